"""The ledger: every intervention, decision, verdict override and budget change of a migration
(or of the whole study), newest first, each with its note whole; `/` filters by text, kind,
reviewer and attempt. Pages come from SQL (storage/ledger.py); other processes' records show
as they commit (the app's ChangeWatcher calls `study_changed`)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Header, OptionList, Static
from textual.widgets.option_list import Option

from domain.models import AttemptSummary, Migration
from screens.base import PAGE_SIZE, FilteredList, Pager
from screens.data import read
from screens.messages import FilterApplied, LoadFailed
from screens.navigation import AttemptCursor, attempt_in_migration
from screens.presenters import render
from screens.presenters.effort import ledger_counts_line, ledger_entry
from screens.text import text
from screens.widgets.filter_bar import FilterBar
from screens.widgets.footer import Footer
from storage import ledger
from storage.review import ListFilter
from workbench import config
from workbench.blind import sight


def option_id(entry: ledger.LedgerEntry) -> str:
    """The entry's option id in the list (`intervention:31`)."""
    return f"{entry.kind}:{entry.id}"


class LedgerList(OptionList):
    """The entries, several lines each; vim keys as on the tables."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="ledger.down", tooltip="The next (older) record"),
        Binding("k", "cursor_up", "Up", show=False, id="ledger.up", tooltip="The previous (newer) record"),
        Binding("g", "first", "Top", show=False, id="ledger.top", tooltip="The newest record"),
        Binding("G", "last", "Bottom", show=False, id="ledger.bottom",
                tooltip="The oldest record loaded (loads the next page when there is one)"),
        Binding("enter", "select", "Open attempt", id="ledger.open",
                tooltip="Open the attempt the highlighted record concerns"),
    ]


class LedgerScreen(FilteredList):
    """Pushed with `L` from the study (migration None), migration and attempt screens."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="ledger.back", tooltip="Back to the previous screen"),
        Binding("slash", "filter", "Filter", key_display="/", id="ledger.filter", priority=True, tooltip=ledger.LEDGER_HELP),
    ]
    FOOTER_FIRST = ("ledger.back", "ledger.open", "ledger.filter", "app.help")
    AUTO_FOCUS = "#ledger"
    help_title = "ledger"

    def __init__(self, migration: Migration | None, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__(classes="ledger")
        self.migration = migration
        """The migration whose records these are (None: the whole study's)."""
        self.pager: Pager[ledger.Key] = Pager(size=page_size)
        self.summaries: dict[str, ledger.LedgerEntry] = {}
        """The loaded entries by option id, newest first."""
        self.filter = ListFilter()
        self.left_out = False
        """Records of migrations this reviewer judges blind are left out (storage.ledger._blind)."""
        self.counts: dict[str, int] | None = None
        self.stale = False
        """Records changed while a page was being read: the list is read again after it."""

    @property
    def migration_id(self) -> int | None:
        return None if self.migration is None else self.migration.id

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="ledger-header")
        yield FilterBar(id="ledger-filter", placeholder="filter: words, kind: reviewer: attempt:",
                        help=ledger.LEDGER_HELP)
        yield Static(id="problem", classes="problem")
        yield LedgerList(id="ledger")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self._show_header()
        self.pager.loading = True
        self.load_page(self.app.db_path, None)
        self.load_counts(self.app.db_path)

    def _show_header(self) -> None:
        out = Text("Ledger ", style="bold")
        if self.migration is None:
            out.append("of the study: every migration")
        else:
            out.append_text(text(self.migration.slug, "bold"))
            out.append("  ")
            out.append_text(text(self.migration.title))
        if self.counts is not None:
            out.append("\n")
            out.append_text(ledger_counts_line(self.counts))
        if self.left_out:
            out.append("\nrecords of migrations you judge blind are left out until you have judged them",
                       style="dim italic")
        if self.filter:
            out.append("\n")
            out.append_text(render.filter_line(self.filter.describe(), len(self.summaries), self.pager.complete))
        self.query_one("#ledger-header", Static).update(out)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ledger-counts")
    def load_counts(self, path: Path) -> None:
        migration_id = self.migration_id
        reviewer = config.reviewer()

        def counted(db) -> tuple[dict[str, int], bool]:
            seen = sight(db, reviewer, migrations=True)
            return (ledger.ledger_counts(db, migration_id, reviewer),
                    bool(seen.hidden_migrations) if migration_id is None else not seen.sees_migration(migration_id))

        result = read(path, counted)
        if isinstance(result, LoadFailed):
            self.post_message(result)
        else:
            self.app.call_from_thread(self._counted, *result)

    def _counted(self, counts: dict[str, int], left_out: bool) -> None:
        self.counts, self.left_out = counts, left_out
        self._show_header()

    @work(thread=True, exclusive=True, exit_on_error=False, group="ledger")
    def load_page(self, path: Path, before: ledger.Key | None) -> None:
        migration_id, wanted, size = self.migration_id, self.filter, self.pager.size
        reviewer = config.reviewer()
        rows = read(path, lambda db: ledger.ledger_page(db, migration_id, wanted, before=before, limit=size,
                                                        blind_to=reviewer))
        if isinstance(rows, LoadFailed):
            self.post_message(rows)
        else:
            self.app.call_from_thread(self._page_loaded, before, wanted, rows)

    def _page_loaded(self, before: ledger.Key | None, wanted: ListFilter,
                     rows: list[ledger.LedgerEntry]) -> None:
        if wanted != self.filter or before != self.pager.after:
            return  # the filter changed, or a refresh replaced the list, while this page was read
        entries = self.query_one(LedgerList)
        if before is None:
            entries.clear_options()
        entries.add_options(self._option(e) for e in rows if option_id(e) not in self.summaries)
        self.summaries.update((option_id(e), e) for e in rows)
        if rows:
            self.pager.after = rows[-1].key
        self.pager.complete = len(rows) < self.pager.size
        self.pager.loading = False
        if not self.summaries:
            entries.add_option(Option(Text("No record meets the filter (/ then escape clears it)." if self.filter
                                           else "No interventions, decisions, overrides or budget changes yet.",
                                           style="dim"), disabled=True))
        elif entries.highlighted is None:
            entries.highlighted = 0
        self._show_header()
        if self.stale:
            self.study_changed()
        else:
            self._maybe_load_more(entries)

    def _option(self, entry: ledger.LedgerEntry) -> Option:
        return Option(ledger_entry(entry, with_slug=self.migration is None), id=option_id(entry))

    def _maybe_load_more(self, entries: LedgerList) -> None:
        if self.pager.after is not None and self.pager.wants_more(entries.highlighted or 0, entries.option_count):
            self.pager.loading = True
            self.load_page(self.app.db_path, self.pager.after)

    @on(OptionList.OptionHighlighted, "#ledger")
    def _highlighted(self) -> None:
        self._maybe_load_more(self.query_one(LedgerList))

    @on(OptionList.OptionSelected, "#ledger")
    def _open_attempt(self, message: OptionList.OptionSelected) -> None:
        entry = self.summaries.get(message.option.id or "")
        if entry is None or entry.attempt_id is None:
            self.notify("This record concerns the whole migration, not one attempt.", severity="warning")
            return
        self.load_attempt(self.app.db_path, entry.attempt_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ledger-open")
    def load_attempt(self, path: Path, attempt_id: int) -> None:
        """The attempt on top of the ledger (as the queue opens its attempts), so `escape` comes
        back here with the cursor where it was; `[`/`]` there step through its migration."""
        reviewer = config.reviewer()
        found = read(path, lambda db: attempt_in_migration(db, reviewer, attempt_id))
        if isinstance(found, LoadFailed):
            self.post_message(found)
        elif found is None:
            self.app.call_from_thread(self.app.notify, "That attempt is no longer in the study",
                                      severity="warning", markup=False)
        else:
            self.app.call_from_thread(self._show_attempt, *found)

    def _show_attempt(self, migration: Migration, summary: AttemptSummary, cursor: AttemptCursor) -> None:
        from screens.attempt import AttemptScreen

        if self.app.screen is self:  # not when the reviewer left the ledger while it was read
            self.app.push_screen(AttemptScreen(migration, summary, cursor))

    # --- the filter ---------------------------------------------------------------------------------
    @on(FilterApplied, "#ledger-filter")
    def _filter_applied(self, message: FilterApplied) -> None:
        if self.restart_filtered(message, self.query_one(LedgerList), ledger.parse_ledger_filter):
            self._show_header()
            self.load_page(self.app.db_path, None)

    # --- records changed (this app's forms, another reviewer, a script) ---------------------------------
    def study_changed(self) -> None:
        """Called by the app's ChangeWatcher: the loaded entries are read again (down to the oldest
        shown), so new records appear at the top and corrections strike their originals."""
        self.load_counts(self.app.db_path)
        if self.pager.loading:
            self.stale = True  # read again once the page being read is shown
        else:
            self.stale = False
            self.reload_entries(self.app.db_path, None if self.pager.complete else self.pager.after)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ledger-refresh")
    def reload_entries(self, path: Path, down_to: ledger.Key | None) -> None:
        migration_id, wanted = self.migration_id, self.filter
        reviewer = config.reviewer()
        rows = read(path, lambda db: ledger.ledger_page(db, migration_id, wanted, down_to=down_to, limit=None,
                                                        blind_to=reviewer))
        if not isinstance(rows, LoadFailed):
            self.app.call_from_thread(self._refreshed, wanted, rows)

    def _refreshed(self, wanted: ListFilter, rows: list[ledger.LedgerEntry]) -> None:
        if wanted != self.filter:
            return  # a new filter's first page is on its way
        if self.pager.loading:
            self.stale = True  # a page started after this read: read again once it is shown
            return
        if rows == list(self.summaries.values()):
            return
        entries = self.query_one(LedgerList)
        at = entries.highlighted
        current = entries.get_option_at_index(at).id if at is not None and entries.option_count else None
        entries.clear_options()
        self.summaries = {option_id(e): e for e in rows}
        entries.add_options(self._option(e) for e in rows)
        if current in self.summaries:
            entries.highlighted = list(self.summaries).index(current)
        elif rows:
            entries.highlighted = 0
        self._show_header()
