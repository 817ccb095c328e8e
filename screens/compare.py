"""Two attempts side by side: only what differs in command, configuration and hardware
evidence, their curves overlaid on the reference's, and the diff between their commits."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Header, Static, TabbedContent, TabPane

from domain.models import AttemptSummary, Migration
from screens.base import WorkbenchScreen
from screens.data import read
from screens.messages import CompareFacts, LoadFailed
from screens.presenters import render
from screens.presenters.compare import difference_table, facts
from screens.text import text
from screens.widgets.curves import CurvesPane
from screens.widgets.diff_view import DiffPane
from screens.widgets.footer import Footer
from workbench import config

PANES = ("differences", "curves", "diff")


class CompareScreen(WorkbenchScreen):
    """Pushed with two attempts of one migration: `left` is the earlier choice."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back", tooltip="Back"),
        Binding("tab", "next_pane", "Pane", id="compare.next_pane",
                tooltip="Next pane: differences, curves, diff"),
        Binding("shift+tab", "previous_pane", "Previous pane", show=False, id="compare.previous_pane",
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
                               previous_label=f"attempt #{a.seq}", base=self.migration.base_commit,
                               attempt_id=b.id)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self._load(self.app.db_path, self.left, self.right)

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def _load(self, path: Path, left: AttemptSummary, right: AttemptSummary) -> None:
        from workbench.blind import attempt_seen_by

        reviewer = config.reviewer()

        def one(db, summary):
            """As this reviewer may see it: blinded, with no verdicts, while they judge it blind."""
            view = attempt_seen_by(db, reviewer, summary.attempt.id)
            if view is None:
                return facts(summary, None, "")
            l3 = next((v for v in view.verdicts if v.level == 3), None)
            return facts(view.summary, view.verification, f"{l3.effective.value}: {l3.reason}" if l3 else "")

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
