"""The help screen: the keys that work on the screen it was opened from."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from domain.models import LADDER, Outcome
from screens.presenters.palette import tone
from screens.presenters.render import MARKS


def key_table(rows: Iterable[tuple[str, str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(style="dim", ratio=1)
    for key, description, tooltip in rows:
        table.add_row(Text(key), Text(description), Text(tooltip))
    return table


def ladder_legend() -> Text:
    out = Text("Ladder (L1-5): ", style="bold")
    out.append(" · ".join(f"L{n} {name}" for n, name in LADDER.items()))
    out.append("\n")
    for outcome, word in ((Outcome.PASS, "pass"), (Outcome.FAIL, "fail"), (Outcome.UNKNOWN, "unknown"),
                          (None, "no verdict yet")):
        mark, style = MARKS[outcome]
        out.append(mark, style=tone(style))
        out.append(f" {word}  ")
    return out


class HelpScreen(ModalScreen[None]):
    """Lists `(key, description, tooltip)` rows; `escape`, `?` or `f1` close it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close", id="help.close", tooltip="Close the help"),
        Binding("question_mark", "dismiss", "Close", key_display="?", show=False,
                id="help.close_question", tooltip="Close the help"),
        Binding("f1", "dismiss", "Close", show=False, id="help.close_f1",
                tooltip="Close the help"),
    ]

    def __init__(self, title: str, rows: list[tuple[str, str, str]]) -> None:
        super().__init__(id="help")
        self.help_title = title
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = self.help_title
            box.border_subtitle = "escape closes"
            with VerticalScroll():
                yield Static(key_table(self.rows), id="help-keys")
                yield Static(ladder_legend(), id="help-ladder")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
