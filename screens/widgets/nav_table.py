"""Widgets shared by the screens."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

ELSEWHERE = Coordinate(-2, -2)
"""A cursor on no row (the header is row -1)."""


class NavTable(DataTable):
    """A row-cursor DataTable with vim keys, whose render caches hold about two screens and
    survive a move of the cursor; its `fill` column, if it has one, takes the width the others
    leave."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="table.down",
                tooltip="Move the cursor down a row"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up",
                tooltip="Move the cursor up a row"),
        Binding("g", "scroll_top", "Top", show=False, id="table.top",
                tooltip="Go to the first row"),
        Binding("G", "scroll_bottom", "Bottom", show=False, id="table.bottom",
                tooltip="Go to the last loaded row (loads the next page when there is one)"),
    ]

    FILL_MIN = 12
    """Cells the fill column needs to be worth showing; with fewer it gets none (the screen shows
    its value elsewhere, in the detail under the list)."""

    def __init__(self, *, fill: str | None = None, **kwargs) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self.fill = ColumnKey(fill) if fill else None
        """The last column, whose cells (Text with overflow "ellipsis") are drawn cut with `…`
        to the width the other columns leave; the table then never scrolls sideways."""
        if fill:
            self.styles.overflow_x = "hidden"
        self._size_caches(0)

    def _render_line_in_row(self, row_key: Any, line_no: int, base_style: Any, cursor_location: Coordinate,
                            hover_location: Coordinate) -> Any:
        """DataTable keeps a row's drawn lines by where the cursor is, so each move of the cursor
        drew every visible row again: about half of a `j` (issue 19). With a row cursor, a row the
        cursor is not on is drawn alike wherever the cursor is (and so for the hover), so it is
        asked for with one location for all of them, ELSEWHERE, and comes from the cache."""
        if self.cursor_type == "row":
            cursor_location, hover_location = self._seen_from(row_key, cursor_location, hover_location)
        return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)

    def _seen_from(self, row_key: Any, cursor: Coordinate, hover: Coordinate) -> tuple[Coordinate, Coordinate]:
        """The cursor's and the hover's locations as a row's drawing depends on them: ELSEWHERE
        for one not on the row (the header's row is -1)."""
        row = self._row_locations.get(row_key) if row_key in self._row_locations else -1
        return (cursor if cursor.row == row else ELSEWHERE, hover if hover.row == row else ELSEWHERE)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Any) -> Any:
        """DataTable keeps a drawn line by where the cursor is too, so when `j` scrolls the table
        every visible line was cut and joined again from its row's cells (issue 19). A line whose
        row the cursor and the hover are not on is kept under ELSEWHERE, in the same cache, so
        whatever clears DataTable's lines clears these."""
        if self.cursor_type != "row":
            return super()._render_line(y, x1, x2, base_style)
        try:
            row_key, _ = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        cursor, hover = self._seen_from(row_key, self.cursor_coordinate, self.hover_coordinate)
        key = (ELSEWHERE, y, x1, x2, self.size.width, cursor, hover, base_style, self._show_hover_cursor,
               self._update_count, self._pseudo_class_state)
        strip = self._line_cache.get(key)
        if strip is None:
            strip = self._line_cache[key] = super()._render_line(y, x1, x2, base_style)
        return strip

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        if self.cursor_type == "row" and old.row != new.row:
            self.call_after_refresh(self._draw_ahead, new, 1 if new.row > old.row else -1)

    def _draw_ahead(self, cursor: Coordinate, step: int) -> None:
        """Once the screen shows a move of the cursor, draw the rows the next move the same way
        will draw: the row after, with the cursor on it; this row without it; and the row after
        that, which the table scrolls into view. A move drew them when it came, about a third of
        a `j` (issue 19); now they wait in the row cache. Nothing is drawn if the cursor moved on
        in between, and a row already in the cache costs a lookup."""
        if cursor != self.cursor_coordinate:
            return
        ahead = Coordinate(cursor.row + step, cursor.column)
        style, hover = self.rich_style, self.hover_coordinate
        for row, at in ((ahead.row, ahead), (cursor.row, ELSEWHERE), (ahead.row + step, ELSEWHERE)):
            if 0 <= row < self.row_count:
                row_key = self._row_locations.get_key(row)
                for line_no in range(self.rows[row_key].height):
                    self._render_line_in_row(row_key, line_no, style, at, hover)

    def on_resize(self, event: events.Resize) -> None:
        """Keep the cursor in view: the detail under a list grows, and a table it shrinks kept its
        scroll, so after a burst of `j`s the cursor's row could sit below the last one shown."""
        self._size_caches(event.size.height)
        self._fit_fill()
        if self.row_count:
            self._scroll_cursor_into_view()

    def watch_show_vertical_scrollbar(self) -> None:
        self._fit_fill()  # the scrollbar takes its width from the fill column

    def _update_dimensions(self, new_rows: Any) -> None:
        super()._update_dimensions(new_rows)  # new rows widen the other columns
        self._fit_fill()

    def _update_column_widths(self, updated_cells: Any) -> None:
        super()._update_column_widths(updated_cells)  # so do updated cells
        self._fit_fill()

    def _fit_fill(self) -> None:
        """Give the fill column the width the other columns leave (none under FILL_MIN cells).
        DataTable files drawn cells, rows and lines by its update count, not by the columns'
        widths: cut to a new width, lines drawn at the old one stayed in the caches and were drawn
        again (b6bfee4, reverted: 1 run in 2 of the cache tests), so a new width clears them."""
        column = self.columns.get(self.fill) if self.fill is not None else None
        width = self.scrollable_content_region.width
        if column is None or not width:
            return
        padding = 2 * self.cell_padding
        others = self._row_label_column_width + sum(
            c.get_render_width(self) for key, c in self.columns.items() if key != self.fill)
        room = width - others - padding
        room = room if room >= self.FILL_MIN else 0
        if column.auto_width or column.width != room:
            column.auto_width, column.width = False, room
            self._clear_caches()
            self.refresh()
        # no room: the column's padding is past the edge, and nothing to scroll to
        self.virtual_size = Size(others + (padding + room if room else 0), self.virtual_size.height)

    def _size_caches(self, height: int) -> None:
        """Size DataTable's render caches to two screens of the table. Its own sizes (1,000 rows
        and lines, 10,000 cells) fill up as the cursor moves, since the row and line caches' keys
        hold the cursor: after a few hundred `j`s they kept about 100,000 objects for the garbage
        collector, and its full collections took 100-350 ms (issue 19). A smaller screen drops
        the surplus entry by entry: `clear` would leave the cache's ring of entries to the
        collector. The line cache is twice that: DataTable also files each line NavTable keeps
        under the cursor's location."""
        lines = 2 * max(height, 20)
        caches = (self._row_render_cache, self._line_cache, self._row_renderable_cache, self._cell_render_cache)
        for cache, size in zip(caches, (lines, 2 * lines, lines, lines * max(len(self.columns) + 1, 16))):
            cache.maxsize = size
            for key in list(cache.keys())[size:]:
                cache.discard(key)
