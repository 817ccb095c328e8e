"""A study as a research team records it, figure by figure against values worked out by hand.

Four migrations from raw records: m1 accepted on a full run after a 5-step smoke run; m2
accepted on its smoke run (so no final run); m3 stopped, its goal verdict lifted by a reviewer's
override; m4 in progress, with a blocked attempt that has no times and an attempt on an
accelerator the study has no price for. Reviewers are named in mixed case in the notes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_report import F, P, U, _all_text, _attempt, _recompute_totals, _verdict_id, _verify, check_rows, tables_of

from domain.models import Outcome
from storage import records
from storage.database import open_study
from workbench.report import FORMATS, build_report, render

STATUS = {"m1": "accepted", "m2": "accepted", "m3": "stopped", "m4": "in_progress"}


def _series(db, attempt_id: int, steps: int, eval_value: float | None = None) -> None:
    db["metric_point"].insert_all({"attempt_id": attempt_id, "name": "loss", "step": s, "value": 1.0 / (s + 1)}
                                  for s in range(steps))
    if eval_value is not None:
        db["metric_point"].insert({"attempt_id": attempt_id, "name": "eval_accuracy", "step": steps - 1,
                                   "value": eval_value})


def _accept(db, migration_id: int, attempt_id: int) -> None:
    db["decision"].insert({"migration_id": migration_id, "kind": "accept", "reason": "goal reached",
                           "figures": "{}", "reviewer": "Ana Lima", "at": "2026-11-03T10:00:00Z",
                           "attempt_id": attempt_id})


@pytest.fixture
def paper(tmp_path: Path):
    study = open_study(tmp_path / "paper.db", create=True)
    db = study.db
    db["study"].insert({"id": 1, "slug": "paper", "title": "Paper study", "staff_hourly_rate": 100.0,
                        "reviewers": json.dumps(["Ben Carter <ben.carter@uni.example>", "Ana Lima"]),
                        "prices": json.dumps({"tpu-v5e": 2.0})})
    m = {slug: db["migration"].insert({
        "slug": slug, "title": f"{slug} to torch_xla", "repo": "repo", "base_commit": "c0", "accelerator": "tpu-v5e",
        "chips": 4, "runtime": "torch_xla", "goal_metric": "eval_accuracy", "goal_reference": 0.9,
        "goal_direction": "max", "goal_tolerance": 0.01, "status": STATUS[slug]}).last_pk for slug in STATUS}
    a: dict[str, int] = {}
    for slug in ("m1", "m2", "m3"):
        _series(db, _attempt(db, m[slug], 0, "09:00", "09:30", source="reference"), 20, 0.9)
    a["m1s1"] = _attempt(db, m["m1"], 1, "10:00", "10:05")
    _verify(db, a["m1s1"], (P, P, U, U, U), wall=300, cost=2 / 3, time_ratio=0.2, cost_ratio=0.2)
    _series(db, a["m1s1"], 5)
    a["m1s2"] = _attempt(db, m["m1"], 2, "11:00", "11:30", expected=5)
    _verify(db, a["m1s2"], (P, P, P, P, P), wall=1800, cost=4.0, time_ratio=0.8, cost_ratio=1.1)
    _series(db, a["m1s2"], 20, 0.905)
    _accept(db, m["m1"], a["m1s2"])
    a["m2s1"] = _attempt(db, m["m2"], 1, "10:00", "10:05")
    _verify(db, a["m2s1"], (P, P, U, U, U), wall=300, cost=2 / 3, time_ratio=0.2, cost_ratio=0.2)
    _series(db, a["m2s1"], 5, 0.7)
    _accept(db, m["m2"], a["m2s1"])
    a["m3s1"] = _attempt(db, m["m3"], 1, "10:00", "10:30", expected=4)
    _verify(db, a["m3s1"], (P, P, P, F, U), cause="goal_not_met", silent=True, wall=1800, cost=4.0,
            time_ratio=0.5, cost_ratio=0.5)
    _series(db, a["m3s1"], 20, 0.85)
    records.add_verdict_override(db, verdict_id=_verdict_id(db, a["m3s1"], 4), outcome=Outcome.PASS,
                                 justification="BEN re-ran the eval by hand", reviewer="BEN")
    a["m4s1"] = db["attempt"].insert({"migration_id": m["m4"], "seq": 1, "source": "agent", "commit_sha": "b",
                                      "argv": "[]", "status": "interrupted", "intended_kind": "tpu-v5e",
                                      "intended_count": 4}).last_pk  # blocked: no times, never verified
    a["m4s2"] = _attempt(db, m["m4"], 2, "10:00", "11:00", exit_code=1, expected=3)
    db["attempt"].update(a["m4s2"], {"intended_kind": "a100"})  # no price in the study
    _verify(db, a["m4s2"], (F, U, U, U, U), cause="crash", wall=3600, cost=None)
    records.add_intervention(db, migration_id=m["m1"], kind="hint", minutes=10, note="Ben's hint", reviewer="ben")
    records.add_intervention(db, migration_id=m["m3"], kind="fix_environment", minutes=20,
                             note="ANA fixed the env; ben.carter@uni.example agreed", reviewer="ana")
    db["review_session"].insert({"reviewer": "BEN", "migration_id": m["m1"], "started_at": "2026-11-02T09:00:00Z",
                                 "active_seconds": 1800.0})
    yield study, m, a
    study.close()


TOTALS = {  # measure: (value, of, percent) under the accepted rule, worked out in the docstring above
    "Migrations": (4, None, None),
    "Projects meeting the goal (level 4)": (2, 4, 50.0),  # m1 (5), m3 (4 after the override)
    "Projects meeting the goal, verifier alone": (1, 4, 25.0),  # m3 is 3 without it
    "Attempts": (6, None, None),
    "Attempts verified": (5, 6, 83.3),  # all but the blocked m4s1
    "Attempts failed": (1, 5, 20.0),  # m4s2; m3s1's only fail is overridden
    "Attempts failed, verifier alone": (2, 5, 40.0),
    "Failures that raised no error (silent)": (0, 1, 0.0),  # m4s2 crashed with exit 1
    "Failures that raised no error, verifier alone": (1, 2, 50.0),  # m3s1
    "Attempts stating an expected level": (3, 6, 50.0),
    "Attempts below the agent's expected level (over-claims)": (1, 3, 33.3),  # m4s2: 3 > 0
    "Over-claims, verifier alone": (2, 3, 66.7),  # and m3s1: 4 > 3
    "Migrations with a final run": (1, 4, 25.0),  # m1's accepted full run only
    "Migrations without a final run: stopped": (1, 4, 25.0),
    "Migrations without a final run: in progress": (1, 4, 25.0),
    "Migrations without a final run: accepted a smoke run": (1, 4, 25.0),
    "Time ratio of final runs, median": (0.8, None, None),
    "Cost ratio of final runs, median": (1.1, None, None),
    "Migrations that ended faster": (1, 1, 100.0),
    "Migrations that ended cheaper": (0, 1, 0.0),
    "Migrations that ended faster and cheaper": (0, 1, 0.0),
    "Intervention minutes": (30.0, None, None),
    "Review hours": (0.5, None, None),
    "Staff hours": (1.0, None, None),
    "Staff cost ($)": (100.0, None, None),
    "Wall hours of attempts and re-runs": (7800 / 3600, None, None),  # 300 + 1800 + 300 + 1800 + 3600 s
    "Chip-hours of attempts and re-runs": (28 / 3 / 2 + 4.0, None, None),  # $ / price, + 1 h x 4 chips unpriced
    "Compute cost ($)": (28 / 3, None, None),  # 2/3 + 4 + 2/3 + 4; m4 adds nothing
    "Attempts and re-runs without times (no wall time, no cost)": (1, 6, 16.7),  # m4s1
    "Attempts and re-runs on an unpriced accelerator (no cost)": (1, 6, 16.7),  # m4s2
    "Total cost ($)": (28 / 3 + 100.0, None, None),
}
LAST_PASSING = {  # the old rule: the last verified attempt passing level 1, whatever the status
    "Migrations with a final run": (3, 4, 75.0),
    "Migrations without a final run: no verified attempt passed level 1": (1, 4, 25.0),
    "Time ratio of final runs, median": (0.5, None, None),  # 0.8, 0.2, 0.5
    "Time ratio of final runs, min": (0.2, None, None),
    "Cost ratio of final runs, median": (0.5, None, None),  # 1.1, 0.2, 0.5
    "Migrations that ended faster": (3, 3, 100.0),
    "Migrations that ended cheaper": (2, 3, 66.7),
    "Migrations that ended faster and cheaper": (2, 3, 66.7),
}
GOALS = {  # metric, better, reference, tolerance, final seq, its value, best verified seq, its value
    "m1": ("eval_accuracy", "max", 0.9, 0.01, 2, 0.905, 2, 0.905),
    "m2": ("eval_accuracy", "max", 0.9, 0.01, None, None, 1, 0.7),
    "m3": ("eval_accuracy", "max", 0.9, 0.01, None, None, 1, 0.85),
    "m4": ("eval_accuracy", "max", 0.9, 0.01, None, None, None, None),
}


@pytest.mark.parametrize("fmt", ["md", "html", "latex", "csv"])
def test_every_figure_of_a_paper_study_in_every_format(paper, fmt):
    study, m, a = paper
    tables = tables_of(fmt, render(build_report(study.db), fmt))
    check_rows(tables["totals"], TOTALS)
    check_rows(tables["goals"], GOALS)
    old = tables_of(fmt, render(build_report(study.db, final="last-passing"), fmt))
    check_rows(old["totals"], {k: v for k, v in TOTALS.items() if "final" not in k and "ended" not in k}
               | LAST_PASSING)


def test_the_json_of_a_paper_study_traces_every_figure(paper):
    study, m, a = paper
    doc = json.loads(render(build_report(study.db), "json"))
    _recompute_totals(doc)
    t = doc["totals"]
    assert t["untimed"]["attempt_ids"] == [a["m4s1"]] and t["unpriced"]["attempt_ids"] == [a["m4s2"]]
    assert {k: v["migration_ids"] for k, v in t["without_final_run"].items() if v["n"]} == {
        "stopped": [m["m3"]], "in_progress": [m["m4"]], "smoke": [m["m2"]]}
    assert t["time_ratio"]["attempt_ids"] == [a["m1s2"]] and t["time_ratio"]["median_bootstrap95"] == [0.8, 0.8]
    assert t["failed"]["wilson95_percent"] == [3.6, 62.4]  # 1 of 5, worked out by hand
    smoke = {x["id"]: x["smoke"] for x in doc["attempts"]}
    assert smoke == {a["m1s1"]: True, a["m1s2"]: False, a["m2s1"]: True, a["m3s1"]: False, a["m4s1"]: False,
                     a["m4s2"]: False}  # m4 has no reference run: nothing to fall short of


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_pseudonymised_paper_study_names_nobody(paper, fmt):
    study, m, a = paper
    hidden = _all_text(fmt, render(build_report(study.db, pseudonymise=True), fmt))
    assert not re.search(r"(?i)(?<![a-z])(ben|carter|ana|lima)(?![a-z])|uni\.example", hidden)
