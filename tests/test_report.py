"""Reports: a study built from raw records, every count and rate checked in every format.

The study is written as rows (attempts, verifications with their verdicts and failures,
overrides, interventions, decisions, review sessions, model calls); nothing in it is a count.
The expected numbers below are worked out by hand from those rows (docs/report.md).
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from storage import records
from storage.database import open_study
from workbench.report import ATTEMPT_TEXT_FORMATS, FORMATS, build_report, render

SECRETS = {
    "anthropic": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "openai": "sk-proj-ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210",
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "github": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "google": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.payloadpayload.sig",
    "slack": "xoxb-1234567890-AbCdEfGhIjKlMnOp",
    "gitlab": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "private-key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----",
}

P, F, U = "pass", "fail", "unknown"


def _attempt(db, migration_id: int, seq: int, start: str, end: str, *, source: str = "agent", exit_code=0,
             expected=None, claim: str = "", argv=("python", "train.py"), env=None) -> int:
    return db["attempt"].insert({
        "migration_id": migration_id, "seq": seq, "source": source, "commit_sha": f"c{migration_id}{seq}",
        "argv": json.dumps(list(argv)), "cwd": ".", "env": json.dumps(env or {}),
        "started_at": f"2026-11-01T{start}:00Z", "ended_at": f"2026-11-01T{end}:00Z",
        "status": "ok" if exit_code == 0 else "nonzero_exit", "exit_code": exit_code,
        "exit_code_source": "process", "expected_level": expected, "claim": claim,
        "intended_kind": "tpu-v5e", "intended_count": 4,
    }).last_pk


def _verify(db, attempt_id: int, ladder: tuple[str, ...], *, cause=None, silent=False, wall=None, cost=None,
            time_ratio=None, cost_ratio=None, superseded_by=None) -> int:
    """A verification row with its five verdicts and failure. Its own summary flags are left
    wrong on purpose (highest level 0, no over-claim): the report must count from the verdicts."""
    vid = db["verification"].insert({
        "attempt_id": attempt_id, "verifier": "test", "verifier_version": "1", "inputs_hash": f"h{attempt_id}",
        "at": "2026-11-02T00:00:00Z", "highest_level": 0, "over_claim": 0, "silent": 0,
        "wall_seconds": wall, "cost_dollars": cost, "time_ratio": time_ratio, "cost_ratio": cost_ratio,
        "superseded_by": superseded_by,
    }).last_pk
    for level, outcome in enumerate(ladder, start=1):
        db["verdict"].insert({"attempt_id": attempt_id, "level": level, "outcome": outcome, "reason": "r",
                              "evidence": "[]", "verifier": "test", "verifier_version": "1",
                              "verification_id": vid, "superseded_by": superseded_by})
    if cause:
        db["failure"].insert({"attempt_id": attempt_id, "cause": cause, "silent": int(silent),
                              "note": f"{cause} note", "evidence": "[]", "verification_id": vid,
                              "superseded_by": superseded_by})
    return vid


def _verdict_id(db, attempt_id: int, level: int) -> int:
    return db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = ? AND superseded_by IS NULL",
                      [attempt_id, level]).fetchone()[0]


STATUS = {"alpha": "accepted", "beta": "stopped", "gamma": "in_progress"}


def build_study(path: Path):
    """Three migrations: alpha (5 attempts, reaches level 5, accepted on its 4th), beta (2 attempts,
    an override lifts its goal verdict, stopped), gamma (one unverified attempt, no reference, in
    progress). Returns (study, ids)."""
    study = open_study(path, create=True)
    db = study.db
    with db.atomic():
        db["study"].insert({"id": 1, "slug": "s", "title": "Report study", "staff_hourly_rate": 100.0,
                            "reviewers": json.dumps(["ana", "bob"]), "prices": json.dumps({"tpu-v5e": 2.0})})
        mids = {}
        for slug in ("alpha", "beta", "gamma"):
            mids[slug] = db["migration"].insert({
                "slug": slug, "title": f"{slug.title()} to torch_xla", "repo": "repo", "base_commit": "c0",
                "accelerator": "tpu-v5e", "chips": 4, "runtime": "torch_xla", "goal_metric": "eval_accuracy",
                "goal_reference": 0.9, "goal_direction": "max", "goal_tolerance": 0.01, "status": STATUS[slug],
            }).last_pk
        a, b, g = mids["alpha"], mids["beta"], mids["gamma"]
        ids: dict[str, int] = {}
        # the references' walls give the final runs' ratios (a4: 1800 s over 3600 s; b2: over 1500 s)
        ids["ref_a"] = _attempt(db, a, 0, "09:00", "10:00", source="reference")
        ids["a1"] = _attempt(db, a, 1, "10:00", "10:06", exit_code=1, expected=2,
                             argv=("python", "train.py", f"--api-key={SECRETS['openai']}"),
                             env={"HF_TOKEN": SECRETS["huggingface"]},
                             claim=f"Runs now; used Authorization: Bearer {SECRETS['bearer']}")
        ids["a2"] = _attempt(db, a, 2, "11:00", "11:30", expected=4, claim=f"key {SECRETS['anthropic']} works")
        ids["a3"] = _attempt(db, a, 3, "12:00", "12:30", argv=("python", "train.py", SECRETS["google"]))
        ids["a4"] = _attempt(db, a, 4, "13:00", "13:30", expected=5, env={"AWS": SECRETS["aws"]})
        ids["a5"] = _attempt(db, a, 5, "14:00", "14:10", expected=3,
                             argv=("python", "train.py", f"--slack={SECRETS['slack']}"),
                             claim=f"pushed with {SECRETS['gitlab']}; key:\n{SECRETS['private-key']}")
        ids["ref_b"] = _attempt(db, b, 0, "09:00", "09:25", source="reference")
        ids["b1"] = _attempt(db, b, 1, "10:00", "10:06", expected=3)
        ids["b2"] = _attempt(db, b, 2, "11:00", "11:30", expected=4)
        ids["c1"] = _attempt(db, g, 1, "10:00", "11:00")
        for name, start in (("ref_a", 0.0), ("ref_b", 0.1), ("a4", 0.05)):
            db["metric_point"].insert_all({"attempt_id": ids[name], "name": "loss", "step": s,
                                           "value": 2.0 / (s + 1) + start} for s in range(20))
        for name, step, value in (("a2", 5, 0.5), ("a3", 19, 0.91), ("a4", 10, 0.8), ("a4", 19, 0.905)):
            db["metric_point"].insert({"attempt_id": ids[name], "name": "eval_accuracy", "step": step,
                                       "value": value})
        _verify(db, ids["a1"], (F, U, U, U, U), cause="crash", wall=360, cost=0.8)
        _verify(db, ids["a2"], (P, F, P, F, U), cause="numerical_mismatch", silent=True, wall=1800, cost=4.0,
                time_ratio=1.0, cost_ratio=2.0)
        _verify(db, ids["a3"], (P, P, P, P, F), cause="slower_or_costlier", silent=True, wall=1800, cost=4.0,
                time_ratio=0.8, cost_ratio=1.6)
        _verify(db, ids["a4"], (P, P, P, P, P), wall=1800, cost=4.0, time_ratio=0.5, cost_ratio=0.9)
        newer = _verify(db, ids["b1"], (P, P, F, U, U), cause="wrong_configuration", silent=True, wall=360,
                        cost=0.8)
        _verify(db, ids["b1"], (P, P, P, P, P), wall=360, cost=0.8, superseded_by=newer)  # history only
        _verify(db, ids["b2"], (P, P, P, F, U), cause="goal_not_met", silent=True, wall=1800, cost=4.0,
                time_ratio=1.2, cost_ratio=0.7)
        if "llm_call" in db.table_names():
            for mid, dollars in ((a, 1.25), (a, 0.75), (b, 0.5)):
                db["llm_call"].insert({"at": "2026-11-02T00:00:00Z", "purpose": "claims", "migration_id": mid,
                                       "model": "m", "input_hash": "x", "cost_usd": dollars})
    goal = _verdict_id(db, ids["b2"], 4)
    records.add_verdict_override(db, verdict_id=goal, outcome=_outcome(F), justification="still short",
                                 reviewer="bob")
    records.add_verdict_override(db, verdict_id=goal, outcome=_outcome(P),
                                 justification=f"eval set was wrong; ana checked, token {SECRETS['github']}",
                                 reviewer="ana")
    i1 = records.add_intervention(db, migration_id=a, kind="fix_environment", minutes=30,
                                  note="installed libtpu for ana", reviewer="ana")
    i2 = records.add_intervention(db, migration_id=a, kind="hint", minutes=10, note="hint", reviewer="ana",
                                  attempt_id=ids["a2"])
    i3 = records.add_intervention(db, migration_id=a, kind="hint", minutes=15, note="it was 15", reviewer="ana",
                                  attempt_id=ids["a2"], corrects=i2)
    i4 = records.add_intervention(db, migration_id=b, kind="fix_code", minutes=60,
                                  note=f"pasted GITHUB_TOKEN={SECRETS['github']} by mistake", reviewer="bob")
    ids.update(i1=i1, i2=i2, i3=i3, i4=i4)
    from domain.models import DecisionKind

    ids["d1"] = db["decision"].insert({"migration_id": a, "kind": "accept", "reason": "level 5 reached",
                                       "figures": "{}", "reviewer": "ana", "at": "2026-11-02T10:00:00Z",
                                       "attempt_id": ids["a4"]}).last_pk
    ids["d2"] = records.record_decision(db, migration_id=b, kind=DecisionKind.CONTINUE, reason="one more try", reviewer="bob")
    ids["d3"] = records.record_decision(db, migration_id=b, kind=DecisionKind.STOP,
                                     reason=f"budget spent; key {SECRETS['huggingface']}",
                                     reviewer="bob")
    for mid, reviewer, seconds in ((a, "ana", 1800.0), (a, "ana", 1800.0), (b, "bob", 3600.0)):
        db["review_session"].insert({"reviewer": reviewer, "migration_id": mid, "started_at": "2026-11-02T09:00:00Z",
                                     "active_seconds": seconds})
    ids.update(mids)
    return study, ids


def _outcome(value: str):
    from domain.models import Outcome

    return Outcome(value)


@pytest.fixture
def study(tmp_path: Path):
    study, ids = build_study(tmp_path / "study.db")
    yield study, ids
    study.close()


def has_llm(db) -> bool:
    return "llm_call" in db.table_names()


# ----------------------------------------------------------------------------- expected numbers

def expected_totals(llm: bool, final: str = "last-passing") -> dict[str, tuple]:
    """Measure -> (value, of, percent), as worked out by hand from the rows above, under the
    final-run rule `final` (docs/report.md)."""
    if final == "accepted":  # alpha's accepted a4 is the only final run: beta stopped, gamma in progress
        finals = {
            "Migrations with a final run": (1, 3, 33.3),
            "Migrations without a final run: stopped": (1, 3, 33.3),
            "Migrations without a final run: in progress": (1, 3, 33.3),
            "Time ratio of final runs, median": (0.5, None, None),
            "Time ratio of final runs, min": (0.5, None, None),
            "Time ratio of final runs, max": (0.5, None, None),
            "Cost ratio of final runs, median": (0.5, None, None),  # $4 over the reference's $8
            "Cost ratio of final runs, min": (0.5, None, None),
            "Cost ratio of final runs, max": (0.5, None, None),
            "Migrations that ended faster": (1, 1, 100.0),
            "Migrations that ended cheaper": (1, 1, 100.0),
            "Migrations that ended faster and cheaper": (1, 1, 100.0),
        }
    else:  # the last verified attempt passing level 1: alpha's a4, beta's b2
        finals = {
            "Migrations with a final run": (2, 3, 66.7),
            "Migrations without a final run: no verified attempt passed level 1": (1, 3, 33.3),
            "Time ratio of final runs, median": (0.85, None, None),
            "Time ratio of final runs, min": (0.5, None, None),
            "Time ratio of final runs, max": (1.2, None, None),
            "Cost ratio of final runs, median": (0.85, None, None),  # $4 over $8 and over $3.33
            "Cost ratio of final runs, min": (0.5, None, None),
            "Cost ratio of final runs, max": (1.2, None, None),
            "Migrations that ended faster": (1, 2, 50.0),
            "Migrations that ended cheaper": (1, 2, 50.0),
            "Migrations that ended faster and cheaper": (1, 2, 50.0),
        }
    return finals | {
        "Migrations": (3, None, None),
        "Projects meeting the goal (level 4)": (2, 3, 66.7),
        "Projects meeting the goal, verifier alone": (1, 3, 33.3),
        "Interventions": (3, None, None),
        "Interventions per migration (mean)": (1.0, None, None),
        "Attempts": (8, None, None),
        "Attempts verified": (6, 8, 75.0),
        "Attempts failed": (4, 6, 66.7),
        "Attempts failed, verifier alone": (5, 6, 83.3),
        "Failures that raised no error (silent)": (3, 4, 75.0),
        "Failures that raised no error, verifier alone": (4, 5, 80.0),
        "Attempts stating an expected level": (6, 8, 75.0),
        "Attempts below the agent's expected level (over-claims)": (3, 5, 60.0),
        "Over-claims, verifier alone": (4, 5, 80.0),
        "Intervention minutes": (105.0, None, None),
        "Review hours": (2.0, None, None),
        "Staff hours": (3.75, None, None),
        "Staff cost ($)": (375.0, None, None),
        "Wall hours of attempts and re-runs": (3.37, None, None),
        "Chip-hours of attempts and re-runs": (13.47, None, None),
        "Compute cost ($)": (26.93, None, None),
        "Attempts and re-runs without times (no wall time, no cost)": (0, 8, 0.0),
        "Attempts and re-runs on an unpriced accelerator (no cost)": (0, 8, 0.0),
        "LLM cost ($)": (2.5 if llm else 0.0, None, None),
        "Total cost ($)": (26.93 + 375.0 + (2.5 if llm else 0.0), None, None),
    }


OUTCOMES = {  # attempts, failed, silent, over-claims, expectations, highest, goal met, final, time, cost
    "alpha": (5, 3, 2, 2, 3, 5, "yes", 4, 0.5, 0.5),
    "beta": (2, 1, 1, 1, 2, 4, "yes", 2, 1.2, 1.2),
    "gamma": (1, 0, 0, 0, 0, None, None, None, None, None),
}
"""Under --final last-passing; under the accepted rule beta (stopped) has no final run."""
OUTCOMES_ACCEPTED = OUTCOMES | {"beta": (2, 1, 1, 1, 2, 4, "yes", None, None, None)}
GOALS = {  # metric, better, reference, tolerance, final seq, its value, best verified seq, its value
    "alpha": ("eval_accuracy", "max", 0.9, 0.01, 4, 0.905, 3, 0.91),  # a4's last step; a3 beats it
    "beta": ("eval_accuracy", "max", 0.9, 0.01, None, None, None, None),
    "gamma": ("eval_accuracy", "max", 0.9, 0.01, None, None, None, None),
}
"""Under the accepted rule; under --final last-passing beta's final run is b2 (no value)."""
VERIFIER_ALONE = {  # failed, silent, over-claims, highest, goal met, overrides
    "alpha": (3, 2, 2, 5, "yes", 0),
    "beta": (2, 2, 2, 3, "no", 1),
    "gamma": (0, 0, 0, None, None, 0),
}


