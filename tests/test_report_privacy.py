"""Pseudonymised reports: no reviewer's name, login or e-mail survives in any case, in any format.

The study is raw records the way a team writes them: reviewers recorded by first name, login or
e-mail, and notes, reasons, claims and commands that mention colleagues in any case and with
possessives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from linearity import grows_linearly
from test_report import P, U, _all_text, _attempt, _verdict_id, _verify, md_tables

from domain.models import Outcome
from storage import records
from storage.database import open_study
from workbench.report import FORMATS, build_report, render
from workbench.report.scrub import EMAIL, Scrub

PEOPLE = ["Ben Carter <ben.carter@uni.example>", "Ana Lima"]
LEAKS = re.compile(r"(?i)(?<![a-z])(ben|carter|bcarter|ben\.carter|ana|lima|analima)(?![a-z])|uni\.example")


@pytest.fixture
def study(tmp_path: Path):
    study = open_study(tmp_path / "people.db", create=True)
    db = study.db
    db["study"].insert({"id": 1, "slug": "s", "title": "Study of Ben's team", "staff_hourly_rate": 50.0,
                        "reviewers": json.dumps(PEOPLE), "prices": json.dumps({"tpu-v5e": 2.0})})
    m = db["migration"].insert({
        "slug": "port", "title": "ANA's port to torch_xla", "repo": "repo", "base_commit": "c0",
        "accelerator": "tpu-v5e", "chips": 4, "runtime": "torch_xla", "goal_metric": "eval_accuracy",
        "goal_reference": 0.9, "goal_direction": "max", "goal_tolerance": 0.01, "status": "accepted"}).last_pk
    _attempt(db, m, 0, "09:00", "09:30", source="reference")
    a1 = _attempt(db, m, 1, "10:00", "10:30", expected=2,
                  argv=("python", "/home/bcarter/train.py", "--user=Ben", "--out=runs/ben_v2/ANA-notes.txt"),
                  claim="Ana\u2019s fix works; ask ben.carter@uni.example or x.y@corp.example")
    _verify(db, a1, (P, P, U, U, U), wall=1800, cost=4.0, time_ratio=0.5, cost_ratio=0.5)
    records.add_verdict_override(db, verdict_id=_verdict_id(db, a1, 3), outcome=Outcome.PASS,
                                 justification="CARTER checked it", reviewer="bcarter")
    records.add_intervention(db, migration_id=m, kind="hint", minutes=10, note="Ben's hint, BEN's idea",
                             reviewer="BEN")
    records.add_intervention(db, migration_id=m, kind="hint", minutes=5, note="lima reviewed ANA.LIMA's notes",
                             reviewer="ana")
    db["decision"].insert({"migration_id": m, "kind": "accept", "reason": "ben.carter@UNI.EXAMPLE agrees with Ana",
                           "figures": "{}", "reviewer": "Ana Lima", "at": "2026-11-02T10:00:00Z", "attempt_id": a1})
    db["review_session"].insert({"reviewer": "ben.carter@uni.example", "migration_id": m,
                                 "started_at": "2026-11-02T09:00:00Z", "active_seconds": 600.0})
    yield study
    study.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_name_login_or_email_survives_in_any_format(study, fmt):
    plain = _all_text(fmt, render(build_report(study.db), fmt))
    assert LEAKS.search(plain)  # the study does mention them: the check below can fail
    hidden = _all_text(fmt, render(build_report(study.db, pseudonymise=True), fmt))
    leaks = sorted({m.group() for m in LEAKS.finditer(hidden)})
    assert not leaks, leaks
    assert "x.y@corp.example" not in hidden and "Reviewer 1" in hidden and "Reviewer 2" in hidden


def test_the_same_person_gets_the_same_pseudonym_everywhere(study):
    report = build_report(study.db, pseudonymise=True)
    doc = json.loads(render(report, "json"))
    ben, ana = "Reviewer 1", "Reviewer 2"  # the study's list order
    assert [(i["reviewer"], i["note"]) for i in doc["interventions"]] == [
        (ben, f"{ben}'s hint, {ben}'s idea"), (ana, f"{ana} reviewed {ana}'s notes")]
    assert doc["overrides"][0]["reviewer"] == ben and doc["overrides"][0]["justification"] == f"{ben} checked it"
    decision = doc["migrations"][0]["decisions"][0]
    assert (decision["reviewer"], decision["reason"]) == (ana, f"{ben} agrees with {ana}")
    assert doc["review_sessions"][0]["reviewer"] == ben
    claim = doc["attempts"][0]["claim"]
    assert claim == f"{ana}\u2019s fix works; ask {ben} or [email]"
    assert f"/home/{ben}/train.py" in doc["attempts"][0]["command"] and f"--user={ben}" in doc["attempts"][0]["command"]
    assert f"--out=runs/{ben}_v2/{ana}-notes.txt" in doc["attempts"][0]["command"]
    assert doc["study"]["title"] == f"Study of {ben}'s team"
    md = md_tables(render(report, "md").decode())
    assert md["Verdict overrides"][1][6] == ben  # the same name in another format


def test_pseudonym_patterns_are_linear_on_a_megabyte_line():
    scrub = Scrub(pseudonymise=True)
    for person in PEOPLE:
        scrub.add_reviewer(person)
    scrub.text("")  # compiles the alias pattern
    shapes = [("", u, "") for u in ("a", "a.", "a@", "a@b", "ben", "ben ")]
    shapes += [("", "x", "@"), ("a@", "b", ""), ("a@b.", "c-", "")]

    def run(head: str, unit: str, tail: str, n: int) -> None:
        line = head + unit * (n // len(unit)) + tail
        EMAIL.sub(scrub._email, line)
        scrub._pattern.sub(lambda m: "", line)

    slow = [shape for shape in shapes if not grows_linearly(lambda n, s=shape: run(*s, n), 250_000)]
    assert not slow
