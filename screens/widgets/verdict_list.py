"""The five ladder levels of an attempt, each with its reason and evidence."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import OptionList

from screens.messages import EvidenceLogLineWanted


class VerdictList(OptionList):
    """The five levels, each with its reason and evidence; `enter` on evidence jumps to it."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="verdicts.down",
                tooltip="Next level or piece of evidence"),
        Binding("k", "cursor_up", "Up", show=False, id="verdicts.up",
                tooltip="Previous level or piece of evidence"),
        Binding("enter", "select", "Go to evidence", id="verdicts.jump",
                tooltip="Jump to the evidence: its log line, its metric point, or the record"),
        Binding("l", "log_line", "Log line", id="verdicts.log_line",
                tooltip="Jump to the log line a metric point was read from"),
    ]

    def action_log_line(self) -> None:
        if self.highlighted is not None:
            self.post_message(EvidenceLogLineWanted(self.get_option_at_index(self.highlighted).id or ""))
