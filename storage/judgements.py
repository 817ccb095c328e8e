"""Judgements, review queues, adjudications and blind mode (docs/judgements.md): reads and writes.

Every table here is append-only (storage/schema.py m012): a changed mind is a new judgement that
supersedes the old one; a new deal is a new batch of assignments; the study's blind mode is its
latest `blind_mode` row. Each write is audited in its own transaction, taken with
`records.immediate` so reviewers' processes writing at once queue rather than fail. The reads
take a plain sqlite3 connection too (storage.fastread): the writes import storage.records, and
with it sqlite-utils, only when they run, so `workbench queue DB` starts without it (issue 19).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from domain.judgements import HumanJudgement, QueueItem
from domain.models import FailureCause, Outcome
from storage.queries import Reader, expected_level_of, hidden_attempts, hidden_of

if TYPE_CHECKING:
    from storage.sqlite import Database

CURRENT = "NOT EXISTS (SELECT 1 FROM judgement later WHERE later.supersedes = j.id)"
"""SQL over `judgement j`: no later record supersedes it."""
_IN = "IN (SELECT value FROM json_each(:ids))"


def _rows(db: Database, sql: str, params: list[Any] | dict[str, Any]) -> list[dict[str, Any]]:
    return list(db.query(sql, params))


def _judgement(row: dict[str, Any]) -> HumanJudgement:
    return HumanJudgement(
        id=row["id"], attempt_id=row["attempt_id"], reviewer=row["reviewer"],
        levels=tuple(Outcome(row[f"level{n}"]) for n in range(1, 6)),
        cause=FailureCause(row["cause"]) if row["cause"] else None, note=row["note"] or "",
        blind=bool(row["blind"]), active_seconds=float(row["active_seconds"]), at=row["at"],
        supersedes=row["supersedes"],
    )


def add_judgement(db: Database, *, attempt_id: int, reviewer: str, levels: Sequence[Outcome],
                  cause: FailureCause | None, note: str, blind: bool, active_seconds: float) -> int:
    """A new judgement; it supersedes the reviewer's current one of this attempt, if any."""
    if len(levels) != 5:
        raise ValueError("levels: one outcome per level, five in all")
    if active_seconds < 0:
        raise ValueError("active seconds must not be negative")
    from storage.records import audit, immediate, insert_row, now

    with immediate(db):
        previous = db.execute(
            f"SELECT id FROM judgement j WHERE attempt_id = ? AND reviewer = ? AND {CURRENT}",
            [attempt_id, reviewer],
        ).fetchone()
        row = {
            "attempt_id": attempt_id, "reviewer": reviewer,
            **{f"level{n}": outcome.value for n, outcome in enumerate(levels, start=1)},
            "cause": cause.value if cause else None, "note": note, "blind": int(blind),
            "active_seconds": float(active_seconds), "at": now(),
            "supersedes": previous[0] if previous else None,
        }
        new_id = insert_row(db, "judgement", row)
        audit(db, reviewer, "insert", "judgement", new_id, row)
        if previous is not None:
            audit(db, reviewer, "supersede", "judgement", previous[0], {"superseded_by": new_id})
    return new_id


def current_judgements(db: Database, migration_ids: Sequence[int] | None = None) -> list[HumanJudgement]:
    """Every reviewer's current judgement of each attempt (of these migrations), oldest first."""
    where = "" if migration_ids is None else f" AND a.migration_id {_IN}"
    rows = _rows(db, f"SELECT j.* FROM judgement j JOIN attempt a ON a.id = j.attempt_id"
                     f" WHERE {CURRENT}{where} ORDER BY j.id", {"ids": json.dumps(list(migration_ids or []))})
    return [_judgement(r) for r in rows]


def judgement_history(db: Database, attempt_id: int) -> list[HumanJudgement]:
    """All judgements of an attempt, superseded ones too, oldest first."""
    return [_judgement(r) for r in _rows(db, "SELECT * FROM judgement WHERE attempt_id = ? ORDER BY id",
                                         [attempt_id])]


# --------------------------------------------------------------------------- queues and blind mode


