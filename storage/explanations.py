"""`workbench explain`'s stored results (table `explanation`, docs/explain.md)."""

from __future__ import annotations

import json
from typing import Any

from storage import records
from storage.sqlite import Database


def store_explanation(db: Database, attempt_id: int, result: dict[str, Any], reviewer: str) -> int:
    """Keep `result` (the `--json` object) as the attempt's current explanation; returns its id."""
    with records.immediate(db):
        return records.insert_row(db, "explanation", {
            "attempt_id": attempt_id, "created_at": records.now(), "reviewer": reviewer,
            "explained_by": result.get("explained_by"), "commit_sha": result.get("commit"),
            "sentence": result["sentence"], "data": json.dumps(result, sort_keys=True, default=str),
        })


def latest_explanation(db: Database, attempt_id: int) -> dict[str, Any] | None:
    """The attempt's newest explanation (the `--json` object), or None."""
    try:
        row = db.execute("SELECT data FROM explanation WHERE attempt_id = ? ORDER BY id DESC LIMIT 1",
                         [attempt_id]).fetchone()
    except Exception:  # a database opened read-only before the table's migration
        return None
    return None if row is None else json.loads(row[0])


def current_sentences(db: Database) -> list[tuple[int, int, str, str | None, str | None]]:
    """(migration id, seq, sentence, explained_by, commit) of every attempt's newest explanation,
    by migration and seq; none on a study from before the table's migration (m017)."""
    try:
        return [tuple(r) for r in db.execute(
            "SELECT a.migration_id, a.seq, e.sentence, e.explained_by, e.commit_sha FROM explanation e"
            " JOIN attempt a ON a.id = e.attempt_id"
            " WHERE e.id IN (SELECT max(id) FROM explanation GROUP BY attempt_id) ORDER BY a.migration_id, a.seq"
        ).fetchall()]
    except Exception:  # noqa: BLE001 - no explanation table yet
        return []


def attempt_seq(db: Database, attempt_id: int) -> int | None:
    """An attempt's seq by its id (a re-run job's result), None when it is gone."""
    row = db.execute("SELECT seq FROM attempt WHERE id = ?", [attempt_id]).fetchone()
    return row[0] if row else None


def attempt_external_id(db: Database, attempt_id: int) -> str:
    """An attempt's external id (`rerun:job-N` for a re-run), "" when it has none."""
    row = db.execute("SELECT external_id FROM attempt WHERE id = ?", [attempt_id]).fetchone()
    return (row[0] if row else None) or ""


def earlier_commits(db: Database, migration_id: int, seq: int) -> list[tuple[int, int, str]]:
    """(id, seq, commit) of the migration's attempts before `seq` that name a commit, newest first."""
    return [tuple(r) for r in db.execute(
        "SELECT id, seq, commit_sha FROM attempt WHERE migration_id = ? AND seq < ? AND commit_sha IS NOT NULL"
        " ORDER BY seq DESC", [migration_id, seq]).fetchall()]
