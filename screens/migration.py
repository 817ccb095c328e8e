"""A migration's attempts, the reference runs pinned first, with the highlighted one in detail."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from domain.models import AttemptSource, AttemptSummary, Migration
from domain.text import clean
from screens.base import PAGE_SIZE, FilteredList, NewsToasts, Pager, Scope
from screens.data import read
from screens.effort import EffortActions
from screens.messages import AttemptsPage, FilterApplied, LoadFailed
from screens.navigation import AttemptCursor
from screens.presenters import render
from screens.widgets.detail import Detail
from screens.widgets.effort_panel import EffortBox, EffortPanel
from screens.widgets.filter_bar import FILTER_HELP, FilterBar
from screens.widgets.footer import Footer
from screens.widgets.nav_table import NavTable
from storage import queries, review
from workbench import config
from workbench.blind import sight

COLUMNS = (
    ("#", "seq"),
    ("Src", "source"),
    ("Status", "status"),
    ("L1-5", "ladder"),
    ("Failure", "failure"),
    ("Claim", "over"),
    ("Intv", "interventions"),
    ("Exp", "expected"),
    ("Commit", "commit"),
    ("Command", "command"),
)
"""`L1-5` is the ladder (✓ pass, ✗ fail, ? unknown, · no verdict); `Claim` says `over` where the
agent claimed more than was verified; `Exp` the level the agent said it expected."""

class AttemptTable(NavTable):
    """A migration's attempts; `enter` opens the highlighted one."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", id="migration.open",
                tooltip="Open the highlighted attempt: overview, diff, log, verdicts, curves"),
    ]


def _pin_key(values: tuple[Text, Text]) -> tuple[bool, int]:
    seq, source = values
    return (source.plain != render.SOURCE[AttemptSource.REFERENCE][0], int(seq.plain))


