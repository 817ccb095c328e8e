"""Live watches of a migration's agent sessions (`workbench watch`, the app's `W`), and what they
change: an intervention recorded without an attempt while a watch is live links to the attempt
that was latest at that moment (storage.records.record_intervention).

A watcher adds its row when it starts, renews `heartbeat_at` every HEARTBEAT_S seconds and removes
the row when it stops. A row whose heartbeat is older than STALE_S seconds does not count: its
watcher was killed without stopping (it is removed when the next watch of that migration starts).
These rows are machine state, not human records, and are not audited.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from storage.sqlite import Database
from storage.transactions import immediate, now

HEARTBEAT_S = 10.0
"""Seconds between a watcher's heartbeats (each one is a commit the open apps notice)."""
STALE_S = 30.0
"""A watch whose heartbeat is older than this does not count."""


@dataclass(frozen=True, slots=True)
class Watch:
    id: int
    migration_id: int
    pid: int
    host: str
    started_at: str
    heartbeat_at: str


def _cutoff(stale: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=stale)
    return moment.isoformat(timespec="milliseconds")


def start_watch(db: Database, migration_id: int, pid: int, host: str) -> int:
    """Add a live watch; stale rows of the same migration are removed first."""
    with immediate(db):
        db.execute("DELETE FROM watch WHERE migration_id = ? AND heartbeat_at < ?", [migration_id, _cutoff(STALE_S)])
        stamp = now()
        cursor = db.execute(
            "INSERT INTO watch (migration_id, pid, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?)",
            [migration_id, pid, host, stamp, stamp])
        return int(cursor.lastrowid or 0)


def beat(db: Database, watch_id: int) -> bool:
    """Renew the watch's heartbeat; False when its row is gone (removed as stale meanwhile)."""
    with immediate(db):
        cursor = db.execute("UPDATE watch SET heartbeat_at = ? WHERE id = ?", [now(), watch_id])
        return cursor.rowcount > 0


def stop_watch(db: Database, watch_id: int) -> None:
    with immediate(db):
        db.execute("DELETE FROM watch WHERE id = ?", [watch_id])


def live_watches(db: Database, migration_id: int | None = None, *, stale: float = STALE_S) -> list[Watch]:
    """The watches whose heartbeat is fresh, of one migration or of all."""
    rows = db.execute(
        "SELECT id, migration_id, pid, host, started_at, heartbeat_at FROM watch"
        " WHERE heartbeat_at >= ? AND (? IS NULL OR migration_id = ?) ORDER BY id",
        [_cutoff(stale), migration_id, migration_id]).fetchall()
    return [Watch(*row) for row in rows]


def latest_agent_attempt(db: Database, migration_id: int) -> int | None:
    """The id of the migration's agent attempt with the highest sequence number."""
    row = db.execute("SELECT id FROM attempt WHERE migration_id = ? AND source = 'agent' ORDER BY seq DESC LIMIT 1",
                     [migration_id]).fetchone()
    return None if row is None else int(row[0])


def watched_attempt(db: Database, migration_id: int) -> int | None:
    """While a watch of the migration is live: its latest agent attempt (None otherwise)."""
    if not live_watches(db, migration_id):
        return None
    return latest_agent_attempt(db, migration_id)


def intervention_seq(db: Database, intervention_id: int) -> int | None:
    """The sequence number of the attempt an intervention concerns (None: the migration)."""
    row = db.execute("SELECT a.seq FROM intervention i JOIN attempt a ON a.id = i.attempt_id WHERE i.id = ?",
                     [intervention_id]).fetchone()
    return None if row is None else int(row[0])
