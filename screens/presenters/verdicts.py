"""The verdicts pane's options: each level of the ladder and the evidence behind it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.widgets.option_list import Option

from domain.models import LADDER, Evidence, Outcome
from domain.text import clean
from domain.verdicts import Verdict
from screens.presenters import render
from screens.presenters.palette import tone
from screens.text import text


def verdict_options(verdicts: list[Verdict], decided: Sequence[tuple[int, Outcome, int]] = (),
                    counted_for: int | None = None) -> list[Option]:
    """One option per level (mark, outcome, the latest override, the counted outcome where
    another run decided it, the reason) and one per piece of evidence, with ids `level:N` and
    `ev:N:i` the attempt screen jumps by. `decided`: (level, counted outcome, the deciding run's
    seq), so the pane reads as the attempt's row and the counts; a level only another run has
    shows too (`counted:N`: this run has no verdict there). `counted_for`: on a re-run, the seq of
    the attempt whose counts those are."""
    counted = {level: _counted_line(outcome, seq, counted_for) for level, outcome, seq in decided}
    own = {verdict.level: verdict for verdict in verdicts}
    options = []
    for level in sorted(own.keys() | counted.keys()):
        verdict = own.get(level)
        note = [counted[level]] if level in counted else []
        if verdict is None:
            head = _level_head(level)
            head.append("no verdict on this run", style="dim")
            options.append(Option(Group(head, *note), id=f"counted:{level}"))
            continue
        # Wrapped lines hang under their own text, not under the level's name.
        reason = Padding(text(verdict.reason or "–"), (0, 0, 0, 2))
        options.append(Option(Group(_verdict_head(verdict), *note, reason), id=f"level:{level}"))
        for n, evidence in enumerate(verdict.evidence):
            line = Text()
            line.append(_evidence_label(evidence), style="bold")
            line.append(" ")
            line.append_text(text(evidence.text))
            arrow = Table.grid(padding=(0, 1))
            arrow.add_column(no_wrap=True, style="dim")
            arrow.add_column(ratio=1)
            arrow.add_row(Text("   →"), line)
            options.append(Option(arrow, id=f"ev:{level}:{n}"))
    return options


def _level_head(level: int) -> Text:
    head = Text()
    head.append(f"L{level} {LADDER.get(level, '')} ", style="bold")
    return head


def _verdict_head(verdict: Verdict) -> Text:
    """The level, this run's effective outcome, and the override that made it so."""
    mark, style = render.MARKS.get(verdict.effective, render.MARKS[None])
    head = _level_head(verdict.level)
    head.append(f"{mark} {verdict.effective.value}", style=tone(style))
    if verdict.overrides:
        last = verdict.overrides[-1]
        head.append(f" (verifier: {verdict.outcome.value}; override by ", style="dim")
        head.append_text(text(last.reviewer, "dim"))
        head.append(": ", style="dim")
        head.append_text(text(last.justification, "dim"))
        head.append(")", style="dim")
    return head


def _counted_line(outcome: Outcome, seq: int, counted_for: int | None) -> Text:
    """The attempt's counted outcome at a level and the run that decided it (storage.counted): a
    re-run on an agent attempt's pane; on a re-run's, the attempt's own run or another re-run."""
    mark, style = render.MARKS.get(outcome, render.MARKS[None])
    line = Text("  counted: " if counted_for is None else f"  counted for #{counted_for}: ", style="dim")
    line.append(f"{mark} {outcome.value}", style=tone(style))
    line.append(f" — {'run' if seq == counted_for else 're-run'} #{seq}", style="dim")
    return line


def _evidence_label(evidence: Evidence) -> str:
    if evidence.kind == "log_line":
        return f"log line {clean(evidence.ref)}"
    if evidence.kind == "metric":
        return f"metric {clean(evidence.ref)}"
    return f"{clean(evidence.kind)} {clean(evidence.ref)}"
