"""The launch's grouped counts (issue 19) give the rows the per-attempt formulas they replaced gave.

The old formulas are kept here, verbatim, as the reference: correlated subqueries per attempt and
per migration over the same EFFECTIVE_VERDICTS. Compared on a seeded study with every case the
counts distinguish (overrides, several per verdict; superseded verdicts; claim reviews raising,
lowering and clearing the expected level; unverified attempts; references; empty migrations) and
on the demo study.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from domain.models import Outcome
from storage import queries, records
from storage.database import open_study
from storage.queries import CURRENT_INTERVENTIONS, EFFECTIVE_VERDICTS, over_claim_of, verified_of


def old_level_of(a: str) -> str:
    return f"""(SELECT COALESCE(MIN(n.level), 6) - 1
        FROM (SELECT 1 AS level UNION ALL SELECT 2 UNION ALL SELECT 3
              UNION ALL SELECT 4 UNION ALL SELECT 5) n
        WHERE NOT EXISTS (SELECT 1 FROM effective e WHERE e.attempt_id = {a}.id
                          AND e.level = n.level AND e.outcome = 'pass'))"""


OLD_ATTEMPT_LEVEL = f"""
attempt_level AS (
    SELECT a.id, a.migration_id, {old_level_of("a")} AS level, {verified_of("a")} AS verified
    FROM attempt a WHERE a.source != 'reference'
)"""

FAILED = "EXISTS (SELECT 1 FROM effective e WHERE e.attempt_id = a.id AND e.outcome = 'fail')"
"""An attempt failed when an effective outcome fails: an override counts (as in the report)."""
SILENT = ("COALESCE((SELECT f.silent FROM failure f WHERE f.attempt_id = a.id AND f.superseded_by IS NULL),"
          " a.exit_code = 0)")
"""...and raised no error: the verifier's silent flag, else exit 0 (as in the report)."""

OLD_SUMMARIES = f"""
    WITH {EFFECTIVE_VERDICTS}, {OLD_ATTEMPT_LEVEL}, {CURRENT_INTERVENTIONS}
    SELECT m.slug,
        (SELECT count(*) FROM attempt a WHERE a.migration_id = m.id
            AND a.source != 'reference') AS n_attempts,
        (SELECT count(*) FROM attempt a WHERE a.migration_id = m.id AND a.source != 'reference'
            AND {FAILED}) AS n_failed,
        (SELECT count(*) FROM attempt a WHERE a.migration_id = m.id AND a.source != 'reference'
            AND {FAILED} AND {SILENT}) AS n_silent,
        (SELECT count(*) FROM current_intervention i WHERE i.migration_id = m.id)
            AS n_interventions,
        (SELECT MAX(level) FROM attempt_level l WHERE l.migration_id = m.id AND l.verified)
            AS highest_level,
        (SELECT count(*) FROM attempt a WHERE a.migration_id = m.id AND a.source != 'reference'
            AND {over_claim_of("a")}) AS n_over_claims,
        (SELECT SUM(v.cost_dollars) FROM verification v JOIN attempt a ON a.id = v.attempt_id
            WHERE a.migration_id = m.id AND v.superseded_by IS NULL) AS cost_dollars
    FROM migration m ORDER BY m.slug
"""

OLD_TOTALS = f"""
    WITH {EFFECTIVE_VERDICTS}, {CURRENT_INTERVENTIONS}
    SELECT
        (SELECT count(*) FROM migration) AS migrations,
        (SELECT count(*) FROM attempt WHERE source != 'reference') AS attempts,
        (SELECT count(*) FROM attempt a WHERE a.source != 'reference' AND {FAILED}) AS failed,
        (SELECT count(*) FROM attempt a WHERE a.source != 'reference' AND {FAILED} AND {SILENT}) AS silent,
        (SELECT count(*) FROM attempt a WHERE a.source != 'reference' AND {over_claim_of("a")})
            AS over_claims,
        (SELECT count(*) FROM current_intervention) AS interventions
"""

