"""My queue: the attempts dealt to this app's reviewer (`workbench assign`), a keyset page at a
time, with counts of done and left. `enter` opens one; from there `[`/`]` step through the queue
(across migrations) and `u` jumps to the next attempt not judged yet; `u` here does the same
(and `n`, its first key here).
Judgements recorded here or by another process show as they commit (the app's ChangeWatcher
calls `study_changed`). No verdict, claim or cause is shown: the queue may be judged blind."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from domain.judgements import QueueItem
from domain.models import AttemptSummary, Migration
from screens.base import PAGE_SIZE, Pager, WorkbenchScreen
from screens.data import read
from screens.messages import LoadFailed
from screens.navigation import QueueCursor
from screens.presenters.palette import tone
from screens.text import text
from screens.widgets.footer import Footer
from screens.widgets.nav_table import NavTable
from storage.sqlite import Database
from workbench import config

COLUMNS = (("Migration", "migration"), ("#", "seq"), ("Source", "source"), ("Judged", "done"),
           ("Blind", "blind"))
Key = tuple[str, int]
"""(migration slug, seq): the queue's order, and its pages' keyset."""


@dataclass
class QueueRead:
    """What one read of the queue gives: the items and, for stepping from the attempt screen,
    each one's summary, migration, reference run and previous commit."""

    items: list[QueueItem]
    summaries: dict[int, AttemptSummary] = field(default_factory=dict)
    migrations: dict[int, Migration] = field(default_factory=dict)
    references: dict[int, AttemptSummary | None] = field(default_factory=dict)
    previous: dict[int, tuple[int, str] | None] = field(default_factory=dict)
    counts: tuple[int, int] = (0, 0)
    """(done, assigned) of the whole queue."""
    study_blind: bool = False


def read_queue(db: Database, reviewer: str, *, after: Key | None, until: Key | None, limit: int | None,
               known: set[int]) -> QueueRead:
    """A page of the queue (storage.judgements.queue_page) with what the attempt screen needs of
    each item it has not read before (`known` migrations are not read again)."""
    from storage import queries
    from storage.judgements import queue_counts, queue_page, study_blind
    from storage.verify_inputs import reference_attempt
    from workbench.blind import as_seen_by

    out = QueueRead(queue_page(db, reviewer, after=after, until=until, limit=limit),
                    counts=queue_counts(db, reviewer), study_blind=study_blind(db))
    found = [queries.attempt_summary(db, item.attempt_id) for item in out.items]
    for summary in as_seen_by(db, reviewer, [s for s in found if s is not None]):  # None: gone since
        out.summaries[summary.attempt.id] = summary
        mid = summary.attempt.migration_id
        out.previous[summary.attempt.id] = queries.previous_agent_commit(db, mid, summary.attempt.seq)
        if mid not in known and mid not in out.migrations:
            migration = queries.migration_by_id(db, mid)
            if migration is not None:
                out.migrations[mid] = migration
            reference = reference_attempt(db, mid)
            out.references[mid] = None if reference is None else queries.attempt_summary(db, reference.id)
    return out


def queue_cells(item: QueueItem, study_blind: bool) -> tuple[Text, ...]:
    """A row: the attempt's name and source, judged or left, blind or not; never a verdict."""
    done = Text("✓ done", style=tone("$text-success")) if item.done else Text("· left", style="bold")
    blind = Text("blind", style="italic") if item.blind or study_blind else Text("")
    return text(item.migration), Text(f"#{item.seq}"), text(item.source), done, blind


def empty_queue(reviewer: str, db_path: Path) -> Text:
    """What to do, with a command that works when pasted into a shell anywhere: the study's whole
    path (the demo lives in the user data folder), quoted as a shell needs."""
    import shlex

    command = shlex.join(["workbench", "assign", str(db_path.resolve()), "--reviewers", reviewer, "--overlap", "0"])
    out = Text("Nothing is dealt to ", style="bold")
    out.append_text(text(reviewer, "bold"))
    out.append(" yet. Deal the study's unjudged attempts out with\n", style="bold")
    out.append_text(text(f"  {command}"))
    out.append("\n(name every reviewer: --reviewers a,b,c, then --overlap 0.2 gives a fifth to two of them;"
               " --blind hides verdicts until judged; WORKBENCH_REVIEWER names you; docs/judgements.md, \"Queues\").",
               style="dim")
    return out


