"""Reads for workbench/report that storage/queries.py does not already give (the chosen
migrations, each attempt's last recorded step and goal value, what each re-run re-ran): the
report holds no SQL of its own."""

from __future__ import annotations

import json

from domain.models import Migration
from storage.converters import migration_from_row
from storage.sqlite import Database


def report_migrations(db: Database) -> list[Migration]:
    """Every migration of the study, by slug."""
    return [migration_from_row(r) for r in db.query("SELECT * FROM migration ORDER BY slug")]


def report_last_steps(db: Database, migration_ids: list[int]) -> dict[int, int]:
    """Attempt id -> the highest step of any of its metric series, for the migrations' attempts
    (references too) that recorded a metric."""
    return dict(db.execute(
        "SELECT p.attempt_id, MAX(p.step) FROM metric_point p JOIN attempt a ON a.id = p.attempt_id"
        " WHERE a.migration_id IN (SELECT value FROM json_each(?)) GROUP BY p.attempt_id",
        [json.dumps(migration_ids)],
    ).fetchall())


def report_goal_values(db: Database, migration_ids: list[int]) -> dict[int, float]:
    """Attempt id -> its value of its migration's goal metric at that series' last step (the value
    the verifier's level 4 judges), for the migrations' attempts that recorded it."""
    return dict(db.execute(
        "SELECT p.attempt_id, p.value FROM metric_point p JOIN attempt a ON a.id = p.attempt_id"
        " JOIN migration m ON m.id = a.migration_id"
        " WHERE a.migration_id IN (SELECT value FROM json_each(?)) AND p.name = m.goal_metric"
        " AND p.step = (SELECT MAX(q.step) FROM metric_point q WHERE q.attempt_id = p.attempt_id"
        " AND q.name = p.name)",
        [json.dumps(migration_ids)],
    ).fetchall())


def report_rerun_of(db: Database, migration_ids: list[int]) -> dict[int, int]:
    """Re-run attempt id -> the id of the attempt it re-ran, for the migrations' re-runs."""
    return dict(db.execute(
        "SELECT id, rerun_of FROM attempt WHERE rerun_of IS NOT NULL"
        " AND migration_id IN (SELECT value FROM json_each(?))",
        [json.dumps(migration_ids)],
    ).fetchall())
