"""Writes. Each one records itself in the audit table, in the same transaction.

Human records (interventions, decisions, verdict overrides, review sessions) are only ever
inserted: the schema's triggers refuse updates and deletes, so a correction is a new record.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from domain.models import DecisionKind, Outcome
from storage.transactions import immediate, now

if TYPE_CHECKING:  # the app's review-time hooks load this module before the first screen (issue 19)
    from storage.sqlite import Database


def audit(
    db: Database,
    reviewer: str,
    action: str,
    entity: str,
    entity_id: int | None,
    detail: dict[str, Any] | None = None,
) -> None:
    audits(db, reviewer, [(action, entity, entity_id, detail)])


_sorted_json = json.JSONEncoder(sort_keys=True).encode
"""`json.dumps(..., sort_keys=True)` without building an encoder per call: a verify run writes
fourteen audit rows an attempt."""


def audits(db: Database, reviewer: str, rows: list[tuple[str, str, int | None, dict[str, Any] | None]]) -> None:
    """`audit` for several rows (action, entity, entity id, detail) in one statement: a
    verification run writes about fourteen."""
    at = now()
    db.conn.executemany(
        "INSERT INTO audit (at, reviewer, action, entity, entity_id, detail) VALUES (?,?,?,?,?,?)",
        [(at, reviewer, action, entity, entity_id, _sorted_json(detail or {}))
         for action, entity, entity_id, detail in rows],
    )


@contextmanager
def relaxed_sync(db: Database) -> Iterator[None]:
    """synchronous=NORMAL for a long run of group commits (an import, a verify run): in WAL mode
    the database stays safe from corruption and skips an fsync per commit (a power cut may lose
    the last groups, never half of one). Inside an open transaction, which SQLite refuses to
    change it in, the connection keeps its level."""
    if db.conn.in_transaction:
        yield
        return
    previous = int(db.execute("PRAGMA synchronous").fetchone()[0])
    db.execute("PRAGMA synchronous=NORMAL")
    try:
        yield
    finally:
        db.execute(f"PRAGMA synchronous={previous}")


_PLAIN = frozenset({str, int, float, bytes, bool, type(None)})
"""Values sqlite3 stores as they are; others (lists, dicts, dates) go through sqlite-utils' JSON."""


def _plain(row: dict[str, Any]) -> bool:
    return all(type(value) in _PLAIN for value in row.values())


_INSERTS: dict[tuple[str, ...], str] = {}
"""INSERT statements by table and columns: a verify run writes 30,000 rows of two shapes."""


def insert_row(db: Database, table: str, row: dict[str, Any]) -> int:
    """Insert one row and return its new id (every table here has an integer key `id`).

    Plain values go in with one prepared statement: sqlite-utils' `insert` reads the schema on
    every call, which was most of an import's per-attempt cost."""
    if _plain(row):
        key = (table, *row)
        sql = _INSERTS.get(key)
        if sql is None:
            names = ", ".join(f'"{column}"' for column in row)
            sql = _INSERTS[key] = f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(row))})'
        pk = db.conn.execute(sql, list(row.values())).lastrowid
    else:
        pk = db.table(table).insert(row).last_pk
    if not isinstance(pk, int):
        raise TypeError(f"{table}: the new row has no integer id ({pk!r})")
    return pk


def update_row(db: Database, table: str, row_id: int, changes: dict[str, Any]) -> None:
    """Set the columns of the row with id `row_id` (plain values directly, as `insert_row`)."""
    if _plain(changes):
        assignments = ", ".join(f'"{column}" = ?' for column in changes)
        db.conn.execute(f'UPDATE "{table}" SET {assignments} WHERE id = ?', [*changes.values(), row_id])
    else:
        db.table(table).update(row_id, changes)