class QueueTable(NavTable):
    """The queue's attempts; `enter` opens the highlighted one."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", id="queue.open",
                tooltip="Open the highlighted attempt; [ and ] there step through this queue"),
    ]


def _sort_key(values: tuple[Text, Text]) -> Key:
    return values[0].plain, int(values[1].plain.lstrip("#"))


class QueueScreen(WorkbenchScreen):
    """Pushed with `Q` from the study screen (or the palette)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="queue.back", tooltip="Back to the study's migrations"),
        # u, as on the attempt screen (where n is the next failure); n, its first key here, still works
        Binding("u", "next_left", "Next left", id="queue.next_left_u",
                tooltip="Open the next attempt you have not judged yet (after the highlighted one; "
                        "as u on the attempt screen)"),
        Binding("n", "next_left", "Next left", show=False, id="queue.next_left",
                tooltip="Open the next attempt you have not judged yet (as u)"),
    ]
    FOOTER_FIRST = ("queue.open", "queue.back", "queue.next_left_u", "app.help")
    AUTO_FOCUS = "#queue"
    help_title = "my queue"

    def __init__(self, *, page_size: int = PAGE_SIZE, reviewer: str | None = None) -> None:
        super().__init__(classes="queue")
        self.reviewer = reviewer or config.reviewer()
        self.pager: Pager[Key] = Pager(size=page_size)
        self.items: dict[str, QueueItem] = {}
        """The loaded items by row key (the attempt id), in queue order."""
        self.cursor = QueueCursor()
        """The loaded items' summaries in queue order: handed to the attempt screens opened here."""
        self.summaries: dict[int, AttemptSummary] = {}
        """Every item's summary read so far, by attempt id."""
        self.counts: tuple[int, int] | None = None
        """(done, assigned) of the whole queue, once read."""
        self.study_blind = False
        self.stale = False
        """Records changed while a page was being read: the list is read again after it."""
        self.seeking = False
        """`n` found nothing left among the loaded rows: look again as more pages load."""

    @property
    def done(self) -> int:
        return self.counts[0] if self.counts else 0

    @property
    def left(self) -> int:
        return self.counts[1] - self.counts[0] if self.counts else 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("Reading your queue…", style="dim"), id="queue-header")
        yield Static(id="problem", classes="problem")
        table = QueueTable(id="queue")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self.pager.loading = True
        self.load_page(self.app.db_path, None)

    # --- reads ----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="queue")
    def load_page(self, path: Path, after: Key | None) -> None:
        reviewer, size, known = self.reviewer, self.pager.size, set(self.cursor.migrations)
        result = read(path, lambda db: read_queue(db, reviewer, after=after, until=None, limit=size, known=known))
        if isinstance(result, LoadFailed):
            self.post_message(result)
        else:
            self.app.call_from_thread(self._page_loaded, after, result)

    def _page_loaded(self, after: Key | None, result: QueueRead) -> None:
        if after != self.pager.after:
            return  # a page for a position the list has moved past
        self._take(result)
        table = self.query_one(QueueTable)
        with self.app.batch_update():
            for item in result.items:
                key = str(item.attempt_id)
                if key not in self.items and item.attempt_id in result.summaries:
                    self.items[key] = item
                    table.add_row(*queue_cells(item, self.study_blind), key=key)
        self._sync_cursor()
        if result.items:
            self.pager.after = result.items[-1].key
        self.pager.complete = len(result.items) < self.pager.size
        self.pager.loading = False
        self._show_header()
        if self.stale:
            self.study_changed()
        elif self.seeking:
            self.action_next_left()
        else:
            self._maybe_load_more(table)

    def _take(self, result: QueueRead) -> None:
        """What every read brings besides the rows: counts, migrations, references, commits."""
        self.counts = result.counts
        self.study_blind = result.study_blind
        self.cursor.migrations.update(result.migrations)
        self.cursor.references.update(result.references)
        self.cursor.previous.update(result.previous)
        self.summaries.update(result.summaries)

    def _sync_cursor(self) -> None:
        """The cursor's rows: the loaded items' summaries, in table order; the judged ones."""
        table = self.query_one(QueueTable)
        order = [int(row.key.value) for row in table.ordered_rows if row.key.value in self.items]
        self.cursor.rows = [self.summaries[a] for a in order if a in self.summaries]
        self.cursor.done = {item.attempt_id for item in self.items.values() if item.done}

    def _show_header(self) -> None:
        out = Text("My queue: ", style="bold")
        out.append_text(text(self.reviewer, "bold"))
        if self.counts is None:
            out.append(" · reading…", style="dim")
        elif self.counts[1] == 0:
            out = empty_queue(self.reviewer, self.app.db_path)
        else:
            out.append(f" · {self.done} done, {self.left} left", style="bold")
            out.append(f" of {self.counts[1]} dealt", style="dim")
            loaded = len(self.items)
            if loaded < self.counts[1]:
                out.append(f" · {loaded} loaded, more as you scroll", style="dim")
            out.append("\nenter opens one; there [ ] step through the queue; u, here or there, opens the next left", style="dim")
        self.query_one("#queue-header", Static).update(out)
        self.query_one(QueueTable).display = bool(self.counts and self.counts[1])

    def _maybe_load_more(self, table: DataTable) -> None:
        if self.pager.after is not None and self.pager.wants_more(table.cursor_row, table.row_count):
            self.pager.loading = True
            self.load_page(self.app.db_path, self.pager.after)

    # --- records changed (a judgement here or in another process, a new deal) ---------------------
    def study_changed(self) -> None:
        """Called by the app's ChangeWatcher: the loaded items are read again (their done marks,
        the counts; new items dealt among them are added in order)."""
        if self.pager.loading:
            self.stale = True
            return
        self.stale = False
        self.reload_rows(self.app.db_path, None if self.pager.complete else self.pager.after)

    @work(thread=True, exclusive=True, exit_on_error=False, group="queue-refresh")
    def reload_rows(self, path: Path, until: Key | None) -> None:
        reviewer, known = self.reviewer, set(self.cursor.migrations)
        result = read(path, lambda db: read_queue(db, reviewer, after=None, until=until, limit=None, known=known))
        if not isinstance(result, LoadFailed):
            self.app.call_from_thread(self._refreshed, result)

    def _refreshed(self, result: QueueRead) -> None:
        if self.pager.loading:
            self.stale = True  # a page started after this read: read again once it is shown
            return
        blind_changed = result.study_blind != self.study_blind
        self._take(result)
        table = self.query_one(QueueTable)
        added = False
        with self.app.batch_update():
            for item in result.items:
                key = str(item.attempt_id)
                old = self.items.get(key)
                if item == old and not blind_changed:
                    continue
                if item.attempt_id not in result.summaries:
                    continue
                self.items[key] = item
                cells = queue_cells(item, self.study_blind)
                if old is None:
                    table.add_row(*cells, key=key)
                    added = True
                else:
                    for (_, column), cell in zip(COLUMNS, cells):
                        table.update_cell(key, column, cell)
            if added:
                self._sorted(table)
        self._sync_cursor()
        self._show_header()

    def _sorted(self, table: DataTable) -> None:
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key if table.row_count else None
        table.sort("migration", "seq", key=_sort_key)
        self.items = {k: self.items[k] for k in (row.key.value for row in table.ordered_rows) if k in self.items}
        if key is not None:
            table.move_cursor(row=table.get_row_index(key), animate=False)

    # --- opening and following ---------------------------------------------------------------------
    def current(self) -> AttemptSummary | None:
        table = self.query_one(QueueTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value or ""
        return self.cursor.get(int(key)) if key.isdigit() else None

    def open(self, summary: AttemptSummary) -> None:
        from screens.attempt import AttemptScreen

        migration = self.cursor.migrations.get(summary.attempt.migration_id)
        if migration is None:
            return
        self.cursor.current = summary.attempt.id
        self.follow(summary.attempt.id)
        self.app.push_screen(AttemptScreen(migration, summary, self.cursor))

    def follow(self, attempt_id: int) -> None:
        """Move the cursor to that attempt (an attempt screen stepped there; pages load)."""
        key = str(attempt_id)
        if key in self.items:
            table = self.query_one(QueueTable)
            table.move_cursor(row=table.get_row_index(key))

    def action_next_left(self) -> None:
        """Open the next attempt not judged yet after the highlighted one; past the loaded rows,
        the next page is read first."""
        here = self.current()
        found = self.cursor.next_left(here.attempt.id if here else None, here_too=True)
        if found is not None and here is not None and self.cursor.index(found.attempt.id) < self.cursor.index(
                here.attempt.id) and not self.pager.complete:
            found = None  # it wrapped round: the pages not read yet come first
        if found is not None:
            self.seeking = False
            self.open(found)
        elif not self.pager.complete and self.pager.after is not None:
            self.seeking = True
            if not self.pager.loading:
                self.pager.loading = True
                self.load_page(self.app.db_path, self.pager.after)
        else:
            self.seeking = False
            self.app.notify(f"Nothing left in your queue: {self.done} of {self.counts[1] if self.counts else 0}"
                            " judged", markup=False)

    @on(DataTable.RowHighlighted, "#queue")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._maybe_load_more(event.data_table)

    @on(DataTable.RowSelected, "#queue")
    def _selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value or ""
        summary = self.cursor.get(int(key)) if key.isdigit() else None
        if summary is not None:
            self.open(summary)
