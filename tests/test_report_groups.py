"""A report that shows no attempt's row (md, latex, html) counts groups of alike attempts
(storage.report.report_attempt_groups, issue 39): every count, sum, level, goal value and final
run is what the report counted a row per attempt gives, on a generated study of real SQLite rows
given what sets attempts apart (re-runs, overrides, claim reviews, decisions, unverified and
untimed runs, unpriced kinds, ties of goal values in both directions)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import pytest

from domain.kinds import Outcome
from storage import queries, records
from storage.database import open_study
from workbench.report import FORMATS, PER_ATTEMPT_FORMATS, build_for, build_report, render
from workbench.report.model import AttemptGroup, Count, Spread

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
bench_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_report)


def rerun(db, attempt_id: int, ladder: tuple[str, ...]) -> int:
    """A verified re-run of the attempt, of its commit, with its own verdicts (what `workbench rerun` writes)."""
    migration_id, seq = db.execute("SELECT migration_id, MAX(seq) + 1 FROM attempt WHERE migration_id ="
                                   " (SELECT migration_id FROM attempt WHERE id = ?)", [attempt_id]).fetchone()
    run = db.execute("INSERT INTO attempt (migration_id, seq, source, argv, cwd, env, started_at, ended_at, status,"
                     " exit_code, commit_sha, rerun_of, intended_kind, intended_count) VALUES (?, ?, 'rerun',"
                     " '[\"python\", \"train.py\"]', '.', '{}', '2026-11-03T00:00:00Z', '2026-11-03T00:30:00Z', 'ok',"
                     " 0, 'c1', ?, 'tpu-v5e', 4)", [migration_id, seq, attempt_id]).lastrowid
    verification = db.execute("INSERT INTO verification (attempt_id, verifier, verifier_version, inputs_hash, at,"
                              " highest_level, wall_seconds, cost_dollars, time_ratio, cost_ratio) VALUES"
                              " (?, 'bench', '1', 'h', '2026-11-03', 0, 1800, 2.4, 0.5, 0.8)", [run]).lastrowid
    for level, outcome in enumerate(ladder, start=1):
        db.execute("INSERT INTO verdict (attempt_id, level, outcome, reason, evidence, verifier, verifier_version,"
                   " verification_id) VALUES (?, ?, ?, 'r', '[]', 'bench', '1', ?)", [run, level, outcome, verification])
    db.execute("INSERT INTO metric_point (attempt_id, name, step, value) VALUES (?, 'eval_accuracy', 100, 0.87)", [run])
    return run


@pytest.fixture(scope="module")
def study_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("groups") / "study.db"
    bench_report.generate(path, 2000, 8)  # 250 attempts a migration, verified, a spread of ladders
    study = open_study(path)
    db = study.db
    with db.conn:
        agents = [r[0] for r in db.execute("SELECT id FROM attempt WHERE source = 'agent' ORDER BY id")]
        # goal values with ties inside groups and across them; migration 2's goal is the lower the better
        db.conn.executemany("INSERT INTO metric_point (attempt_id, name, step, value) VALUES (?, 'eval_accuracy', 100, ?)",
                            [(i, 0.80 + (i % 5) * 0.01) for i in agents if i % 3])
        db.execute("UPDATE migration SET goal_direction = 'min' WHERE id = 2")
        # runs without the verifier's wall time (priced from their own times), unpriced and wider ones
        db.execute("UPDATE verification SET wall_seconds = NULL WHERE attempt_id % 97 = 0")
        db.execute("UPDATE attempt SET intended_kind = 'tpu-v4' WHERE id % 89 = 0")  # chip-hours from wall time
        db.execute("UPDATE attempt SET intended_count = 8, observed_count = 8 WHERE id % 83 = 0")
        db.execute("UPDATE attempt SET exit_code = 137 WHERE id % 79 = 0")
        # attempts not verified yet
        for m in range(1, 9):
            db.execute("INSERT INTO attempt (migration_id, seq, source, argv, cwd, env, started_at, ended_at, status,"
                       " exit_code, commit_sha, intended_kind, intended_count) VALUES (?, 900, 'agent', '[\"python\"]',"
                       " '.', '{}', '2026-11-04T00:00:00Z', '2026-11-04T00:10:00Z', 'ok', 0, 'c1', ?, 4)",
                       [m, "tpu-v4" if m % 2 else "tpu-v5e"])  # tpu-v4 has no price in the study
    for i in agents[5::211]:  # reviewers' word on the expected level, overrides, re-runs
        records.add_claim_review(db, attempt_id=i, action="correct", reviewer="ana", expected_level=1)
    for i in agents[17::173]:
        verdict = next(v for v in queries.verdicts(db, i) if v.level == 2)
        records.add_verdict_override(db, verdict_id=verdict.id, outcome=Outcome.PASS, justification="by hand",
                                     reviewer="ana")
    with db.conn:
        for i in agents[3::157]:
            rerun(db, i, ("pass", "pass", "pass", "pass", "pass"))
    study.close()
    return path


def same(a, b, where: str) -> None:
    """The two reports' values alike: a count by the records it holds, a sum to rounding."""
    if isinstance(a, Count):
        assert (a.table, sorted(a.ids)) == (b.table, sorted(b.ids)), where
    elif isinstance(a, Spread):
        assert (a.table, sorted(a.values), a.interval) == (b.table, sorted(b.values), b.interval), where
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (where, a, b)
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            if f.name != "attempt_facts":  # the one thing a grouped report holds otherwise
                same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, (list, tuple)) and a and dataclasses.is_dataclass(a[0]):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    else:
        assert a == b, (where, a, b)