def expected_effort(llm: bool) -> dict[str, tuple]:
    # interventions, minutes, review h, staff h, staff $, wall h, chip-h, compute $, llm $, total $
    la, lb = (2.0, 0.5) if llm else (0.0, 0.0)
    return {
        "alpha": (2, 45.0, 1.0, 1.75, 175.0, 1.77, 7.07, 14.13, la, 14.13 + 175.0 + la),
        "beta": (1, 60.0, 1.0, 2.0, 200.0, 0.6, 2.4, 4.8, lb, 4.8 + 200.0 + lb),
        "gamma": (0, 0.0, 0.0, 0.0, 0.0, 1.0, 4.0, 8.0, 0.0, 8.0),
    }


KINDS = {("alpha", "fix_environment"): (1, 30.0), ("alpha", "hint"): (1, 15.0), ("beta", "fix_code"): (1, 60.0)}


# ----------------------------------------------------------------------------- reading formats back

def norm(value: str):
    """A displayed cell back to a number where it is one."""
    value = value.strip()
    if value in ("", "–", "--"):
        return None
    text = value.replace(",", "").rstrip("%")
    try:
        return float(text)
    except ValueError:
        return value


def same(got, want) -> bool:
    if want is None:
        return got is None
    if isinstance(want, str):
        return got == want
    return isinstance(got, float) and abs(got - want) <= 0.011 + 0.0005 * abs(want)


