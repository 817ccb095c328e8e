"""The `/` filter line of the study, attempt and ledger lists (as in lazygit and k9s)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from screens.messages import FilterApplied
from screens.typeahead import focus_now

FILTER_HELP = (
    "Filter (/): words match the title, slug or command; key:value terms narrow further: "
    "status:ok, level:4 (or >=3, <=1, none), cause:numerical, silent:yes, overclaim:yes, "
    "source:agent, reviewer:ana. Enter applies, escape clears."
)
"""The filter syntax, for the tooltips and the help screen."""


class FilterBar(Input):
    """One line, hidden until `/`; enter applies the filter (the header shows it), escape clears it."""

    DEFAULT_CSS = """
    FilterBar { display: none; }
    FilterBar, FilterBar:focus { height: 1; border: none; padding: 0 1; background: $boost; }
    FilterBar.-open { display: block; }
    """

    BINDINGS = [
        Binding("escape", "clear_filter", "Clear filter", id="filter.clear",
                tooltip="Clear the filter and show every row"),
    ]

    def __init__(self, *, help: str = FILTER_HELP, **kwargs) -> None:
        kwargs.setdefault("placeholder", "filter: words, status: level: cause: silent: overclaim: source: reviewer:")
        super().__init__(**kwargs)
        self.tooltip = help

    def open(self) -> None:
        self.add_class("-open")
        focus_now(self)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-open")  # the header shows the filter; `/` opens it again to edit
        self.post_message(FilterApplied(self, self.value.strip()))

    def action_clear_filter(self) -> None:
        self.value = ""
        self.remove_class("-open")
        self.post_message(FilterApplied(self, ""))
