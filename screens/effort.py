"""Human effort in the app: the standing panel, the keys that record effort, review time and
other reviewers' writes.

- `EffortPanel` shows where a migration stands against its budgets, what the rules suggest, the
  latest decision and the interventions (of the migration, or of one attempt).
- `EffortActions` is a screen mixin: `i` intervention, `a` accept, `x` stop, `C` continue,
  `B` budgets, `o` override a verdict. A screen that shows a migration subclasses it and
  says which migration and attempt are in view (`effort_target`).
- `ReviewTracker` turns the reviewer's input into review sessions per migration.
- `ChangeWatcher` polls SQLite's data version, so another reviewer's records show within
  seconds.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from domain import effort
from domain.models import DecisionKind, Intervention, Migration
from domain.text import clean
from screens.data import read
from screens.forms import BudgetForm, DecisionForm, InterventionForm, OverrideForm
from screens.messages import LoadFailed
from screens.text import text
from storage import queries, records, review
from storage.review import ChangeWatcher
from workbench import config


@dataclass(frozen=True)
class PanelData:
    standing: effort.Standing
    interventions: list[Intervention]
    corrected: dict[int, int]
    decision: Any
    review: dict[str, float]


class EffortPanel(Static):
    """Budgets, the suggestion, the latest decision and the interventions of a migration (or of
    one attempt); `reload()` reads them again in a worker."""

    DEFAULT_CSS = """
    EffortPanel { height: auto; max-height: 10; border-top: solid $primary-muted; padding: 0 1; }
    """

    def __init__(self, migration_id: int, *, attempt_id: int | None = None, id: str | None = "effort-panel") -> None:
        super().__init__(Text("Reading the budgets…", style="dim"), id=id)
        self.migration_id = migration_id
        self.attempt_id = attempt_id
        self.data: PanelData | None = None

    def on_mount(self) -> None:
        self.reload()

    def show_attempt(self, attempt_id: int | None) -> None:
        if attempt_id != self.attempt_id:
            self.attempt_id = attempt_id
            self.reload()

    def reload(self) -> None:
        self._load(self.app.db_path, self.migration_id, self.attempt_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-panel")
    def _load(self, path: Path, migration_id: int, attempt_id: int | None) -> None:
        def gather(db) -> PanelData:
            found = (queries.attempt_interventions(db, attempt_id) if attempt_id is not None
                     else queries.interventions(db, migration_id))
            made = queries.decisions(db, migration_id)
            return PanelData(queries.migration_standing(db, migration_id), found,
                             queries.corrected_ids(db, migration_id), made[-1] if made else None,
                             queries.review_seconds_by_reviewer(db, migration_id))

        result = read(path, gather)
        if isinstance(result, LoadFailed):
            self.app.call_from_thread(self.update, Text(result.problem, style="bold red"))
            return
        self.app.call_from_thread(self._show, result)

    def _show(self, data: PanelData) -> None:
        self.data = data
        self.update(render_panel(data, self.attempt_id))


def render_panel(data: PanelData, attempt_id: int | None) -> Text:
    s = data.standing
    out = Text()
    out.append("Budget ", style="bold")
    parts = []
    for lim in s.limits:
        style = "bold red" if lim.exhausted else ("yellow" if lim.near else "")
        parts.append(Text(effort.describe_limit(lim), style=style))
    out.append_text(Text(" · ").join(parts))
    out.append(f" · staff cost ${s.staff_dollars:,.2f}")
    if s.unpriced_runs:
        out.append(f" · {s.unpriced_runs} run(s) unpriced", style="dim")
    out.append("\n")
    best = "none verified" if s.highest_level is None else f"L{s.highest_level}"
    out.append(f"Level {best}, L{s.acceptance_level} required · status {s.status} · suggests ")
    out.append(s.suggestion.value.upper(),
               style={DecisionKind.ACCEPT: "bold green", DecisionKind.STOP: "bold red"}.get(s.suggestion, "bold"))
    out.append(f" ({'; '.join(s.reasons)})\n", style="dim")
    if data.decision is not None:
        d = data.decision
        out.append("Decision ", style="bold")
        out.append(f"{d.kind.value} by ")
        out.append_text(text(d.reviewer))
        out.append(f" {d.at[:16]}")
        if d.suggested is not None and d.suggested is not d.kind:
            out.append(f" (against {d.suggested.value})", style="yellow")
        if d.reason:
            out.append(": ")
            out.append_text(text(d.reason))
        out.append("\n")
    if data.review:
        out.append("Review ", style="bold")
        out.append_text(Text(", ").join(text(f"{name} {sec / 60:.0f} min") for name, sec in data.review.items()))
        out.append("\n")
    scope = "this attempt" if attempt_id is not None else "this migration"
    current = [i for i in data.interventions if i.id not in data.corrected]
    out.append(f"Interventions on {scope}: {len(current)}", style="bold")
    if current:
        out.append(f", {sum(i.minutes for i in current):g} min")
    for i in reversed(data.interventions[-3:]):
        out.append("\n")
        line = f"  #{i.id} {i.kind} {i.minutes:g} min by {i.reviewer} {i.at[:16]}"
        if i.corrects is not None:
            line += f" (corrects #{i.corrects})"
        if i.id in data.corrected:
            out.append_text(text(line + f" (corrected by #{data.corrected[i.id]})", "dim strike"))
        else:
            out.append_text(text(line))
        if i.note:
            out.append(": ")
            out.append_text(text(i.note[:80]))
    return out


def _form_data(db, migration_id: int) -> dict[str, Any]:
    attempts = [(a.id, a.label) for a in review.attempt_choices(db, migration_id)]
    return {
        "kinds": effort.intervention_kinds(queries.study_intervention_kinds(db)),
        "attempts": attempts,
        "history": queries.interventions(db, migration_id),
        "corrected": queries.corrected_ids(db, migration_id),
    }


class EffortActions(Screen):
    """Mixin for a screen that shows a migration: the keys that record human effort."""

    BINDINGS = [
        Binding("i", "intervene", "Intervene", id="effort.intervene",
                tooltip="Record an intervention (kind, minutes, note) on this migration or attempt"),
        Binding("a", "decide('accept')", "Accept", id="effort.accept",
                tooltip="Record a decision to accept the migration (asks for a reason; shows the figures)"),
        Binding("x", "decide('stop')", "Stop", id="effort.stop",
                tooltip="Record a decision to stop the migration (asks for a reason; shows the figures)"),
        Binding("C", "decide('continue')", "Continue", show=False, id="effort.continue",
                tooltip="Record a decision to continue the migration"),
        Binding("B", "budgets", "Budgets", show=False, id="effort.budgets",
                tooltip="Edit the migration's budgets and acceptance level"),
        Binding("o", "override", "Override", show=False, id="effort.override",
                tooltip="Override a verdict of this attempt with a justification"),
    ]

    def effort_target(self) -> tuple[Migration, int | None, str]:
        """The migration in view, the attempt in view (None: none) and a label for it."""
        return self.migration, None, ""  # type: ignore[attr-defined]

    def effort_level(self) -> int | None:
        """The ladder level in view (the highlighted verdict), for `o`."""
        return None

    def effort_saved(self, what: str) -> None:
        """After a save: the panels read again; a screen may also reload its own rows."""
        for panel in self.query(EffortPanel):
            panel.reload()

    def _after(self, what: str):
        def done(new_id: int | None) -> None:
            if new_id is not None:
                self.effort_saved(what)
        return done

    def action_intervene(self) -> None:
        migration, attempt_id, _ = self.effort_target()
        self._open_intervention(self.app.db_path, migration, attempt_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-form")
    def _open_intervention(self, path: Path, migration: Migration, attempt_id: int | None) -> None:
        data = read(path, lambda db: _form_data(db, migration.id))
        if isinstance(data, LoadFailed):
            self.app.call_from_thread(self.app.notify, data.problem, severity="error", markup=False)
            return
        form = InterventionForm(migration.id, attempt_id=attempt_id, migration_title=migration.title, **data)
        self.app.call_from_thread(self.app.push_screen, form, self._after("intervention"))

    def action_decide(self, kind: str) -> None:
        migration, _, _ = self.effort_target()
        self.app.push_screen(DecisionForm(migration.id, DecisionKind(kind), migration_title=migration.title),
                             self._after("decision"))

    def action_budgets(self) -> None:
        migration, _, _ = self.effort_target()
        self._open_budgets(self.app.db_path, migration)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-form")
    def _open_budgets(self, path: Path, migration: Migration) -> None:
        def current(db):
            fresh = queries.migration_by_id(db, migration.id) or migration
            return queries.effective_budgets(db, fresh)

        data = read(path, current)
        if isinstance(data, LoadFailed):
            self.app.call_from_thread(self.app.notify, data.problem, severity="error", markup=False)
            return
        budgets, level = data
        self.app.call_from_thread(self.app.push_screen, BudgetForm(migration.id, budgets, level),
                                  self._after("budgets"))

    def action_override(self) -> None:
        _, attempt_id, label = self.effort_target()
        if attempt_id is None:
            self.app.notify("Highlight an attempt to override one of its verdicts", markup=False)
            return
        self._open_override(self.app.db_path, attempt_id, self.effort_level(), label)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-form")
    def _open_override(self, path: Path, attempt_id: int, level: int | None, label: str) -> None:
        verdicts = read(path, lambda db: queries.verdicts(db, attempt_id))
        if isinstance(verdicts, LoadFailed):
            self.app.call_from_thread(self.app.notify, verdicts.problem, severity="error", markup=False)
            return
        if not verdicts:
            self.app.call_from_thread(self.app.notify, "This attempt has no verdicts yet: verify it first",
                                      markup=False)
            return
        self.app.call_from_thread(self.app.push_screen, OverrideForm(verdicts, level=level, attempt_label=label),
                                  self._after("override"))


# --------------------------------------------------------------------------- review time


class ReviewTracker:
    """Counts active review time per migration for this app's reviewer (docs/effort.md)."""

    def __init__(self, path: Path, reviewer: str | None = None, *, idle_gap: float = effort.IDLE_GAP_SECONDS,
                 segment: float = effort.SEGMENT_SECONDS, clock=time.monotonic) -> None:
        self.path = path
        self.reviewer = reviewer or config.reviewer()
        self.sessions = effort.Sessionizer(idle_gap=idle_gap, segment=segment)
        self.clock = clock
        self._lock = threading.Lock()

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

        with reading(self.path) as db:
            for piece in pieces:
                records.add_review_session(
                    db, reviewer=self.reviewer, migration_id=piece.migration_id, started_at=piece.started_at,
                    ended_at=piece.ended_at, active_seconds=piece.active_seconds,
                )


