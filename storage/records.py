"""Writes. Each one records itself in the audit table, in the same transaction.

Human records (interventions, decisions, verdict overrides, review sessions) are only ever
inserted: the schema's triggers refuse updates and deletes, so a correction is a new record.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from sqlite_utils import Database

from workbench.models import DecisionKind, Outcome


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def audit(
    db: Database,
    reviewer: str,
    action: str,
    entity: str,
    entity_id: int | None,
    detail: dict[str, Any] | None = None,
) -> None:
    db.execute(
        "INSERT INTO audit (at, reviewer, action, entity, entity_id, detail) VALUES (?,?,?,?,?,?)",
        [now(), reviewer, action, entity, entity_id, json.dumps(detail or {}, sort_keys=True)],
    )


def _insert(db: Database, table: str, row: dict[str, Any], reviewer: str) -> int:
    with db.atomic():
        row_id = db[table].insert(row).last_pk
        audit(db, reviewer, "insert", table, row_id, row)
    return row_id


def add_intervention(
    db: Database,
    *,
    migration_id: int,
    kind: str,
    minutes: float,
    note: str,
    reviewer: str,
    attempt_id: int | None = None,
    corrects: int | None = None,
) -> int:
    if minutes < 0:
        raise ValueError("minutes must not be negative")
    return _insert(
        db,
        "intervention",
        {
            "migration_id": migration_id,
            "attempt_id": attempt_id,
            "kind": kind,
            "minutes": float(minutes),
            "note": note,
            "reviewer": reviewer,
            "at": now(),
            "corrects": corrects,
        },
        reviewer,
    )


def add_decision(
    db: Database,
    *,
    migration_id: int,
    kind: DecisionKind,
    reason: str,
    figures: dict[str, Any],
    reviewer: str,
) -> int:
    return _insert(
        db,
        "decision",
        {
            "migration_id": migration_id,
            "kind": kind.value,
            "reason": reason,
            "figures": json.dumps(figures, sort_keys=True),
            "reviewer": reviewer,
            "at": now(),
        },
        reviewer,
    )


def add_verdict_override(
    db: Database, *, verdict_id: int, outcome: Outcome, justification: str, reviewer: str
) -> int:
    if not justification.strip():
        raise ValueError("an override needs a justification")
    return _insert(
        db,
        "verdict_override",
        {
            "verdict_id": verdict_id,
            "outcome": outcome.value,
            "justification": justification,
            "reviewer": reviewer,
            "at": now(),
        },
        reviewer,
    )


def upsert_by_key(
    db: Database,
    table: str,
    key: dict[str, Any],
    row: dict[str, Any],
    reviewer: str,
    *,
    keep: tuple[str, ...] = (),
) -> tuple[int, str]:
    """Insert the row, or update the one with the same key if it differs.

    Returns (id, what happened: "insert", "update" or "same"); only real changes are audited.
    Columns in `keep` are set on insert and never overwritten afterwards.
    """
    where = " AND ".join(f"{column} = ?" for column in key)
    existing = list(db.query(f"SELECT * FROM {table} WHERE {where}", list(key.values())))
    full = {**row, **key}
    if not existing:
        row_id = db[table].insert(full).last_pk
        audit(db, reviewer, "insert", table, row_id, full)
        return row_id, "insert"
    current = existing[0]
    changes = {
        column: value
        for column, value in full.items()
        if column not in keep and current.get(column) != value
    }
    if not changes:
        return current["id"], "same"
    db[table].update(current["id"], changes)
    audit(db, reviewer, "update", table, current["id"], changes)
    return current["id"], "update"
