"""Follow a project's Claude Code sessions while the agent writes them (`workbench watch`).

Each round stats the project's transcripts (sessions and sub-agents); a session whose files
changed is read on from where the last round stopped (workbench/importers/follow.py): only the
bytes added since are parsed, the calls still waiting for their results are kept between rounds,
and a half-written last line waits for its end. A file that shrank or was replaced is read again
from the start; the external ids make that idempotent. New Bash calls become attempts, the ones
whose result arrived are updated. Attempts whose result arrived (or changed) are verified at
once; a call still running stays `no_result` and unverified until its result comes.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage import queries, watches
from storage import setup as store
from storage.database import StudyDatabase
from workbench.importers.claude_code import FileReport, read_records
from workbench.importers.follow import Follower
from workbench.importers.rules import WorkloadRule
from workbench.importers.sessions import project_folders


@dataclass(frozen=True, slots=True)
class Seen:
    """One verified attempt, as the watcher reports it."""

    seq: int
    status: str
    exit_code: int | None
    level: int
    cause: str | None
    silent: bool
    over_claim: bool | None
    hidden: bool = False
    """The watching reviewer is blind to it (domain.blind.Sight): its level and flags are not said."""

    def line(self) -> str:
        code = f" (exit {self.exit_code})" if self.exit_code is not None else ""
        if self.hidden:
            return f"attempt {self.seq}: {self.status}{code}: verified; its verdicts are hidden until you judge it"
        flags = [self.cause or ""] + (["SILENT FAILURE"] if self.silent else []) + \
            (["OVER-CLAIM"] if self.over_claim else [])
        extra = ", ".join(f for f in flags if f)
        return f"attempt {self.seq}: {self.status}{code}: level {self.level}" + (f", {extra}" if extra else "")


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1, -1)
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _first_cwd(path: Path) -> str | None:
    for record in read_records(path, FileReport(path)):
        if isinstance(record.get("cwd"), str):
            return record["cwd"]
    return None


@dataclass
class Watcher:
    """One migration's view of one project's sessions; `poll` does one round."""

    study_db: StudyDatabase
    slug: str
    project: Path
    reviewer: str
    rule: WorkloadRule = field(default_factory=WorkloadRule)
    repo: Path | None = None
    _stamps: dict[Path, tuple[Any, ...]] = field(default_factory=dict)
    _ours: dict[Path, bool] = field(default_factory=dict)
    _states: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    _follower: Follower | None = None

    def __post_init__(self) -> None:
        self.project = self.project.expanduser().resolve()

    def _belongs(self, session: Path) -> bool:
        """The session's cwd is the project or inside it (cached once a cwd is seen)."""
        if session not in self._ours:
            cwd = _first_cwd(session)
            if cwd is None:
                return True
            root = str(self.project).rstrip("/")
            self._ours[session] = cwd == root or cwd.startswith(root + "/")
        return self._ours[session]

    def changed_sessions(self) -> dict[Path, tuple[Any, ...]]:
        """Sessions whose files (their own or their sub-agents') changed since the last round,
        with their files' new sizes and times."""
        out = {}
        for folder in project_folders(self.project):
            flat = sorted(folder.glob("agent-*.jsonl"))
            for session in sorted(folder.glob("*.jsonl")):
                if session.name.startswith("agent-") or not self._belongs(session):
                    continue
                nested = session.with_suffix("") / "subagents"
                files = [session, *flat, *(sorted(nested.glob("agent-*.jsonl")) if nested.is_dir() else [])]
                stamp = tuple((f, *_stat(f)) for f in files)
                if stamp != self._stamps.get(session):
                    out[session] = stamp
        return out

    def poll(self) -> list[Seen]:
        """Read what was added, verify the attempts whose result arrived or changed."""
        from workbench.importers.claude_code import ClaudeCodeImporter

        sessions = self.changed_sessions()
        if sessions:
            if self._follower is None:
                self._follower = Follower(ClaudeCodeImporter(self.study_db, self.slug, self.reviewer,
                                                             rule=self.rule, repo=self.repo))
            again = set(self._follower.read(list(sessions)))
            self._stamps.update({k: v for k, v in sessions.items() if k not in again})
        return self._verify_changed()

    @property
    def sessions(self) -> int:
        """Sessions followed so far."""
        return len(self._stamps)

    def _verify_changed(self) -> list[Seen]:
        from workbench.blind import sight
        from workbench.verify import verify_migration

        db = self.study_db.db
        migration = queries.get_migration(db, self.slug)
        study = queries.get_study(db)
        if migration is None or study is None:
            return []
        states = store.attempt_states(db, migration.id)
        seen = []
        for seq, state in states.items():
            if state == self._states.get(seq) or state[0] == "no_result":
                continue
            outcomes = verify_migration(db, migration, study, self.reviewer, seq=seq).outcomes
            blind = sight(db, self.reviewer, attempts=[o.attempt.id for o in outcomes])
            for outcome in outcomes:
                found = queries.current_verification(db, outcome.attempt.id)
                if found is not None:
                    seen.append(Seen(seq, state[0], state[1], found.highest_level,
                                     found.cause.value if found.cause else None, found.silent, found.over_claim,
                                     hidden=not blind.sees_attempt(outcome.attempt.id)))
            self._states[seq] = state
        return seen

    def run(self, *, interval: float = 0.5, stop_after: float | None = None,
            echo: Callable[[str], None] = print, stop: threading.Event | None = None,
            after_round: Callable[[], None] | None = None) -> int:
        """Poll until `stop_after` seconds have passed, `stop` is set, or forever; returns the
        attempts reported; `after_round` is called after each round. While it runs the study records a live watch of the migration
        (storage.watches), with a heartbeat every HEARTBEAT_S seconds."""
        migration = queries.get_migration(self.study_db.db, self.slug)
        if migration is not None:  # attempts already there when the watch starts are not reported
            self._states = store.attempt_states(self.study_db.db, migration.id)
        stop = stop or threading.Event()
        deadline = None if stop_after is None else time.monotonic() + stop_after
        reported = 0
        heartbeat = _Heartbeat(self.study_db, migration.id) if migration is not None else None
        try:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                started = time.monotonic()
                for item in self.poll():
                    echo(item.line())
                    reported += 1
                if heartbeat is not None:
                    heartbeat.tick()
                if after_round is not None:
                    after_round()
                stop.wait(max(0.0, interval - (time.monotonic() - started)))
        finally:
            if heartbeat is not None:
                heartbeat.close()
        return reported


class _Heartbeat:
    """The watch's row in the study: added at start, renewed every HEARTBEAT_S, removed at stop."""

    def __init__(self, study_db: StudyDatabase, migration_id: int) -> None:
        self.db = study_db.db
        self.migration_id = migration_id
        self.id: int | None = None
        self.last = 0.0
        self.tick()

    def tick(self) -> None:
        if self.id is not None and time.monotonic() - self.last < watches.HEARTBEAT_S:
            return
        try:
            if self.id is None or not watches.beat(self.db, self.id):
                self.id = watches.start_watch(self.db, self.migration_id, os.getpid(), socket.gethostname())
            self.last = time.monotonic()
        except sqlite3.OperationalError:
            pass  # the study is busy: the next round tries again, well within STALE_S

    def close(self) -> None:
        if self.id is not None:
            try:
                watches.stop_watch(self.db, self.id)
            except sqlite3.Error:
                pass  # the row goes stale by itself
