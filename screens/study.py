"""The base screen: the study's migrations, a keyset page at a time."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from domain.models import MigrationSummary
from domain.text import clean, plural
from screens.base import PAGE_SIZE, FilteredList, NewsToasts, Pager, Scope
from screens.data import after_first_page, read_plain
from screens.messages import FilterApplied, LoadFailed, MigrationsPage, StudyLoaded
from screens.presenters import render
from screens.widgets.detail import Detail
from screens.widgets.filter_bar import FILTER_HELP, FilterBar
from screens.widgets.footer import Footer
from screens.widgets.nav_table import NavTable
from storage import queries, review
from workbench import config

COLUMNS = (
    ("Migration", "slug"),
    ("Status", "status"),
    ("Target", "target"),
    ("Att", "attempts"),
    ("Fail", "failed"),
    ("Silent", "silent"),
    ("Intv", "interventions"),
    ("Best", "level"),
    ("Cost", "cost"),
)
"""Header and key per column; `Best` is the highest ladder level any attempt verified."""


class MigrationTable(NavTable):
    """The study's migrations; `enter` opens the highlighted one."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", id="study.open",
                tooltip="Open the highlighted migration's attempts"),
    ]


class StudyScreen(FilteredList):
    """Lists the migrations; the app's base screen, so `q` quits here and only here."""

    BINDINGS = [
        Binding("q", "app.quit", "Quit", id="study.quit", tooltip="Quit workbench"),
        Binding("V", "app.verify", "Verify", id="study.verify",
                tooltip="Verify every attempt of the study with the ladder verifier "
                        "(unchanged attempts are skipped)"),
        Binding("U", "app.rerun_unknown", "Re-run unknown L3", show=False, id="study.rerun_unknown",
                tooltip="Re-run with the probe every attempt of the study whose level 3 is unknown"),
        Binding("slash", "filter", "Filter", key_display="/", id="study.filter", priority=True, tooltip=FILTER_HELP),
        Binding("N", "new_migration", "New", id="study.new_migration",
                tooltip="Add a migration (as `workbench migration add`): repository, target, goal"),
        Binding("plus", "new_migration", "New migration", show=False, key_display="+",
                id="study.new_migration_plus", tooltip="Add a migration (as `workbench migration add`)"),
        Binding("e", "export", "Export", id="study.export",
                tooltip="Export a counted report (Markdown, HTML, CSV, JSON, LaTeX)"),
        Binding("L", "ledger", "Ledger", id="study.ledger",
                tooltip="The ledger: every intervention, decision, override and budget change of "
                        "the study, newest first, each note whole (/ filters)"),
        Binding("Q", "queue", "My queue", id="study.queue",
                tooltip="The attempts dealt to you (workbench assign), with counts of done and left; "
                        "enter opens one, [ and ] step through the queue"),
        Binding("A", "agreement", "Agreement", id="study.agreement",
                tooltip="Reviewer agreement per level (kappa, alpha, with the verifier) and the "
                        "disagreements to adjudicate"),
    ]
    FOOTER_FIRST = ("study.open", "study.filter", "study.verify", "study.ledger", "study.queue", "study.new_migration",
                    "study.quit", "study.export", "study.agreement", "app.help")
    AUTO_FOCUS = "#migrations"
    """The table, not the hidden filter line."""
    help_title = "study"

    def verify_scope(self) -> Scope:
        return None, None, "the whole study"

    def action_ledger(self) -> None:
        from screens.ledger import LedgerScreen

        self.app.push_screen(LedgerScreen(None, page_size=self.app.page_size))

    def action_queue(self) -> None:
        self.app.open_queue()

    def action_agreement(self) -> None:
        self.app.open_agreement()

    def action_export(self) -> None:
        from screens.export import ExportScreen

        self.app.push_screen(ExportScreen(self.app.db_path))

    def __init__(self, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__(id="study")
        self.pager: Pager[str] = Pager(size=page_size)
        self.summaries: dict[str, MigrationSummary] = {}
        """The loaded migrations by slug, in table order."""
        self.total: int | None = None
        self.totals: dict[str, int] | None = None
        self.filter = review.ListFilter()
        """The `/` filter the table shows (applied in SQL, so paging still works)."""
        self.fresh: set[str] = set()
        """Rows (slugs) whose silent failures or over-claims went up while shown."""
        self.news = NewsToasts(self, "migrations")
        self.ladder: review.LadderCounts | None = None
        """Attempts per highest level; set by the worker just before it posts the totals."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("Loading the study…", style="dim"), id="study-counts")
        yield FilterBar(id="study-filter")
        yield Static(id="problem", classes="problem")
        table = MigrationTable(id="migrations")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Detail(id="migration-detail", classes="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self.pager.loading = True
        self.load_study(self.app.db_path)
        # the detail follows the cursor in the same refresh as the table (not a message later)
        self.watch(self.query_one(MigrationTable), "cursor_coordinate", lambda at: self._show_detail(at.row),
                   init=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="study")
    def load_study(self, path: Path) -> None:
        """The study record, its totals and the first page of migrations."""
        size, wanted = self.pager.size, self.filter
        result = read_plain(path, lambda db: (
            queries.get_study(db),
            queries.count_migrations(db),
            self._page(db, wanted, None, size),
        ))
        if isinstance(result, LoadFailed):
            self.post_message(result)
            return
        study, total, rows = result
        # The table first; the study's totals (a pass over every attempt) follow once it is painted.
        self.post_message(StudyLoaded(study, total, None))
        self.post_message(MigrationsPage(None, rows, len(rows) < self.pager.size))
        after_first_page(self.app)
        counted = read_plain(path, self._counts)
        if isinstance(counted, LoadFailed):
            self.post_message(counted)
            return
        self.ladder = counted[1]
        self.post_message(StudyLoaded(study, total, counted[0]))

    @work(thread=True, exclusive=True, exit_on_error=False, group="migrations")
    def load_page(self, path: Path, after: str | None) -> None:
        size, wanted = self.pager.size, self.filter
        rows = read_plain(path, lambda db: self._page(db, wanted, after, size))
        if isinstance(rows, LoadFailed):
            self.post_message(rows)
        elif wanted == self.filter:  # else the filter changed while this page was read
            self.post_message(MigrationsPage(after, rows, len(rows) < self.pager.size))

    @staticmethod
    def _page(db, wanted: review.ListFilter, after: str | None, size: int) -> list[MigrationSummary]:
        """A page as this reviewer may see it: no verdict counts of a migration holding an
        attempt they judge blind (workbench.blind.migrations_seen_by)."""
        from workbench.blind import migrations_seen_by

        reviewer = config.reviewer()
        if wanted:
            rows = review.filtered_migrations(db, wanted, after=after, limit=size, blind_to=reviewer)
        else:
            rows = queries.migration_summaries(db, after=after, limit=size)
        return migrations_seen_by(db, reviewer, rows)

    @staticmethod
    def _counts(db) -> tuple[dict[str, int], review.LadderCounts | None]:
        """The study's totals and ladder counts; neither (no totals, `{}`) while this reviewer
        judges any attempt blind: they would tell its verdicts (domain.blind.Sight.sees_scope)."""
        from workbench.blind import sight

        if not sight(db, config.reviewer(), scope=True).sees_scope:
            return {}, None
        return queries.study_totals(db), review.ladder_counts(db)

    def action_new_migration(self) -> None:
        from screens.setup import NewMigrationForm

        self.app.push_screen(NewMigrationForm(), self._migration_added)

    def _migration_added(self, new_id: int | None) -> None:
        """A migration was added: the study is read again from the start (the empty-study
        panel gives way to the table)."""
        if new_id is None:
            return
        self.query_one(MigrationTable).clear()
        self.summaries.clear()
        self.pager = Pager(size=self.pager.size, loading=True)
        self.load_study(self.app.db_path)

    @on(FilterApplied, "#study-filter")
    def _filter_applied(self, message: FilterApplied) -> None:
        if self.restart_filtered(message, self.query_one(MigrationTable)):
            self._show_counts()
            self.load_page(self.app.db_path, None)

    def on_study_loaded(self, message: StudyLoaded) -> None:
        self.total = message.migrations
        self.totals = message.totals
        if message.study is not None:
            self.app.title = clean(message.study.title)
        self._show_counts()

    def on_migrations_page(self, message: MigrationsPage) -> None:
        if message.after != self.pager.after:
            return  # a page for a position the table has moved past
        table = self.query_one(MigrationTable)
        with self.app.batch_update():
            for summary in message.rows:
                slug = summary.migration.slug
                if slug in self.summaries:
                    continue
                self.summaries[slug] = summary
                table.add_row(*render.migration_row(summary), key=slug)
        if message.rows:
            self.pager.after = message.rows[-1].migration.slug
        self.pager.complete = message.complete
        self.pager.loading = False
        self._show_counts()
        if message.after is None:
            self._show_detail(0)
        self._maybe_load_more(table)
        if not self.app.first_page_shown.is_set():
            self.call_after_refresh(self.app.first_page_done)

    # --- records changed (another reviewer, a form, a verify run): counts read again ----------
    def study_changed(self) -> None:
        """Called by the effort poller when the database changed: the loaded rows and the totals
        are read again and updated in place, new migrations added (the cursor stays put)."""
        if self.pager.loading:
            return
        last = None if self.pager.complete else self.pager.after
        if last is not None or self.pager.complete:
            self.reload_rows(self.app.db_path, last)

    @work(thread=True, exclusive=True, exit_on_error=False, group="study-refresh")
    def reload_rows(self, path: Path, last: str | None) -> None:
        """Every migration up to slug `last` (all of them when the list is complete)."""
        wanted = self.filter

        def gather(db):
            rows = []
            after = None
            while True:  # keyset pages up to the last loaded slug, never more than is shown
                page = self._page(db, wanted, after, 500)
                rows += [r for r in page if last is None or r.migration.slug <= last]
                if len(page) < 500 or (last is not None and page[-1].migration.slug >= last):
                    return (queries.get_study(db), queries.count_migrations(db), rows, *self._counts(db))
                after = page[-1].migration.slug

        result = read_plain(path, gather)
        if not isinstance(result, LoadFailed) and wanted == self.filter:
            self.app.call_from_thread(self._refreshed, *result)

    def _refreshed(self, study, total: int, rows: list[MigrationSummary], totals,
                   ladder: review.LadderCounts) -> None:
        self.ladder = ladder
        table = self.query_one(MigrationTable)
        keys = [key for _, key in COLUMNS]
        added = False
        said: list[tuple[str, str]] = []
        with self.app.batch_update():
            for summary in rows:
                slug = summary.migration.slug
                old = self.summaries.get(slug)
                if summary == old:
                    continue
                self.summaries[slug] = summary
                news = render.migration_news(old, summary) if old is not None else ""
                if news:
                    self.fresh.add(slug)
                    said.append((slug, news))
                cells = render.migration_row(summary)
                if slug in self.fresh:
                    cells[0].stylize(render.FRESH)
                if old is None:
                    table.add_row(*cells, key=slug)
                    added = True
                else:
                    for key, cell in zip(keys, cells):
                        table.update_cell(slug, key, cell)
            if added:
                self._sorted(table)
        self.news.add(said)
        self.on_study_loaded(StudyLoaded(study, total, totals))
        self._show_detail(table.cursor_row)

    def _sorted(self, table: DataTable) -> None:
        """Rows back in slug order after new ones were added, the cursor on the same row."""
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key if table.row_count else None
        table.sort("slug", key=lambda cell: cell.plain)
        self.summaries = {k: self.summaries[k] for k in sorted(self.summaries)}
        if key is not None:
            table.move_cursor(row=table.get_row_index(key), animate=False)

    def on_load_failed(self, message: LoadFailed) -> None:
        super().on_load_failed(message)
        self.app.first_page_done()  # no first page to wait for
        if not self.summaries:
            self.query_one(MigrationTable).display = False
            self.query_one("#migration-detail").display = False
            self.query_one("#study-counts", Static).update(
                Text("Cannot read the study. Press q to quit.", style="bold")
            )

    def _show_counts(self) -> None:
        line = Text()
        if self.total is None:
            line.append("Loading the study…", style="dim")
        elif self.total == 0:
            from screens.setup import next_steps

            line = next_steps()
        else:
            line.append(plural(self.total, "migration"), style="bold")
            loaded = len(self.summaries)
            if self.filter:
                line.append(" · ", style="dim")
                line.append_text(render.filter_line(self.filter.describe(), loaded, self.pager.complete))
            elif loaded < self.total:
                line.append(f" · {loaded} loaded, more as you scroll", style="dim")
            if self.totals:
                line.append("\n")
                line.append_text(render.study_totals(self.totals, self.ladder))
            elif self.totals == {}:
                line.append("\nverdict totals hidden while you judge blind", style="dim italic")
        self.query_one("#study-counts", Static).update(line)
        empty = self.total == 0
        self.query_one(MigrationTable).display = not empty
        self.query_one("#migration-detail").display = not empty

    def _show_detail(self, row: int) -> None:
        detail = self.query_one("#migration-detail", Detail)
        table = self.query_one(MigrationTable)
        if not 0 <= row < table.row_count:
            detail.show("")
            return
        key = table.coordinate_to_cell_key((row, 0)).row_key.value
        summary = self.summaries.get(key or "")
        detail.show(render.migration_detail(summary) if summary else "")

    def _maybe_load_more(self, table: DataTable) -> None:
        if self.pager.after is not None and self.pager.wants_more(table.cursor_row, table.row_count):
            self.pager.loading = True
            self.load_page(self.app.db_path, self.pager.after)

    @on(DataTable.RowHighlighted, "#migrations")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._maybe_load_more(event.data_table)

    @on(DataTable.RowSelected, "#migrations")
    def _selected(self, event: DataTable.RowSelected) -> None:
        summary = self.summaries.get(event.row_key.value or "")
        if summary is not None:
            self.app.open_migration(summary.migration.slug)
