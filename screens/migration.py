"""A migration's attempts, the reference runs pinned first, with the highlighted one in detail."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from screens import render
from screens.base import PAGE_SIZE, Pager, WorkbenchScreen
from screens.data import read
from screens.messages import AttemptsPage, LoadFailed
from screens.widgets import NavTable
from storage import queries
from workbench.models import AttemptSource, AttemptSummary, Migration

COLUMNS = (
    ("#", "seq"),
    ("Src", "source"),
    ("Status", "status"),
    ("L1-5", "ladder"),
    ("Failure", "failure"),
    ("Exp", "expected"),
    ("Commit", "commit"),
    ("Command", "command"),
)
"""`L1-5` is the ladder (✓ pass, ✗ fail, ? unknown, · no verdict); `Exp` the level the agent
said it expected."""

FIXED_WIDTH = 62
"""Roughly what the columns before `Command` take, so the command fits the screen."""


class AttemptTable(NavTable):
    """A migration's attempts."""


def _pin_key(values: tuple[Text, Text]) -> tuple[bool, int]:
    seq, source = values
    return (source.plain != render.SOURCE[AttemptSource.REFERENCE][0], int(seq.plain))


class MigrationScreen(WorkbenchScreen):
    """Pushed from the study screen; `escape` goes back."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="migration.back",
                tooltip="Back to the study's migrations"),
    ]

    def __init__(self, migration: Migration, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__(classes="migration")
        self.migration = migration
        self.pager: Pager[int] = Pager(size=page_size)
        self.summaries: dict[str, AttemptSummary] = {}
        """The loaded attempts by row key (the attempt id)."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(render.migration_header(self.migration), id="migration-header")
        yield Static(id="problem", classes="problem")
        table = AttemptTable(id="attempts")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static(Text("Loading the attempts…", style="dim"), id="attempt-detail",
                     classes="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self.pager.loading = True
        self.load_page(self.app.db_path, None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="attempts")
    def load_page(self, path: Path, after: int | None) -> None:
        migration_id, size = self.migration.id, self.pager.size
        rows = read(
            path, lambda db: queries.attempt_summaries(db, migration_id, after=after, limit=size)
        )
        if isinstance(rows, LoadFailed):
            self.post_message(rows)
            return
        self.post_message(
            AttemptsPage(self.migration.id, after, rows, len(rows) < self.pager.size)
        )

    def on_attempts_page(self, message: AttemptsPage) -> None:
        if message.migration_id != self.migration.id or message.after != self.pager.after:
            return
        table = self.query_one(AttemptTable)
        width = max(12, self.app.size.width - FIXED_WIDTH)
        late_reference = False
        with self.app.batch_update():
            for summary in message.rows:
                key = str(summary.attempt.id)
                if key in self.summaries:
                    continue
                if summary.attempt.source is AttemptSource.REFERENCE and table.row_count:
                    late_reference = True
                self.summaries[key] = summary
                table.add_row(*render.attempt_row(summary, command_width=width), key=key)
            if late_reference or (message.after is None and self._reference_not_first()):
                table.sort("seq", "source", key=_pin_key)
        if message.rows:
            self.pager.after = message.rows[-1].attempt.seq
        self.pager.complete = message.complete
        self.pager.loading = False
        if message.after is None:
            if table.row_count:
                self._show_detail(table.cursor_row)
            else:
                self.query_one("#attempt-detail", Static).update(
                    Text("No attempts recorded for this migration.", style="dim")
                )
        self._maybe_load_more(table)

    def _reference_not_first(self) -> bool:
        sources = [s.attempt.source for s in self.summaries.values()]
        refs = [i for i, src in enumerate(sources) if src is AttemptSource.REFERENCE]
        return bool(refs) and refs != list(range(len(refs)))

    def _maybe_load_more(self, table: DataTable) -> None:
        if self.pager.after is not None and self.pager.wants_more(table.cursor_row, table.row_count):
            self.pager.loading = True
            self.load_page(self.app.db_path, self.pager.after)

    def _show_detail(self, row: int) -> None:
        table = self.query_one(AttemptTable)
        detail = self.query_one("#attempt-detail", Static)
        if not 0 <= row < table.row_count:
            return
        key = table.coordinate_to_cell_key((row, 0)).row_key.value
        summary = self.summaries.get(key or "")
        if summary is not None:
            detail.update(render.attempt_detail(summary))

    @on(DataTable.RowHighlighted, "#attempts")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)
        self._maybe_load_more(event.data_table)
