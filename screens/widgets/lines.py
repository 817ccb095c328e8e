"""A virtual list of lines: only the rows on screen are rendered, whatever the length.

`VirtualLines` keeps a cursor line (moved with `j`/`k`, `g`/`G`, page keys; `h`/`l` scroll
long lines sideways), draws an optional
line-number gutter and asks its subclass for one line at a time (`line_text`), so a 1 GB log or
a 20,000-line diff paints as quickly as a short one. Rendered lines are kept in a small LRU.
"""

from __future__ import annotations

from collections import OrderedDict

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from screens.messages import CursorMoved

CACHED_LINES = 512
"""Rendered lines kept: a few screens of a tall terminal. Each is a dozen objects for the garbage
collector (a Strip and its caches, its segments), so 2,000 kept 20,000 more after paging through
a log, and made every full collection longer (issue 19)."""


class VirtualLines(ScrollView, can_focus=True):
    """Subclasses implement `line_count` and `line_text(index)`."""

    COMPONENT_CLASSES = {"lines--gutter", "lines--cursor"}
    DEFAULT_CSS = """
    VirtualLines {
        height: 1fr;
        background: $surface;
    }
    VirtualLines > .lines--gutter {
        color: $text-muted;
    }
    VirtualLines > .lines--cursor {
        background: $primary 30%;
    }
    VirtualLines:focus > .lines--cursor {
        background: $primary 50%;
    }
    """

    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", show=False, id="lines.down",
                tooltip="Move down a line"),
        Binding("k,up", "cursor_up", "Up", show=False, id="lines.up", tooltip="Move up a line"),
        Binding("g,home", "first", "Top", show=False, id="lines.top", tooltip="Go to the first line"),
        Binding("G,end", "last", "Bottom", show=False, id="lines.bottom",
                tooltip="Go to the last line"),
        Binding("pagedown", "page_down", "Page down", show=False, id="lines.page_down",
                tooltip="Down a screen"),
        Binding("pageup", "page_up", "Page up", show=False, id="lines.page_up",
                tooltip="Up a screen"),
        Binding("h,left", "sideways(-1)", "Left", show=False, id="lines.left",
                tooltip="Scroll long lines left (a quarter of the width)"),
        Binding("l,right", "sideways(1)", "Right", show=False, id="lines.right",
                tooltip="Scroll long lines right (a quarter of the width)"),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)
    show_gutter: bool = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._cache: OrderedDict[int, Strip] = OrderedDict()
        self._widest = 0

    # --- what subclasses provide -------------------------------------------------------------
    @property
    def line_count(self) -> int:
        return 0

    def line_text(self, index: int) -> Text:
        raise NotImplementedError

    def line_style(self, index: int) -> Style | None:
        """A style laid under the whole row (a diff's added line, a search match)."""
        return None

    # --- geometry ------------------------------------------------------------------------------
    @property
    def gutter_width(self) -> int:
        return len(str(max(self.line_count, 1))) + 1 if self.show_gutter else 0

    def reset(self) -> None:
        """The lines changed: forget what was rendered and size the view again."""
        self._cache.clear()
        self._widest = 0
        self.cursor = min(self.cursor, max(self.line_count - 1, 0))
        self._resize()
        self.refresh()

    def _resize(self) -> None:
        width = max(self._widest + self.gutter_width, self.scrollable_content_region.width, 1)
        self.virtual_size = Size(width, self.line_count)

    def on_resize(self) -> None:
        self._resize()

    # --- rendering -----------------------------------------------------------------------------
    def _strip_for(self, index: int) -> Strip:
        strip = self._cache.get(index)
        if strip is not None:
            self._cache.move_to_end(index)
            return strip
        text = self.line_text(index)
        segments = list(text.render(self.app.console))
        strip = Strip(segments)
        if strip.cell_length > self._widest:
            self._widest = strip.cell_length
            self.call_after_refresh(self._resize)
        self._cache[index] = strip
        if len(self._cache) > CACHED_LINES:
            self._cache.popitem(last=False)
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= self.line_count:
            return Strip.blank(width, base)
        gutter_width = self.gutter_width
        body = self._strip_for(index).crop(scroll_x, scroll_x + max(width - gutter_width, 0))
        under = self.line_style(index)
        if index == self.cursor:
            cursor = self.get_component_rich_style("lines--cursor")
            under = cursor if under is None else under + Style(bgcolor=cursor.bgcolor)
        segments: list[Segment] = []
        if gutter_width:
            segments.append(Segment(f"{index + 1:>{gutter_width - 1}} ",
                                    base + self.get_component_rich_style("lines--gutter")))
        strip = Strip(segments + list(body), gutter_width + body.cell_length)
        strip = strip.extend_cell_length(width)
        strip = strip.apply_style(base + under if under is not None else base)
        return strip.crop(0, width)

    # --- movement ------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self.post_message(CursorMoved(self, new))

    def go_to(self, index: int, *, top: bool = False) -> None:
        """Put the cursor on line `index` (0-based) and scroll it into view; `top` puts it a
        few lines under the top, so what follows it shows."""
        if not self.line_count:
            return
        index = max(0, min(index, self.line_count - 1))
        self.cursor = index
        height = self.scrollable_content_region.height or 1
        y = self.scroll_offset.y
        if top:
            self.scroll_to(y=max(index - min(3, height // 4), 0), animate=False)
        elif index < y:
            self.scroll_to(y=index, animate=False)
        elif index >= y + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def action_cursor_down(self) -> None:
        self.go_to(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self.go_to(self.cursor - 1)

    def action_first(self) -> None:
        self.go_to(0)

    def action_last(self) -> None:
        self.go_to(self.line_count - 1)

    def action_sideways(self, direction: int) -> None:
        """`h`/`l` as in less and lazygit: a quarter of the width (8 columns at least) at a time."""
        step = max(8, (self.scrollable_content_region.width - self.gutter_width) // 4)
        self.scroll_to(x=max(0, self.scroll_offset.x + direction * step), animate=False)

    def action_page_down(self) -> None:
        height = self.scrollable_content_region.height or 1
        self.scroll_to(y=self.scroll_offset.y + height, animate=False)
        self.go_to(self.cursor + height)

    def action_page_up(self) -> None:
        height = self.scrollable_content_region.height or 1
        self.scroll_to(y=max(self.scroll_offset.y - height, 0), animate=False)
        self.go_to(self.cursor - height)
