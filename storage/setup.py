"""Writes that make a study without a bundle: the study row, a migration, its edits and the
reference run. Each write is audited in its own transaction, as storage/records.py does, and
leaves rows shaped exactly as a bundle import leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from domain.models import Attempt, Migration, Study
from storage import queries, records
from storage.converters import attempt_to_row, migration_to_row, study_to_row
from storage.imports import replace_metric_points
from storage.logs import store_log
from storage.sqlite import Database


def has_study(db: Database) -> bool:
    return db.execute("SELECT COUNT(*) FROM study").fetchone()[0] > 0


def create_study(db: Database, study: Study, reviewer: str) -> None:
    """The study row (id 1), as a bundle import writes it."""
    with records.immediate(db):
        row = study_to_row(study)
        records.insert_row(db, "study", row)
        records.audit(db, reviewer, "insert", "study", 1, row)


def add_migration(db: Database, migration: Migration, command: str | None, reviewer: str,
                  setup: str | None = None, verify_settings: dict[str, Any] | None = None) -> int:
    """A new migration row, with its first verify settings when given (`migration add --metric`),
    in one transaction; the caller has checked the slug is free (the unique index holds)."""
    row = {**migration_to_row(migration), "command": command, "setup": setup}
    with records.immediate(db):
        migration_id = records.insert_row(db, "migration", row)
        records.audit(db, reviewer, "insert", "migration", migration_id, row)
        if verify_settings:
            records.add_verify_settings(db, migration_id=migration_id, settings=verify_settings,
                                        source="migration add", reviewer=reviewer)
    return migration_id


def migration_command(db: Database, migration_id: int) -> str | None:
    row = db.execute("SELECT command FROM migration WHERE id = ?", [migration_id]).fetchone()
    return row[0] if row else None


def migration_setup(db: Database, migration_id: int) -> str | None:
    """The shell line run in each re-run's worktree before the command (None: none)."""
    row = db.execute("SELECT setup FROM migration WHERE id = ?", [migration_id]).fetchone()
    return row[0] if row else None


def update_migration(db: Database, migration_id: int, changes: dict[str, Any], reviewer: str) -> list[str]:
    """Change a migration's columns; only those that really change are written, audited and returned."""
    with records.immediate(db):
        current = next(iter(db.query("SELECT * FROM migration WHERE id = ?", [migration_id])))
        diff = {k: v for k, v in changes.items() if current.get(k) != v}
        if not diff:
            return []
        db.table("migration").update(migration_id, diff)
        records.audit(db, reviewer, "update", "migration", migration_id,
                      {**diff, "was": {k: current.get(k) for k in diff}})
    return list(diff)


def next_reference_seq(db: Database, migration_id: int) -> int:
    """0 as in a bundle when it is free, else after the migration's last attempt."""
    taken = db.execute("SELECT 1 FROM attempt WHERE migration_id = ? AND seq = 0", [migration_id]).fetchone()
    return queries.next_seq(db, migration_id) if taken else 0


def add_reference(db: Database, attempt: Attempt, log: Path, points: list[tuple[str, int, float]],
                  reviewer: str, *, probes: Sequence[tuple[str, int | None, str]] = ()) -> int:
    """The reference attempt with its log, metric series and probe reports (file, rank, JSON),
    all in one transaction."""
    with records.immediate(db):
        log_id = store_log(db, log)
        row = {**attempt_to_row(attempt), "log_id": log_id}
        attempt_id = records.insert_row(db, "attempt", row)
        records.audit(db, reviewer, "insert", "attempt", attempt_id, row)
        if points:
            replace_metric_points(db, attempt_id, points, reviewer)
        _reference_value_from(db, attempt.migration_id, points, reviewer)
        db.conn.executemany(
            "INSERT INTO probe_report (attempt_id, file, rank, data) VALUES (?, ?, ?, ?)",
            [(attempt_id, *probe) for probe in probes],
        )
    return attempt_id


def attempt_states(db: Database, migration_id: int) -> dict[int, tuple[Any, ...]]:
    """seq -> (status, exit code, log, claim, expected level, commit) of the migration's agent
    attempts: what a watcher compares between rounds to see which ones changed."""
    return {row[0]: tuple(row[1:]) for row in db.execute(
        "SELECT seq, status, exit_code, log_id, claim, expected_level, commit_sha FROM attempt"
        " WHERE migration_id = ? AND source = 'agent' ORDER BY seq", [migration_id])}


def _reference_value_from(db: Database, migration_id: int, points: list[tuple[str, int, float]], reviewer: str) -> None:
    """A goal given without its value takes the reference run's: the goal metric at its last step
    (what level 4 reads of any run). Audited like an edit; a value already set is kept."""
    metric, value = db.execute("SELECT goal_metric, goal_reference FROM migration WHERE id = ?",
                               [migration_id]).fetchone()
    last = max(((step, v) for name, step, v in points if name == metric), default=None)
    if value is not None or last is None:
        return
    db.table("migration").update(migration_id, {"goal_reference": last[1]})
    records.audit(db, reviewer, "update", "migration", migration_id,
                  {"goal_reference": last[1], "was": {"goal_reference": None}, "why": "from the reference run"})
