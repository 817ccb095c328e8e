"""The standing effort panel of a migration (or of one attempt): read in a worker, drawn by
`screens.presenters.effort.render_panel`, in a box that scrolls (`EffortBox`) and opens the
ledger screen (screens/ledger.py) with `enter` or a click."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from screens.data import read
from screens.messages import LoadFailed
from screens.presenters.effort import PanelData, render_panel
from screens.presenters.palette import tone
from storage import queries
from workbench import config
from workbench.blind import sight


class EffortPanel(Static):
    """Budgets, the suggestion, the latest decision and the interventions of a migration (or of
    one attempt); `reload()` reads them again in a worker."""

    DEFAULT_CSS = """
    EffortPanel { height: auto; padding: 0 1; }
    """

    def __init__(self, migration_id: int, *, attempt_id: int | None = None, id: str | None = "effort-panel") -> None:
        super().__init__(Text("Reading the budgets…", style="dim"), id=id)
        self.migration_id = migration_id
        self.attempt_id = attempt_id
        self.data: PanelData | None = None

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self._load(self.app.db_path, self.migration_id, self.attempt_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="effort-panel")
    def _load(self, path: Path, migration_id: int, attempt_id: int | None) -> None:
        reviewer = config.reviewer()

        def gather(db) -> PanelData:
            found = (queries.attempt_interventions(db, attempt_id) if attempt_id is not None
                     else queries.interventions(db, migration_id))
            made = queries.decisions(db, migration_id)
            seen = sight(db, reviewer, migrations=True)
            return PanelData(seen.standing(migration_id, queries.migration_standing(db, migration_id)), found,
                             queries.corrected_ids(db, migration_id), made[-1] if made else None,
                             queries.review_seconds_by_reviewer(db, migration_id),
                             not seen.sees_migration(migration_id))

        result = read(path, gather)
        if isinstance(result, LoadFailed):
            self.app.call_from_thread(self.update, Text(result.problem, style=tone("bold $text-error")))
            return
        self.app.call_from_thread(self._show, result)

    def _show(self, data: PanelData) -> None:
        self.data = data
        self.update(render_panel(data, self.attempt_id))


class EffortBox(VerticalScroll):
    """The effort panel at most 10 lines high (4 on a short screen, app.tcss), scrolling the rest;
    `enter` or a click opens the ledger."""

    DEFAULT_CSS = """
    EffortBox { height: auto; max-height: 10; border-top: solid $primary-muted; }
    EffortBox:focus { border-top: solid $primary; }
    """

    BINDINGS = [
        Binding("enter", "screen.ledger", "Ledger", id="effort.panel_ledger",
                tooltip="Open the ledger: every intervention, decision, override and budget change"),
    ]

    def on_click(self) -> None:
        self.run_action("screen.ledger")
