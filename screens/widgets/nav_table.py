"""Widgets shared by the screens."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable


class NavTable(DataTable):
    """A row-cursor DataTable with vim keys."""

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
