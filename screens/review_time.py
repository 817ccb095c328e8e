"""Review time and other reviewers' writes, wired into the App.

- `ReviewTracker` turns the reviewer's input into review sessions per migration.
- `EffortHooks` counts input events, stores closed sessions in workers, and polls SQLite's data
  version (storage.review.ChangeWatcher), so another reviewer's records show within seconds.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual.screen import Screen

from domain.errors import WorkbenchError
from domain.models import Migration
from domain.text import clean
from storage.review import ChangeWatcher
from workbench import config

if TYPE_CHECKING:  # domain.effort (about 10 ms of dataclasses) loads at the first input or tick, after the first page
    from domain import effort


class ReviewTracker:
    """Counts active review time per migration for this app's reviewer (docs/effort.md)."""

    def __init__(self, path: Path, reviewer: str | None = None, *, idle_gap: float | None = None,
                 segment: float | None = None, clock=time.monotonic) -> None:
        """`idle_gap` and `segment` default to domain.effort's IDLE_GAP_SECONDS and SEGMENT_SECONDS."""
        self.path = path
        self.reviewer = reviewer or config.reviewer()
        self._settings = (idle_gap, segment)
        self._sessions: effort.Sessionizer | None = None
        self.clock = clock
        self._lock = threading.Lock()

    @property
    def sessions(self) -> effort.Sessionizer:
        """The sessionizer, made on first use (under the lock, as every use is)."""
        if self._sessions is None:
            from domain import effort

            idle_gap, segment = self._settings
            self._sessions = effort.Sessionizer(
                idle_gap=effort.IDLE_GAP_SECONDS if idle_gap is None else idle_gap,
                segment=effort.SEGMENT_SECONDS if segment is None else segment)
        return self._sessions

    @staticmethod
    def migration_in_view(screen_stack: list[Screen]) -> int | None:
        for screen in reversed(screen_stack):
            migration = getattr(screen, "migration", None)
            if isinstance(migration, Migration):
                return migration.id
            migration_id = getattr(screen, "migration_id", None)
            if isinstance(migration_id, int):
                return migration_id
        return None

    def touch(self, screen_stack: list[Screen]) -> list[effort.ReviewPiece]:
        with self._lock:
            return self.sessions.touch(self.migration_in_view(screen_stack), self.clock())

    def tick(self) -> list[effort.ReviewPiece]:
        with self._lock:
            return self.sessions.tick(self.clock())

    def close(self) -> list[effort.ReviewPiece]:
        with self._lock:
            return self.sessions.close()

    def save(self, pieces: list[effort.ReviewPiece]) -> None:
        """Store closed sessions (blocking: call from a worker, or at exit)."""
        if not pieces:
            return
        from screens.data import reading
        from storage import records

        with reading(self.path) as db:
            for piece in pieces:
                records.add_review_session(
                    db, reviewer=self.reviewer, migration_id=piece.migration_id, started_at=piece.started_at,
                    ended_at=piece.ended_at, active_seconds=piece.active_seconds,
                )


def _input_events() -> tuple[type, ...]:
    from textual import events

    return (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp,
            events.MouseScrollLeft, events.MouseScrollRight, events.Paste)


class EffortHooks:
    """What the App wires in: review time from input events, and polling for others' writes.

    In the App: `self.effort = EffortHooks(self)` in `__init__`, `self.effort.start()` in
    `on_mount`, `self.effort.input(event)` in `on_event`, `self.effort.stop()` at exit.
    """

    POLL_SECONDS = 1.0
    """How often the data version is polled; other reviewers' records show within about this."""

    def __init__(self, app, *, idle_gap: float | None = None, save: bool = True) -> None:
        """`save=False`: a read-only study, where review time is counted but not stored."""
        self.app = app
        self.saves = save
        self.review = ReviewTracker(app.db_path, idle_gap=idle_gap)
        self.watcher = ChangeWatcher(app.db_path)
        self.inputs = _input_events()
        self.stopped = False

    def start(self) -> None:
        try:
            self.watcher.changed()  # the baseline, before any screen reads: later commits all show
        except (sqlite3.Error, WorkbenchError):
            pass  # the screens report an unreadable database themselves
        self.app.set_interval(self.POLL_SECONDS, self._poll, name="effort-poll")

    def input(self, event) -> None:
        if isinstance(event, self.inputs) and not event.is_forwarded and not self.stopped:
            self._save(self.review.touch(self.app.screen_stack))

    def stop(self) -> None:
        """Store the open review session and stop watching (the app is closing)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            if self.saves:
                self.review.save(self.review.close())
        except Exception as exc:  # the app is closing: say so, never hide it
            import sys

            print(f"workbench: review time not saved: {clean(str(exc))}", file=sys.stderr)
        self.watcher.close()

    def _poll(self) -> None:
        if self.stopped:
            return
        self._save(self.review.tick())
        self._watch()

    def _save(self, pieces: list[effort.ReviewPiece]) -> None:
        if pieces and self.saves:
            self.app.run_worker(lambda: self.review.save(pieces), thread=True, exit_on_error=False,
                                group="review-save")

    def _watch(self) -> None:
        def check() -> None:
            try:
                changed = self.watcher.changed()
            except (sqlite3.Error, WorkbenchError):
                return
            if changed and not self.stopped:
                self.app.call_from_thread(self.study_changed)

        self.app.run_worker(check, thread=True, exclusive=True, exit_on_error=False, group="effort-watch")

    def study_changed(self) -> None:
        from screens.widgets.effort_panel import EffortPanel  # loaded with the first screen that has one

        for screen in self.app.screen_stack:
            for panel in screen.query(EffortPanel):
                panel.reload()
            hook = getattr(screen, "study_changed", None)
            if callable(hook):
                hook()
