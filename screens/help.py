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


def words_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for word, meaning in WORDS:
        table.add_row(Text(word), Text(meaning))
    return table


WORDS = (
    ("Fail", "attempts with a failure: a level of the ladder they were meant to reach failed, L5 "
             "included, as the paper counts them; a migration is accepted at its own level (accept "
             "at L4) even when all its attempts failed L5"),
    ("Silent", "failed attempts that raised no error (exit 0, no traceback, no fatal line)"),
    ("Best", "the highest level an attempt of the migration passed"),
    ("Exp", "the level the agent's own report said it expected"),
    ("Claim", "over: the agent claimed more than the evidence verified"),
    ("Intv", "interventions recorded by people"),
    ("N runs", "an attempt and its re-runs, counted as one attempt (R on it lists them)"),
)
"""The columns and header words the lists use, for the help screen."""


class HelpScreen(ModalScreen[None]):
    """Lists `(key, description, tooltip)` rows; `j`/`k`, `g`/`G` scroll it (as every list here);
    `escape`, `?`, `f1` or `q` close it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close", id="help.close", tooltip="Close the help"),
        Binding("question_mark", "dismiss", "Close", key_display="?", show=False,
                id="help.close_question", tooltip="Close the help"),
        Binding("f1", "dismiss", "Close", show=False, id="help.close_f1",
                tooltip="Close the help"),
        Binding("q", "dismiss", "Close", show=False, id="help.close_q", tooltip="Close the help"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="help.down", tooltip="Scroll down a line"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="help.up", tooltip="Scroll up a line"),
        Binding("g,home", "top", "Top", show=False, id="help.top", tooltip="Scroll to the top"),
        Binding("G,end", "bottom", "Bottom", show=False, id="help.bottom", tooltip="Scroll to the end"),
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
                yield Static(words_table(), id="help-words")

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_top(self) -> None:
        self.query_one(VerticalScroll).scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.query_one(VerticalScroll).scroll_end(animate=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
