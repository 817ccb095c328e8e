"""What the verifier reads from a study: attempts, series, logs and the record it hashes.

The verifier (workbench/verify) asks these named functions and never writes SQL itself; each
returns domain objects or plain values, so the rules above stay free of the schema.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from domain.models import Attempt, AttemptSource
from domain.noise import SEED
from storage.converters import attempt_from_row, point_rows
from storage.records import select_rows
from storage.schema import ATTEMPT_SUMMARIES
from storage.sqlite import Database


@dataclass(frozen=True, slots=True)
class LogInfo:
    """A stored log's size and SHA-256: what decides extraction and what a verdict hashes."""

    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class AttemptInputs:
    """What verifying an attempt reads from the study besides its log's bytes, read once: its
    stored record, its log's size and hash, its probe reports, its checkpoint and its metric
    points. Its hashes are a verdict's inputs; the same values are what it is judged on."""

    record: dict[str, Any]
    log: LogInfo | None
    probe_reports: list[dict[str, Any]]
    checkpoint: dict[str, Any] | None
    points: list[tuple[str, int, float]]

    def metric_series(self) -> dict[str, dict[int, float]]:
        """Every stored metric series: name -> step -> value."""
        out: dict[str, dict[int, float]] = {}
        for name, step, value in self.points:
            out.setdefault(name, {})[step] = value
        return out

    def metric_series_digest(self) -> str:
        """SHA-256 of the points as `metric_series` orders them, each `repr((name, step, value))`."""
        return hashlib.sha256("".join(map(repr, self.points)).encode()).hexdigest()


def attempt_inputs(db: Database, attempt: Attempt) -> AttemptInputs:
    from storage.artifacts import artifact_of
    from storage.queries import probe_reports

    points = point_rows(db.execute("SELECT name, step, value FROM metric_point WHERE attempt_id = ?"
                                   " ORDER BY name, step", [attempt.id]).fetchall())
    return AttemptInputs(attempt_record(db, attempt.id),
                         log_info(db, attempt.log_id) if attempt.log_id is not None else None,
                         probe_reports(db, attempt.id), artifact_of(db, attempt.id), points)


def log_info(db: Database, log_id: int) -> LogInfo | None:
    row = db.execute("SELECT size, sha256 FROM log WHERE id = ?", [log_id]).fetchone()
    return LogInfo(int(row[0]), str(row[1])) if row else None


def attempt_record(db: Database, attempt_id: int) -> dict[str, Any]:
    """The attempt's row as stored, less its id and the summaries of its verification that triggers
    keep on it (schema.ATTEMPT_SUMMARIES: written by verifying it): every field a verdict depends on."""
    rows = select_rows(db, "SELECT * FROM attempt WHERE id = ?", [attempt_id])
    if not rows:
        return {}
    return {k: v for k, v in rows[0].items() if k != "id" and k not in ATTEMPT_SUMMARIES}


def reference_attempt(db: Database, migration_id: int) -> Attempt | None:
    """The migration's reference run: its latest attempt with source `reference`."""
    rows = select_rows(db, "SELECT * FROM attempt WHERE migration_id = ? AND source = ? ORDER BY seq DESC LIMIT 1",
                       [migration_id, AttemptSource.REFERENCE.value])
    return attempt_from_row(rows[0]) if rows else None


def agent_attempts(db: Database, migration_id: int, seq: int | None = None) -> list[Attempt]:
    """The migration's attempts to verify (every source but `reference`), or only `seq`."""
    sql = "SELECT * FROM attempt WHERE migration_id = ? AND source != ?"
    params: list[Any] = [migration_id, AttemptSource.REFERENCE.value]
    if seq is not None:
        sql += " AND seq = ?"
        params.append(seq)
    return [attempt_from_row(row) for row in select_rows(db, sql + " ORDER BY seq", params)]


def count_agent_attempts(db: Database, migration_ids: list[int], seq: int | None = None) -> int:
    """How many attempts `agent_attempts` gives over these migrations: a verify run's total."""
    sql = "SELECT count(*) FROM attempt WHERE source != ? AND migration_id IN (SELECT value FROM json_each(?))"
    params: list[Any] = [AttemptSource.REFERENCE.value, json.dumps(migration_ids)]
    if seq is not None:
        sql += " AND seq = ?"
        params.append(seq)
    return int(db.execute(sql, params).fetchone()[0])


