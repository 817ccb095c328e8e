"""Importer writes (attempt numbering, child rows replaced whole, groups of attempts per commit) and
the reads of what they wrote."""

from __future__ import annotations

from typing import Any

from domain.transcript import Edit
from storage import records
from storage.converters import point_rows
from storage.sqlite import Database

ATTEMPT_CHILDREN = ("attempt_edit", "attempt_tool_call")
"""Tables of an attempt's ordered child rows (column `ord`) that an import replaces whole."""


def seq_of(db: Database, migration_id: int, external_id: str) -> int | None:
    """The sequence number of the attempt imported earlier under `external_id`, if any."""
    row = db.execute("SELECT seq FROM attempt WHERE migration_id = ? AND external_id = ?",
                     [migration_id, external_id]).fetchone()
    return None if row is None else row[0]


def replace_metric_points(db: Database, attempt_id: int, points: list[tuple[str, int, float]],
                          reviewer: str) -> bool:
    """Make the attempt's series exactly `points` (name, step, value in that order; NaN and infinities
    kept); True if it changed."""
    current = point_rows(db.execute("SELECT name, step, value FROM metric_point WHERE attempt_id = ?"
                                    " ORDER BY name, step", [attempt_id]).fetchall())
    if list(map(repr, current)) == list(map(repr, points)):  # repr: NaN equals NaN
        return False
    db.execute("DELETE FROM metric_point WHERE attempt_id = ?", [attempt_id])
    db.conn.executemany("INSERT INTO metric_point (attempt_id, name, step, value) VALUES (?, ?, ?, ?)",
                        [(attempt_id, *point) for point in points])
    records.audit(db, reviewer, "replace", "metric_point", attempt_id, {"points": len(points)})
    return True


def replace_attempt_rows(db: Database, attempt_id: int, table: str, rows: list[dict[str, Any]],
                         reviewer: str, *, fresh: bool = False) -> bool:
    """Make the attempt's rows of `table` exactly `rows` (all with the same keys); True if it changed.

    `fresh`: the attempt row was inserted in this transaction, so it has no rows to compare or
    delete (two statements fewer per table on a first import)."""
    if table not in ATTEMPT_CHILDREN:
        raise ValueError(f"{table!r} is not an attempt child table")
    columns = list(rows[0]) if rows else []
    values = [tuple(row.values()) for row in rows]
    names = ", ".join(columns)
    if fresh:
        if not rows:
            return False
    elif rows:
        current = db.conn.execute(f"SELECT {names} FROM {table} WHERE attempt_id = ? ORDER BY ord",
                                  [attempt_id]).fetchall()
        if current == values:
            return False
    elif db.conn.execute(f"SELECT 1 FROM {table} WHERE attempt_id = ? LIMIT 1", [attempt_id]).fetchone() is None:
        return False
    if not fresh:
        db.conn.execute(f"DELETE FROM {table} WHERE attempt_id = ?", [attempt_id])
    if rows:
        marks = ", ".join("?" * len(columns))
        db.conn.executemany(f"INSERT INTO {table} ({names}, attempt_id) VALUES ({marks}, ?)",
                            [(*row, attempt_id) for row in values])
    records.audit(db, reviewer, "replace", table, attempt_id, {"rows": len(rows)})
    return True


def link_spawned_agent(db: Database, migration_id: int, tool_use_id: str, agent_id: str) -> None:
    """Tool calls already written (by an earlier import) learn the sub-agent they started."""
    db.execute(
        "UPDATE attempt_tool_call SET spawned_agent_id = ? WHERE tool_use_id = ? AND spawned_agent_id IS NULL"
        " AND attempt_id IN (SELECT id FROM attempt WHERE migration_id = ?)",
        [agent_id, tool_use_id, migration_id],
    )


def in_transaction(db: Database) -> bool:
    return db.conn.in_transaction


def begin_group(db: Database) -> bool:
    """Open a group of writes unless a transaction is open already (then its owner commits it).

    True when this call opened one, which `commit_group` must then close.
    """
    if db.conn.in_transaction:
        return False
    db.conn.execute("BEGIN IMMEDIATE")
    return True


def commit_group(db: Database) -> None:
    """Commit the group; when that fails, roll it back and raise: its writes are lost."""
    try:
        db.conn.execute("COMMIT")
    except Exception:
        if db.conn.in_transaction:
            db.conn.rollback()
        raise


def attempt_edits(db: Database, attempt_id: int) -> list[Edit]:
    """The edits an attempt's transcript recorded since the previous attempt, in order."""
    return [
        Edit(tool=r["tool"], file_path=r["file_path"] or "", old_text=r["old_text"], new_text=r["new_text"],
             replace_all=bool(r["replace_all"]), patch=r["patch"] or "", tool_use_id=r["tool_use_id"] or "",
             at=r["at"])
        for r in db.query("SELECT * FROM attempt_edit WHERE attempt_id = ? ORDER BY ord", [attempt_id])
    ]