def md_tables(text: str) -> dict[str, list[list[str]]]:
    tables: dict[str, list[list[str]]] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
        elif line.startswith("| ") and title:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            cells = [re.sub(r"\\(.)", r"\1", c) for c in cells]
            if set("".join(cells)) <= set("-: "):
                continue
            tables.setdefault(title, []).append(cells)
    return tables


class _HtmlTables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: str | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.current = attrs.get("id", "")[len("table-"):]
            self.tables[self.current] = []
        elif tag == "tr" and self.current is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None and self.current is not None:
            self.tables[self.current].append(self.row)
            self.row = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def html_tables(text: str) -> dict[str, list[list[str]]]:
    parser = _HtmlTables()
    parser.feed(text)
    return parser.tables


def latex_tables(text: str) -> dict[str, list[list[str]]]:
    tables = {}
    for block in text.split(r"\begin{table}")[1:]:
        name = re.search(r"\\label\{tab:workbench-([a-z-]+)\}", block).group(1).replace("-", "_")
        body = block.split(r"\toprule")[1].split(r"\bottomrule")[0]
        rows = []
        for line in body.splitlines():
            line = line.strip()
            if not line or line == r"\midrule":
                continue
            line = line.removesuffix(r"\\").strip()
            cells = [c.strip() for c in re.split(r"(?<!\\)&", line)]
            cells = [c.replace(r"\allowbreak{}", "").replace(r"\_", "_").replace(r"\%", "%").replace(r"\$", "$")
                     .replace("--", "–") for c in cells]
            rows.append(cells)
        tables[name] = rows
    return tables


def csv_tables(data: bytes) -> dict[str, list[list[str]]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name.removesuffix(".csv"): list(csv.reader(io.StringIO(archive.read(name).decode())))
                for name in archive.namelist() if name.endswith(".csv")}


TITLES = {"Study totals": "totals", "Outcomes per migration": "outcomes",
          "Outcomes per migration, verifier alone (before overrides)": "verifier_alone",
          "Human effort and cost per migration": "effort_and_cost", "Goal per migration": "goals", "Interventions by kind": "interventions_by_kind",
          "Decisions and their reasons": "decisions", "Verdict overrides": "overrides"}


def tables_of(fmt: str, data: bytes) -> dict[str, list[list[str]]]:
    if fmt == "md":
        return {TITLES.get(k, k): v for k, v in md_tables(data.decode()).items()}
    if fmt == "html":
        return html_tables(data.decode())
    if fmt == "latex":
        return latex_tables(data.decode())
    if fmt == "csv":
        return csv_tables(data)
    raise AssertionError(fmt)


def check_rows(rows: list[list[str]], expected: dict, key_columns: int = 1) -> None:
    body = {tuple(r[:key_columns]) if key_columns > 1 else r[0]: r[key_columns:] for r in rows[1:]}
    assert set(body) >= set(expected), (set(expected) - set(body))
    for key, want in expected.items():
        got = [norm(c) for c in body[key]]
        for column, (g, w) in enumerate(zip(got, want)):
            assert same(g, w), f"{key} column {column + key_columns}: {g!r} != {w!r}"


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("final", ["accepted", "last-passing"])
@pytest.mark.parametrize("fmt", ["md", "html", "latex", "csv"])
def test_every_count_and_rate_in_every_table_format(study, fmt, final):
    s, ids = study
    data = render(build_report(s.db, final=final), fmt)
    tables = tables_of(fmt, data)
    check_rows(tables["totals"], expected_totals(has_llm(s.db), final))
    failed = next(r for r in tables["totals"] if r[0] == "Attempts failed")  # 4 of 6
    assert failed[4].replace("--", "–").replace(r"\%", "%") in ("30.0%–90.3%", "30.0-90.3")
    check_rows(tables["outcomes"], OUTCOMES_ACCEPTED if final == "accepted" else OUTCOMES)
    check_rows(tables["goals"], GOALS if final == "accepted" else GOALS | {
        "beta": ("eval_accuracy", "max", 0.9, 0.01, 2, None, None, None)})
    check_rows(tables["verifier_alone"], VERIFIER_ALONE)
    check_rows(tables["effort_and_cost"], expected_effort(has_llm(s.db)))
    check_rows(tables["interventions_by_kind"], KINDS, key_columns=2)
    decisions = {r[1]: (r[2], r[3]) for r in tables["decisions"][1:]}
    assert decisions[str(ids["d1"])] == ("accept", "level 5 reached")
    assert decisions[str(ids["d2"])] == ("continue", "one more try")
    assert decisions[str(ids["d3"])][0] == "stop" and "[REDACTED:huggingface]" in decisions[str(ids["d3"])][1]
    overrides = tables["overrides"][1:]
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in overrides] == [
        ("2", "4", "fail", "fail", "no"), ("2", "4", "fail", "pass", "yes")]


