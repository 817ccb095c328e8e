"""Widgets shared by the screens."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import DataTable


class NavTable(DataTable):
    """A row-cursor DataTable with vim keys, whose render caches hold about two screens."""

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

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self._size_caches(0)

    def on_resize(self, event: events.Resize) -> None:
        self._size_caches(event.size.height)

    def _size_caches(self, height: int) -> None:
        """Size DataTable's render caches to two screens of the table. Its own sizes (1,000 rows
        and lines, 10,000 cells) fill up as the cursor moves, since the row and line caches' keys
        hold the cursor: after a few hundred `j`s they kept about 100,000 objects for the garbage
        collector, and its full collections took 100-350 ms (issue 19). A smaller screen drops
        the surplus entry by entry: `clear` would leave the cache's ring of entries to the
        collector."""
        lines = 2 * max(height, 20)
        caches = (self._row_render_cache, self._line_cache, self._row_renderable_cache, self._cell_render_cache)
        for cache, size in zip(caches, (lines, lines, lines, lines * max(len(self.columns) + 1, 16))):
            cache.maxsize = size
            for key in list(cache.keys())[size:]:
                cache.discard(key)