OLD_HIGHEST = f"""
    WITH {EFFECTIVE_VERDICTS}, {OLD_ATTEMPT_LEVEL}
    SELECT MAX(level) FROM attempt_level WHERE migration_id = ? AND verified
"""

OUTCOMES = ("pass", "fail", "unknown")


def _migration(n: int) -> dict[str, Any]:
    return {"id": n, "slug": f"m-{n:02d}", "title": f"M{n}", "repo": "/r", "base_commit": "c0",
            "accelerator": "tpu-v5e", "chips": 4, "runtime": "torch_xla", "goal_metric": "acc",
            "goal_reference": 0.9, "goal_direction": "max", "goal_tolerance": 0.0,
            "status": "in_progress"}


def _verify(db: Any, rng: random.Random, attempt_id: int, superseded: bool) -> int:
    """One verification of the attempt with five verdicts (some levels missing) and maybe a failure."""
    vid = db["verification"].insert({
        "attempt_id": attempt_id, "verifier": "t", "verifier_version": "1", "inputs_hash": "h",
        "at": "2026-12-01", "highest_level": 0, "cost_dollars": rng.choice([None, 1.5, 2.25])}).last_pk
    if superseded:  # by itself until the current one exists (one current verification per attempt)
        db["verification"].update(vid, {"superseded_by": vid})
    for level in range(1, 6):
        if rng.random() < 0.15:
            continue  # a level without a verdict
        db["verdict"].insert({
            "attempt_id": attempt_id, "level": level, "outcome": rng.choices(OUTCOMES, [6, 2, 1])[0],
            "verifier": "t", "verifier_version": "1", "verification_id": vid,
            "superseded_by": 0 if superseded else None})
    if rng.random() < 0.4:
        db["failure"].insert({"attempt_id": attempt_id, "cause": "crash", "silent": rng.randint(0, 1),
                              "verification_id": vid, "superseded_by": 0 if superseded else None})
    return vid


