"""Forms for human records: an intervention, a decision, a verdict override, budgets, a judgement.

Each is a `ModalScreen[int | None]` that saves itself in a thread worker and dismisses with the
new record's id only once the database has it; until then (bad input, a locked or missing
database) it says what is wrong on its `#form-error` line and keeps everything typed.
`ctrl+s` saves, `escape` cancels.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static
from textual.worker import Worker, WorkerState

from domain import effort
from domain.effort import Intervention
from domain.errors import WorkbenchError
from domain.judgements import check_cause, missing_cause
from domain.models import LADDER, Budgets, DecisionKind, FailureCause, Outcome
from domain.text import clean
from domain.verdicts import Verdict
from screens.data import describe_error, reading
from screens.presenters.effort import standing_text
from screens.text import text
from screens.typeahead import Input
from storage import queries, records
from storage.sqlite import Database
from workbench import config
from workbench.blind import sight

Save = Callable[[Database], int]
"""What a form writes: run on the study in a worker thread; ValueError means bad input."""


class RecordForm(ModalScreen[int | None]):
    """A form that saves one record. Subclasses compose their fields and build the write."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="form.save", tooltip="Save this record"),
        Binding("escape", "cancel", "Cancel", id="form.cancel",
                tooltip="Close without saving (nothing is written)"),
    ]

    form_title = "Record"
    record_name = "record"
    WRITES_STUDY = True
    """The app refuses to open it on a read-only study (WorkbenchApp.push_screen)."""

    def __init__(self) -> None:
        super().__init__(classes="record-form")
        self.saved_id: int | None = None
        """The new record's id once the database has it."""
        self.saving = False

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.form_title
            box.border_subtitle = "ctrl+s saves · escape cancels"
            with VerticalScroll():
                yield from self.compose_fields()
                yield Static(id="form-error")
                with Horizontal(classes="form-buttons"):
                    yield Button("Save", variant="primary", id="form-save")
                    yield Button("Cancel", id="form-cancel")

    def compose_fields(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query_one("#form-error").display = False

    def build(self) -> Save:
        """Check what was typed (ValueError says what is wrong) and return the write."""
        raise NotImplementedError

    def show_error(self, problem: str) -> None:
        """Say what is wrong under the fields, scrolled into view (at 80x24 the fields fill the box)."""
        error = self.query_one("#form-error", Static)
        error.update(Text(clean(problem)))
        error.display = True
        self.call_after_refresh(error.scroll_visible, animate=False)

    def action_save(self) -> None:
        if self.saving:
            return
        try:
            save = self.build()
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.saving = True
        self.query_one("#form-save", Button).disabled = True
        self._save(save)

    def action_cancel(self) -> None:
        if not self.saving:
            self.dismiss(None)

    @on(Button.Pressed, "#form-save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#form-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @work(thread=True, exclusive=True, exit_on_error=False, group="form-save")
    def _save(self, save: Save) -> None:
        try:
            with reading(self.app.db_path) as db:
                new_id = save(db)
        except ValueError as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        except (WorkbenchError, sqlite3.Error) as exc:
            self.app.call_from_thread(self._failed, f"not saved: {describe_error(exc)}")
            return
        self.app.call_from_thread(self._saved, new_id)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self._failed(f"not saved: {describe_error(event.worker.error)}")

    def _failed(self, problem: str) -> None:
        self.saving = False
        self.query_one("#form-save", Button).disabled = False
        self.show_error(problem)

    def _saved(self, new_id: int) -> None:
        self.saved_id = new_id
        self.saving = False
        self.app.notify(f"Saved {self.record_name} #{new_id}", markup=False)
        self.dismiss(new_id)


def _select_value(select: Select) -> Any:
    value = select.value
    return None if value is Select.NULL else value


def _minutes_label(minutes: float) -> str:
    return f"{minutes:g} min"


class InterventionForm(RecordForm):
    """Kind, minutes, a note, the attempt it concerns, and optionally the record it corrects."""

    form_title = "Record an intervention"
    record_name = "intervention"

    def __init__(
        self,
        migration_id: int,
        *,
        kinds: dict[str, str],
        attempts: list[tuple[int, str]],
        attempt_id: int | None = None,
        history: list[Intervention] = (),  # type: ignore[assignment]
        corrected: dict[int, int] | None = None,
        migration_title: str = "",
    ) -> None:
        super().__init__()
        self.migration_id = migration_id
        self.kinds = kinds
        self.attempts = attempts
        self.attempt_id = attempt_id
        self.history = [i for i in history if i.id not in (corrected or {})]
        """Records that can still be corrected: those nothing corrects yet."""
        self.migration_title = migration_title

    def compose_fields(self) -> ComposeResult:
        if self.migration_title:
            yield Static(text(self.migration_title, "bold"), classes="form-info")
        yield Label("Kind")
        yield Select([(Text(f"{name} – {clean(about)}" if about else name), name)
                      for name, about in self.kinds.items()],
                     prompt="Choose a kind", id="intervention-kind")
        yield Label("Minutes spent (15, 7.5 or 1:30)")
        yield Input(placeholder="minutes", id="intervention-minutes")
        yield Label("Note")
        yield Input(placeholder="what was done and why", id="intervention-note")
        yield Label("Attempt it concerns")
        yield Select([(Text(clean(label)), attempt_id) for attempt_id, label in self.attempts],
                     prompt="the migration as a whole", value=self.attempt_id or Select.NULL,
                     id="intervention-attempt")
        if self.history:
            yield Label("Corrects (leave empty for a new record; the original stays in history)")
            yield Select([(Text(clean(f"#{i.id} {i.kind} {_minutes_label(i.minutes)} by {i.reviewer}: "
                                      f"{i.note[:40]}")), i.id) for i in reversed(self.history)],
                         prompt="nothing: a new intervention", id="intervention-corrects")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#intervention-kind", Select).focus()

    @on(Select.Changed, "#intervention-corrects")
    def _correcting(self, event: Select.Changed) -> None:
        """Start a correction from the original's values; the reviewer changes what was wrong."""
        original = next((i for i in self.history if i.id == event.value), None)
        if original is None:
            return
        if original.kind in self.kinds:
            self.query_one("#intervention-kind", Select).value = original.kind
        minutes = self.query_one("#intervention-minutes", Input)
        if not minutes.value:
            minutes.value = f"{original.minutes:g}"
        note = self.query_one("#intervention-note", Input)
        if not note.value:
            note.value = original.note
        if original.attempt_id is not None:
            self.query_one("#intervention-attempt", Select).value = original.attempt_id

    def build(self) -> Save:
        kind = _select_value(self.query_one("#intervention-kind", Select))
        if kind is None:
            raise ValueError(f"kind: choose one of {', '.join(self.kinds)}")
        effort.check_kind(kind, self.kinds)
        minutes = effort.parse_minutes(self.query_one("#intervention-minutes", Input).value)
        note = self.query_one("#intervention-note", Input).value
        attempt_id = _select_value(self.query_one("#intervention-attempt", Select))
        corrects = None
        if self.history:
            corrects = _select_value(self.query_one("#intervention-corrects", Select))
        reviewer, migration_id = config.reviewer(), self.migration_id
        return lambda db: records.record_intervention(
            db, migration_id=migration_id, kind=kind, minutes=minutes, note=note, reviewer=reviewer,
            attempt_id=attempt_id, corrects=corrects,
        )


DECISION_WORDS = {DecisionKind.ACCEPT: "Accept", DecisionKind.STOP: "Stop", DecisionKind.CONTINUE: "Continue"}


def decision_reason_problem(standing: effort.Standing, kind: DecisionKind) -> str:
    """Why a decision with no reason is refused, naming the suggestion only to whom may see it."""
    if standing.hidden:
        return "reason: required while you judge one of this migration's attempts blind"
    return f"reason: the rules suggest {standing.suggestion.value}; say why you {kind.value} instead"


class DecisionForm(RecordForm):
    """Accept, stop or continue, with a reason; the figures at this moment are stored with it."""

    record_name = "decision"

    def __init__(self, migration_id: int, kind: DecisionKind, *, migration_title: str = "",
                 attempt_id: int | None = None, attempt_label: str = "") -> None:
        super().__init__()
        self.migration_id = migration_id
        self.kind = kind
        self.migration_title = migration_title
        self.attempt_id = attempt_id
        """The run decided on: the attempt on screen (None: the latest when saved)."""
        self.attempt_label = attempt_label
        self.standing: effort.Standing | None = None
        self.form_title = f"{DECISION_WORDS[kind]} this migration"

    def compose_fields(self) -> ComposeResult:
        if self.migration_title:
            yield Static(text(self.migration_title, "bold"), classes="form-info")
        if self.attempt_id is not None:
            yield Static(text(f"On attempt {self.attempt_label}"), id="decision-attempt", classes="form-info")
        yield Static(Text("Reading the figures…", style="dim"), id="decision-standing", classes="form-info")
        yield Label("Decision")
        yield Select([(DECISION_WORDS[k], k.value) for k in DecisionKind], value=self.kind.value,
                     allow_blank=False, id="decision-kind")
        yield Label("Reason (required when it goes against the suggestion)", id="decision-reason-label")
        yield Input(placeholder="why", id="decision-reason")

    def on_mount(self) -> None:
        super().on_mount()
        # The reason is where typing goes: Tab does not leave it for a button (a space typed there
        # pressed Save, with the reason cut short or empty) or the kind (chosen by the key that
        # opened the form; the mouse still changes it).
        for widget in (self.query_one("#decision-kind", Select), *self.query(Button), *self.query(VerticalScroll)):
            widget.can_focus = False
        self.query_one("#decision-reason", Input).focus()
        self._load(self.migration_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="form-load")
    def _load(self, migration_id: int) -> None:
        try:
            with reading(self.app.db_path) as db:
                seen = sight(db, config.reviewer(), migrations=True)
                current = seen.standing(migration_id, queries.migration_standing(db, migration_id))
        except (WorkbenchError, sqlite3.Error) as exc:
            self.app.call_from_thread(self.show_error, describe_error(exc))
            return
        self.app.call_from_thread(self._loaded, current)

    def _loaded(self, current: effort.Standing) -> None:
        self.standing = current
        self.query_one("#decision-standing", Static).update(standing_text(current))
        if current.hidden:  # the suggestion is not shown, so a reason is always asked
            self.query_one("#decision-reason-label", Label).update("Reason (required while you judge blind)")

    def build(self) -> Save:
        if self.standing is None:
            raise ValueError("the figures are still loading; save again in a moment")
        kind = DecisionKind(self.query_one("#decision-kind", Select).value)
        reason = self.query_one("#decision-reason", Input).value
        if self.standing.needs_reason(kind) and not reason.strip():
            raise ValueError(decision_reason_problem(self.standing, kind))
        reviewer, migration_id = config.reviewer(), self.migration_id
        expected = None if self.standing.hidden else self.standing.suggestion
        attempt_id = self.attempt_id
        return lambda db: records.record_decision(
            db, migration_id=migration_id, kind=kind, reason=reason, reviewer=reviewer, expected=expected,
            attempt_id=attempt_id,
        )


class OverrideForm(RecordForm):
    """Override one level's outcome with a justification; the automated verdict stays beside it."""

    form_title = "Override a verdict"
    record_name = "verdict override"

    def __init__(self, verdicts: list[Verdict], *, level: int | None = None, attempt_label: str = "") -> None:
        super().__init__()
        self.verdicts = {v.level: v for v in verdicts}
        not_passed = [n for n, v in sorted(self.verdicts.items()) if v.effective is not Outcome.PASS]
        self.level = level if level in self.verdicts else next(iter(not_passed or sorted(self.verdicts)), None)
        """The level the form opens on: the one asked for, else the first not passed (what a
        reviewer overrides), else the first."""
        self.attempt_label = attempt_label

    def compose_fields(self) -> ComposeResult:
        if self.attempt_label:
            yield Static(text(self.attempt_label, "bold"), classes="form-info")
        if not self.verdicts:
            yield Static("This attempt has no verdicts yet: verify it first.", classes="form-info")
            return
        yield Label("Level")
        yield Select([(f"L{n} {LADDER.get(n, '')}", n) for n in sorted(self.verdicts)],
                     value=self.level, allow_blank=False, id="override-level")
        yield Static(id="override-verdict", classes="form-info")
        yield Label("Outcome")
        yield Select([(o.value, o.value) for o in Outcome], prompt="Choose the outcome", id="override-outcome")
        yield Label("Justification (required)")
        yield Input(placeholder="why the verifier is wrong here", id="override-justification")

    def on_mount(self) -> None:
        super().on_mount()
        if self.verdicts:
            self._show_verdict(self.level)
            self.query_one("#override-outcome", Select).focus()

    @on(Select.Changed, "#override-level")
    def _level_changed(self, event: Select.Changed) -> None:
        self._show_verdict(event.value)

    def _show_verdict(self, level: Any) -> None:
        verdict = self.verdicts.get(level)
        if verdict is None:
            return
        out = Text()
        out.append("verifier: ", style="dim")
        out.append(verdict.outcome.value, style="bold")
        out.append(" – ")
        out.append_text(text(verdict.reason or "no reason given"))
        for o in verdict.overrides:
            out.append(f"\noverridden to {o.outcome.value} by ", style="dim")
            out.append_text(text(f"{o.reviewer}: {o.justification}", "dim"))
        self.query_one("#override-verdict", Static).update(out)

    def build(self) -> Save:
        if not self.verdicts:
            raise ValueError("nothing to override: this attempt has no verdicts yet")
        verdict = self.verdicts[self.query_one("#override-level", Select).value]
        outcome = _select_value(self.query_one("#override-outcome", Select))
        if outcome is None:
            raise ValueError("outcome: choose pass, fail or unknown")
        justification = self.query_one("#override-justification", Input).value
        if not justification.strip():
            raise ValueError("justification: say why the verifier's outcome is wrong")
        reviewer = config.reviewer()
        return lambda db: records.add_verdict_override(
            db, verdict_id=verdict.id, outcome=Outcome(outcome), justification=justification.strip(),
            reviewer=reviewer,
        )


class JudgementForm(RecordForm):
    """A reviewer's own word on an attempt, level by level: pass, fail or unknown, a cause where
    a level fails, a note (docs/judgements.md). It shows nothing of the verifier or the claim, so
    it can be given blind; the attempt screen reveals them once it is saved."""

    form_title = "Judge this attempt"
    record_name = "judgement"
    BINDINGS = [
        Binding("p", "mark('pass')", "Pass", id="judge.pass", tooltip="The focused level passes; on to the next"),
        Binding("f", "mark('fail')", "Fail", id="judge.fail", tooltip="The focused level fails; on to the next"),
        Binding("u", "mark('unknown')", "Unknown", id="judge.unknown",
                tooltip="The focused level is unknown from the evidence; on to the next"),
    ]
    CHOICES = (("pass", "pass"), ("fail", "fail"), ("unknown", "unknown"))
    """Named as the CLI, the help's legend and the verdicts name them (`unknown`, not "can't tell")."""

    def __init__(self, slug: str, seq: int, *, attempt_label: str = "", started: float) -> None:
        super().__init__()
        self.slug, self.seq = slug, seq
        self.attempt_label = attempt_label
        self.started = started
        """`time.monotonic()` when the reviewer opened the attempt: the judgement's active time."""
        self.asked: list[Outcome] | None = None
        """The levels for which a missing cause was asked about: saving them again records them."""

    def compose_fields(self) -> ComposeResult:
        if self.attempt_label:
            yield Static(text(self.attempt_label, "bold"), classes="form-info")
        yield Label("p, f or u sets a level (pass, fail, unknown) and moves on")
        for level, name in LADDER.items():  # one line each, so all five and the note fit 80x24
            with Horizontal(classes="judge-level"):
                yield Static(f"L{level} {name}", classes="judge-level-name")
                yield Select(self.CHOICES, prompt="–", id=f"judge-level{level}", compact=True)
        yield Label("Cause, where a level fails (docs/failure-taxonomy.md)")
        yield Select([(c.value.replace("_", " "), c.value) for c in FailureCause], prompt="none",
                     id="judge-cause", compact=True)
        yield Label("Note")
        yield Input(placeholder="what the evidence shows", id="judge-note")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#judge-level1", Select).focus()

    def action_mark(self, outcome: str) -> None:
        """One key per level, as a reviewer moves down the ladder (not enter, a letter, enter, tab)."""
        focused = self.focused
        if not isinstance(focused, Select) or not (focused.id or "").startswith("judge-level") or focused.expanded:
            raise SkipAction()
        focused.value = outcome
        self.focus_next()

    def build(self) -> Save:
        import time

        from workbench.judging import record_judgement

        levels = []
        for level in LADDER:
            value = _select_value(self.query_one(f"#judge-level{level}", Select))
            if value is None:
                raise ValueError(f"L{level}: choose pass, fail or unknown")
            levels.append(Outcome(value))
        cause = _select_value(self.query_one("#judge-cause", Select))
        check_cause(levels, cause)
        missing = missing_cause(levels, cause)
        if missing and self.asked != levels:  # asked once; saved as it is on the second ctrl+s
            self.asked = levels
            self.query_one("#judge-cause", Select).focus()
            raise ValueError(f"{missing}: choose one, or save again to record it without")
        note = self.query_one("#judge-note", Input).value.strip() or None
        slug, seq, reviewer = self.slug, self.seq, config.reviewer()
        seconds = max(0.0, time.monotonic() - self.started)
        return lambda db: record_judgement(db, slug, seq, levels=",".join(o.value for o in levels), cause=cause,
                                           note=note, reviewer=reviewer, active_seconds=seconds)[0]


class BudgetForm(RecordForm):
    """Edit the budgets and the acceptance level: a new record, the latest one wins."""

    form_title = "Budgets and acceptance"
    record_name = "budget change"

    FIELDS = (
        ("compute_dollars", "Compute budget ($)", False),
        ("staff_hours", "Staff hours", False),
        ("attempts", "Agent attempts", True),
        ("calendar_days", "Calendar days", False),
    )

    def __init__(self, migration_id: int, budgets: Budgets, acceptance_level: int) -> None:
        super().__init__()
        self.migration_id = migration_id
        self.budgets = budgets
        self.acceptance_level = acceptance_level

    def compose_fields(self) -> ComposeResult:
        yield Static(Text("Leave a budget empty for no limit.", style="dim"), classes="form-info")
        for name, label, _ in self.FIELDS:
            value = getattr(self.budgets, name)
            yield Label(label)
            yield Input("" if value is None else f"{value:g}", id=f"budget-{name.replace('_', '-')}")
        yield Label("Acceptance: the ladder level required")
        yield Select([(f"L{n} {LADDER[n]}", n) for n in LADDER], value=self.acceptance_level,
                     allow_blank=False, id="budget-level")
        yield Label("Reason")
        yield Input(placeholder="why the budgets change", id="budget-reason")

    def build(self) -> Save:
        values = {
            name: effort.parse_budget(self.query_one(f"#budget-{name.replace('_', '-')}", Input).value,
                                      label.lower(), integer=integer)
            for name, label, integer in self.FIELDS
        }
        level = effort.check_acceptance_level(self.query_one("#budget-level", Select).value)
        if Budgets(**values) == self.budgets and level == self.acceptance_level:
            raise ValueError("nothing changed: edit a budget or the acceptance level, or press escape")
        reason = self.query_one("#budget-reason", Input).value
        reviewer, migration_id = config.reviewer(), self.migration_id
        return lambda db: records.add_budget_change(
            db, migration_id=migration_id, acceptance_level=level, reason=reason, reviewer=reviewer, **values,
        )
