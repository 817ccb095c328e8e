"""The keys that record human effort, as a screen mixin: `i` intervention, `a` accept, `x` stop,
`C` continue, `B` budgets, `o` override a verdict, `L` the ledger of them all. A screen that
shows a migration subclasses `EffortActions` and says which migration and attempt are in view
(`effort_target`).

The panel is screens/widgets/effort_panel.py, its text screens/presenters/effort.py; review time
and the poll for other reviewers' writes are screens/review_time.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work
from textual.binding import Binding
from textual.screen import Screen

from domain import effort
from domain.models import DecisionKind, Migration
from screens.data import read
from screens.forms import BudgetForm, DecisionForm, InterventionForm, OverrideForm
from screens.messages import LoadFailed
from screens.widgets.effort_panel import EffortPanel
from storage import queries, review, watches
from workbench import config
from workbench.blind import sight


def _form_data(db, migration_id: int) -> dict[str, Any]:
    """The intervention form's choices. While the reviewer judges one of the migration's attempts
    blind, earlier interventions (their notes) are not offered for correction."""
    attempts = [(a.id, a.label) for a in review.attempt_choices(db, migration_id)]
    hidden = not sight(db, config.reviewer(), migrations=True).sees_migration(migration_id)
    return {
        "kinds": effort.intervention_kinds(queries.study_intervention_kinds(db)),
        "attempts": attempts,
        "history": [] if hidden else queries.interventions(db, migration_id),
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
        Binding("L", "ledger", "Ledger", id="effort.ledger",
                tooltip="The ledger: every intervention, decision, override and budget change of "
                        "this migration, newest first, each note whole (/ filters)"),
    ]

    EFFORT_CURSOR_ONLY = False
    """True where `effort_target`'s attempt is only the highlighted row of a list: while a watch of
    the migration is live, `i` then starts on no attempt, so the record concerns the latest one."""

    def effort_target(self) -> tuple[Migration, int | None, str]:
        """The migration in view, the attempt in view (None: none) and a label for it."""
        return self.migration, None, ""  # type: ignore[attr-defined]

    def decision_target(self) -> tuple[Migration, int | None, str]:
        """What `a`/`x`/`C` decide on: the attempt in view, unless it is a reference run (the
        yardstick: the decision then concerns the latest attempt)."""
        migration, attempt_id, label = self.effort_target()
        if attempt_id is not None and attempt_id in self.reference_ids():
            return migration, None, ""
        return migration, attempt_id, label

    def reference_ids(self) -> set[int]:
        """The reference runs among the attempts this screen shows."""
        return set()

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

    def action_ledger(self) -> None:
        migration, _, _ = self.effort_target()
        self.app.open_ledger(migration)

    def action_intervene(self) -> None:
        migration, attempt_id, _ = self.effort_target()
        self._open_intervention(self.app.db_path, migration, attempt_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-form")
    def _open_intervention(self, path: Path, migration: Migration, attempt_id: int | None) -> None:
        data = read(path, lambda db: (_form_data(db, migration.id), bool(watches.live_watches(db, migration.id))))
        if isinstance(data, LoadFailed):
            self.app.call_from_thread(self.app.notify, data.problem, severity="error", markup=False)
            return
        fields, watched = data
        if watched and self.EFFORT_CURSOR_ONLY:
            # the highlighted row is where the cursor was left, not a choice: the latest attempt when saved
            attempt_id = None
            self.app.call_from_thread(
                self.app.notify, "A watch is live: left on 'the migration as a whole', the intervention concerns"
                " the latest attempt when it is saved", markup=False)
        form = InterventionForm(migration.id, attempt_id=attempt_id, migration_title=migration.title, **fields)
        self.app.call_from_thread(self.app.push_screen, form, self._after("intervention"))

    def action_decide(self, kind: str) -> None:
        migration, attempt_id, label = self.decision_target()  # the attempt on screen is the run decided on
        self.app.push_screen(DecisionForm(migration.id, DecisionKind(kind), migration_title=migration.title,
                                          attempt_id=attempt_id, attempt_label=label),
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
        from workbench.blind import sight

        reviewer = config.reviewer()
        data = read(path, lambda db: (not sight(db, reviewer, attempts=[attempt_id]).sees_attempt(attempt_id),
                                      queries.verdicts(db, attempt_id)))
        if isinstance(data, LoadFailed):
            self.app.call_from_thread(self.app.notify, data.problem, severity="error", markup=False)
            return
        hidden, verdicts = data
        if hidden:
            self.app.call_from_thread(self.app.notify, "Its verdicts are hidden while you judge it blind: "
                                      "record your judgement first (J on the attempt screen)", markup=False)
            return
        if not verdicts:
            self.app.call_from_thread(self.app.notify, "This attempt has no verdicts yet: verify it first",
                                      markup=False)
            return
        self.app.call_from_thread(self.app.push_screen, OverrideForm(verdicts, level=level, attempt_label=label),
                                  self._after("override"))