def test_json_carries_every_count_with_the_ids_behind_it(study):
    s, ids = study
    doc = json.loads(render(build_report(s.db, final="last-passing"), "json"))
    assert doc["final_rule"] == "last-passing"
    t = doc["totals"]
    want = expected_totals(has_llm(s.db))
    pairs = {"goal_met": "Projects meeting the goal (level 4)", "failed": "Attempts failed",
             "failed_verifier": "Attempts failed, verifier alone", "silent": "Failures that raised no error (silent)",
             "silent_verifier": "Failures that raised no error, verifier alone",
             "over_claims": "Attempts below the agent's expected level (over-claims)",
             "over_claims_verifier": "Over-claims, verifier alone",
             "stated_expectation": "Attempts stating an expected level"}
    for key, label in pairs.items():
        value, of, percent = want[label]
        assert (t[key]["n"], t[key]["of"], t[key]["percent"]) == (value, of, percent), key
    A = lambda *names: sorted(ids[n] for n in names)  # noqa: E731
    assert sorted(t["attempts"]["attempt_ids"]) == A("a1", "a2", "a3", "a4", "a5", "b1", "b2", "c1")
    assert sorted(t["verified"]["attempt_ids"]) == A("a1", "a2", "a3", "a4", "b1", "b2")
    assert sorted(t["failed"]["attempt_ids"]) == A("a1", "a2", "a3", "b1")
    assert sorted(t["failed_verifier"]["attempt_ids"]) == A("a1", "a2", "a3", "b1", "b2")
    assert sorted(t["silent"]["attempt_ids"]) == A("a2", "a3", "b1")
    assert sorted(t["over_claims"]["attempt_ids"]) == A("a1", "a2", "b1")
    assert sorted(t["over_claims"]["of_attempt_ids"]) == A("a1", "a2", "a4", "b1", "b2")
    assert sorted(t["interventions"]["intervention_ids"]) == sorted([ids["i1"], ids["i3"], ids["i4"]])
    assert t["interventions_per_migration"] == 1.0
    assert sorted(t["goal_met"]["migration_ids"]) == sorted([ids["alpha"], ids["beta"]])
    assert t["time_ratio"]["median"] == pytest.approx(0.85)
    assert sorted(t["time_ratio"]["attempt_ids"]) == A("a4", "b2")
    assert (t["time_ratio"]["min"], t["time_ratio"]["max"]) == (0.5, 1.2)
    assert t["faster"]["migration_ids"] == [ids["alpha"]]
    assert t["cheaper"]["migration_ids"] == [ids["alpha"]]
    assert t["faster_and_cheaper"]["n"] == 1
    assert t["staff_cost_dollars"] == pytest.approx(375.0)
    assert t["compute_cost_dollars"] == pytest.approx(0.8 + 4 * 3 + 4 / 3 + 0.8 + 4.0 + 8.0)
    m = {x["slug"]: x for x in doc["migrations"]}
    assert m["alpha"]["interventions"]["by_kind"]["hint"] == {"n": 1, "intervention_ids": [ids["i3"]],
                                                               "minutes": 15.0}
    assert m["alpha"]["final_run"] == {"attempt_id": ids["a4"], "seq": 4, "time_ratio": 0.5, "cost_ratio": 0.5,
                                       "faster": True, "cheaper": True, "why_none": None}
    assert m["gamma"]["final_run"]["why_none"] == "not_passing"
    assert m["alpha"]["goal"] == {"metric": "eval_accuracy", "direction": "max", "reference_value": 0.9,
                                  "tolerance": 0.01, "reference_attempt_id": ids["ref_a"], "final_value": 0.905,
                                  "final_attempt_id": ids["a4"], "best_verified_value": 0.91,
                                  "best_verified_attempt_id": ids["a3"]}
    assert m["beta"]["goal"]["final_attempt_id"] == ids["b2"] and m["beta"]["goal"]["final_value"] is None
    assert m["beta"]["highest_level"] == 4 and m["beta"]["highest_level_verifier"] == 3
    assert m["beta"]["highest_level_attempt_id"] == ids["b2"]
    assert m["gamma"]["highest_level"] is None and m["gamma"]["goal_met"] is False
    assert [d["id"] for d in m["beta"]["decisions"]] == [ids["d2"], ids["d3"]]
    assert m["alpha"]["review"]["seconds"] == 3600.0 and len(m["alpha"]["review"]["review_session_ids"]) == 2
    if has_llm(s.db):
        assert m["alpha"]["llm"]["cost_dollars"] == 2.0 and len(m["alpha"]["llm"]["llm_call_ids"]) == 2
        assert "llm_call" in doc["llm_cost_source"]
    else:
        assert m["alpha"]["llm"]["cost_dollars"] == 0 and "reported as 0" in doc["llm_cost_source"]
    corrected = {i["id"]: i for i in doc["interventions"]}
    assert corrected[ids["i2"]]["counts"] is False and corrected[ids["i2"]]["corrected_by"] == ids["i3"]
    attempts = {a["id"]: a for a in doc["attempts"]}
    assert ids["ref_a"] not in attempts
    assert attempts[ids["b2"]]["ladder"] == ["pass", "pass", "pass", "pass", "unknown"]
    assert attempts[ids["a5"]]["cost_dollars"] == pytest.approx(4 / 3)  # unverified: the verifier's formula


def test_one_migration_only(study):
    s, ids = study
    report = build_report(s.db, ["beta"])
    assert [m.slug for m in report.migrations] == ["beta"]
    assert report.totals.failed.part.n == 1 and report.totals.failed.whole.n == 2
    assert report.totals.interventions.ids == (ids["i4"],)
    assert "Migrations: beta" in render(report, "md").decode()