def describe_pieces(pieces: list[effort.ReviewPiece]) -> str:
    return clean(", ".join(f"{p.active_seconds:.0f}s on #{p.migration_id}" for p in pieces))


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

    def __init__(self, app, *, idle_gap: float = effort.IDLE_GAP_SECONDS) -> None:
        self.app = app
        self.review = ReviewTracker(app.db_path, idle_gap=idle_gap)
        self.watcher = ChangeWatcher(app.db_path)
        self.inputs = _input_events()
        self.stopped = False

    def start(self) -> None:
        try:
            self.watcher.changed()  # the baseline, before any screen reads: later commits all show
        except sqlite3.Error:
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
        if pieces:
            self.app.run_worker(lambda: self.review.save(pieces), thread=True, exit_on_error=False,
                                group="review-save")

    def _watch(self) -> None:
        def check() -> None:
            try:
                changed = self.watcher.changed()
            except sqlite3.Error:
                return
            if changed and not self.stopped:
                self.app.call_from_thread(self.study_changed)

        self.app.run_worker(check, thread=True, exclusive=True, exit_on_error=False, group="effort-watch")

    def study_changed(self) -> None:
        for screen in self.app.screen_stack:
            for panel in screen.query(EffortPanel):
                panel.reload()
            hook = getattr(screen, "study_changed", None)
            if callable(hook):
                hook()
