"""Two attempts side by side: only what differs in command, configuration and hardware
evidence, their curves overlaid on the reference's, and the diff between their commits."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane

from domain.models import AttemptSummary, Migration
from domain.text import clean
from screens import render
from screens.base import WorkbenchScreen
from screens.curves import CurvesPane
from screens.data import read
from screens.diff_view import DiffPane
from screens.messages import LoadFailed
from screens.text import text

PANES = ("differences", "curves", "diff")


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
    out["L3 hardware evidence"] = l3_reason or "–"
    out["status"] = render.attempt_status(summary).plain
    out["exit code from"] = a.exit_code_source or "–"
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


@dataclass
class CompareFacts(Message):
    left: dict[str, str]
    right: dict[str, str]


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
            ta.stylize("bold red", start, end)
        for start, end in spans_b:
            tb.stylize("bold green", start, end)
        table.add_row(text(key), ta, tb)
    same = len(keys) - len(differing)
    table.add_row(Text(""), Text(f"{same} other fields are the same", style="dim"), Text(""))
    return table


class CompareScreen(WorkbenchScreen):
    """Pushed with two attempts of one migration: `left` is the earlier choice."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back", tooltip="Back"),
        Binding("tab", "next_pane", "Pane", id="compare.next_pane",
                tooltip="Next pane: differences, curves, diff"),
        Binding("shift+tab", "previous_pane", "Pane", show=False, id="compare.previous_pane",
                tooltip="Previous pane"),
        Binding("x", "swap", "Swap", id="compare.swap", tooltip="Swap the two sides"),
    ]
    help_title = "compare"

    def __init__(self, migration: Migration, left: AttemptSummary, right: AttemptSummary,
                 reference: AttemptSummary | None) -> None:
        super().__init__(classes="compare")
        self.migration = migration
        self.left = left
        self.right = right
        self.reference = reference
        """The migration's reference run, drawn on the curves (None: it has none loaded)."""

    def compose(self) -> ComposeResult:
        a, b = self.left.attempt, self.right.attempt
        reference = self.reference
        heading = text(self.migration.slug, "bold")
        heading.append("  compare ")
        heading.append_text(text(f"#{a.seq}", "bold"))
        heading.append(" ")
        heading.append_text(render.ladder(self.left))
        heading.append(" with ")
        heading.append_text(text(f"#{b.seq}", "bold"))
        heading.append(" ")
        heading.append_text(render.ladder(self.right))
        yield Header()
        yield Static(heading, id="compare-header")
        yield Static(id="problem", classes="problem")
        with TabbedContent(id="compare-panes"):
            with TabPane("Differences", id="differences"):
                with VerticalScroll(id="differences-scroll"):
                    yield Static(Text("Loading…", style="dim"), id="differences-text")
            with TabPane("Curves", id="curves"):
                ref_id = reference.attempt.id if reference else None
                yield CurvesPane(self.app.db_path, [(f"#{a.seq}", a.id), (f"#{b.seq}", b.id)],
                                 ref_id if ref_id not in (a.id, b.id) else None, self.migration.id)
            with TabPane("Diff", id="diff"):
                yield DiffPane(self.app.db_path, self.migration.repo, new=b.commit, previous=a.commit,
                               previous_label=f"attempt #{a.seq}", base=self.migration.base_commit)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self._load(self.app.db_path, self.left, self.right)

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def _load(self, path: Path, left: AttemptSummary, right: AttemptSummary) -> None:
        from storage import queries

        def one(db, summary):
            verdicts = {v.level: v for v in queries.verdicts(db, summary.attempt.id)}
            l3 = verdicts.get(3)
            reason = ""
            if l3 is not None:
                reason = f"{l3.effective.value}: {l3.reason}"
            return facts(summary, queries.current_verification(db, summary.attempt.id), reason)

        result = read(path, lambda db: (one(db, left), one(db, right)))
        if isinstance(result, LoadFailed):
            self.post_message(result)
        else:
            self.post_message(CompareFacts(*result))

    def on_compare_facts(self, message: CompareFacts) -> None:
        self.query_one("#differences-text", Static).update(difference_table(
            f"#{self.left.attempt.seq}", f"#{self.right.attempt.seq}", message.left, message.right,
            width=self.app.size.width if self.app.size.width < 120 else 0))

    def action_next_pane(self, step: int = 1) -> None:
        tabs = self.query_one(TabbedContent)
        index = PANES.index(tabs.active) if tabs.active in PANES else 0
        tabs.active = PANES[(index + step) % len(PANES)]
        focus = {"differences": "#differences-scroll", "curves": "#curves-table",
                 "diff": "#diff-view"}[tabs.active]
        self.call_after_refresh(lambda: self.query_one(focus).focus())

    def action_previous_pane(self) -> None:
        self.action_next_pane(-1)

    def action_swap(self) -> None:
        self.app.switch_screen(CompareScreen(self.migration, self.right, self.left, self.reference))