def test_groups_count_what_a_row_per_attempt_counts(study_path: Path) -> None:
    study = open_study(study_path)
    try:
        each = build_report(study.db, attempt_texts=False)
        grouped = build_report(study.db, attempt_texts=False, per_attempt=False)
    finally:
        study.close()
    facts = [a for m in grouped.migrations for a in m.attempt_facts]
    assert all(type(a) is AttemptGroup for a in facts)
    assert len(facts) < sum(len(m.attempt_facts) for m in each.migrations) / 3  # groups, not rows
    assert sum(len(a.members) for a in facts) == sum(len(m.attempt_facts) for m in each.migrations)
    same(each.totals, grouped.totals, "totals")
    same(each.migrations, grouped.migrations, "migrations")
    for fmt in ("md", "latex", "html"):  # html: a bar an attempt, drawn from its group
        assert render(grouped, fmt) == render(each, fmt)
    # what the study was made to hold, so the comparison above covers it
    assert each.totals.reruns.n and each.totals.decided_by_reruns.n and each.totals.untimed.n == 0
    assert any(o.effective for o in each.overrides) and each.totals.with_final_run.n
    assert each.totals.unpriced.n and each.migrations[1].goal.direction == "min"
    # best goal values held by groups of several: the one named (the same as above) is read from them
    assert any(m.goal.best_attempt_id in a.members and m.goal.best_attempt_id != a.id
               for m in grouped.migrations for a in m.attempt_facts if len(a.members) > 1)


def test_each_format_is_built_with_what_it_shows(study_path: Path) -> None:
    study = open_study(study_path)
    try:
        for fmt in FORMATS:
            report = build_for(study.db, fmt)
            assert report.per_attempt is (fmt in PER_ATTEMPT_FORMATS)
            assert render(report, fmt)
        grouped = build_for(study.db, "md")
        for fmt in PER_ATTEMPT_FORMATS:  # a row per attempt: groups cannot give them
            with pytest.raises(ValueError, match="per_attempt=True"):
                render(grouped, fmt)
        # the last passing run is an attempt's own: that rule counts a row per attempt
        assert build_for(study.db, "md", final="last-passing").per_attempt
        with pytest.raises(ValueError, match="groups"):
            build_report(study.db, per_attempt=False)  # with the attempts' texts
    finally:
        study.close()


def test_a_rerun_standing_in_for_its_attempt_is_summed_once(tmp_path: Path) -> None:
    """An imported commit has no times of its own: its verified re-run's time and cost stand for it
    (its row, its final-run figures), and the compute sums count that run once, as the re-run; they
    counted it twice, as the attempt too."""
    import orjson

    path = tmp_path / "study.db"
    bench_report.generate(path, 6, 1)  # a reference and 6 timed attempts
    study = open_study(path)
    db = study.db
    with db.conn:
        attempt = db.execute("INSERT INTO attempt (migration_id, seq, source, argv, cwd, env, status, commit_sha,"
                             " intended_kind, intended_count) VALUES (1, 7, 'agent', '[\"python\"]', '.', '{}', 'ok',"
                             " 'c1', 'tpu-v5e', 4)").lastrowid
        run = rerun(db, attempt, ("pass", "pass", "pass", "pass", "pass"))
    each, grouped = (build_report(db, attempt_texts=texts, per_attempt=texts) for texts in (True, False))
    study.close()
    [m] = each.migrations
    facts = {a.id: a for a in m.attempt_facts}
    assert facts[attempt].wall_seconds == facts[run].wall_seconds == 1800.0  # standing in for it
    timed = [a.wall_seconds for a in m.attempt_facts if a.id != attempt and a.wall_seconds is not None]
    assert m.wall_hours == pytest.approx(sum(timed) / 3600) and run in m.timed.ids and attempt not in m.timed.ids
    assert m.compute.dollars == pytest.approx(sum(a.cost_dollars for a in m.attempt_facts if a.id != attempt))
    same(each.migrations, grouped.migrations, "migrations")
    sources = orjson.loads(render(each, "json"))["totals"]["sources"]
    assert attempt not in sources["wall_hours"]["attempt_ids"] + sources["compute_cost_dollars"]["attempt_ids"]
