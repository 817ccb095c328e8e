"""What the report's count of groups reads (issue 39), kept by triggers whichever writer changes
the rows under it and filled for a study from before it: each attempt's last point of each series
(schema m021's `metric_last`) and its current failure's silent flag (m022's
`attempt.own_failure_silent`); and the count reads them from indexes alone, grouping as it reads."""

from __future__ import annotations

import random
from pathlib import Path

from storage import schema
from storage.imports import replace_metric_points
from storage.report import report_attempt_groups, report_migrations
from storage.sqlite import Database

DERIVED = ("SELECT attempt_id, name, MAX(step), value FROM metric_point GROUP BY attempt_id, name"
           " ORDER BY attempt_id, name")
"""The last point of each series computed from every point (min/max give a bare column of their row)."""
KEPT = "SELECT attempt_id, name, step, value FROM metric_last ORDER BY attempt_id, name"


def test_every_way_of_writing_points_keeps_the_last_ones(demo_study) -> None:
    db = demo_study.db
    built = db.execute(KEPT).fetchall()  # the demo as built: its imports, verification, re-runs
    assert built and built == db.execute(DERIVED).fetchall()
    attempts = [r[0] for r in db.execute("SELECT id FROM attempt ORDER BY id LIMIT 3")]
    db.execute("DELETE FROM metric_point WHERE attempt_id IN (SELECT value FROM json_each(?))", [str(attempts)])
    rng = random.Random(21)
    names = ("loss", "eval_accuracy")
    for op in range(400):
        a, name, step = rng.choice(attempts), rng.choice(names), rng.randrange(12)
        kind = op % 7
        if kind in (0, 1):
            db.conn.executemany("INSERT OR IGNORE INTO metric_point VALUES (?, ?, ?, ?)",
                                [(a, name, rng.randrange(12), rng.random()) for _ in range(rng.randrange(1, 5))])
        elif kind == 2:  # a REPLACE of the last point's value
            db.execute("INSERT OR REPLACE INTO metric_point SELECT ?, ?, COALESCE(MAX(step), ?), ? FROM metric_point"
                       " WHERE attempt_id = ? AND name = ?", [a, name, step, rng.random(), a, name])
        elif kind == 3:
            db.execute("DELETE FROM metric_point WHERE attempt_id = ? AND name = ? AND step = ?", [a, name, step])
        elif kind == 4:  # a point moved past or below the last one, or to another series
            db.execute("UPDATE OR IGNORE metric_point SET step = ?, name = ? WHERE attempt_id = ? AND name = ?"
                       " AND step = (SELECT MAX(step) FROM metric_point WHERE attempt_id = ? AND name = ?)",
                       [rng.randrange(12), rng.choice(names), a, name, a, name])
        elif kind == 5:
            db.execute("UPDATE metric_point SET value = ? WHERE attempt_id = ? AND name = ?", [rng.random(), a, name])
        else:  # an importer's whole series (delete, then insert), NaN kept as NULL
            points = [(n, s, float("nan") if s == 3 else rng.random()) for n in names for s in range(rng.randrange(6))]
            replace_metric_points(db, a, points, "t")
        assert db.execute(KEPT).fetchall() == db.execute(DERIVED).fetchall(), f"after operation {op} ({kind})"
    assert db.execute("SELECT count(*) FROM metric_last WHERE attempt_id IN (SELECT value FROM json_each(?))",
                      [str(attempts)]).fetchone()[0] > 0


def test_an_older_study_gets_its_last_points(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = Database(path)
    schema.migrations.apply(db, stop_before="m021_metric_last")
    db.conn.execute("PRAGMA foreign_keys = OFF")
    # the highest step's value, not the highest value; two series of one attempt
    db.conn.executemany("INSERT INTO metric_point VALUES (?, ?, ?, ?)",
                        [(7, "loss", 1, 0.9), (7, "loss", 30, 0.2), (7, "loss", 4, 0.5), (7, "acc", 2, 0.7),
                         (8, "acc", 5, None)])
    db.conn.commit()
    schema.migrations.apply(db)
    assert db.execute(KEPT).fetchall() == [(7, "acc", 2, 0.7), (7, "loss", 30, 0.2), (8, "acc", 5, None)]
    assert "idx_metric_point_attempt_step" not in {i.name for i in db.table("metric_point").indexes}


def test_the_count_of_groups_reads_indexes_only(demo_study) -> None:
    """Each table of the grouped read through an index that holds every column it takes, in the
    order it groups them: a plan that read attempt, verification or failure rows (their commands,
    claims, the verifier's inputs) and sorted the attempts was most of the report at 150,000."""
    db = demo_study.db
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    report_attempt_groups(db, [m.id for m in report_migrations(db)], [], seqs=True)
    db.conn.set_trace_callback(None)
    grouped = next(s for s in statements if "GROUP BY" in s)
    plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {grouped}").fetchall()]
    for table, index in (("a", "idx_attempt_report"), ("v", "idx_verification_report")):
        assert any(step.startswith(f"SEARCH {table} USING COVERING INDEX {index} ") for step in plan), plan
    assert not any("TEMP B-TREE" in step or "metric_point" in step or "failure" in step for step in plan), plan


FAILURE_SILENT = "SELECT id, own_failure_silent FROM attempt ORDER BY id"
COMPUTED = (f"SELECT id, {schema.OWN_FAILURE_SILENT.format(a='attempt.id')} FROM attempt ORDER BY id")


def test_every_way_of_writing_failures_keeps_the_attempts_flag(demo_study) -> None:
    db = demo_study.db
    assert db.execute(FAILURE_SILENT).fetchall() == db.execute(COMPUTED).fetchall()  # as built
    assert db.execute("SELECT count(*) FROM attempt WHERE own_failure_silent IS NOT NULL").fetchone()[0] >= 2
    db.conn.execute("PRAGMA foreign_keys = OFF")  # a hand edit of the study
    first, second = (r[0] for r in db.execute("SELECT id FROM attempt WHERE id NOT IN (SELECT attempt_id FROM failure)"
                                              " ORDER BY id LIMIT 2"))
    for sql, args in (
        ("INSERT INTO failure (attempt_id, cause, silent) VALUES (?, 'crash', 1)", [first]),
        ("UPDATE failure SET silent = 0 WHERE attempt_id = ? AND superseded_by IS NULL", [first]),
        ("UPDATE failure SET attempt_id = ? WHERE attempt_id = ? AND superseded_by IS NULL", [second, first]),
        ("UPDATE failure SET superseded_by = -1 WHERE attempt_id = ?", [second]),
        ("UPDATE failure SET superseded_by = NULL WHERE attempt_id = ?", [second]),
        ("DELETE FROM failure WHERE attempt_id = ?", [second]),
    ):
        db.execute(sql, args)
        assert db.execute(FAILURE_SILENT).fetchall() == db.execute(COMPUTED).fetchall(), sql

