"""Re-runs in the app: the launcher (`r` on an attempt) and the live view of a job's output.

The launcher shows everything that will run, editable: backend, host or TPU name, zone, chips,
the command one argument per line (it came from an agent's transcript: nothing runs until the
reviewer presses Run), environment overrides one KEY=VALUE per line, timeout, repeats, target venv.
The job view tails the job's log file (written by its detached runner, so it re-attaches to a
job started earlier or from the shell), in batches every 250 ms, with state, elapsed time and
progress; when the job ends it names the new attempt and its level.
"""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Checkbox, Label, Log, ProgressBar, Select, Static

from domain.costs import parse_time
from domain.jobs import progress_text
from domain.models import Attempt, Migration
from domain.text import clean, plural
from screens.data import describe_error, reading
from screens.text import text
from screens.typeahead import Input, TextArea
from screens.widgets.footer import Footer

BACKENDS = [("local (this machine; XLA:CPU devices stand in for chips)", "local"), ("ssh", "ssh"),
            ("gcloud TPU VM", "gcloud"), ("SkyPilot", "skypilot")]


class RerunLauncher(ModalScreen[int | None]):
    """Confirm and start a re-run; dismisses with the new job's id, or None."""

    WRITES_STUDY = True  # a job and its results (WorkbenchApp.push_screen)

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="rerun.cancel", tooltip="Close; nothing runs"),
        Binding("ctrl+r", "run", "Run", id="rerun.run", tooltip="Run the command exactly as shown"),
    ]

    def __init__(self, db_path: Path, migration: Migration, attempt: Attempt) -> None:
        super().__init__()
        self.db_path = db_path
        self.migration = migration
        self.attempt = attempt
        self.differ: list = []
        """The recorded variables the chosen backend would set otherwise (jobs.EnvDifference)."""
        self.launching = False
        """The pre-flight and the job's start are under way: Run is off, so one press makes one job."""

    def compose(self) -> ComposeResult:
        from workbench.rerun.jobs import environment

        a = self.attempt
        chips = a.intended_hardware.count if a.intended_hardware else self.migration.target.chips
        env, self.differ = environment(a.command.env, "local", chips)
        with Vertical() as box:
            # the title and the keys on the border: at 80x24 the lines go to the command and its environment
            box.border_title = text(f"Re-run attempt #{a.seq} of {self.migration.slug} at {a.commit[:12]}")
            box.border_subtitle = "ctrl+r runs · escape cancels"
            yield Static(text("From the agent's record: read it. Nothing runs until you press Run.", "italic"))
            with VerticalScroll(id="rerun-fields"):
                # The command first: it is what the reviewer must read, and 80x24 shows little more.
                yield Label(f"Command, one argument per line (runs in {a.command.cwd} of the checkout)")
                yield TextArea("\n".join(a.command.argv), id="rerun-argv", soft_wrap=True)
                yield Label("Environment, KEY=VALUE per line")
                yield TextArea("\n".join(f"{k}={v}" for k, v in sorted(env.items())), id="rerun-env")
                yield Static(id="rerun-env-differs")
                yield Checkbox("", id="rerun-env-defaults")
                yield Label("Backend")
                yield Select(BACKENDS, value="local", allow_blank=False, id="rerun-backend")
                yield Label("Host, TPU VM or cluster name (not for local)")
                yield Input(id="rerun-host")
                yield Label("Zone (gcloud)")
                yield Input(id="rerun-zone")
                yield Label("Chips")
                yield Input(str(chips), id="rerun-chips", type="integer")
                yield Label("Timeout in seconds (empty: none)")
                yield Input(id="rerun-timeout", type="number")
                yield Label("Repeat: runs, one after another, seed N in WORKBENCH_SEED (levels 2 and 5 count their spread)")
                yield Input("1", id="rerun-repeat", type="integer")
                yield Label("Target environment (venv folder; its bin/ goes first on PATH)")
                yield Input(os.environ.get("WORKBENCH_TARGET_VENV", ""), id="rerun-venv")
                yield Checkbox("Keep the worktree afterwards", id="rerun-keep")
            yield Static("", id="rerun-error")
            with Horizontal():
                yield Button("Run", variant="warning", id="rerun-go")
                yield Button("Cancel", id="rerun-close")

    def on_mount(self) -> None:
        from screens.typeahead import focus_now

        self.query_one("#rerun-error").display = False
        self._show_differences()
        focus_now(self.query_one("#rerun-argv", TextArea))  # typing goes to the command, as the form opens
        if not self.attempt.command.argv:
            self._offer_migration_command()

    @work(thread=True, exit_on_error=False, group="rerun-offer")
    def _offer_migration_command(self) -> None:
        """An attempt recorded without a command: the migration's is offered (what `workbench rerun`
        runs too); nothing runs until Run."""
        import shlex

        from screens.data import reading
        from storage.setup import migration_command

        with reading(self.db_path) as db:
            argv = shlex.split(migration_command(db, self.migration.id) or "")
        self.app.call_from_thread(self._offer, argv)

    def _offer(self, argv: list[str]) -> None:
        area = self.query_one("#rerun-argv", TextArea)
        if argv and not area.text.strip():
            area.text = "\n".join(argv)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "run" and self.launching)

    def _error(self, line: str) -> None:
        error = self.query_one("#rerun-error", Static)
        error.update(text(line))
        error.display = True

    def _show_differences(self) -> None:
        """Each recorded variable the backend would set otherwise, and why; the checkbox is the
        reviewer's choice to use the backend's values instead (recorded on the job)."""
        differs = self.query_one("#rerun-env-differs", Static)
        box = self.query_one("#rerun-env-defaults", Checkbox)
        differs.display = box.display = bool(self.differ)
        backend = self.query_one("#rerun-backend", Select).value
        differs.update(text("\n".join(
            f"{d.name}: recorded {d.recorded} (kept); the {backend} backend would set {d.default}: {d.why}"
            for d in self.differ)))
        box.label = text("Use the backend's values instead for: " + ", ".join(d.name for d in self.differ)
                         + " (recorded on the job)")

    @on(Select.Changed, "#rerun-backend")
    @on(Input.Changed, "#rerun-chips")
    def _target_changed(self) -> None:
        from workbench.rerun.jobs import environment

        try:
            chips = int(self.query_one("#rerun-chips", Input).value.strip() or "1")
        except ValueError:
            return
        backend = str(self.query_one("#rerun-backend", Select).value)
        _, self.differ = environment(self.attempt.command.env, backend, chips)
        self._show_differences()
        self._use_defaults(self.query_one("#rerun-env-defaults", Checkbox).value)

    @on(Checkbox.Changed, "#rerun-env-defaults")
    def _defaults_toggled(self, event: Checkbox.Changed) -> None:
        self._use_defaults(event.value)

    def _use_defaults(self, chosen: bool) -> None:
        """Set the differing variables to the backend's values, or back to the recorded ones."""
        area = self.query_one("#rerun-env", TextArea)
        values = {d.name: d.default if chosen else d.recorded for d in self.differ}
        lines = [line for line in area.text.splitlines() if line.split("=", 1)[0].strip() not in values]
        area.text = "\n".join(sorted(lines + [f"{k}={v}" for k, v in values.items()]))

    def _spec(self):
        from workbench.rerun.jobs import JobSpec, env_changes

        argv = tuple(line for line in self.query_one("#rerun-argv", TextArea).text.splitlines() if line)
        env = {}
        for line in self.query_one("#rerun-env", TextArea).text.splitlines():
            if not line.strip():
                continue
            if "=" not in line:
                raise ValueError(f"environment line without '=': {line!r}")
            key, value = line.split("=", 1)
            env[key.strip()] = value
        chips_text = self.query_one("#rerun-chips", Input).value.strip() or "1"
        timeout_text = self.query_one("#rerun-timeout", Input).value.strip()
        options = {}
        venv = self.query_one("#rerun-venv", Input).value.strip()
        if venv:
            options["venv"] = venv
        a = self.attempt
        changes = env_changes(a.command.env, env, self.differ)
        if changes:
            options["env_changes"] = changes
        return JobSpec(
            migration_id=self.migration.id, attempt_id=a.id,
            backend=str(self.query_one("#rerun-backend", Select).value), argv=argv, cwd=a.command.cwd,
            env=env, chips=int(chips_text), host=self.query_one("#rerun-host", Input).value.strip() or None,
            zone=self.query_one("#rerun-zone", Input).value.strip() or None,
            accelerator=a.intended_hardware.kind if a.intended_hardware else self.migration.target.accelerator,
            timeout_s=float(timeout_text) if timeout_text else None,
            keep_worktree=self.query_one("#rerun-keep", Checkbox).value, options=options,
        )

    @on(Button.Pressed, "#rerun-go")
    def action_run(self) -> None:
        if self.launching:
            return
        try:
            spec = self._spec()
            repeat = int(self.query_one("#rerun-repeat", Input).value.strip() or "1")
            if not 1 <= repeat <= 100:
                raise ValueError("repeat: from 1 to 100 runs")
        except ValueError as exc:
            self._error(str(exc))
            return
        self._launching(True)
        line = self.query_one("#rerun-error", Static)
        line.update(text("Checking that the target environment can start it (pre-flight)…", "italic"))
        line.display = True
        self._launch(spec, repeat)

    def _launching(self, on: bool) -> None:
        self.launching = on
        self.query_one("#rerun-go", Button).disabled = on
        self.refresh_bindings()

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerun-launch")
    def _launch(self, spec, repeat: int = 1) -> None:
        from storage.database import open_study
        from workbench import config
        from workbench.rerun import jobs

        try:
            study = open_study(self.db_path)
            try:
                job = jobs.launch(study, spec, config.reviewer(), repeat=repeat)
            finally:
                study.close()
        except Exception as exc:  # shown on the form; the form stays open with what was typed
            self.app.call_from_thread(self._failed, describe_error(exc))
            return
        self.app.call_from_thread(self.dismiss, job.id)

    def _failed(self, problem: str) -> None:
        self._launching(False)
        self._error(problem)

    @on(Button.Pressed, "#rerun-close")
    def action_cancel(self) -> None:
        self.dismiss(None)