def current_hashes(db: Database, migration_id: int) -> dict[int, tuple[int, str]]:
    """attempt id -> (current verification id, its inputs hash), for a migration, in one read."""
    return {int(a): (int(v), str(h)) for a, v, h in db.execute(
        "SELECT v.attempt_id, v.id, v.inputs_hash FROM verification v JOIN attempt a ON a.id = v.attempt_id"
        " WHERE a.migration_id = ? AND v.superseded_by IS NULL", [migration_id]).fetchall()}


def database_file(db: Database) -> str | None:
    """The file the connection reads (None in memory): what a worker process opens again."""
    row = db.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else None


@dataclass(frozen=True, slots=True)
class Correct:
    """A correct attempt of a migration, as level 5 compares with it: its record, its stored
    per-step series of the names asked for, and its probe reports."""

    attempt: Attempt
    series: dict[str, dict[int, float]]
    probe_reports: list[dict[str, Any]]


def correct_attempts(db: Database, migration_id: int, names: tuple[str, ...]) -> list[Correct]:
    """The migration's attempts (every source but `reference`) whose current effective levels 1
    to 4 all pass, with their stored series named in `names` and their probe reports: three reads
    for the migration."""
    from storage.queries import EFFECTIVE_VERDICTS

    rows = select_rows(db, f"""
        WITH {EFFECTIVE_VERDICTS}
        SELECT a.* FROM attempt a
        WHERE a.migration_id = ? AND a.source != ?
          AND (SELECT count(*) FROM effective e WHERE e.attempt_id = a.id AND e.level <= 4
               AND e.outcome = 'pass') = 4
        ORDER BY a.seq""", [migration_id, AttemptSource.REFERENCE.value])
    if not rows:
        return []
    ids = json.dumps([row["id"] for row in rows])
    series: dict[int, dict[str, dict[int, float]]] = {}
    for aid, name, step, value in db.execute(
            "SELECT attempt_id, name, step, value FROM metric_point WHERE attempt_id IN (SELECT value FROM json_each(?))"
            " AND name IN (SELECT value FROM json_each(?))", [ids, json.dumps(list(names))]).fetchall():
        series.setdefault(aid, {}).setdefault(name, {})[step] = value
    reports: dict[int, list[dict[str, Any]]] = {}
    for aid, data in db.execute("SELECT attempt_id, data FROM probe_report WHERE attempt_id IN"
                                " (SELECT value FROM json_each(?)) ORDER BY id", [ids]).fetchall():
        reports.setdefault(aid, []).append(json.loads(data))
    return [Correct(attempt_from_row(row), series.get(row["id"], {}), reports.get(row["id"], [])) for row in rows]


def replicates(db: Database, attempt: Attempt) -> list[Attempt]:
    """The run's replicates, one per seed (the latest), in seed order: for a reference run, the
    migration's other reference attempts at the same commit; for a re-run, the other re-runs of
    the same attempt at the same commit (`workbench rerun --repeat`); each naming in its recorded
    environment a `WORKBENCH_SEED` other than the run's own. An attempt that is neither, or a
    re-run without a seed, has none (and costs no read)."""
    own = attempt.command.env.get(SEED)
    if attempt.source is AttemptSource.REFERENCE:
        rows = select_rows(db, "SELECT * FROM attempt WHERE migration_id = ? AND source = ? AND id != ?"
                           " AND commit_sha = ? ORDER BY seq", [attempt.migration_id, AttemptSource.REFERENCE.value,
                                                                attempt.id, attempt.commit])
    elif attempt.rerun_of is not None and own is not None:
        rows = select_rows(db, "SELECT * FROM attempt WHERE migration_id = ? AND rerun_of = ? AND id != ?"
                           " AND commit_sha = ? ORDER BY seq", [attempt.migration_id, attempt.rerun_of,
                                                                attempt.id, attempt.commit])
    else:
        return []
    by_seed: dict[str, Attempt] = {}
    for row in rows:
        other = attempt_from_row(row)
        seed = other.command.env.get(SEED)
        if seed is not None and seed != own:
            by_seed[seed] = other
    return [by_seed[s] for s in sorted(by_seed, key=lambda s: (len(s), s))]
