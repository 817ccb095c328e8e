"""What every workbench screen shares: worker error handling and keyset paging state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.text import Text
from textual.binding import ActiveBinding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, OptionList, Static
from textual.worker import Worker, WorkerState

from screens.data import describe_error
from screens.messages import FilterApplied, LoadFailed
from screens.typeahead import step_aside_while_typing
from screens.widgets.filter_bar import FilterBar
from storage import review

K = TypeVar("K")

Scope = tuple[str | None, int | None, str]
"""What `V` verifies: (migration slug or None for the study, attempt seq or None, what the
verify dialog calls it)."""

PAGE_SIZE = 100
"""Rows per page; the next page loads when the cursor comes within `PREFETCH` of the end."""
PREFETCH = 20


@dataclass
class Pager(Generic[K]):
    """Where a keyset-paged table stands: the key of its last row, and whether more may follow."""

    size: int = PAGE_SIZE
    after: K | None = None
    complete: bool = False
    loading: bool = True
    """A page is being read; a new pager's first is, from the screen's making (its mount starts
    the read): keys typed ahead wait for it (`WorkbenchScreen.reading_first_page`)."""

    def wants_more(self, cursor_row: int, row_count: int) -> bool:
        if self.complete or self.loading:
            return False
        return cursor_row >= row_count - min(PREFETCH, max(self.size // 2, 1))


class WorkbenchScreen(Screen):
    """A screen whose database workers report failures in its `#problem` line, and whose own
    keys come first in the footer."""

    FOOTER_FIRST: tuple[str, ...] = ()
    """Binding ids shown first in the footer (and the help and palette), in this order; the rest
    follow as Textual orders them (focused widget, screen, app). At 80 columns the footer holds
    about eight keys: these are the ones this screen is for."""

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        found = super().active_bindings
        if not self.FOOTER_FIRST:
            return found
        rank = {binding_id: n for n, binding_id in enumerate(self.FOOTER_FIRST)}
        return dict(sorted(found.items(), key=lambda item: rank.get(item[1].binding.id or "", len(rank))))

    def verify_scope(self) -> Scope | None:
        """What `V` verifies on this screen (the study, migration and attempt screens say); None
        where it does not apply."""
        return None

    @property
    def reading_first_page(self) -> bool:
        """A list opened or filtered is reading its first page: keys typed ahead wait for it
        (screens/keygate.py), so that an `enter` opens a row of the new list. Not once the read
        failed (the problem line shows)."""
        pager = getattr(self, "pager", None)
        if not isinstance(pager, Pager) or not pager.loading or self.read_failed:
            return False
        return not any(table.row_count for table in self.query(DataTable))

    read_failed = False
    """A read of this screen failed (its problem line says why): keys typed ahead wait no longer."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.post_message(LoadFailed(describe_error(event.worker.error)))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.read_failed = True
        problem = self.query_one("#problem", Static)
        problem.update(Text(message.problem))
        problem.display = True


def scope_of(screen: Screen) -> Scope | None:
    """What `V` verifies on `screen`; None where it does not apply. The screens answer for
    themselves, so checking imports no screen module (the footer asks at every refresh)."""
    return screen.verify_scope() if isinstance(screen, WorkbenchScreen) else None


class NewsToasts:
    """A list's news (rows that newly show a silent failure or an over-claim, from any process),
    said once they stop coming: QUIET_S after the last, or LONGEST_S after the first while they keep
    coming. A study verified whole, here or by a colleague, reaches the list over many refreshes:
    said as they came, it stacked a toast per migration; gathered, more than
    `render.NEWS_TOASTS` rows are one toast. The rows themselves are marked at once."""

    QUIET_S = 1.0
    LONGEST_S = 10.0

    def __init__(self, screen: Screen, rows: str) -> None:
        self.screen, self.rows = screen, rows
        self.pending: dict[str, str] = {}
        self.first = 0.0
        self.timer: Timer | None = None

    def add(self, news: list[tuple[str, str]]) -> None:
        import time

        if not news:
            return
        now = time.monotonic()
        if not self.pending:
            self.first = now
        self.pending.update(news)
        if self.timer is not None:
            self.timer.stop()
        self.timer = self.screen.set_timer(max(0.0, min(self.QUIET_S, self.first + self.LONGEST_S - now)), self.say)

    def say(self) -> None:
        from screens.presenters import render

        for toast in render.news_toasts(list(self.pending.items()), self.rows):
            self.screen.app.notify(toast, severity="warning", markup=False)
        self.pending.clear()
        self.timer = None


class FilteredList(WorkbenchScreen):
    """A keyset-paged list screen with a `/` filter (`filter`, `summaries`, `pager` by key)."""

    filter: review.ListFilter
    summaries: dict
    pager: Pager

    def restart_filtered(self, asked: FilterApplied, table: DataTable | OptionList,
                         parse: Callable[[str], review.ListFilter] = review.parse_filter) -> bool:
        """Take the filter a FilterBar applied (`parse` reads it): a bad one is a one-line toast
        (while typing, nothing: the term may be half written); a changed one empties the list (a
        table or an option list) to be read again from its first page (True)."""
        try:
            wanted = parse(asked.value)
        except ValueError as exc:
            if not asked.live:
                self.app.notify(str(exc), severity="error", markup=False)
            return False
        if not asked.live:
            table.focus()
        if wanted == self.filter:
            return False
        self.filter = wanted
        if isinstance(table, OptionList):
            table.clear_options()
        else:
            table.clear()
        self.summaries.clear()
        self.pager = Pager(size=self.pager.size, loading=True)
        return True

    def action_filter(self) -> None:
        """`/` (a priority binding: what is typed after it goes into the filter line)."""
        step_aside_while_typing(self)
        self.query_one(FilterBar).open()