class JobScreen(Screen[None]):
    """A job's live output, state, elapsed time and progress."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="job.back", tooltip="Back (the job keeps running)"),
        Binding("x", "cancel_job", "Cancel job", id="job.cancel", tooltip="Stop the job (press twice)"),
    ]
    help_title = "job"

    def __init__(self, db_path: Path, job_id: int) -> None:
        super().__init__()
        self.db_path = db_path
        self.job_id = job_id
        self.read_offset = 0
        self.done = False
        self.cancel_armed = 0.0
        self.step: int | None = None
        """The largest step the output showed so far."""
        self.total: tuple[int, bool] | None = None
        """(steps in all, taken from the reference run): `step N/M` as printed, else the reference's."""

    def compose(self) -> ComposeResult:
        yield Static(text(f"job {self.job_id}"), id="job-status")
        yield ProgressBar(total=None, show_eta=False, id="job-progress")
        yield Log(id="job-log", max_lines=200_000)
        yield Footer()

    def on_mount(self) -> None:
        self.poll()
        self.set_interval(0.25, self.poll)

    def poll(self) -> None:
        if not self.done:
            self._read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="job-poll")
    def _read(self) -> None:
        from domain.jobs import result_line
        from storage.jobs import job_result, reference_steps
        from workbench import config
        from workbench.blind import sight
        from workbench.rerun import jobs

        with reading(self.db_path) as db:
            job = jobs.get_job(db, self.job_id)
            if job.active and job.runner_pid is not None and not jobs.runner_alive(job):
                jobs.recover(db)
                job = jobs.get_job(db, self.job_id)
            data, offset = jobs.read_output(job, self.read_offset)
            found = None if job.active else sight(db, config.reviewer(), attempts=[job.result_attempt_id]
                                                  ).job_result(job.result_attempt_id, job_result(db, job))
            result = "" if found is None else " · " + result_line(found)
            if self.total is None:  # read once: the reference run's steps, for the estimate
                reference = reference_steps(db, job.spec.migration_id)
                self.total = (reference, True) if reference else (0, False)
        self.app.call_from_thread(self._show, job, data, offset, result)

    def _show(self, job, data: bytes, offset: int, result: str) -> None:
        from workbench.rerun import jobs

        self.read_offset = offset
        if data:
            lines = [clean(line) for line in data.decode("utf-8", errors="replace").splitlines()]
            self.query_one(Log).write_lines(lines)
            found = jobs.progress(data)
            if found:
                self.total = (found[1], False)  # the program's own total wins over the reference's
            seen = jobs.steps_seen(data)
            if seen is not None:
                self.step = max(self.step or 0, seen)
            if self.step and self.total and self.total[0]:
                bar = self.query_one(ProgressBar)
                bar.update(total=self.total[0], progress=min(self.step, self.total[0]))
        elapsed, seconds = "", 0.0
        if job.wall_seconds is not None:
            elapsed = f"{job.wall_seconds:.1f} s"
        elif (start := parse_time(job.started_at)) is not None:
            seconds = (datetime.datetime.now(datetime.UTC) - start).total_seconds()
            elapsed = f"{seconds:.0f} s"
        where = job.spec.backend + (f" {job.spec.host}" if job.spec.host else "")
        line = f"job {job.id} · {job.state.value} · {where} · {plural(job.spec.chips, 'chip')} · {elapsed}"
        if job.active and self.step:
            total, from_reference = self.total or (0, False)
            line += " · " + progress_text(self.step, total or None, seconds, total_from_reference=from_reference)
        changed = job.spec.options.get("env_changes") or []
        if changed:
            line += " · environment changed: " + ", ".join(f"{c['name']} {c['recorded']}→{c['used']}" for c in changed)
        if job.exit_code is not None:
            line += f" · exit {job.exit_code}"
        if job.error:
            line += f" · {job.error}"
        self.query_one("#job-status", Static).update(text(line + result))
        if not job.active:
            self.done = True
            bar = self.query_one(ProgressBar)
            bar.update(total=bar.total or 1, progress=bar.total or 1)  # a finished job stops animating
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A finished job has nothing left to cancel: the key leaves the footer."""
        return not (action == "cancel_job" and self.done)

    def action_cancel_job(self) -> None:
        if self.app.refuse_write():
            return
        now = time.monotonic()
        if now - self.cancel_armed > 3:
            self.cancel_armed = now
            self.app.notify("Press x again to stop the job", markup=False)
            return
        self._cancel()

    @work(thread=True, exclusive=True, exit_on_error=False, group="job-cancel")
    def _cancel(self) -> None:
        from workbench.rerun import jobs

        with reading(self.db_path) as db:
            jobs.cancel(jobs.get_job(db, self.job_id))
        self.app.call_from_thread(self.app.notify, "Stopping the job…", markup=False)


def open_launcher(screen: Screen, migration: Migration, attempt: Attempt) -> None:
    """Push the launcher; on Run, show the new job's output."""
    app = screen.app
    path = app.db_path

    def started(job_id: int | None) -> None:
        if job_id is not None:
            app.push_screen(JobScreen(path, job_id))

    app.push_screen(RerunLauncher(path, migration, attempt), started)
