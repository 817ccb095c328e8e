"""Unknown is actionable in the app: `U` on the study or a migration re-runs with the probe every
agent attempt whose level 3 is unknown or that has no trace (the service behind `workbench verify --rerun-unknown`,
workbench/verify/unknown.py). A dialog lists the commands first (they come from agents' records:
nothing runs until the reviewer presses Run); then a screen follows the jobs, queued to done, and
`enter` opens one job's live output (screens/rerun.py)."""

from __future__ import annotations

import datetime
import os
import shlex
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Label, ProgressBar, Select, Static

from domain.costs import parse_time
from domain.jobs import JobState
from domain.text import plural
from screens.data import describe_error, reading
from screens.rerun import BACKENDS, JobScreen
from screens.text import text
from screens.typeahead import Input
from screens.widgets.footer import Footer


class RerunUnknownDialog(ModalScreen[list[int] | None]):
    """The attempts whose level 3 is unknown or that have no trace, and their commands; dismisses
    with the started jobs."""

    WRITES_STUDY = True  # jobs and their results (WorkbenchApp.push_screen)

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="rerun_unknown.cancel", tooltip="Close; nothing runs"),
        Binding("ctrl+r", "run", "Run all", id="rerun_unknown.run",
                tooltip="Re-run every listed attempt with the probe, each command exactly as shown"),
    ]

    def __init__(self, db_path: Path, slug: str | None, label: str) -> None:
        super().__init__()
        self.db_path = db_path
        self.slug = slug
        self.label = label
        self.targets: list = []
        """(migration slug, attempt) pairs found by the worker."""

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = text(f"Re-run unknown L3 or no trace with the probe: {self.label}")
            box.border_subtitle = "ctrl+r runs all · escape cancels"
            yield Static(text("From the agents' records: read them. Nothing runs until Run all.", "italic"))
            with VerticalScroll():
                yield Static(text("Looking for attempts whose level 3 is unknown or that have no trace…"), id="unknown-list")
                yield Label("Backend")
                yield Select(BACKENDS, value="local", allow_blank=False, id="unknown-backend")
                yield Label("Host, TPU VM or cluster name (not for local)")
                yield Input(id="unknown-host")
                yield Label("Chips (empty: each attempt's intended count)")
                yield Input(id="unknown-chips", type="integer")
                yield Label("Target environment (venv folder; its bin/ goes first on PATH)")
                yield Input(os.environ.get("WORKBENCH_TARGET_VENV", ""), id="unknown-venv")
            yield Static("", id="unknown-error")
            with Horizontal():
                yield Button("Run all", variant="warning", id="unknown-go", disabled=True)
                yield Button("Cancel", id="unknown-close")

    def on_mount(self) -> None:
        self.query_one("#unknown-error").display = False
        self._find()

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerun-unknown-find")
    def _find(self) -> None:
        from storage import queries
        from workbench import config
        from workbench.blind import sight
        from workbench.verify.unknown import unknown_in

        try:
            with reading(self.db_path) as db:
                found = unknown_in(db, self.slug)
                migration = None if self.slug is None else queries.get_migration(db, self.slug)
                seen = sight(db, config.reviewer(), attempts=[a.id for _, a in found],
                             scope=True if migration is None else [migration.id])
                targets = [(slug, a) for slug, a in found if seen.sees_attempt(a.id)]  # its level 3 is a verdict
        except Exception as exc:  # shown on the dialog
            self.app.call_from_thread(self._error, describe_error(exc))
            return
        self.app.call_from_thread(self._found, targets, not seen.sees_scope)

    def _found(self, targets: list, blind: bool) -> None:
        """`blind`: the reviewer is blind to some attempts here, which are not offered whatever
        their level 3 (saying whether one is unknown would tell its verdict)."""
        self.targets = targets
        listing = self.query_one("#unknown-list", Static)
        if not targets:
            listing.update(text("No attempt you may see has an unknown level 3 or no trace (those you judge blind"
                                " are not offered): nothing to re-run." if blind else
                                "No attempt has an unknown level 3 or no trace: nothing to re-run."))
            return
        lines = [f"{plural(len(targets), 'attempt')}:"]
        lines += [f"{slug} #{a.seq}: {shlex.join(a.command.argv)}" for slug, a in targets]
        listing.update(text("\n".join(lines), keep_newlines=True))
        self.query_one("#unknown-go", Button).disabled = False

    def _error(self, line: str) -> None:
        error = self.query_one("#unknown-error", Static)
        error.update(text(line))
        error.display = True

    @on(Button.Pressed, "#unknown-go")
    def action_run(self) -> None:
        if not self.targets:
            return
        chips_text = self.query_one("#unknown-chips", Input).value.strip()
        host = self.query_one("#unknown-host", Input).value.strip() or None
        venv = self.query_one("#unknown-venv", Input).value.strip()
        backend = str(self.query_one("#unknown-backend", Select).value)
        self.query_one("#unknown-go", Button).disabled = True
        self._launch(backend, int(chips_text) if chips_text else None, host, {"venv": venv} if venv else {})

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerun-unknown-launch")
    def _launch(self, backend: str, chips: int | None, host: str | None, options: dict) -> None:
        from storage.database import open_study
        from workbench import config
        from workbench.verify.unknown import launch_all, rerun_specs

        try:
            study = open_study(self.db_path)
            try:
                attempts = [a for _, a in self.targets]
                specs = rerun_specs(study.db, attempts, backend, chips=chips, host=host, options=options)
                started = launch_all(study, specs, config.reviewer())
            finally:
                study.close()
        except Exception as exc:  # shown on the dialog, which stays open with what was typed
            self.app.call_from_thread(self._error, describe_error(exc))
            self.app.call_from_thread(setattr, self.query_one("#unknown-go", Button), "disabled", False)
            return
        self.app.call_from_thread(self.dismiss, [job.id for job in started])

    @on(Button.Pressed, "#unknown-close")
    def action_cancel(self) -> None:
        self.dismiss(None)