def select_rows(db: Database, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """The rows of a query as dicts, read on the connection (no savepoint, unlike `db.query`)."""
    cursor = db.conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _insert(db: Database, table: str, row: dict[str, Any], reviewer: str) -> int:
    with immediate(db):
        row_id = insert_row(db, table, row)
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
    existing = select_rows(db, f"SELECT * FROM {table} WHERE {where}", list(key.values()))
    full = {**row, **key}
    if not existing:
        row_id = insert_row(db, table, full)
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
    update_row(db, table, current["id"], changes)
    audit(db, reviewer, "update", table, current["id"], changes)
    return current["id"], "update"


def _evidence_json(evidence: Any) -> str:
    return json.dumps([{"kind": e.kind, "ref": e.ref, "text": e.text} for e in evidence])


class VerificationRows(NamedTuple):
    """What `write_verification` stores of a judgement, as plain values. A verify run's workers
    make them (`verification_rows`), so its parent unpickles strings rather than a judgement's
    evidence objects and encodes none of them."""

    columns: dict[str, Any]
    """The verification's judged columns (highest level, cause, flags, time and cost)."""
    verdicts: list[tuple[int, str, str, str]]
    """Each level's (level, outcome, reason, evidence as JSON)."""
    failure: tuple[str, int, str, str] | None
    """(cause, silent, note, evidence as JSON); None without a cause."""


def verification_rows(judgement: Any) -> VerificationRows:
    """The rows of a judgement (`workbench.verify.ladder.Judgement`)."""
    columns = {
        "highest_level": judgement.highest_level,
        "cause": judgement.cause.value if judgement.cause else None,
        "silent": int(judgement.silent),
        "over_claim": None if judgement.over_claim is None else int(judgement.over_claim),
        "wall_seconds": judgement.wall_seconds,
        "cost_dollars": judgement.cost_dollars,
        "time_ratio": judgement.time_ratio,
        "cost_ratio": judgement.cost_ratio,
    }
    verdicts = [(r.level, r.outcome.value, r.reason, _evidence_json(r.evidence)) for r in judgement.levels]
    failure = None if judgement.cause is None else (
        judgement.cause.value, int(judgement.silent), judgement.cause_note, _evidence_json(judgement.cause_evidence))
    return VerificationRows(columns, verdicts, failure)


def record_verifications(db: Database, items: list[dict[str, Any]]) -> list[int | Exception]:
    """Store a batch of verification runs in one transaction. A run is its five verdicts, the
    failure (if any) and the derived facts; the attempt's current verification, verdicts and
    failure are marked superseded by the new ones, never deleted; a level's override is carried
    onto its new verdict where the verifier's outcome is unchanged (`carry_overrides`). Each item
    holds `write_verification`'s keywords.

    Each run is whole on its own, in a savepoint: one that fails is rolled back and its error
    returned in its place, and the others of the batch stay. One commit per batch instead of
    one per attempt is what makes verifying a whole study cheap on SQLite.
    """
    with immediate(db):
        try:
            with db.atomic():  # the whole batch in one savepoint, each kind of row in one statement
                return list[int | Exception](_write_verifications(db, items))
        except Exception:  # noqa: BLE001 - rolled back: again a run at a time, to keep the others
            pass
        out: list[int | Exception] = []
        for item in items:
            try:
                with db.atomic():
                    out.append(write_verification(db, **item))
            except Exception as exc:  # noqa: BLE001 - the batch's other attempts stay written
                out.append(exc)
    return out


def _in(count: int) -> str:
    return "(" + ",".join("?" * count) + ")"


WRITE_BATCH = 100
"""Verification runs written by one set of statements (40 parameters a run in its verdicts)."""


def _write_verifications(db: Database, items: list[dict[str, Any]]) -> list[int]:
    """`write_verification` for each item, with each statement run once for the batch (a dozen
    statements, not a dozen a run: the parent of a verify run writes while its workers judge).
    Rows get the ids, and audit rows the order, that one run at a time gives them."""
    if len(items) > WRITE_BATCH:  # SQLite's limit on a statement's parameters
        return _write_verifications(db, items[:WRITE_BATCH]) + _write_verifications(db, items[WRITE_BATCH:])
    attempt_ids = [item["attempt_id"] for item in items]
    reviewers = {item["reviewer"] for item in items}
    if len(set(attempt_ids)) < len(attempt_ids) or len(reviewers) != 1:  # a later run supersedes an earlier
        return [write_verification(db, **item) for item in items]
    at = now()
    previous = dict(db.execute(
        "SELECT attempt_id, id FROM verification WHERE superseded_by IS NULL AND attempt_id IN " + _in(len(items)),
        attempt_ids).fetchall())
    if previous:  # free the "current" slots first (pointing at themselves)
        db.execute("UPDATE verification SET superseded_by = id WHERE id IN " + _in(len(previous)), list(previous.values()))
    rows = [{"attempt_id": item["attempt_id"], "reference_attempt_id": item["reference_attempt_id"],
             "verifier": item["verifier"], "verifier_version": item["verifier_version"],
             "inputs_hash": item["inputs_hash"], "inputs": item["inputs"], "settings": item["settings"], "at": at,
             "reviewer": item["reviewer"], **item["rows"].columns} for item in items]
    if any(list(row) != list(rows[0]) or not _plain(row) for row in rows):
        raise TypeError("a batch of verifications writes rows of one shape, of plain values")
    names = ", ".join(f'"{column}"' for column in rows[0])
    ids = dict(db.conn.execute(
        f"INSERT INTO verification ({names}) VALUES " + ", ".join([_in(len(rows[0]))] * len(rows))
        + " RETURNING attempt_id, id", [value for row in rows for value in row.values()]).fetchall())
    audited: dict[int, list[Any]] = {
        row["attempt_id"]: [("insert", "verification", ids[row["attempt_id"]],
                             {k: v for k, v in row.items() if k not in ("inputs", "settings")})]
        for row in rows}
    if previous:
        db.conn.executemany("UPDATE verification SET superseded_by = ? WHERE id = ?",
                            [(ids[aid], old) for aid, old in previous.items()])
        superseded: dict[int, list[Any]] = {aid: [] for aid in previous}
        for table in ("verdict", "failure"):
            for old_id, aid in db.execute(
                    f"SELECT id, attempt_id FROM {table} WHERE superseded_by IS NULL AND attempt_id IN "
                    + _in(len(previous)) + " ORDER BY id", list(previous)).fetchall():
                superseded[aid].append(("supersede", table, old_id, {"superseded_by": ids[aid]}))
            db.conn.executemany(f"UPDATE {table} SET superseded_by = ? WHERE attempt_id = ? AND superseded_by IS NULL",
                                [(ids[aid], aid) for aid in previous])
        for aid, old in previous.items():
            audited[aid] += [*superseded[aid], ("supersede", "verification", old, {"superseded_by": ids[aid]})]
    verdicts = [(item["attempt_id"], level, outcome, reason, evidence, item["verifier"], item["verifier_version"],
                 ids[item["attempt_id"]])
                for item in items for level, outcome, reason, evidence in item["rows"].verdicts]
    if verdicts:
        for verdict_id, aid, level, outcome in sorted(db.conn.execute(
                "INSERT INTO verdict (attempt_id, level, outcome, reason, evidence, verifier, verifier_version,"
                " verification_id) VALUES " + ", ".join([_in(8)] * len(verdicts)) + " RETURNING id, attempt_id, level, outcome",
                [value for verdict in verdicts for value in verdict]).fetchall()):  # RETURNING: in no set order
            audited[aid].append(("insert", "verdict", verdict_id, {"attempt_id": aid, "level": level, "outcome": outcome}))
    failures = [(item["attempt_id"], *item["rows"].failure, ids[item["attempt_id"]])
                for item in items if item["rows"].failure is not None]
    if failures:
        for failure_id, aid, cause, silent in sorted(db.conn.execute(
                "INSERT INTO failure (attempt_id, cause, silent, note, evidence, verification_id) VALUES "
                + ", ".join([_in(6)] * len(failures)) + " RETURNING id, attempt_id, cause, silent",
                [value for failure in failures for value in failure]).fetchall()):
            audited[aid].append(("insert", "failure", failure_id, {"attempt_id": aid, "cause": cause, "silent": bool(silent)}))
    for aid, row in carry_overrides(db, [ids[aid] for aid in previous]):
        audited[aid].append(row)
    audits(db, reviewers.pop(), [row for aid in attempt_ids for row in audited[aid]])
    return [ids[aid] for aid in attempt_ids]


def carry_overrides(db: Database, verification_ids: list[int]) -> list[tuple[int, Any]]:
    """Each level's latest override on the verdicts the new verifications superseded, copied onto
    the new verdict of that level where the verifier's outcome there is the same (the reviewer
    disagreed with that outcome, and it stands): an override keeps counting through a re-verification.
    Where the outcome changed, the override stays on the verdict it judged (the evidence changed:
    it needs a new look; `workbench verify` names it, storage.queries.overrides_left_behind).
    The copy keeps the reviewer, justification and time and names the original (`carried_from`).
    Gives (attempt id, audit row) per copy."""
    if not verification_ids:
        return []
    carried = db.conn.execute(
        "INSERT INTO verdict_override (verdict_id, outcome, justification, reviewer, at, carried_from)"
        " SELECT new.id, o.outcome, o.justification, o.reviewer, o.at, COALESCE(o.carried_from, o.id)"
        # from the few overrides, each verdict by its key: no index leads from a verification to its verdicts
        " FROM verdict_override o CROSS JOIN verdict old ON old.id = o.verdict_id"
        "  AND old.superseded_by IN (SELECT value FROM json_each(?))"
        " CROSS JOIN verdict new ON new.attempt_id = old.attempt_id AND new.level = old.level"
        "  AND new.superseded_by IS NULL AND new.verification_id = old.superseded_by AND new.outcome = old.outcome"
        " WHERE o.id = (SELECT MAX(x.id) FROM verdict_override x WHERE x.verdict_id = old.id) ORDER BY new.id"
        " RETURNING id, verdict_id, outcome, carried_from, (SELECT attempt_id FROM verdict WHERE id = verdict_id)",
        [json.dumps(verification_ids)]).fetchall()
    return [(aid, ("insert", "verdict_override", oid, {"verdict_id": vid, "outcome": outcome, "carried_from": origin}))
            for oid, vid, outcome, origin, aid in sorted(carried)]


def write_verification(
    db: Database,
    *,
    attempt_id: int,
    reference_attempt_id: int | None,
    verifier: str,
    verifier_version: str,
    inputs_hash: str,
    inputs: str,
    settings: str,
    rows: VerificationRows,
    reviewer: str,
) -> int:
    """One verification run's rows (`verification_rows` of its judgement), inside the caller's
    transaction. `inputs` is the JSON text `inputs_hash` hashes, stored as it was hashed;
    `settings` is JSON text too (a verify run writes one migration's many verdicts with the same
    settings)."""
    previous = db.execute(
        "SELECT id FROM verification WHERE attempt_id = ? AND superseded_by IS NULL", [attempt_id]
    ).fetchone()
    row = {
        "attempt_id": attempt_id,
        "reference_attempt_id": reference_attempt_id,
        "verifier": verifier,
        "verifier_version": verifier_version,
        "inputs_hash": inputs_hash,
        "inputs": inputs,
        "settings": settings,
        "at": now(),
        "reviewer": reviewer,
        **rows.columns,
    }
    if previous is not None:
        # free the "current" slot first (pointing at itself); the new row's id is set below
        db.execute("UPDATE verification SET superseded_by = id WHERE id = ?", [previous[0]])
    verification_id = insert_row(db, "verification", row)
    audited: list[tuple[str, str, int | None, dict[str, Any] | None]] = [
        ("insert", "verification", verification_id, {k: v for k, v in row.items() if k not in ("inputs", "settings")})]
    if previous is not None:
        audited += _supersede(db, attempt_id, previous[0], verification_id)
    audited += _insert_results(db, attempt_id, verification_id, rows, verifier, verifier_version)
    if previous is not None:
        audited += [row for _, row in carry_overrides(db, [verification_id])]
    audits(db, reviewer, audited)
    return verification_id


def _supersede(db: Database, attempt_id: int, previous_id: int, verification_id: int) -> list[Any]:
    """Mark the previous run and its verdicts and failure superseded by the new run (kept, not
    deleted); gives the audit rows."""
    db.execute("UPDATE verification SET superseded_by = ? WHERE id = ?", [verification_id, previous_id])
    audited = []
    for table in ("verdict", "failure"):
        old = [r[0] for r in db.execute(
            f"SELECT id FROM {table} WHERE attempt_id = ? AND superseded_by IS NULL", [attempt_id]
        ).fetchall()]
        db.execute(
            f"UPDATE {table} SET superseded_by = ? WHERE attempt_id = ? AND superseded_by IS NULL",
            [verification_id, attempt_id],
        )
        audited += [("supersede", table, old_id, {"superseded_by": verification_id}) for old_id in old]
    return [*audited, ("supersede", "verification", previous_id, {"superseded_by": verification_id})]


@functools.cache
def _verdicts_insert(count: int) -> str:
    """One INSERT of `count` verdicts giving back their (id, level, outcome): a statement fewer
    an attempt than an `executemany` and a read of the ids."""
    return ("INSERT INTO verdict (attempt_id, level, outcome, reason, evidence, verifier, verifier_version,"
            " verification_id) VALUES " + ", ".join(["(?,?,?,?,?,?,?,?)"] * count) + " RETURNING id, level, outcome")


def _insert_results(db: Database, attempt_id: int, verification_id: int, rows: VerificationRows, verifier: str,
                    verifier_version: str) -> list[Any]:
    """The run's five verdicts (one statement) and its failure (if any); gives the audit rows."""
    written = sorted(db.conn.execute(_verdicts_insert(len(rows.verdicts)), [
        value for level, outcome, reason, evidence in rows.verdicts
        for value in (attempt_id, level, outcome, reason, evidence, verifier, verifier_version, verification_id)
    ]).fetchall())  # RETURNING gives its rows in no set order
    audited: list[Any] = [("insert", "verdict", verdict_id, {"attempt_id": attempt_id, "level": level, "outcome": outcome})
                          for verdict_id, level, outcome in written]
    if rows.failure is not None:
        cause, silent, note, evidence = rows.failure
        failure = {"attempt_id": attempt_id, "cause": cause, "silent": silent, "note": note, "evidence": evidence,
                   "verification_id": verification_id}
        failure_id = insert_row(db, "failure", failure)
        audited.append(("insert", "failure", failure_id, {"attempt_id": attempt_id, "cause": cause, "silent": bool(silent)}))
    return audited


def add_verify_settings(
    db: Database, *, migration_id: int, settings: dict[str, Any], source: str, reviewer: str
) -> int | None:
    """Record a migration's verify overrides (the whole table); None when they are unchanged."""
    current = db.execute(
        "SELECT settings FROM verify_setting WHERE migration_id = ? ORDER BY id DESC LIMIT 1", [migration_id]
    ).fetchone()
    text = json.dumps(settings, sort_keys=True)
    if current is not None and current[0] == text:
        return None
    if current is None and not settings:
        return None
    return _insert(
        db,
        "verify_setting",
        {"migration_id": migration_id, "settings": text, "source": source, "reviewer": reviewer, "at": now()},
        reviewer,
    )


# AI assist (docs/assist.md): model calls, model-extracted claims, the reviewer's verdict on them.

def record_llm_call(
    db: Database,
    *,
    purpose: str,
    model: str,
    input_hash: str,
    request: dict[str, Any],
    reviewer: str,
    migration_id: int | None = None,
    attempt_id: int | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cost_usd: float | None = None,
    response: Any = None,
    error: str | None = None,
    duration_s: float | None = None,
) -> int:
    """One call to a language model, answered or not: what was sent, the tokens, the dollars."""
    row = {
        "at": now(),
        "purpose": purpose,
        "migration_id": migration_id,
        "attempt_id": attempt_id,
        "model": model,
        "input_hash": input_hash,
        "request": json.dumps(request, sort_keys=True),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read_tokens,
        "cache_write_tokens": cache_write_tokens,
        "cost_usd": cost_usd,
        "response": None if response is None else json.dumps(response, sort_keys=True),
        "error": error,
        "duration_s": duration_s,
        "reviewer": reviewer,
    }
    with immediate(db):
        row_id = insert_row(db, "llm_call", row)
        audit(db, reviewer, "insert", "llm_call", row_id,
              {k: v for k, v in row.items() if k not in ("request", "response")})
    return row_id


def add_claim_extraction(
    db: Database,
    *,
    attempt_id: int,
    llm_call_id: int,
    model: str,
    expected_level: int | None,
    success_claimed: bool,
    sentence: str | None,
    quote_found: bool,
    reviewer: str,
) -> int:
    """What a model read from an attempt's claim; it counts only once a reviewer accepts it."""
    return _insert(
        db,
        "claim_extraction",
        {
            "attempt_id": attempt_id,
            "llm_call_id": llm_call_id,
            "model": model,
            "expected_level": expected_level,
            "success_claimed": int(success_claimed),
            "sentence": sentence,
            "quote_found": int(quote_found),
            "at": now(),
        },
        reviewer,
    )


def add_claim_review(
    db: Database,
    *,
    attempt_id: int,
    action: str,
    reviewer: str,
    extraction_id: int | None = None,
    expected_level: int | None = None,
    note: str = "",
) -> int:
    """The reviewer's word on an attempt's expected level: `accept` a model extraction (its level
    counts) or `correct` (this record's level counts; None means the agent expected no level)."""
    if action not in ("accept", "correct"):
        raise ValueError("a claim review is 'accept' or 'correct'")
    if action == "accept":
        if extraction_id is None:
            raise ValueError("accepting needs the extraction it accepts")
        found = db.execute(
            "SELECT expected_level FROM claim_extraction WHERE id = ? AND attempt_id = ?",
            [extraction_id, attempt_id],
        ).fetchone()
        if found is None:
            raise ValueError(f"no claim extraction {extraction_id} for this attempt")
        expected_level = found[0]
    if expected_level is not None and not 1 <= expected_level <= 5:
        raise ValueError("an expected level is 1 to 5, or none")
    return _insert(
        db,
        "claim_review",
        {
            "attempt_id": attempt_id,
            "extraction_id": extraction_id,
            "action": action,
            "expected_level": expected_level,
            "note": note,
            "reviewer": reviewer,
            "at": now(),
        },
        reviewer,
    )


# --------------------------------------------------------------------------- human effort
# docs/effort.md. Each write validates what a reviewer typed and raises ValueError with one line
# that says what is wrong; nothing is written then.


def record_intervention(
    db: Database,
    *,
    migration_id: int,
    kind: str,
    minutes: float | str,
    note: str,
    reviewer: str,
    attempt_id: int | None = None,
    corrects: int | None = None,
    link_watched: bool = True,
) -> int:
    """An intervention, checked: a known kind, sensible minutes, an attempt of this migration,
    and a correction only of a record of this migration that nothing corrects yet. A new record
    without an attempt, made while a watch of the migration is live (storage.watches), concerns
    the migration's latest agent attempt at this moment (`link_watched=False`: never)."""
    from domain.effort import check_kind, intervention_kinds, parse_minutes
    from storage import queries, watches

    value = parse_minutes(minutes)
    with immediate(db):
        kind = check_kind(kind, intervention_kinds(queries.study_intervention_kinds(db)))
        if attempt_id is None and corrects is None and link_watched:
            attempt_id = watches.watched_attempt(db, migration_id)
        if attempt_id is not None:
            row = db.execute("SELECT migration_id FROM attempt WHERE id = ?", [attempt_id]).fetchone()
            if row is None or row[0] != migration_id:
                raise ValueError(f"attempt: #{attempt_id} is not an attempt of this migration")
        if corrects is not None:
            row = db.execute("SELECT migration_id FROM intervention WHERE id = ?", [corrects]).fetchone()
            if row is None or row[0] != migration_id:
                raise ValueError(f"corrects: there is no intervention #{corrects} in this migration")
            later = db.execute("SELECT id FROM intervention WHERE corrects = ?", [corrects]).fetchone()
            if later is not None:
                raise ValueError(f"corrects: #{corrects} is already corrected by #{later[0]}; correct that one")
        return add_intervention(
            db, migration_id=migration_id, kind=kind, minutes=value, note=note.strip(),
            reviewer=reviewer, attempt_id=attempt_id, corrects=corrects,
        )


DECISION_STATUS = {"accept": "accepted", "stop": "stopped", "continue": "in_progress"}
"""A decision sets the migration's status."""


def record_decision(
    db: Database, *, migration_id: int, kind: DecisionKind, reason: str, reviewer: str,
    expected: DecisionKind | None = None, attempt_id: int | None = None,
) -> int:
    """A decision with the figures and the rules' suggestion as they are inside the write
    transaction; the migration's status follows it. A decision against the suggestion needs a
    reason. `expected` is the suggestion the reviewer saw: if the figures moved since and the
    suggestion changed, the decision is refused so the reviewer can look again. `attempt_id` is
    the run decided on (the attempt on screen, `decide --attempt`); None: the latest attempt."""
    from storage import queries

    reason = reason.strip()
    with immediate(db):
        if attempt_id is not None:
            row = db.execute("SELECT source, rerun_of FROM attempt WHERE id = ? AND migration_id = ?",
                             [attempt_id, migration_id]).fetchone()
            if row is None:
                raise ValueError(f"attempt: {attempt_id} is not an attempt of this migration")
            if row[0] == "reference":
                raise ValueError("attempt: the reference run is the yardstick, not a run to decide on")
            while row[0] == "rerun" and row[1] is not None:  # a re-run is a run of the attempt it re-ran
                attempt_id = row[1]
                row = db.execute("SELECT source, rerun_of FROM attempt WHERE id = ?", [attempt_id]).fetchone()
        current = queries.migration_standing(db, migration_id)
        if expected is not None and current.suggestion is not expected:
            raise ValueError(
                f"the suggestion changed to {current.suggestion.value} since the form opened"
                " (another reviewer's record); look again and save"
            )
        if current.needs_reason(kind) and not reason:
            raise ValueError(
                f"reason: the rules suggest {current.suggestion.value}; say why you {kind.value} instead"
            )
        decision_id = _insert(db, "decision", {
            "migration_id": migration_id,
            "kind": kind.value,
            "reason": reason,
            "figures": json.dumps(current.figures(), sort_keys=True),
            "suggested": current.suggestion.value,
            "attempt_id": current.latest_attempt_id if attempt_id is None else attempt_id,
            "reviewer": reviewer,
            "at": now(),
        }, reviewer)
        status = DECISION_STATUS[kind.value]
        old = db.execute("SELECT status FROM migration WHERE id = ?", [migration_id]).fetchone()[0]
        if old != status:
            db.execute("UPDATE migration SET status = ? WHERE id = ?", [status, migration_id])
            audit(db, reviewer, "update", "migration", migration_id,
                  {"status": status, "was": old, "decision": decision_id})
    return decision_id


def add_budget_change(
    db: Database, *, migration_id: int, compute_dollars: float | None, staff_hours: float | None,
    attempts: int | None, calendar_days: float | None, acceptance_level: int, reason: str,
    reviewer: str,
) -> int:
    """New budgets and acceptance level for a migration: the whole set, the latest one wins."""
    from domain.effort import check_acceptance_level

    for name, value in (("compute dollars", compute_dollars), ("staff hours", staff_hours),
                        ("attempts", attempts), ("calendar days", calendar_days)):
        if value is not None and value < 0:
            raise ValueError(f"{name}: must be 0 or more")
    return _insert(db, "budget_change", {
        "migration_id": migration_id,
        "compute_dollars": compute_dollars,
        "staff_hours": staff_hours,
        "attempts": attempts,
        "calendar_days": calendar_days,
        "acceptance_level": check_acceptance_level(acceptance_level),
        "reason": reason.strip(),
        "reviewer": reviewer,
        "at": now(),
    }, reviewer)


def add_review_session(
    db: Database, *, reviewer: str, migration_id: int, started_at: str, ended_at: str | None,
    active_seconds: float,
) -> int:
    if active_seconds < 0:
        raise ValueError("active seconds must not be negative")
    return _insert(db, "review_session", {
        "reviewer": reviewer,
        "migration_id": migration_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "active_seconds": float(active_seconds),
    }, reviewer)