class MigrationScreen(EffortActions, FilteredList):
    """Pushed from the study screen; `escape` goes back."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="migration.back",
                tooltip="Back to the study's migrations"),
        Binding("n", "failure(1)", "Next failure", id="migration.next_failure",
                tooltip="Move to the next failed attempt"),
        Binding("p", "failure(-1)", "Prev failure", show=False, id="migration.previous_failure",
                tooltip="Move to the previous failed attempt"),
        Binding("s", "silent", "Silent", id="migration.next_silent",
                tooltip="Move to the next silent failure"),
        Binding("V", "app.verify", "Verify", id="migration.verify",
                tooltip="Verify this migration's attempts with the ladder verifier "
                        "(unchanged attempts are skipped)"),
        Binding("U", "app.rerun_unknown", "Re-run unknown L3", show=False, id="migration.rerun_unknown",
                tooltip="Re-run with the probe every attempt of this migration whose level 3 is unknown"),
        Binding("slash", "filter", "Filter", key_display="/", id="migration.filter", priority=True, tooltip=FILTER_HELP),
        Binding("R", "reference", "Reference", id="migration.reference",
                tooltip="Record this migration's reference run from its files (as `workbench reference --log`)"),
        Binding("c", "compare", "Compare", id="migration.compare",
                tooltip="Mark this attempt for comparison; on a second attempt, compare the two"),
        Binding("t", "whole_title", "Title", show=False, id="migration.title",
                tooltip="Show the migration's whole title (one line, cut, by default); again to cut it"),
        Binding("W", "watch", "Watch", show=False, id="migration.watch",
                tooltip="Follow this migration's Claude Code sessions live (its repository's sessions, as "
                        "`workbench watch`): new Bash calls become attempts, verified as results arrive; "
                        "again to stop"),
    ]
    FOOTER_FIRST = ("effort.panel_ledger", "migration.open", "migration.back", "migration.compare", "app.help", "effort.ledger",
                    "migration.filter", "migration.next_failure")
    """What fits 80 columns: this screen's own keys before the effort keys."""
    AUTO_FOCUS = "#attempts"
    """The table, not the hidden filter line."""
    help_title = "migration"
    EFFORT_CURSOR_ONLY = True

    def __init__(self, migration: Migration, *, page_size: int = PAGE_SIZE,
                 open_attempt: int | None = None) -> None:
        super().__init__(classes="migration")
        self.migration = migration
        self.pager: Pager[int] = Pager(size=page_size)
        self.summaries: dict[str, AttemptSummary] = {}
        """The loaded attempts by row key (the attempt id)."""
        self.cursor = AttemptCursor()
        """The loaded attempts in table order and the one marked with `c`: handed to the
        attempt screens this screen opens (kept current as pages load)."""
        self.open_attempt = open_attempt
        self.ladder: review.LadderCounts | None = None
        """The header's attempts per highest level, once read."""
        self.ladder_hidden = False
        """This reviewer judges one of the attempts blind: no counts in the header."""
        self.filter = review.ListFilter()
        """The `/` filter the table shows (kept while attempts are opened and closed)."""
        self.fresh: set[str] = set()
        """Rows (attempt ids) that became a silent failure or an over-claim while shown."""
        self.news = NewsToasts(self, "attempts")

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(render.migration_title(self.migration), id="migration-title")
        yield Static(render.migration_header(self.migration), id="migration-header")
        yield FilterBar(id="attempt-filter")
        yield Static(id="problem", classes="problem")
        table = AttemptTable(id="attempts", fill="command")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Detail(Text("Loading the attempts…", style="dim"), id="attempt-detail", classes="detail")
        with EffortBox():
            yield EffortPanel(self.migration.id)
        yield Footer()

    def verify_scope(self) -> Scope:
        return self.migration.slug, None, clean(self.migration.slug)

    def reference_ids(self) -> set[int]:
        return {s.attempt.id for s in self.summaries.values() if s.attempt.source is AttemptSource.REFERENCE}

    def effort_target(self) -> tuple[Migration, int | None, str]:
        """For the effort keys (screens/effort.py): this migration and the highlighted attempt."""
        table = self.query_one(AttemptTable)
        summary = None
        if table.row_count:
            summary = self.summaries.get(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value or "")
        if summary is None:
            return self.migration, None, ""
        return self.migration, summary.attempt.id, f"{self.migration.slug} #{summary.attempt.seq}"

    def action_watch(self) -> None:
        if not self.app.refuse_write():  # following sessions imports them
            self.app.live.toggle(self.migration)

    def show_watch(self) -> None:
        """The subtitle says whether this migration's sessions are being watched (screens/live.py)."""
        from screens.live import watch_line

        self.sub_title = watch_line(self.app.live.get(self.migration.id))

    def action_whole_title(self) -> None:
        self.query_one("#migration-title").toggle_class("-whole").refresh(layout=True)

    def on_mount(self) -> None:
        self.show_watch()
        self.query_one("#migration-title").tooltip = render.migration_title(self.migration)
        self.query_one("#problem").display = False
        self.pager.loading = True
        self.load_page(self.app.db_path, None)
        self.load_ladder(self.app.db_path)
        # the detail follows the cursor in the same refresh as the table (not a message later)
        self.watch(self.query_one(AttemptTable), "cursor_coordinate", lambda at: self._show_detail(at.row), init=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="migration-ladder")
    def load_ladder(self, path: Path) -> None:
        """The header's attempts per highest level (read again when records change); none while
        this reviewer judges one of them blind: they would tell its verdicts."""
        migration_id, reviewer = self.migration.id, config.reviewer()

        def counts_seen(db) -> review.LadderCounts | None:
            if not sight(db, reviewer, migrations=True).sees_migration(migration_id):
                return None
            return review.ladder_counts(db, migration_id)

        read_both = read(path, lambda db: (counts_seen(db), queries.migration_by_id(db, migration_id)))
        if isinstance(read_both, LoadFailed):
            self.post_message(read_both)
        else:
            self.app.call_from_thread(self._show_ladder, *read_both)

    def _show_ladder(self, counts: review.LadderCounts | None, fresh: Migration | None = None) -> None:
        if fresh is not None and fresh != self.migration:  # `migration edit` elsewhere: target, goal, title
            self.migration = fresh
            self.query_one("#migration-title", Static).update(render.migration_title(fresh))
            self.query_one("#migration-title").tooltip = render.migration_title(fresh)
        self.ladder = counts
        self.ladder_hidden = counts is None
        self._show_header()

    def _show_header(self) -> None:
        out = render.migration_header(self.migration, self.ladder)
        if self.ladder_hidden:
            out.append("\nverdict counts hidden while you judge blind", style="dim italic")
        if self.filter:
            out.append("\n")
            out.append_text(render.filter_line(self.filter.describe(), len(self.summaries),
                                               self.pager.complete))
        self.query_one("#migration-header", Static).update(out)

    @work(thread=True, exclusive=True, exit_on_error=False, group="attempts")
    def load_page(self, path: Path, after: int | None) -> None:
        migration_id, size, wanted = self.migration.id, self.pager.size, self.filter
        rows = read(path, lambda db: self._page(db, migration_id, wanted, after, size))
        if isinstance(rows, LoadFailed):
            self.post_message(rows)
        elif wanted == self.filter:  # else the filter changed while this page was read
            self.post_message(AttemptsPage(self.migration.id, after, rows, len(rows) < self.pager.size))

    @staticmethod
    def _page(db, migration_id: int, wanted: review.ListFilter, after: int | None,
              size: int) -> list[AttemptSummary]:
        """A page as this reviewer may see it (workbench.blind.as_seen_by). A filter leaves out
        the attempts they judge blind: whether one matched would tell its claim or verdicts."""
        from workbench.blind import as_seen_by

        reviewer = config.reviewer()
        if wanted:
            return review.filtered_attempts(db, migration_id, wanted, after=after, limit=size, blind_to=reviewer)
        return as_seen_by(db, reviewer, queries.attempt_summaries(db, migration_id, after=after, limit=size))

    def action_reference(self) -> None:
        from screens.setup import ReferenceForm

        self.app.push_screen(ReferenceForm(self.migration.slug), self._reference_added)

    def _reference_added(self, new_id: int | None) -> None:
        """The new reference run is pinned first: the attempts are read again from the start."""
        if new_id is None:
            return
        self.query_one(AttemptTable).clear()
        self.summaries.clear()
        self._sync_cursor()
        self.pager = Pager(size=self.pager.size, loading=True)
        self.load_page(self.app.db_path, None)
        self.load_ladder(self.app.db_path)

    @on(FilterApplied, "#attempt-filter")
    def _filter_applied(self, message: FilterApplied) -> None:
        if self.restart_filtered(message, self.query_one(AttemptTable)):
            self._sync_cursor()
            self._show_header()
            self.load_page(self.app.db_path, None)

    def on_attempts_page(self, message: AttemptsPage) -> None:
        if message.migration_id != self.migration.id or message.after != self.pager.after:
            return
        table = self.query_one(AttemptTable)
        late_reference = False
        with self.app.batch_update():
            for summary in message.rows:
                key = str(summary.attempt.id)
                if key in self.summaries:
                    continue
                if summary.attempt.source is AttemptSource.REFERENCE and table.row_count:
                    late_reference = True
                self.summaries[key] = summary
                table.add_row(*render.attempt_row(summary), key=key)
            if late_reference or (message.after is None and self._reference_not_first()):
                table.sort("seq", "source", key=_pin_key)
        self._sync_cursor()
        if message.rows:
            self.pager.after = message.rows[-1].attempt.seq
        self.pager.complete = message.complete
        self.pager.loading = False
        if self.filter:
            self._show_header()
        if message.after is None:
            if table.row_count:
                self._show_detail(table.cursor_row)
            else:
                self.query_one("#attempt-detail", Detail).show(
                    Text("No attempt meets the filter (/ then escape clears it)." if self.filter
                         else "No attempts recorded for this migration.", style="dim")
                )
        self._maybe_load_more(table)
        if self.open_attempt is not None:
            self._open_pending(table)

    # --- records changed (another reviewer, a form, a verify run): rows read again ------------
    def study_changed(self) -> None:
        """Called by the effort poller when the database changed: the loaded attempts are read
        again and their rows updated in place, new attempts added (the cursor stays where it is)."""
        self.load_ladder(self.app.db_path)
        if not self.pager.loading and (self.pager.complete or self.pager.after is not None):
            self.reload_rows(self.app.db_path, None if self.pager.complete else self.pager.after)

    def effort_saved(self, what: str) -> None:
        super().effort_saved(what)
        self.study_changed()

    @work(thread=True, exclusive=True, exit_on_error=False, group="attempts-refresh")
    def reload_rows(self, path: Path, last: int | None) -> None:
        """Every attempt up to seq `last` (all of them when the list is complete)."""
        migration_id, wanted = self.migration.id, self.filter

        def gather(db):
            rows = []
            after = None
            while True:
                page = self._page(db, migration_id, wanted, after, 500)
                rows += page
                if len(page) < 500 or (last is not None and page[-1].attempt.seq >= last):
                    return rows
                after = page[-1].attempt.seq

        rows = read(path, gather)
        if not isinstance(rows, LoadFailed) and wanted == self.filter:
            self.app.call_from_thread(self._refreshed, rows, last is None)

    def _refreshed(self, rows: list[AttemptSummary], complete: bool) -> None:
        table = self.query_one(AttemptTable)
        keys = [key for _, key in COLUMNS]
        added = False
        said: list[tuple[str, str]] = []
        with self.app.batch_update():
            for summary in rows:
                key = str(summary.attempt.id)
                old = self.summaries.get(key)
                if old is None and not complete or summary == old:
                    continue
                self.summaries[key] = summary
                news = render.news_of(old, summary)
                if news:
                    self.fresh.add(key)
                    said.append((f"{self.migration.slug} #{summary.attempt.seq}", news))
                cells = self._cells(summary)
                if old is None:
                    table.add_row(*cells, key=key)
                    added = True
                else:
                    for column, cell in zip(keys, cells):
                        table.update_cell(key, column, cell)
            if added:
                self._keep_cursor(table, lambda: table.sort("seq", "source", key=_pin_key))
        self.news.add(said)
        self._sync_cursor()
        self._show_detail(table.cursor_row)

    def _cells(self, summary: AttemptSummary) -> tuple[Text, ...]:
        """The row's cells; one marked since it newly became a silent failure or an over-claim."""
        cells = render.attempt_row(summary)
        if str(summary.attempt.id) in self.fresh:
            cells[0].stylize(render.FRESH)
        return cells

    @staticmethod
    def _keep_cursor(table: DataTable, change) -> None:
        """`change` the table with the cursor on the same row (by key) after it."""
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key if table.row_count else None
        change()
        if key is not None:
            table.move_cursor(row=table.get_row_index(key), animate=False)

    def _open_pending(self, table: DataTable) -> None:
        key = str(self.open_attempt)
        if key in self.summaries:
            self.open_attempt = None
            table.move_cursor(row=table.get_row_index(key))
            self.open(self.summaries[key])
        elif not self.pager.complete and not self.pager.loading and self.pager.after is not None:
            self.pager.loading = True
            self.load_page(self.app.db_path, self.pager.after)
        elif self.pager.complete:
            pending, self.open_attempt = self.open_attempt, None
            self.open_run(self.app.db_path, pending)  # a re-run: listed under its attempt, not as a row

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
        detail = self.query_one("#attempt-detail", Detail)
        if not 0 <= row < table.row_count:
            return
        key = table.coordinate_to_cell_key((row, 0)).row_key.value
        summary = self.summaries.get(key or "")
        if summary is not None:
            out = render.attempt_detail(summary)
            if self.marked is not None:
                marked = self.summaries.get(str(self.marked))
                if marked is not None:
                    out.append(f"\nmarked for comparison: #{marked.attempt.seq} (c on another compares)",
                               style="bold")
            detail.show(out)

    # --- order, neighbours and failures, for this screen and the attempt screen --------------------
    def ordered(self) -> list[AttemptSummary]:
        """The loaded attempts in table order (reference runs first)."""
        table = self.query_one(AttemptTable)
        return [self.summaries[row.key.value] for row in table.ordered_rows
                if row.key.value in self.summaries]

    def follow(self, attempt_id: int) -> AttemptSummary | None:
        """Move the cursor to that attempt (so `escape` comes back to it; pages load)."""
        summary = self.summaries.get(str(attempt_id))
        if summary is not None:
            table = self.query_one(AttemptTable)
            table.move_cursor(row=table.get_row_index(str(attempt_id)))
        return summary

    @property
    def marked(self) -> int | None:
        """The attempt marked with `c` for a comparison."""
        return self.cursor.marked

    @marked.setter
    def marked(self, attempt_id: int | None) -> None:
        self.cursor.marked = attempt_id

    def _sync_cursor(self) -> None:
        self.cursor.rows = self.ordered()

    def current(self) -> AttemptSummary | None:
        table = self.query_one(AttemptTable)
        if not table.row_count:
            return None
        return self.summaries.get(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value or "")

    def open(self, summary: AttemptSummary) -> None:
        from screens.attempt import AttemptScreen

        self.app.push_screen(AttemptScreen(self.migration, summary, self.cursor))

    @work(thread=True, exclusive=True, exit_on_error=False, group="open-run")
    def open_run(self, path: Path, attempt_id: int | None) -> None:
        """An attempt of this migration that is not a row of the list (a re-run, a run of the
        attempt it re-ran) opened from elsewhere (the palette): its own screen."""
        from workbench.blind import as_seen_by

        reviewer = config.reviewer()
        found = read(path, lambda db: as_seen_by(db, reviewer, [s for s in [queries.attempt_summary(db, attempt_id)]
                                                                if s and s.attempt.migration_id == self.migration.id]))
        if isinstance(found, LoadFailed):
            self.post_message(found)
        elif found:
            self.app.call_from_thread(self.open, found[0])
        else:
            self.app.call_from_thread(self.app.notify, "That attempt is not in this migration", severity="warning",
                                      markup=False)

    def action_failure(self, step: int) -> None:
        self._to_failure(step, silent=False, nothing="No more failures that way")

    def action_silent(self) -> None:
        self._to_failure(1, silent=True, nothing="No silent failure below this one")

    def _to_failure(self, step: int, *, silent: bool, nothing: str) -> None:
        summary = self.current()
        if summary is None:
            return
        found = self.cursor.failure(summary.attempt.id, step, silent=silent)
        if found is None:
            self.app.notify(nothing, markup=False)
        else:
            self.follow(found.attempt.id)

    def action_compare(self) -> None:
        summary = self.current()
        if summary is None:
            return
        if self.marked is None or self.marked == summary.attempt.id:
            self.marked = None if self.marked == summary.attempt.id else summary.attempt.id
            self._show_detail(self.query_one(AttemptTable).cursor_row)
            if self.marked is not None:
                self.app.notify(f"Marked #{summary.attempt.seq}: press c on another attempt to compare",
                                markup=False)
            return
        other = self.summaries.get(str(self.marked))
        self.marked = None
        self._show_detail(self.query_one(AttemptTable).cursor_row)
        if other is not None:
            from screens.compare import CompareScreen

            self.app.push_screen(CompareScreen(self.migration, other, summary, self.cursor.reference()))

    @on(DataTable.RowSelected, "#attempts")
    def _selected(self, event: DataTable.RowSelected) -> None:
        summary = self.summaries.get(event.row_key.value or "")
        if summary is not None:
            self.open(summary)

    @on(DataTable.RowHighlighted, "#attempts")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._maybe_load_more(event.data_table)