def dealable_attempts(db: Database, migration_id: int | None) -> list[int]:
    """Agent attempts (no reference runs, no re-runs) nobody has judged or been dealt yet."""
    where = "" if migration_id is None else " AND a.migration_id = ?"
    sql = ("SELECT a.id FROM attempt a WHERE a.source = 'agent'"
           " AND NOT EXISTS (SELECT 1 FROM judgement j WHERE j.attempt_id = a.id)"
           " AND NOT EXISTS (SELECT 1 FROM assignment s WHERE s.attempt_id = a.id)" + where + " ORDER BY a.id")
    return [r[0] for r in db.execute(sql, [] if migration_id is None else [migration_id]).fetchall()]


def add_assignments(db: Database, pairs: Sequence[tuple[int, str]], *, blind: bool, seed: int,
                    overlap: float, assigned_by: str) -> int:
    """Store one deal as a new batch of assignments; returns the batch number."""
    from storage.records import audit, immediate, insert_row, now

    with immediate(db):
        batch = db.execute("SELECT COALESCE(MAX(batch), 0) + 1 FROM assignment").fetchone()[0]
        for attempt_id, reviewer in pairs:
            row = {"batch": batch, "attempt_id": attempt_id, "reviewer": reviewer, "blind": int(blind),
                   "seed": seed, "overlap": overlap, "assigned_by": assigned_by, "at": now()}
            audit(db, assigned_by, "insert", "assignment", insert_row(db, "assignment", row), row)
    return batch


def assignments(db: Database, batch: int) -> list[tuple[int, str]]:
    """(attempt id, reviewer) of one batch, by attempt and reviewer."""
    return [(r[0], r[1]) for r in db.execute(
        "SELECT attempt_id, reviewer FROM assignment WHERE batch = ? ORDER BY attempt_id, reviewer", [batch])]


_QUEUE = ("SELECT MIN(s.id), a.id, m.slug, a.seq, MAX(s.blind),"
          " EXISTS (SELECT 1 FROM judgement j WHERE j.attempt_id = a.id AND j.reviewer = s.reviewer), a.source"
          " FROM assignment s JOIN attempt a ON a.id = s.attempt_id JOIN migration m ON m.id = a.migration_id"
          " WHERE s.reviewer = :reviewer")


def queue_page(db: Reader, reviewer: str, *, after: tuple[str, int] | None = None,
               until: tuple[str, int] | None = None, limit: int | None = 100) -> list[QueueItem]:
    """A keyset page of `queue`: the items after (slug, seq) `after`, up to `until` (inclusive),
    at most `limit` of them (None: no limit)."""
    params: dict[str, Any] = {"reviewer": reviewer, "limit": -1 if limit is None else limit}
    where = ""
    if after is not None:
        where += " AND (m.slug > :after_slug OR (m.slug = :after_slug AND a.seq > :after_seq))"
        params.update(after_slug=after[0], after_seq=after[1])
    if until is not None:
        where += " AND (m.slug < :until_slug OR (m.slug = :until_slug AND a.seq <= :until_seq))"
        params.update(until_slug=until[0], until_seq=until[1])
    rows = db.execute(f"{_QUEUE}{where} GROUP BY a.id ORDER BY m.slug, a.seq LIMIT :limit", params).fetchall()
    return [QueueItem(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5]), r[6]) for r in rows]


def queue(db: Reader, reviewer: str) -> list[QueueItem]:
    """The attempts dealt to a reviewer, by migration and seq; `done` once the reviewer judged it."""
    return queue_page(db, reviewer, limit=None)


def queue_counts(db: Database, reviewer: str) -> tuple[int, int]:
    """(done, assigned) of a reviewer's queue: attempts they have judged, attempts dealt to them."""
    row = db.execute(
        "SELECT count(*), COALESCE(SUM(EXISTS (SELECT 1 FROM judgement j WHERE j.attempt_id = d.attempt_id"
        " AND j.reviewer = :reviewer)), 0) FROM (SELECT DISTINCT attempt_id FROM assignment"
        " WHERE reviewer = :reviewer) d", {"reviewer": reviewer}).fetchone()
    return int(row[1]), int(row[0])