class JobsScreen(Screen[None]):
    """Several jobs at once: each one's attempt, state, elapsed time and result, read again
    whenever the study changes (the runners write their states to it); `enter` on one opens its
    live output."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="jobs.back", tooltip="Back (the jobs keep running)"),
    ]
    help_title = "jobs"

    def __init__(self, db_path: Path, job_ids: list[int]) -> None:
        super().__init__()
        self.db_path = db_path
        self.job_ids = job_ids

    def compose(self) -> ComposeResult:
        yield Static(text(plural(len(self.job_ids), "job")), id="jobs-status")
        yield ProgressBar(total=len(self.job_ids), show_eta=False, id="jobs-progress")
        table: DataTable = DataTable(id="jobs-table", cursor_type="row")
        table.add_columns("job", "attempt", "state", "elapsed", "result")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.study_changed()

    def study_changed(self) -> None:
        """A runner wrote a state (storage.review.ChangeWatcher said so): read the jobs again."""
        self._read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="jobs-read")
    def _read(self) -> None:
        from domain.jobs import result_line
        from storage import queries
        from storage.jobs import job_result
        from workbench import config
        from workbench.blind import sight
        from workbench.rerun import jobs

        rows = []
        with reading(self.db_path) as db:
            for job_id in self.job_ids:
                job = jobs.get_job(db, job_id)
                if job.active and job.runner_pid is not None and not jobs.runner_alive(job):
                    jobs.recover(db)
                    job = jobs.get_job(db, job_id)
                attempt = queries.attempt_summary(db, job.spec.attempt_id).attempt
                migration = queries.migration_by_id(db, job.spec.migration_id)
                found = None if job.active else sight(db, config.reviewer(), attempts=[job.result_attempt_id]
                                                      ).job_result(job.result_attempt_id, job_result(db, job))
                rows.append((job, f"{migration.slug if migration else '?'} #{attempt.seq}",
                             "" if found is None else result_line(found)))
        self.app.call_from_thread(self._show, rows)

    def _show(self, rows: list) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        done = 0
        for job, name, result in rows:
            done += not job.active
            table.add_row(text(str(job.id)), text(name), text(job.state.value), text(_elapsed(job)),
                          text(result or (job.error or "")), key=str(job.id))
        table.move_cursor(row=min(cursor, len(rows) - 1))
        self.query_one(ProgressBar).update(total=len(rows), progress=done)
        queued = sum(1 for job, _, _ in rows if job.state is JobState.QUEUED)
        self.query_one("#jobs-status", Static).update(text(
            f"{plural(len(rows), 'job')}: {done} done, {len(rows) - done - queued} running, {queued} queued"))

    @on(DataTable.RowSelected, "#jobs-table")
    def _open_job(self, event: DataTable.RowSelected) -> None:
        """`enter` on a job: its live output."""
        self.app.push_screen(JobScreen(self.db_path, int(str(event.row_key.value))))


def _elapsed(job) -> str:
    if job.wall_seconds is not None:
        return f"{job.wall_seconds:.1f} s"
    start = parse_time(job.started_at)
    if start is None:
        return ""
    return f"{(datetime.datetime.now(datetime.UTC) - start).total_seconds():.0f} s"


def open_rerun_unknown(screen: Screen, slug: str | None, label: str) -> None:
    """Push the dialog; when jobs start, follow them."""
    app = screen.app
    path = app.db_path

    def started(job_ids: list[int] | None) -> None:
        if job_ids:
            app.push_screen(JobsScreen(path, job_ids))

    app.push_screen(RerunUnknownDialog(path, slug, label), started)
