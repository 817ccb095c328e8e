"""The `/` filter line of the study, attempt and ledger lists (as in lazygit and k9s)."""

from __future__ import annotations

from textual.binding import Binding
from textual.timer import Timer

from screens.messages import FilterApplied
from screens.typeahead import Input, focus_now

FILTER_HELP = (
    "Filter (/): words match the title, slug or command; key:value terms narrow further: "
    "status:ok, level:4 (or >=3, <=1, none), cause:numerical, silent:yes, overclaim:yes, "
    "source:agent, reviewer:ana. Level, overclaim, silent and cause read what a row shows (an "
    "attempt's re-runs counted as its runs). Enter applies, escape clears."
)
"""The filter syntax, for the tooltips and the help screen."""


class FilterBar(Input):
    """One line, hidden until `/`; the list follows as you type (a pause of `LIVE_S`), enter
    applies the filter and goes back to the list (the header shows it), escape clears it."""

    LIVE_S = 0.15
    """The pause in typing after which the list follows (one query per pause, not per key)."""

    _live: Timer | None = None

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

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._stop_following()
        if self.has_class("-open"):
            self._live = self.set_timer(self.LIVE_S, self._follow)

    def _follow(self) -> None:
        self._live = None
        self.post_message(FilterApplied(self, self.value.strip(), live=True))

    def _stop_following(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._stop_following()
        self.remove_class("-open")  # the header shows the filter; `/` opens it again to edit
        self.post_message(FilterApplied(self, self.value.strip()))

    def action_clear_filter(self) -> None:
        self.remove_class("-open")
        self.value = ""
        self._stop_following()
        self.post_message(FilterApplied(self, ""))