def hidden_count(db: Reader, reviewer: str, migration_ids: list[int] | None = None) -> int:
    """How many attempts `reviewer` is blind to (`hidden_of`, over every agent attempt and re-run
    in one pass; only those of `migration_ids` when given): while any is, lists and figures over
    them that name or sum attempts' verdicts stay closed to them."""
    within = "" if migration_ids is None else " AND a.migration_id IN (SELECT value FROM json_each(:m))"
    row = db.execute(f"SELECT count(*) FROM attempt a WHERE {hidden_of('a.id')}{within}",
                     {"r": reviewer, "m": json.dumps(migration_ids or [])}).fetchone()
    return int(row[0])


def set_study_blind(db: Database, blind: bool, reviewer: str) -> int:
    from storage.records import audit, immediate, insert_row, now

    with immediate(db):
        row = {"blind": int(blind), "reviewer": reviewer, "at": now()}
        new_id = insert_row(db, "blind_mode", row)
        audit(db, reviewer, "insert", "blind_mode", new_id, row)
    return new_id


def study_blind(db: Database) -> bool:
    """The study's blind mode: its latest setting, off when never set."""
    row = db.execute("SELECT blind FROM blind_mode ORDER BY id DESC LIMIT 1").fetchone()
    return bool(row and row[0])


def hidden_for(db: Database, reviewer: str, attempt_id: int) -> bool:
    """True while `reviewer` is blind to this attempt (storage.queries.hidden_attempts)."""
    return attempt_id in hidden_attempts(db, reviewer, [attempt_id])


# --------------------------------------------------------------------------- agreement inputs


def agreement_inputs(db: Database, migration_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """What agreement is computed from: automated verdicts ((attempt, level) -> outcome), effective
    expected levels and names of the judged attempts, and the adjudicated (attempt, level) pairs."""
    judged = "(SELECT DISTINCT attempt_id FROM judgement)"
    where = "" if migration_ids is None else f" AND a.migration_id {_IN}"
    params = {"ids": json.dumps(list(migration_ids or []))}
    verdicts = {(r[0], r[1]): r[2] for r in db.execute(
        f"SELECT v.attempt_id, v.level, v.outcome FROM verdict v JOIN attempt a ON a.id = v.attempt_id"
        f" WHERE v.superseded_by IS NULL AND v.attempt_id IN {judged}{where}", params)}
    attempts = {r[0]: (r[1], r[2], r[3]) for r in db.execute(
        f"SELECT a.id, m.slug, a.seq, {expected_level_of('a')} FROM attempt a"
        f" JOIN migration m ON m.id = a.migration_id WHERE a.id IN {judged}{where}", params)}
    adjudicated = {(r[0], r[1]) for r in db.execute("SELECT attempt_id, level FROM adjudication")}
    return {"verdicts": verdicts, "attempts": attempts, "adjudicated": adjudicated}


def add_adjudication(db: Database, *, attempt_id: int, level: int, outcome: Outcome, reason: str,
                     reviewer: str) -> tuple[int, int]:
    """The final word on a level after reviewers disagreed: an adjudication record and the
    verdict override it makes (records.add_verdict_override). Returns (adjudication, override)."""
    if outcome not in (Outcome.PASS, Outcome.FAIL):
        raise ValueError("outcome: an adjudication decides: pass or fail")
    if not reason.strip():
        raise ValueError("reason: say why this is the final verdict")
    from storage.records import add_verdict_override, audit, immediate, insert_row, now

    with immediate(db):
        verdict = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = ? AND superseded_by IS NULL",
                             [attempt_id, level]).fetchone()
        if verdict is None:
            raise ValueError(f"level: the attempt has no current verdict at level {level}; verify it first")
        override_id = add_verdict_override(db, verdict_id=verdict[0], outcome=outcome,
                                           justification=f"adjudication: {reason}", reviewer=reviewer)
        row = {"attempt_id": attempt_id, "level": level, "outcome": outcome.value, "reason": reason,
               "reviewer": reviewer, "at": now(), "override_id": override_id}
        new_id = insert_row(db, "adjudication", row)
        audit(db, reviewer, "insert", "adjudication", new_id, row)
    return new_id, override_id