def _all_text(fmt: str, data: bytes) -> str:
    if fmt == "csv":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "\n".join(archive.read(n).decode() for n in archive.namelist())
    return data.decode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_secret_reaches_any_format_and_names_can_be_pseudonymised(study, fmt):
    s, ids = study
    plain = _all_text(fmt, render(build_report(s.db), fmt))
    for kind, secret in SECRETS.items():
        assert secret not in plain, kind
        assert secret[4:20] not in plain, kind
    if fmt in ("csv", "json"):  # commands and claims are in the attempt-level tables
        assert "[REDACTED:openai]" in plain and "[REDACTED:bearer]" in plain
        assert "[REDACTED:anthropic]" in plain and "[REDACTED:google]" in plain
    hidden = _all_text(fmt, render(build_report(s.db, pseudonymise=True), fmt))
    for kind, secret in SECRETS.items():
        assert secret not in hidden, kind
    assert not re.search(r"\b(ana|bob)\b", hidden)
    assert "Reviewer 1" in hidden  # the overrides table names its reviewers in every format


def test_pseudonyms_follow_the_study_list_and_reach_free_text(study):
    s, ids = study
    doc = json.loads(render(build_report(s.db, pseudonymise=True), "json"))
    notes = {i["id"]: (i["reviewer"], i["note"]) for i in doc["interventions"]}
    assert notes[ids["i1"]] == ("Reviewer 1", "installed libtpu for Reviewer 1")
    assert notes[ids["i4"]][0] == "Reviewer 2"
    assert doc["pseudonymised"] is True
    assert {r["reviewer"] for r in doc["review_sessions"]} == {"Reviewer 1", "Reviewer 2"}


def test_superseded_verdicts_and_stored_flags_do_not_count(study):
    s, ids = study
    report = build_report(s.db)
    beta = next(m for m in report.migrations if m.slug == "beta")
    b1 = next(a for a in beta.attempt_facts if a.id == ids["b1"])
    assert b1.level == 2 and b1.failed and b1.cause == "wrong_configuration"
    # The verification rows say highest level 0 and no over-claim; the verdicts say otherwise.
    assert b1.over_claim


def test_a_reviewers_claim_correction_changes_the_over_claim_count(study):
    """Over-claims compare the effective expected level: a reviewer's claim review, else the rules.
    The screens' counts (storage.queries) say the same as the report."""
    from storage import queries, records

    s, ids = study
    before = build_report(s.db).totals
    assert sorted(before.over_claims.part.ids) == sorted([ids["a1"], ids["a2"], ids["b1"]])
    assert queries.study_totals(s.db)["over_claims"] == 3
    # a2: the rules read level 4 in its claim (it reached 1); the reviewer reads level 1
    records.add_claim_review(s.db, attempt_id=ids["a2"], action="correct", expected_level=1, reviewer="ana")
    # b2: the rules read level 4 (it reached 4); the reviewer reads level 5, which is unknown for
    # b2: unknown is not below expectation, so it is no over-claim (issue 38)
    records.add_claim_review(s.db, attempt_id=ids["b2"], action="correct", expected_level=5, reviewer="bob")
    report = build_report(s.db)
    after = report.totals
    assert sorted(after.over_claims.part.ids) == sorted([ids["a1"], ids["b1"]])
    assert after.over_claims.whole.n == before.over_claims.whole.n == 5
    b2 = next(a for m in report.migrations for a in m.attempt_facts if a.id == ids["b2"])
    assert (b2.expected_level, b2.expected_source, b2.over_claim) == (5, "reviewer", False)
    # a reviewer who says the agent named no level takes the attempt out of the denominator
    records.add_claim_review(s.db, attempt_id=ids["a1"], action="correct", expected_level=None, reviewer="ana")
    third = build_report(s.db).totals.over_claims
    assert (third.part.n, third.whole.n) == (1, 4)
    assert queries.study_totals(s.db)["over_claims"] == 1
    summaries = {m.migration.slug: m.over_claims for m in queries.migration_summaries(s.db)}
    assert summaries == {"alpha": 0, "beta": 1, "gamma": 0}
    assert queries.attempt_summary(s.db, ids["a2"]).over_claim is False
    assert queries.attempt_summary(s.db, ids["b2"]).over_claim is None
    assert queries.attempt_summary(s.db, ids["a1"]).over_claim is None


def test_decisions_show_what_the_rules_suggested_and_budget_changes_are_listed(study):
    from domain.models import DecisionKind

    s, ids = study
    alpha = ids["alpha"]
    records.add_budget_change(s.db, migration_id=alpha, compute_dollars=50.0, staff_hours=4.0, attempts=6,
                              calendar_days=None, acceptance_level=4, reason="more compute for the TPU run",
                              reviewer="ana")
    made = records.record_decision(s.db, migration_id=alpha, kind=DecisionKind.CONTINUE, reason="worth one more",
                                   reviewer="ana")
    suggested = s.db.execute("SELECT suggested FROM decision WHERE id = ?", [made]).fetchone()[0]
    assert suggested
    report = build_report(s.db)
    tables = md_tables(render(report, "md").decode())
    decisions = {r[1]: r for r in tables["Decisions and their reasons"][1:]}
    assert decisions[str(made)][2:5] == ["continue", "worth one more", suggested]
    assert decisions[str(ids["d1"])][4] == "–"  # recorded without the rules' suggestion
    budgets = tables["Budget changes"]
    assert budgets[1][:7] == ["alpha", budgets[1][1], "50.00", "4.0", "6", "–", "4"]
    assert "more compute for the TPU run" in budgets[1]
    doc = json.loads(render(report, "json"))
    m = {x["slug"]: x for x in doc["migrations"]}
    assert m["alpha"]["decisions"][-1]["suggested"] == suggested
    assert m["alpha"]["budget_changes"][0]["compute_dollars"] == 50.0
    assert "budget_changes" in csv_tables(render(report, "csv"))
    assert "Budget changes" in render(report, "latex").decode()


