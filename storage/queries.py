"""Reads that return domain objects. Lists page by key (`after`), never by OFFSET."""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database

from storage.converters import attempt_from_row, migration_from_row, study_from_row
from workbench.models import (
    AttemptSummary,
    Failure,
    FailureCause,
    Intervention,
    MetricPoint,
    Migration,
    MigrationSummary,
    Outcome,
    Study,
)

EFFECTIVE_VERDICTS = """
effective AS (
    SELECT v.attempt_id, v.level,
           COALESCE((SELECT o.outcome FROM verdict_override o WHERE o.verdict_id = v.id
                     ORDER BY o.id DESC LIMIT 1), v.outcome) AS outcome
    FROM verdict v
)"""
"""A human override, the latest one, replaces the automated outcome in every count."""

CURRENT_INTERVENTIONS = """
current_intervention AS (
    SELECT * FROM intervention i
    WHERE NOT EXISTS (SELECT 1 FROM intervention c WHERE c.corrects = i.id)
)"""
"""An intervention that a later record corrects no longer counts; the correction does."""


def _rows(db: Database, sql: str, params: list[Any] | dict[str, Any]) -> list[dict[str, Any]]:
    return list(db.query(sql, params))


def get_study(db: Database) -> Study | None:
    rows = _rows(db, "SELECT * FROM study WHERE id = 1", [])
    return study_from_row(rows[0]) if rows else None


def get_migration(db: Database, slug: str) -> Migration | None:
    rows = _rows(db, "SELECT * FROM migration WHERE slug = ?", [slug])
    return migration_from_row(rows[0]) if rows else None


def count_migrations(db: Database) -> int:
    return db.execute("SELECT count(*) FROM migration").fetchone()[0]


def migration_summaries(
    db: Database, *, after: str | None = None, limit: int = 200
) -> list[MigrationSummary]:
    """Migrations ordered by slug, `limit` at a time after the slug `after`."""
    sql = f"""
    WITH {EFFECTIVE_VERDICTS},
    attempt_level AS (
        SELECT a.id, a.migration_id,
               (SELECT COALESCE(MIN(n.level), 6) - 1
                FROM (SELECT 1 AS level UNION ALL SELECT 2 UNION ALL SELECT 3
                      UNION ALL SELECT 4 UNION ALL SELECT 5) n
                WHERE NOT EXISTS (SELECT 1 FROM effective e WHERE e.attempt_id = a.id
                                  AND e.level = n.level AND e.outcome = 'pass')) AS level,
               EXISTS (SELECT 1 FROM verdict v WHERE v.attempt_id = a.id) AS verified
        FROM attempt a WHERE a.source != 'reference'
    ),
    {CURRENT_INTERVENTIONS}
    SELECT m.*,
        (SELECT count(*) FROM attempt a WHERE a.migration_id = m.id
            AND a.source != 'reference') AS n_attempts,
        (SELECT count(*) FROM failure f JOIN attempt a ON a.id = f.attempt_id
            WHERE a.migration_id = m.id AND a.source != 'reference') AS n_failed,
        (SELECT count(*) FROM failure f JOIN attempt a ON a.id = f.attempt_id
            WHERE a.migration_id = m.id AND f.silent AND a.source != 'reference') AS n_silent,
        (SELECT count(*) FROM current_intervention i WHERE i.migration_id = m.id)
            AS n_interventions,
        (SELECT MAX(level) FROM attempt_level l WHERE l.migration_id = m.id AND l.verified)
            AS highest_level
    FROM migration m
    WHERE (:after IS NULL OR m.slug > :after)
    ORDER BY m.slug LIMIT :limit
    """
    return [
        MigrationSummary(
            migration=migration_from_row(row),
            attempts=row["n_attempts"],
            failed=row["n_failed"],
            silent_failures=row["n_silent"],
            interventions=row["n_interventions"],
            highest_level=row["highest_level"],
        )
        for row in _rows(db, sql, {"after": after, "limit": limit})
    ]


def attempt_summaries(
    db: Database, migration_id: int, *, after: int | None = None, limit: int = 200
) -> list[AttemptSummary]:
    """A migration's attempts by sequence number, the reference runs first."""
    sql = f"""
    WITH {EFFECTIVE_VERDICTS}, {CURRENT_INTERVENTIONS}
    SELECT a.*,
        (SELECT json_group_object(e.level, e.outcome) FROM effective e
            WHERE e.attempt_id = a.id) AS ladder,
        f.id AS failure_id, f.cause AS failure_cause, f.silent AS failure_silent,
        f.note AS failure_note,
        (SELECT count(*) FROM current_intervention i WHERE i.attempt_id = a.id)
            AS n_interventions
    FROM attempt a LEFT JOIN failure f ON f.attempt_id = a.id
    WHERE a.migration_id = :migration AND (:after IS NULL OR a.seq > :after)
    ORDER BY a.seq LIMIT :limit
    """
    out = []
    for row in _rows(db, sql, {"migration": migration_id, "after": after, "limit": limit}):
        levels = json.loads(row["ladder"] or "{}")
        failure = None
        if row["failure_id"] is not None:
            failure = Failure(
                id=row["failure_id"],
                attempt_id=row["id"],
                cause=FailureCause(row["failure_cause"]),
                silent=bool(row["failure_silent"]),
                note=row["failure_note"] or "",
            )
        out.append(
            AttemptSummary(
                attempt=attempt_from_row(row),
                ladder=tuple(
                    Outcome(levels[str(n)]) if str(n) in levels else None for n in range(1, 6)
                ),
                failure=failure,
                interventions=row["n_interventions"],
            )
        )
    return out


def metric_series(db: Database, attempt_id: int, name: str) -> list[MetricPoint]:
    return [
        MetricPoint(name, step, value)
        for step, value in db.execute(
            "SELECT step, value FROM metric_point WHERE attempt_id = ? AND name = ? ORDER BY step",
            [attempt_id, name],
        ).fetchall()
    ]


def interventions(db: Database, migration_id: int) -> list[Intervention]:
    """Every intervention record, corrected ones included, oldest first: the full history."""
    return [
        Intervention(
            id=row["id"],
            migration_id=row["migration_id"],
            kind=row["kind"],
            minutes=row["minutes"],
            note=row["note"] or "",
            reviewer=row["reviewer"],
            at=row["at"],
            attempt_id=row["attempt_id"],
            corrects=row["corrects"],
        )
        for row in _rows(
            db, "SELECT * FROM intervention WHERE migration_id = ? ORDER BY id", [migration_id]
        )
    ]


def iter_migration_summaries(db: Database, page: int = 500):
    """Every migration, a page at a time."""
    after = None
    while batch := migration_summaries(db, after=after, limit=page):
        yield from batch
        after = batch[-1].migration.slug


def iter_attempt_summaries(db: Database, migration_id: int, page: int = 500):
    """Every attempt of a migration, a page at a time."""
    after = None
    while batch := attempt_summaries(db, migration_id, after=after, limit=page):
        yield from batch
        after = batch[-1].attempt.seq
