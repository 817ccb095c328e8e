"""The reads the review screens need beyond `storage.queries`: named, and returning plain values
or domain objects, so no SQL lives in `screens/`."""

from __future__ import annotations

import sqlite3
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

from storage.database import BUSY_TIMEOUT_S

ATTEMPT_CHOICES = 2000
"""At most this many attempts are offered in a form's attempt list."""


@dataclass(frozen=True, slots=True)
class AttemptChoice:
    """One attempt as a form lists it: enough to label it, nothing to load."""

    id: int
    seq: int
    source: str
    status: str

    @property
    def label(self) -> str:
        return f"#{self.seq} {self.source} {self.status}"


def attempt_choices(db: Database, migration_id: int, *, limit: int = ATTEMPT_CHOICES) -> list[AttemptChoice]:
    """The migration's attempts in order, for the intervention form's attempt list."""
    rows = db.execute(
        "SELECT id, seq, source, status FROM attempt WHERE migration_id = ? ORDER BY seq LIMIT ?",
        [migration_id, limit]).fetchall()
    return [AttemptChoice(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]


def metric_names(db: Database, attempt_ids: list[int]) -> set[str]:
    """Every metric recorded for any of `attempt_ids` (the curves pane offers these)."""
    if not attempt_ids:
        return set()
    marks = ",".join("?" * len(attempt_ids))
    return {str(r[0]) for r in db.execute(
        f"SELECT DISTINCT name FROM metric_point WHERE attempt_id IN ({marks})", attempt_ids).fetchall()}


class ChangeWatcher:
    """Says when another connection (another reviewer, a script, this app's own workers) has
    committed to the study since the last poll: SQLite's `data_version` on one connection of
    its own, kept open between polls (the number is per connection)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._last: int | None = None
        self._lock = threading.Lock()

    def changed(self) -> bool:
        with self._lock:
            if self._conn is None:
                # mode=rw: never create the file (a missing database is the screens' message)
                uri = f"file:{urllib.parse.quote(str(self.path.resolve()))}?mode=rw"
                self._conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            changed = self._last is not None and version != self._last
            self._last = version
            return changed

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@dataclass(frozen=True, slots=True)
class LadderCounts:
    """Agent attempts by highest level reached (verified ones only), and the rest: so a header
    never reads "failed 0/5" while nothing has been verified."""

    levels: dict[int, int]
    """Highest level (0..5) to the number of verified attempts that reached it and no more."""
    unverified: int
    failed: int
    """Attempts with a current failure record."""
    judged: int
    """Attempts verified or with a failure record: what `failed` is out of."""

    @property
    def attempts(self) -> int:
        return sum(self.levels.values()) + self.unverified


def ladder_counts(db: Database, migration_id: int | None = None) -> LadderCounts:
    """The ladder counts of one migration, or of the whole study when `migration_id` is None
    (one grouped pass over the agent attempts)."""
    from storage.queries import ATTEMPT_LEVEL, EFFECTIVE_VERDICTS

    rows = db.execute(f"""
        WITH {EFFECTIVE_VERDICTS}, {ATTEMPT_LEVEL}
        SELECT CASE WHEN l.verified THEN l.level END AS level, count(*),
               SUM(EXISTS (SELECT 1 FROM failure f WHERE f.attempt_id = l.id
                           AND f.superseded_by IS NULL)) AS failed
        FROM attempt_level l WHERE (:m IS NULL OR l.migration_id = :m)
        GROUP BY 1""", {"m": migration_id}).fetchall()
    levels = {int(r[0]): int(r[1]) for r in rows if r[0] is not None}
    unverified = sum(int(r[1]) for r in rows if r[0] is None)
    failed = sum(int(r[2] or 0) for r in rows)
    failed_unverified = sum(int(r[2] or 0) for r in rows if r[0] is None)
    return LadderCounts(levels, unverified, failed, sum(levels.values()) + failed_unverified)


def verify_targets(db: Database, slug: str | None = None, seq: int | None = None) -> list[tuple[str, int]]:
    """(migration slug, seq) of the agent attempts a verify run covers: the study's, one
    migration's, or one attempt's; the app verifies them one by one to show progress."""
    return [(str(r[0]), int(r[1])) for r in db.execute(
        "SELECT m.slug, a.seq FROM attempt a JOIN migration m ON m.id = a.migration_id"
        " WHERE a.source != 'reference' AND (:slug IS NULL OR m.slug = :slug)"
        " AND (:seq IS NULL OR a.seq = :seq) ORDER BY m.slug, a.seq",
        {"slug": slug, "seq": seq}).fetchall()]
