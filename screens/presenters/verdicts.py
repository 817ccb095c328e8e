"""The verdicts pane's options: each level of the ladder and the evidence behind it."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.widgets.option_list import Option

from domain.models import LADDER, Evidence
from domain.text import clean
from domain.verdicts import Verdict
from screens.presenters import render
from screens.presenters.palette import tone
from screens.text import text


def verdict_options(verdicts: list[Verdict]) -> list[Option]:
    """One option per level (mark, outcome, the latest override, the reason) and one per
    piece of evidence, with ids `level:N` and `ev:N:i` the attempt screen jumps by."""
    options = []
    for verdict in verdicts:
        mark, style = render.MARKS.get(verdict.effective, render.MARKS[None])
        head = Text()
        head.append(f"L{verdict.level} {LADDER.get(verdict.level, '')} ", style="bold")
        head.append(f"{mark} {verdict.effective.value}", style=tone(style))
        if verdict.overrides:
            last = verdict.overrides[-1]
            head.append(f" (verifier: {verdict.outcome.value}; override by ", style="dim")
            head.append_text(text(last.reviewer, "dim"))
            head.append(": ", style="dim")
            head.append_text(text(last.justification, "dim"))
            head.append(")", style="dim")
        # Wrapped lines hang under their own text, not under the level's name.
        reason = Padding(text(verdict.reason or "–"), (0, 0, 0, 2))
        options.append(Option(Group(head, reason), id=f"level:{verdict.level}"))
        for n, evidence in enumerate(verdict.evidence):
            line = Text()
            line.append(_evidence_label(evidence), style="bold")
            line.append(" ")
            line.append_text(text(evidence.text))
            arrow = Table.grid(padding=(0, 1))
            arrow.add_column(no_wrap=True, style="dim")
            arrow.add_column(ratio=1)
            arrow.add_row(Text("   →"), line)
            options.append(Option(arrow, id=f"ev:{verdict.level}:{n}"))
    return options


def _evidence_label(evidence: Evidence) -> str:
    if evidence.kind == "log_line":
        return f"log line {clean(evidence.ref)}"
    if evidence.kind == "metric":
        return f"metric {clean(evidence.ref)}"
    return f"{clean(evidence.kind)} {clean(evidence.ref)}"