def test_cli_writes_each_format(study, tmp_path):
    s, ids = study
    runner = CliRunner()
    for fmt in FORMATS:
        out = tmp_path / f"r.{'zip' if fmt == 'csv' else fmt}"
        result = runner.invoke(main, ["report", str(s.path), "--format", fmt, "-o", str(out),
                                      "--migration", "alpha", "--migration", "beta"])
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 200
    result = runner.invoke(main, ["report", str(s.path), "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout_bytes)["totals"]["attempts"]["n"] == 8
    result = runner.invoke(main, ["report", str(s.path), "--format", "json", "--final", "last-passing"])
    assert result.exit_code == 0 and json.loads(result.stdout_bytes)["final_rule"] == "last-passing"
    result = runner.invoke(main, ["report", str(s.path), "--migration", "nope"])
    assert result.exit_code == 2 and "no migration 'nope'" in result.output


def test_the_output_name_and_the_format_agree(study, tmp_path):
    """`--format csv -o x.csv` wrote a zip under a .csv name: a name that promises another format
    is refused (nothing written), and a name alone picks its format."""
    s, _ = study
    runner = CliRunner()
    for args, name in ((["--format", "csv"], "x.csv"), ([], "x.csv"), (["--format", "md"], "x.json"),
                       (["--format", "csv"], "x.html")):
        result = runner.invoke(main, ["report", str(s.path), *args, "-o", str(tmp_path / name)])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert not (tmp_path / name).exists()
    assert "give -o a .zip name (x.zip)" in runner.invoke(
        main, ["report", str(s.path), "--format", "csv", "-o", str(tmp_path / "x.csv")]).output
    for name, check in (("r.zip", zipfile.is_zipfile), ("r.json", lambda p: json.loads(p.read_text())),
                        ("r.html", lambda p: p.read_text().lstrip().lower().startswith("<!doctype html"))):
        result = runner.invoke(main, ["report", str(s.path), "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert check(tmp_path / name), name
    result = runner.invoke(main, ["report", str(s.path), "--format", "md", "-o", str(tmp_path / "notes.txt")])
    assert result.exit_code == 0 and (tmp_path / "notes.txt").read_text().startswith("#")


def test_a_report_without_the_attempts_texts_renders_the_document_formats_alike(study):
    """md, html and latex show no attempt's command, claim or note: they are built without them
    (the CLI does); json and csv show them, so such a report is refused there."""
    s, _ = study
    whole, bare = build_report(s.db), build_report(s.db, attempt_texts=False)
    for fmt in FORMATS:
        if fmt in ATTEMPT_TEXT_FORMATS:
            with pytest.raises(ValueError, match="attempt_texts"):
                render(bare, fmt)
        else:
            assert render(bare, fmt) == render(whole, fmt), fmt


def test_an_empty_study_reports_without_dividing_by_zero(tmp_path):
    study = open_study(tmp_path / "empty.db", create=True)
    try:
        study.db["study"].insert({"id": 1, "slug": "e", "title": "Empty"})
        report = build_report(study.db)
        for fmt in FORMATS:
            assert render(report, fmt)
        assert report.totals.failed.percent is None and report.totals.interventions_per_migration is None
    finally:
        study.close()


def test_the_latest_override_wins_once_in_python():
    from domain.ladder import effective_outcome

    assert effective_outcome("fail") == "fail"
    assert effective_outcome("fail", ["pass"]) == "pass"
    assert effective_outcome("pass", ["fail", "pass", "unknown"]) == "unknown"


def test_the_report_holds_no_sql_of_its_own():
    folder = Path(__file__).resolve().parent.parent / "workbench" / "report"
    for path in folder.glob("*.py"):
        assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\s", path.read_text()), path.name


def test_the_final_run_is_the_accepted_attempt_and_never_a_smoke_run(study):
    """docs/report.md, "Final run": stopped and in-progress migrations have none; an accepted
    attempt that stopped short of the reference run's last step is a smoke run, never final."""
    s, ids = study
    doc = json.loads(render(build_report(s.db), "json"))
    t, m = doc["totals"], {x["slug"]: x for x in doc["migrations"]}
    assert doc["final_rule"] == "accepted"
    assert m["alpha"]["final_run"]["attempt_id"] == ids["a4"]
    assert (m["beta"]["final_run"]["attempt_id"], m["beta"]["final_run"]["why_none"]) == (None, "stopped")
    assert m["gamma"]["final_run"]["why_none"] == "in_progress"
    assert t["without_final_run"]["stopped"]["migration_ids"] == [ids["beta"]]
    assert t["without_final_run"]["in_progress"]["migration_ids"] == [ids["gamma"]]
    assert t["time_ratio"]["attempt_ids"] == [ids["a4"]] and t["cost_ratio"]["values"] == [0.5]
    md = render(build_report(s.db), "md").decode()
    assert "Final run: the attempt named by the migration's latest accept decision" in md
    assert "- alpha: Alpha to torch\\_xla, tpu-v5e x 4, accepted; final run: seq 4" in md
    assert "- beta: Beta to torch\\_xla, tpu-v5e x 4, stopped; no final run (stopped)" in md
    # alpha accepts a5 instead: 10 steps of the reference's 20, a smoke run
    s.db["metric_point"].insert_all({"attempt_id": ids["a5"], "name": "loss", "step": n, "value": 1.0}
                                    for n in range(10))
    s.db["decision"].insert({"migration_id": ids["alpha"], "kind": "accept", "reason": "smoke looks fine",
                             "figures": "{}", "reviewer": "ana", "at": "2026-11-03T10:00:00Z",
                             "attempt_id": ids["a5"]})
    report = build_report(s.db)
    alpha = report.migrations[0]
    assert (alpha.final_attempt_id, alpha.final_why_none) == (None, "smoke")
    assert [a.smoke for a in alpha.attempt_facts] == [True, True, False, False, True]
    assert report.totals.time_ratios.n == 0 and report.totals.without_final_run["smoke"].ids == (ids["alpha"],)
    md = md_tables(render(report, "md").decode())["Study totals"]
    assert ["Migrations without a final run: accepted a smoke run", "1", "3", "33.3%", "6.1%–79.2%"] in md
    with pytest.raises(Exception, match="unknown final-run rule"):
        build_report(s.db, final="best")


@pytest.mark.parametrize("fmt", FORMATS)
def test_untimed_and_unpriced_attempts_are_counted_with_their_ids(study, fmt):
    """docs/report.md, "Unpriced": they add nothing to compute cost, and every format says how many."""
    s, ids = study
    g = ids["gamma"]
    row = {"migration_id": g, "source": "agent", "argv": "[]", "status": "ok", "exit_code": 0,
           "intended_count": 4}
    untimed = s.db["attempt"].insert({**row, "seq": 2, "commit_sha": "u", "intended_kind": "tpu-v5e"}).last_pk
    unpriced = s.db["attempt"].insert({**row, "seq": 3, "commit_sha": "p", "intended_kind": "a100",
                                       "started_at": "2026-11-01T10:00:00Z",
                                       "ended_at": "2026-11-01T11:00:00Z"}).last_pk
    report = build_report(s.db)
    data = render(report, fmt)
    want = {"Attempts and re-runs without times (no wall time, no cost)": (1, 10, 10.0),
            "Attempts and re-runs on an unpriced accelerator (no cost)": (1, 10, 10.0),
            "Compute cost ($)": (26.93, None, None),  # neither adds a cent
            "Wall hours of attempts and re-runs": (3.37 + 1.0, None, None)}  # the unpriced one has a time
    if fmt == "json":
        t = json.loads(data)["totals"]
        assert t["untimed"]["attempt_ids"] == [untimed] and t["untimed"]["n"] == 1
        assert t["unpriced"]["attempt_ids"] == [unpriced]
        assert t["compute_cost_dollars"] == pytest.approx(26.9333, abs=1e-3)
    else:
        check_rows(tables_of(fmt, data)["totals"], want)


def _wilson_by_hand(k: int, n: int) -> list[float] | None:
    """Wilson (1927), written out again here: centre and half-width over 1 + z^2/n."""
    if not n:
        return None
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return [round(100 * max(0.0, centre - half), 1), round(100 * min(1.0, centre + half), 1)]


def _bootstrap_by_hand(values: list[float], resamples: int, seed: int, percentiles: list[float]):
    import random
    import statistics

    if not values:
        return None
    if len(values) == 1:
        return [values[0], values[0]]
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    cuts = statistics.quantiles(medians, n=40, method="inclusive")
    assert percentiles == [2.5, 97.5]
    return [cuts[0], cuts[-1]]


def test_intervals_against_values_worked_by_hand():
    from workbench.report.stats import bootstrap_median, wilson

    # 3 of 4: p = .75, z^2 = 3.8415; centre = (.75 + .4802) / 1.9604 = .6275, half = .3269
    assert wilson(3, 4) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    assert wilson(0, 8) == pytest.approx((0.0, 0.3244), abs=1e-4) and wilson(0, 0) is None
    assert wilson(5, 5)[1] == 1.0
    assert bootstrap_median([0.7]) == (0.7, 0.7) and bootstrap_median([]) is None
    # two values: a resample's median is 0.5, 0.85 or 1.2; the tails are the extremes
    assert bootstrap_median([0.5, 1.2]) == (0.5, 1.2)
    values = [0.4, 0.6, 0.7, 0.9, 1.1, 1.3, 2.0]
    low, high = bootstrap_median(values)
    assert bootstrap_median(values) == (low, high)  # seeded: the same data, the same interval
    assert 0.4 <= low < 0.9 < high <= 2.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=20.0), min_size=2, max_size=60),
       st.integers(min_value=0, max_value=2**40))
def test_the_bootstrap_draws_what_choices_draws(values, seed):
    """The resamples' positions are drawn once for a number of values (the time and cost ratios share
    them): the interval is still that of `random.Random(seed).choices`' resamples."""
    from workbench.report.stats import bootstrap_median

    assert list(bootstrap_median(values, resamples=200, seed=seed)) == _bootstrap_by_hand(
        values, 200, seed, [2.5, 97.5])


def _recompute_totals(doc: dict) -> None:
    """Every figure of the JSON totals, recomputed from the records its ids name and nothing else."""
    import statistics

    t = doc["totals"]
    A = {a["id"]: a for a in doc["attempts"]}
    M = {m["id"]: m for m in doc["migrations"]}
    minutes = {i["id"]: i["minutes"] for i in doc["interventions"]}
    seconds = {r["id"]: r["active_seconds"] for r in doc["review_sessions"]}
    llm = {c["id"]: c["cost_usd"] for c in doc["llm_calls"]}

    def rate(key, table, of_ids, pred):
        part = [i for i in of_ids if pred(i)]
        assert sorted(t[key][f"of_{table}_ids"]) == sorted(of_ids), key
        assert sorted(t[key][f"{table}_ids"]) == sorted(part), key
        assert (t[key]["n"], t[key]["of"]) == (len(part), len(of_ids)), key
        assert t[key]["percent"] == (round(100 * len(part) / len(of_ids), 1) if of_ids else None), key
        assert t[key]["wilson95_percent"] == _wilson_by_hand(len(part), len(of_ids)), key

    runs = sorted(A)
    attempts = [i for i in runs if A[i]["source"] != "rerun"]
    reruns = [i for i in runs if A[i]["source"] == "rerun"]
    assert sorted(t["attempts"]["attempt_ids"]) == attempts and t["attempts"]["n"] == len(attempts)
    assert sorted(t["reruns"]["attempt_ids"]) == reruns
    deciders = {r for a in A.values() for _, r in a["levels_from_reruns"]}
    confirms = {i for i in reruns if A[i]["level"] == A[A[i]["rerun_of"]]["level"] and i not in deciders}
    rate("reruns_confirming", "attempt", reruns, lambda i: A[i]["verification_id"] is not None and i in confirms)
    rate("reruns_changing", "attempt", reruns, lambda i: A[i]["verification_id"] is not None and i not in confirms)
    verified = [i for i in attempts if A[i]["verification_id"] is not None]
    assert sorted(t["verified"]["attempt_ids"]) == verified
    rate("decided_by_reruns", "attempt", verified, lambda i: bool(A[i]["levels_from_reruns"]))
    failed = [i for i in verified if A[i]["failed"]]
    rate("failed", "attempt", verified, lambda i: A[i]["failed"])
    rate("failed_verifier", "attempt", verified, lambda i: A[i]["failed_automated"])
    rate("silent", "attempt", failed, lambda i: A[i]["silent"])
    rate("silent_verifier", "attempt", [i for i in verified if A[i]["failed_automated"]],
         lambda i: A[i]["silent_automated"])
    judged = [i for i in verified if A[i]["expected_level"] is not None]
    rate("over_claims", "attempt", judged, lambda i: A[i]["level"] < A[i]["expected_level"])
    rate("over_claims_verifier", "attempt", judged, lambda i: A[i]["level_automated"] < A[i]["expected_level"])
    rate("stated_expectation", "attempt", attempts, lambda i: A[i]["expected_level"] is not None)
    migrations = sorted(M)
    levels = {m: [A[i]["level"] for i in M[m]["verified"]["attempt_ids"]] for m in migrations}
    rate("goal_met", "migration", migrations, lambda m: max(levels[m], default=0) >= 4)
    finals = {m: M[m]["final_run"]["attempt_id"] for m in migrations if M[m]["final_run"]["attempt_id"]}
    assert sorted(t["final_runs"]["migration_ids"]) == sorted(finals)
    for why, count in t["without_final_run"].items():
        assert count["migration_ids"] == [m for m in migrations if M[m]["final_run"]["why_none"] == why]
    # a final run's ratios are its migration's: full-run wall and cost over the reference run's
    final_of = {a: M[m]["final_run"] for m, a in finals.items()}
    for key, field, test in (("time_ratio", "time_ratio", "faster"), ("cost_ratio", "cost_ratio", "cheaper")):
        ids = t[key]["attempt_ids"]
        assert sorted(ids) == sorted(a for a in finals.values() if final_of[a][field] is not None)
        values = [final_of[i][field] for i in ids]
        assert t[key]["values"] == values and t[key]["n"] == len(ids)
        assert t[key]["median"] == (statistics.median(values) if values else None)
        assert (t[key]["min"], t[key]["max"]) == ((min(values), max(values)) if values else (None, None))
        assert t[key]["median_bootstrap95"] == _bootstrap_by_hand(values, **t[key]["bootstrap"])
        rate(test, "migration", [m for m, a in finals.items() if final_of[a][field] is not None],
             lambda m, f=field: final_of[finals[m]][f] < 1)
    rate("faster_and_cheaper", "migration",
         [m for m, a in finals.items() if final_of[a]["time_ratio"] is not None and final_of[a]["cost_ratio"] is not None],
         lambda m: final_of[finals[m]]["time_ratio"] < 1 and final_of[finals[m]]["cost_ratio"] < 1)
    assert sorted(t["untimed"]["attempt_ids"]) == [i for i in runs if A[i]["wall_seconds"] is None]
    assert sorted(t["unpriced"]["attempt_ids"]) == [i for i in runs if A[i]["unpriced"]]
    src = t["sources"]
    assert t["intervention_minutes"] == pytest.approx(sum(minutes[i] for i in src["intervention_minutes"]
                                                          ["intervention_ids"]))
    assert sorted(src["intervention_minutes"]["intervention_ids"]) == sorted(t["interventions"]["intervention_ids"])
    assert t["review_seconds"] == pytest.approx(sum(seconds[i] for i in src["review_seconds"]["review_session_ids"]))
    staff_hours = (sum(minutes[i] for i in src["staff_hours"]["intervention_ids"]) / 60
                   + sum(seconds[i] for i in src["staff_hours"]["review_session_ids"]) / 3600)
    assert t["staff_hours"] == pytest.approx(staff_hours)
    assert t["staff_cost_dollars"] == pytest.approx(staff_hours * doc["study"]["staff_hourly_rate"])
    assert t["wall_hours"] == pytest.approx(sum(A[i]["wall_seconds"] for i in src["wall_hours"]["attempt_ids"]) / 3600)
    assert t["chip_hours"] == pytest.approx(sum(A[i]["chip_hours"] for i in src["chip_hours"]["attempt_ids"]))
    compute = sum(A[i]["cost_dollars"] for i in src["compute_cost_dollars"]["attempt_ids"])
    assert t["compute_cost_dollars"] == pytest.approx(compute)
    calls = sum(llm[i] for i in src["llm_cost_dollars"]["llm_call_ids"])
    assert t["llm_cost_dollars"] == pytest.approx(calls)
    assert t["total_cost_dollars"] == pytest.approx(compute + calls + staff_hours * doc["study"]["staff_hourly_rate"])
    assert t["interventions_per_migration"] == pytest.approx(
        len(src["interventions_per_migration"]["intervention_ids"]) / len(migrations))


@pytest.mark.parametrize("final", ["accepted", "last-passing"])
def test_every_json_figure_recomputes_from_its_ids_alone(study, final):
    s, ids = study
    doc = json.loads(render(build_report(s.db, final=final), "json"))
    _recompute_totals(doc)
    # the study-wide sums are the right ones too (hand-computed above)
    assert doc["totals"]["compute_cost_dollars"] == pytest.approx(26.9333, abs=1e-3)


def _rerun(db, of: int, seq: int, ladder: tuple[str, ...], wall: float, cost: float) -> int:
    row = db["attempt"].get(of)
    rid = db["attempt"].insert({
        "migration_id": row["migration_id"], "seq": seq, "source": "rerun", "commit_sha": row["commit_sha"], "argv": "[]",
        "status": "ok", "exit_code": 0, "intended_kind": row["intended_kind"], "intended_count": 4,
        "rerun_of": of, "started_at": "2026-11-03T10:00:00Z", "ended_at": "2026-11-03T10:30:00Z"}).last_pk
    _verify(db, rid, ladder, wall=wall, cost=cost, time_ratio=0.1, cost_ratio=0.1)
    return rid


@pytest.mark.parametrize("fmt", ["md", "html", "latex", "csv", "json"])
def test_reruns_are_evidence_not_attempts(study, fmt):
    """docs/report.md, "Re-run": attempt, failure, silent and over-claim counts stay over the
    agent's attempts; re-runs have rows of their own; their compute counts."""
    s, ids = study
    confirms = _rerun(s.db, ids["a4"], 6, (P, P, P, P, P), 1800, 4.0)  # a4 reached 5: so does this
    changes = _rerun(s.db, ids["a3"], 7, (F, U, U, U, U), 600, 1.0)   # a3 reached 4: this one 0
    data = render(build_report(s.db), fmt)
    if fmt == "json":
        doc = json.loads(data)
        _recompute_totals(doc)
        t = doc["totals"]
        assert t["reruns_confirming"]["attempt_ids"] == [confirms]
        assert t["reruns_changing"]["attempt_ids"] == [changes]
        assert t["time_ratio"]["attempt_ids"] == [ids["a4"]]  # a re-run is never a final run
        return
    want = expected_totals(has_llm(s.db), "accepted") | {
        "Re-runs (not counted as attempts)": (2, None, None),
        "Re-runs that confirmed their attempt's level": (1, 2, 50.0),
        "Re-runs that changed it": (1, 2, 50.0),
        "Compute cost ($)": (26.93 + 5.0, None, None),
        "Wall hours of attempts and re-runs": (3.37 + 2400 / 3600, None, None),
        "Chip-hours of attempts and re-runs": (13.47 + 5.0 / 2.0, None, None),
        "Attempts and re-runs without times (no wall time, no cost)": (0, 10, 0.0),
        "Attempts and re-runs on an unpriced accelerator (no cost)": (0, 10, 0.0),
    }
    want.pop("Total cost ($)")
    check_rows(tables_of(fmt, data)["totals"], want)


def test_a_reruns_verdict_decides_a_level_its_attempt_left_unknown_and_is_cited(study):
    """b2: the verifier says (P, P, P, F, U), a reviewer's override passes level 4. Its re-run says
    (P, P, P, F, P): level 5 was unknown, so the re-run decides it; level 4 keeps the override in
    the effective outcomes and the verifier's own fail in the verifier-alone ones."""
    s, ids = study
    rerun = _rerun(s.db, ids["b2"], 3, (P, P, P, F, P), 1800, 4.0)
    report = build_report(s.db)
    beta = next(m for m in report.migrations if m.slug == "beta")
    b2 = next(a for a in beta.attempt_facts if a.id == ids["b2"])
    assert b2.levels_from_reruns == ((5, rerun),)
    assert (b2.ladder, b2.level, b2.level_automated) == ((P, P, P, P, P), 5, 3)
    assert (beta.highest_level, beta.highest_level_automated) == (5, 3)
    t = report.totals
    assert (t.reruns.ids, t.reruns_confirming.n, t.reruns_changing.ids) == ((rerun,), 0, (rerun,))
    assert t.decided_by_reruns.ids == (ids["b2"],) and t.attempts.n == 8
    doc = json.loads(render(report, "json"))
    _recompute_totals(doc)
    attempts = {a["id"]: a for a in doc["attempts"]}
    assert attempts[ids["b2"]]["levels_from_reruns"] == [[5, rerun]]
    rows = csv_tables(render(report, "csv"))["attempts"]
    b2_row = next(r for r in rows if r[1] == str(ids["b2"]))
    assert b2_row[rows[0].index("levels_from_reruns")] == f"5:{rerun}"
    md = md_tables(render(report, "md").decode())["Study totals"]
    assert ["Attempts with a level decided by a re-run", "1", "6", "16.7%"] == md[[r[0] for r in md].index(
        "Attempts with a level decided by a re-run")][:4]
