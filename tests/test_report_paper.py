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
from test_report import (
    F,
    P,
    U,
    _all_text,
    _attempt,
    _recompute_totals,
    _rerun,
    _verdict_id,
    _verify,
    check_rows,
    tables_of,
)

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
    # full-run wall and cost over the reference's (30 min, $4 on tpu-v5e x 4), not the verifier's stored ratios
    "Time ratio of final runs, median": (1.0, None, None),
    "Cost ratio of final runs, median": (1.0, None, None),
    "Migrations that ended faster": (0, 1, 0.0),
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
    "Time ratio of final runs, median": (1.0, None, None),  # walls 1800, 300, 1800 s over 1800 s
    "Time ratio of final runs, min": (0.17, None, None),
    "Cost ratio of final runs, median": (1.0, None, None),  # $4, $2/3, $4 over $4
    "Migrations that ended faster": (1, 3, 33.3),
    "Migrations that ended cheaper": (1, 3, 33.3),
    "Migrations that ended faster and cheaper": (1, 3, 33.3),
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
    assert t["time_ratio"]["attempt_ids"] == [a["m1s2"]] and t["time_ratio"]["median_bootstrap95"] == [1.0, 1.0]
    assert t["failed"]["wilson95_percent"] == [3.6, 62.4]  # 1 of 5, worked out by hand
    smoke = {x["id"]: x["smoke"] for x in doc["attempts"]}
    assert smoke == {a["m1s1"]: True, a["m1s2"]: False, a["m2s1"]: True, a["m3s1"]: False, a["m4s1"]: False,
                     a["m4s2"]: False}  # m4 has no reference run: nothing to fall short of


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_pseudonymised_paper_study_names_nobody(paper, fmt):
    study, m, a = paper
    hidden = _all_text(fmt, render(build_report(study.db, pseudonymise=True), fmt))
    assert not re.search(r"(?i)(?<![a-z])(ben|carter|ana|lima)(?![a-z])|uni\.example", hidden)


# --------------------------------------------------------------------------- the seed paper's study

PAPER_WALLS = {  # project: (reference wall s, final full-run wall s, median step s of the final, the reference's)
    "p01": (6000, 1980, 0.060, 0.190), "p02": (5000, 2050, 0.070, 0.180), "p03": (4000, 1920, 0.080, 0.172),
    "p04": (3000, 1650, 0.050, 0.094), "p05": (2000, 1200, 0.040, 0.069), "p06": (2500, 1600, 0.060, 0.097),
    "p07": (3000, 2550, 0.090, 0.109), "p08": (1000, 1200, 0.050, 0.043), "p09": (1000, 1900, 0.100, 0.054),
    "p10": (1000, 2580, 0.148, 0.059),
}
"""Ten migrations accepted on full runs whose wall times give the paper's figure, median 0.62x the
reference (0.33x-2.58x). The verifier's old level 5 stored the ratio of median step times after
warm-up (0.60, 0.32-2.51 here: start-up and compilation left out), which the report used to give."""


def _paper_rebuild(tmp_path: Path):
    study = open_study(tmp_path / "rebuild.db", create=True)
    db = study.db
    db["study"].insert({"id": 1, "slug": "seed", "title": "From GPU to TPU with coding agents", "staff_hourly_rate": 100.0,
                        "reviewers": json.dumps(["ana"]), "prices": json.dumps({"a100": 4.0, "tpu-v5e": 2.0})})
    for n, (slug, (ref_wall, wall, step, ref_step)) in enumerate(sorted(PAPER_WALLS.items())):
        mid = db["migration"].insert({
            "slug": slug, "title": slug, "repo": "repo", "base_commit": "c0", "accelerator": "tpu-v5e", "chips": 1,
            "runtime": "torch_xla", "goal_metric": "eval_accuracy", "goal_reference": 0.9, "goal_direction": "max",
            "goal_tolerance": 0.01, "status": "accepted"}).last_pk
        ref = _attempt(db, mid, 0, "00:00", "00:00", source="reference")
        final = _attempt(db, mid, 1, "00:00", "00:00")
        for aid, seconds, kind in ((ref, ref_wall, "a100"), (final, wall, "tpu-v5e")):
            db["attempt"].update(aid, {"started_at": "2026-11-01T00:00:00Z", "intended_kind": kind, "intended_count": 1,
                                       "ended_at": f"2026-11-01T{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}Z"})
            _series(db, aid, 20, 0.91)
        tr = step / ref_step  # what the old level 5 stored: the median step time's ratio
        _verify(db, final, (P, P, P, P, P if tr < 1 else F), wall=wall, cost=wall / 3600 * 2.0, time_ratio=tr,
                cost_ratio=tr / 2)
        _accept(db, mid, final)
    return study


def test_the_seed_papers_final_time_ratio_comes_from_full_run_wall_times(tmp_path):
    study = _paper_rebuild(tmp_path)
    tables = tables_of("md", render(build_report(study.db), "md"))
    check_rows(tables["totals"], {
        "Migrations with a final run": (10, 10, 100.0),
        "Time ratio of final runs, median": (0.62, None, None),
        "Time ratio of final runs, min": (0.33, None, None),
        "Time ratio of final runs, max": (2.58, None, None),
        "Cost ratio of final runs, median": (0.31, None, None),  # $2 against $4 a chip-hour
        "Migrations that ended faster": (7, 10, 70.0),
        "Migrations that ended cheaper": (9, 10, 90.0),  # 1.9x the time at half the price is cheaper
        "Migrations that ended faster and cheaper": (7, 10, 70.0),
    })
    study.close()


def test_a_failure_a_rerun_decided_is_silent_with_its_cause_as_the_app_shows_it(paper):
    """An attempt whose own verdicts left levels 2-5 unknown (no exit code: it was backgrounded),
    re-run: the re-run fails level 2 silently. The report counts the attempt failed, as before, and
    now silent with the re-run's cause, the failure the app shows on the re-run's row (before: not
    silent, no cause, so the app showed a silent failure the report did not count)."""
    study, m, a = paper
    db = study.db
    bg = _attempt(db, m["m4"], 3, "12:00", "12:30")
    db["attempt"].update(bg, {"exit_code": None, "status": "backgrounded"})
    _verify(db, bg, (U, U, U, U, U))
    rerun = _rerun(db, bg, 4, (P, F, P, P, U), 1800, 4.0)
    db["failure"].insert({"attempt_id": rerun, "cause": "numerical_mismatch", "silent": 1, "note": "loss",
                          "evidence": "[]", "verification_id": db.execute(
                              "SELECT id FROM verification WHERE attempt_id = ?", [rerun]).fetchone()[0]})
    doc = json.loads(render(build_report(db), "json"))
    _recompute_totals(doc)
    mine = next(x for x in doc["attempts"] if x["id"] == bg)
    assert (mine["failed"], mine["silent"], mine["cause"]) == (True, True, "numerical_mismatch")
    assert bg in doc["totals"]["silent"]["attempt_ids"]
