"""A whole file's lines at one commit, with syntax colours, drawn only where visible."""

from __future__ import annotations

from rich.text import Text

from domain.text import clean
from screens.widgets.diff_view import Highlighter
from screens.widgets.lines import VirtualLines


class FileView(VirtualLines):
    """A whole file's lines with syntax colours."""

    def __init__(self, path: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.lines: list[str] = []
        self._highlighter: Highlighter | None = None

    @property
    def line_count(self) -> int:
        return len(self.lines)

    def line_text(self, index: int) -> Text:
        if self._highlighter is None:
            self._highlighter = Highlighter(self.app.current_theme.dark)
        out = Text()
        self._highlighter.highlight(self.path, clean(self.lines[index]), out)
        return out