def build_study(path: Path, seed: int) -> Any:
    """A study with every case the counts tell apart, from a seed."""
    rng = random.Random(seed)
    study = open_study(path, create=True)
    db = study.db
    db["study"].insert({"id": 1, "slug": "s", "title": "S"})
    for m in range(1, 8):
        db["migration"].insert(_migration(m))
        for seq in range(0 if m != 7 else 99, rng.randint(0, 14)):  # migration 7: no attempts
            attempt_id = db["attempt"].insert({
                "migration_id": m, "seq": seq, "source": "reference" if seq == 0 else "agent",
                "commit_sha": "c", "argv": "[]", "status": "ok",
                "expected_level": rng.choice([None, 1, 2, 3, 4, 5])}).last_pk
            if rng.random() < 0.2:
                continue  # never verified
            old = _verify(db, rng, attempt_id, superseded=True) if rng.random() < 0.3 else None
            current = _verify(db, rng, attempt_id, superseded=False)
            if old is not None:
                db["verification"].update(old, {"superseded_by": current})
        for k in range(rng.randint(0, 3)):
            records.add_intervention(db, migration_id=m, kind="hint", minutes=5.0, note="n", reviewer="r")
    verdict_ids = [r[0] for r in db.execute("SELECT id FROM verdict").fetchall()]
    for verdict_id in rng.sample(verdict_ids, len(verdict_ids) // 4):
        for _ in range(rng.randint(1, 3)):  # the latest one counts
            records.add_verdict_override(db, verdict_id=verdict_id, outcome=Outcome(rng.choice(OUTCOMES)),
                                         justification="checked", reviewer="r")
    attempt_ids = [r[0] for r in db.execute("SELECT id FROM attempt WHERE source = 'agent'").fetchall()]
    for attempt_id in rng.sample(attempt_ids, len(attempt_ids) // 3):
        for _ in range(rng.randint(1, 2)):
            records.add_claim_review(db, attempt_id=attempt_id, action="correct", reviewer="r",
                                     expected_level=rng.choice([None, 1, 2, 3, 4, 5]))
    return study


def assert_same_counts(db: Any) -> None:
    new = [(s.migration.slug, s.attempts, s.failed, s.silent_failures, s.interventions, s.highest_level,
            s.over_claims, s.cost_dollars) for s in queries.iter_migration_summaries(db, page=3)]
    assert new == [tuple(r) for r in db.execute(OLD_SUMMARIES).fetchall()]
    old_totals = dict(zip(("migrations", "attempts", "failed", "silent", "over_claims", "interventions"),
                          db.execute(OLD_TOTALS).fetchone()))
    assert queries.study_totals(db) == old_totals
    for (migration_id,) in db.execute("SELECT id FROM migration").fetchall():
        assert queries.effort_inputs(db, migration_id).highest_level == \
            db.execute(OLD_HIGHEST, [migration_id]).fetchone()[0]


@pytest.mark.parametrize("seed", range(6))
def test_grouped_counts_match_the_per_attempt_formulas(tmp_path: Path, seed: int) -> None:
    study = build_study(tmp_path / "study.db", seed)
    try:
        assert queries.study_totals(study.db)["over_claims"] > 0  # the study exercises the rule
        assert_same_counts(study.db)
    finally:
        study.close()


def test_grouped_counts_match_on_the_demo_study(demo_study) -> None:
    assert_same_counts(demo_study.db)


def test_the_override_index_is_used_for_the_latest_override(tmp_path: Path) -> None:
    study = open_study(tmp_path / "study.db", create=True)
    try:
        plan = " ".join(str(r) for r in study.db.execute(
            f"EXPLAIN QUERY PLAN WITH {EFFECTIVE_VERDICTS} SELECT * FROM effective").fetchall())
        assert "idx_verdict_override_verdict" in plan
    finally:
        study.close()


@pytest.mark.parametrize("seed", range(3))
def test_reads_of_many_attempts_give_each_attempt_its_own_rows(tmp_path: Path, seed: int) -> None:
    """What `workbench verify` prints a migration's rows from (current verifications, verdicts
    with their overrides, failures, in one read each) holds, for every attempt, the rows SQL
    finds for it alone, and the effective outcome EFFECTIVE_VERDICTS counts."""
    study = build_study(tmp_path / "study.db", seed)
    db = study.db
    try:
        ids = [r[0] for r in db.execute("SELECT id FROM attempt ORDER BY id DESC").fetchall()]
        verifications = queries.current_verifications(db, ids)
        verdicts, failures = queries.current_verdicts(db, ids), queries.current_failures(db, ids)
        effective = {(a, level): outcome for a, level, outcome in db.execute(
            f"WITH {EFFECTIVE_VERDICTS} SELECT attempt_id, level, outcome FROM effective").fetchall()}
        overridden = 0
        for aid in ids:
            one = db.execute("SELECT id FROM verification WHERE attempt_id = ? AND superseded_by IS NULL", [aid]).fetchone()
            assert (verifications[aid].id if aid in verifications else None) == (one[0] if one else None)
            one = db.execute("SELECT id FROM failure WHERE attempt_id = ? AND superseded_by IS NULL", [aid]).fetchone()
            assert (failures[aid].id if aid in failures else None) == (one[0] if one else None)
            rows = db.execute("SELECT id, level FROM verdict WHERE attempt_id = ? AND superseded_by IS NULL ORDER BY level",
                              [aid]).fetchall()
            got = verdicts.get(aid, [])
            assert [(v.id, v.level) for v in got] == [tuple(r) for r in rows]
            for v in got:
                assert v.effective.value == effective[aid, v.level]
                assert [o.id for o in v.overrides] == [r[0] for r in db.execute(
                    "SELECT id FROM verdict_override WHERE verdict_id = ? ORDER BY id", [v.id]).fetchall()]
                overridden += bool(v.overrides)
        assert overridden and len(verdicts) > 3  # the study exercises both
    finally:
        study.close()
