"""The app's live watches (`W` on the migration screen): each follows one migration's Claude Code
sessions, as `workbench watch` does, in a thread worker of the app.

The project is the migration's repository folder; its sessions are looked for in the Claude Code
projects folder ($CLAUDE_CONFIG_DIR or ~/.claude). A watch keeps running when its migration's
screen is closed, until `W` again on that migration or the app exits (Textual cancels its
workers then; the watcher stops within one round and removes its row from the study). What a
watch writes reaches every screen through the app's change polling (screens/review_time.py):
new attempts, their verdicts, and the toast for a new silent failure or over-claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from textual.worker import Worker, get_current_worker

from domain.models import Migration
from domain.text import clean, plural
from screens.data import describe_error

INTERVAL_S = 0.5
"""Seconds between the watcher's looks at the transcripts."""


@dataclass
class Running:
    """One migration's watch as the app sees it."""

    migration: Migration
    project: Path
    worker: Worker | None = None
    sessions: int = 0
    reported: list[str] = field(default_factory=list)


def watch_line(running: Running | None) -> str | None:
    """The migration screen's subtitle: 'watching 2 sessions', or None when not watching."""
    if running is None:
        return None
    return f"watching {plural(running.sessions, 'session')}"


class LiveWatches:
    """`app.live`: the running watches by migration id."""

    def __init__(self, app) -> None:
        self.app = app
        self.running: dict[int, Running] = {}

    def get(self, migration_id: int) -> Running | None:
        return self.running.get(migration_id)

    def toggle(self, migration: Migration) -> bool:
        """Start watching the migration's sessions, or stop; True when now watching. Each way is
        said in a toast: the subtitle that also says it is cut off by a long study title."""
        if migration.id in self.running:
            self.stop(migration.id)
            self.app.notify(f"Stopped watching {clean(migration.slug)}'s Claude Code sessions", markup=False)
            return False
        return self.start(migration)

    def start(self, migration: Migration) -> bool:
        from workbench.importers.sessions import project_folders, projects_dir

        project = Path(migration.repo).expanduser()
        if not project.is_dir():
            self.app.notify(f"Not watching: the migration's repository {clean(str(project))} is not a folder here",
                            severity="error", markup=False)
            return False
        project = project.resolve()
        if not project_folders(project):
            self.app.notify(f"No Claude Code sessions folder for {clean(str(project))} under"
                            f" {clean(str(projects_dir()))} yet: watching for the first session (W stops)",
                            severity="warning", markup=False)
        else:
            self.app.notify(f"Watching {clean(migration.slug)}'s Claude Code sessions: new attempts show as"
                            " they run (W stops)", markup=False)
        running = self.running[migration.id] = Running(migration, project)
        running.worker = self.app.run_worker(lambda: self._run(running), thread=True, exit_on_error=False,
                                             group=f"watch-{migration.id}", name=f"watch {migration.slug}")
        self._changed(migration.id)
        return True

    def stop(self, migration_id: int) -> None:
        running = self.running.pop(migration_id, None)
        if running is not None and running.worker is not None:
            running.worker.cancel()  # sets its cancelled event: the watcher ends its round and stops
        self._changed(migration_id)

    def stop_all(self) -> None:
        for migration_id in list(self.running):
            self.stop(migration_id)

    def _run(self, running: Running) -> None:
        """In the worker's thread: the watcher, on a connection of this thread, until cancelled."""
        from storage.database import open_study
        from workbench import config
        from workbench.watch import Watcher

        stop = get_current_worker().cancelled_event
        try:
            study = open_study(self.app.db_path)
        except Exception as exc:  # noqa: BLE001 - one line for the person, never a crash
            self.app.call_from_thread(self._failed, running, describe_error(exc))
            return
        try:
            watcher = Watcher(study, running.migration.slug, running.project, config.reviewer(),
                              repo=running.project)

            def after_round() -> None:
                if watcher.sessions != running.sessions and not stop.is_set():
                    running.sessions = watcher.sessions
                    self.app.call_from_thread(self._changed, running.migration.id)

            watcher.run(interval=INTERVAL_S, stop=stop, echo=running.reported.append, after_round=after_round)
        except Exception as exc:  # noqa: BLE001 - the watch ends with one line, the app goes on
            if not stop.is_set():
                self.app.call_from_thread(self._failed, running, describe_error(exc))
        finally:
            study.close()

    def _failed(self, running: Running, problem: str) -> None:
        if self.running.get(running.migration.id) is running:
            del self.running[running.migration.id]
        self.app.notify(f"Watch of {clean(running.migration.slug)} stopped: {problem}", severity="error",
                        markup=False)
        self._changed(running.migration.id)

    def _changed(self, migration_id: int) -> None:
        """The migration screens of this migration show the watch's line."""
        for screen in self.app.screen_stack:
            shown = getattr(screen, "show_watch", None)
            migration = getattr(screen, "migration", None)
            if callable(shown) and isinstance(migration, Migration) and migration.id == migration_id:
                shown()
