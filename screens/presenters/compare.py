"""Two attempts side by side: everything compared as strings, and a table of the two with the
changed characters marked."""

from __future__ import annotations

import shlex

from rich.table import Table
from rich.text import Text

from domain.models import AttemptSummary
from domain.text import clean
from screens.presenters import render
from screens.presenters.palette import tone
from screens.text import text


def _options(argv: tuple[str, ...]) -> dict[str, str]:
    """`--name value` / `--name=value` / flags, and positional arguments by position."""
    out: dict[str, str] = {}
    args = list(argv)
    position = 0
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and len(arg) > 1:
            if "=" in arg:
                name, value = arg.split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                name, value = arg, args[i + 1]
                i += 1
            else:
                name, value = arg, "(set)"
            out[f"argv {name}"] = value
        else:
            out[f"argv [{position}]"] = arg
            position += 1
        i += 1
    return out


def facts(summary: AttemptSummary, verification, l3_reason: str) -> dict[str, str]:
    """Everything compared, as strings: command, configuration, hardware evidence, outcome."""
    a = summary.attempt
    out = {"commit": a.commit[:12], "command": shlex.join(a.command.argv), "cwd": a.command.cwd}
    out.update(_options(a.command.argv))
    for key, value in a.command.env.items():
        out[f"env {key}"] = value
    out["intended hardware"] = a.intended_hardware.describe() if a.intended_hardware else "–"
    out["observed hardware"] = a.observed_hardware.describe() if a.observed_hardware else "–"
    out["status"] = render.attempt_status(summary).plain
    out["exit code from"] = a.exit_code_source or "–"
    if summary.hidden:  # blinded for this reviewer (domain.blind.blinded): nothing of the verdicts
        for key in ("L3 hardware evidence", "ladder", "failure", "expected level"):
            out[key] = render.HIDDEN
        return out
    out["L3 hardware evidence"] = l3_reason or "–"
    out["ladder"] = render.ladder(summary).plain
    out["failure"] = render.failure(summary).plain
    out["expected level"] = f"L{a.expected_level}" if a.expected_level is not None else "–"
    if verification is not None:
        out["verified level"] = f"L{verification.highest_level}"
        if verification.wall_seconds is not None:
            out["wall time"] = f"{verification.wall_seconds:.2f} s"
        if verification.cost_dollars is not None:
            out["cost"] = f"${verification.cost_dollars:.5f}"
    return out


def shorten(value: str, spans: list[tuple[int, int]], width: int) -> tuple[str, list[tuple[int, int]]]:
    """`value` cut to about `width` characters around its first changed span (with `…` where
    it was cut), and the spans moved to match; unchanged when it fits."""
    if len(value) <= width or width < 8:
        return value, spans
    first = spans[0][0] if spans else 0
    start = max(0, min(first - width // 4, len(value) - width + 1))
    end = start + width - (1 if start else 0)
    if end < len(value):
        end -= 1
    cut = ("…" if start else "") + value[start:end] + ("…" if end < len(value) else "")
    shift = start - (1 if start else 0)
    moved = [(max(a - shift, 0), min(b - shift, len(cut))) for a, b in spans
             if b > start and a < end]
    return cut, moved


def difference_table(left_label: str, right_label: str, left: dict[str, str],
                     right: dict[str, str], *, width: int = 0) -> Table | Text:
    """The fields that differ; with `width` (the screen's), long commands are cut around the
    first change so that each fits one line of its column."""
    from workbench.diffs import changed_words

    keys = list(dict.fromkeys([*left, *right]))
    differing = [k for k in keys if left.get(k, "–") != right.get(k, "–") and k != "command"]
    if left.get("command") != right.get("command"):
        differing.insert(0, "command")
    table = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
    table.add_column("", style="dim", no_wrap=True)
    table.add_column(Text(left_label, style="bold"), ratio=1)
    table.add_column(Text(right_label, style="bold"), ratio=1)
    for key in differing:
        a, b = clean(left.get(key, "–")), clean(right.get(key, "–"))
        spans_a, spans_b = changed_words(a, b)
        if key == "command" and width:
            column = max((width - 26) // 2, 8)
            a, spans_a = shorten(a, list(spans_a), column)
            b, spans_b = shorten(b, list(spans_b), column)
        ta, tb = Text(a), Text(b)
        for start, end in spans_a:
            ta.stylize(tone("bold $text-error"), start, end)
        for start, end in spans_b:
            tb.stylize(tone("bold $text-success"), start, end)
        table.add_row(text(key), ta, tb)
    same = len(keys) - len(differing)
    table.add_row(Text(""), Text(f"{same} other fields are the same", style="dim"), Text(""))
    return table
