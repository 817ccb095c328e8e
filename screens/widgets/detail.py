"""The highlighted row's detail under a list."""

from __future__ import annotations

from textual.visual import VisualType, visualize
from textual.widgets import Static


class Detail(Static):
    """A Static under a list whose height only grows while its screen lives.

    `Static.update` asks for a layout pass, and a detail of another height moves the list above
    it, which Textual then draws whole: with `j` held through a list of attempts, whose details
    take 4 to 7 lines, that was about one press in six at twice a plain press's cost (issue 19).
    Once the detail has been as tall as it gets, a move draws the detail and two rows, and the
    list's last row stays where it is instead of coming and going."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tallest = 0
        """The most lines of content shown so far: the least the detail keeps."""
        self.shown: VisualType | None = None

    def show(self, content: VisualType) -> None:
        """Show `content`, unless it is what is shown: a table's cursor is set again for every
        row added, so the first page of a list asked for the same detail a hundred times, ~10%
        of the launch (issue 19)."""
        if content == self.shown and getattr(content, "style", None) == getattr(self.shown, "style", None):
            return  # (a Rich Text's == compares its text and spans, not its own style)
        self.shown = content
        width = self.content_size.width
        if not (width and self.is_mounted):
            self.update(content)
            return
        lines = self._clamped(visualize(self, content, markup=self._render_markup).get_height(self.styles, width))
        if lines <= self.tallest:
            self.update(content, layout=False)
            return
        self.tallest = lines
        self.styles.min_height = lines + self.styles.gutter.height
        self.update(content)

    def _clamped(self, lines: int) -> int:
        """The lines of content `max-height` leaves room for."""
        cap = self.styles.max_height
        if cap is None or not cap.is_cells:
            return lines
        return min(lines, int(cap.value) - self.styles.gutter.height)
