"""One attempt in five panes: overview, diff, log, verdicts, curves.

`[`/`]` step to the previous and next attempt, `n`/`p` to the next and previous failure, `s` to
the next silent failure (in the migration screen's order, whose cursor follows), `tab` cycles
the panes, `c` compares with the attempt marked on the migration screen (else the previous one),
`J` records the reviewer's judgement, `R` focuses the attempt's runs (itself and its re-runs,
listed under the overview when it has several; `enter` opens one).

Judging blind (docs/judgements.md), the screen shows the code, diff, log, metrics and hardware
but not the claim, expected level, verdicts or cause, and refuses what would show them (the brief,
an override); once the judgement is saved it reveals them beside it, marking where they differ.
Every read goes through `workbench.blind.attempt_seen_by`, the one place that decides.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widget import AwaitMount, Widget
from textual.widgets import DataTable, Header, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from domain.models import AttemptSource, AttemptSummary, Migration
from domain.text import clean
from screens.base import Scope, WorkbenchScreen
from screens.data import read
from screens.effort import EffortActions
from screens.messages import AttemptFacts, AttemptShown, EvidenceLogLineWanted, LoadFailed
from screens.navigation import AttemptCursor
from screens.presenters import render
from screens.presenters.verdicts import verdict_options
from screens.widgets.curves import CurvesPane
from screens.widgets.diff_view import DiffPane
from screens.widgets.footer import Footer
from screens.widgets.log_view import LogPane
from screens.widgets.nav_table import NavTable
from screens.widgets.verdict_list import VerdictList
from workbench import config

STEP = Binding.Group("Step", compact=True)
"""`[` and `]` share one footer entry."""
PANES = ("overview", "diff", "log", "verdicts", "curves")
PANE_WIDGETS = {"overview": "#overview-scroll", "diff": "#diff-view", "log": "#log-view",
                "verdicts": "#verdict-list", "curves": "#curves-table"}
"""The widget of each pane that takes its keys."""
LOG_LINE = re.compile(r"\blog line (\d+)")


class Pane(TabPane):
    """A pane of the attempt screen. TabbedContent shows the pane a widget was focused in when
    that focus's message reaches it; by then, after quick `tab`s, the focus may have moved on to
    another pane, and showing this one again would leave the shown pane without focus. So the
    message goes on only while the focus is still in this pane."""

    def on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        focused = self.screen.focused
        if focused is None or self not in focused.ancestors:
            event.stop()


class LazyPane(Pane):
    """A pane whose content is made the first time it is shown (`fill`). An attempt opens on one
    pane; the diff, log and curves panes' widgets and first reads (a git diff, the study opened for
    the log and its error scan, the metric series) had cost every opening and every `[`/`]` for
    panes not shown: about a quarter of the CPU from Enter to the settled screen (issue 39)."""

    def __init__(self, title: str, make: Callable[[], Widget], *, id: str) -> None:
        super().__init__(title, id=id)
        self._make: Callable[[], Widget] | None = make

    def fill(self) -> AwaitMount | None:
        """Mount the content if it is not made yet: what awaits its mounting, else None."""
        if self._make is None:
            return None
        make, self._make = self._make, None
        return self.mount(make())


class RunsTable(NavTable):
    """The attempt's runs, under the overview: the attempt itself and its re-runs (app.tcss sizes it)."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open run", id="attempt.open_run",
                tooltip="Open the highlighted run's own screen (its log, verdicts and curves)"),
    ]


class AttemptScreen(EffortActions, WorkbenchScreen):
    """Pushed from the migration screen with the attempt's summary row."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="attempt.back",
                tooltip="Back to the list it was opened from"),
        Binding("tab", "next_pane", "Pane", id="attempt.next_pane",
                tooltip="Next pane: overview, diff, log, verdicts, curves"),
        Binding("shift+tab", "previous_pane", "Previous pane", show=False, id="attempt.previous_pane",
                tooltip="Previous pane"),
        Binding("left_square_bracket", "step(-1)", "Prev", key_display="[", id="attempt.previous",
                tooltip="The previous attempt", group=STEP),
        Binding("right_square_bracket", "step(1)", "Next", key_display="]", id="attempt.next",
                tooltip="The next attempt", group=STEP),
        Binding("n", "failure(1)", "Next failure", id="attempt.next_failure",
                tooltip="The next failed attempt"),
        Binding("p", "failure(-1)", "Prev failure", show=False, id="attempt.previous_failure",
                tooltip="The previous failed attempt"),
        Binding("s", "silent", "Silent", show=False, id="attempt.next_silent",
                tooltip="The next silent failure"),
        Binding("c", "compare", "Compare", id="attempt.compare",
                tooltip="Compare with the attempt marked on the migration screen, else the previous one"),
        Binding("r", "rerun", "Re-run", id="attempt.rerun",
                tooltip="Re-run this attempt's commit (shows the command to confirm first)"),
        Binding("E", "explain", "Explain", show=False, id="attempt.explain",
                tooltip="Explain a level-2 deviation by controlled re-runs (asks first: it runs the command)"),
        Binding("b", "brief", "Brief", id="attempt.brief",
                tooltip="AI brief of this attempt (advisory; asks before sending anything)"),
        Binding("J", "judge", "Judge", id="attempt.judge",
                tooltip="Record your judgement of this attempt, level by level (then see the verifier's)"),
        Binding("R", "runs", "Runs", show=False, id="attempt.runs",
                tooltip="Focus this attempt's runs (itself and its re-runs) under the overview; enter opens one"),
        *(Binding(str(n + 1), f"pane('{name}')", name.capitalize(), show=False,
                  id=f"attempt.pane_{name}", tooltip=f"Show the {name} pane")
          for n, name in enumerate(PANES)),
    ]
    FOOTER_FIRST = ("attempt.back", "attempt.previous", "attempt.next", "attempt.judge", "attempt.compare",
                    "attempt.rerun", "attempt.brief", "app.help", "attempt.next_pane")
    """What fits 80 columns: this screen's own keys before the effort keys."""
    help_title = "attempt"

    def __init__(self, migration: Migration, summary: AttemptSummary, cursor: AttemptCursor,
                 *, pane: str = "overview") -> None:
        super().__init__(classes="attempt")
        self.migration = migration
        self.summary = summary
        self.cursor = cursor
        """The migration screen's attempts in its order, for stepping, the diff's default and `c`."""
        self.pane = pane
        self.facts: AttemptFacts | None = None
        self.shown_at = time.monotonic()
        """When this attempt was shown: a judgement's active time runs from here."""

    # --- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        a = self.summary.attempt
        previous = self.cursor.previous_commit(a.id, a.rerun_of)
        reference = self.cursor.reference()
        yield Header()
        yield Static(render.attempt_heading(self.migration, self.summary), id="attempt-header")
        yield Static(id="problem", classes="problem")
        with TabbedContent(initial=self.pane, id="panes"):
            with Pane("Overview", id="overview"):
                with VerticalScroll(id="overview-scroll"):
                    yield Static(render.attempt_overview(self.summary, None, ""), id="overview-text")
                    yield Static(id="runs-title")
                    yield RunsTable(id="runs-table")
            yield self._pane("Diff", lambda: DiffPane(
                self.app.db_path, self.migration.repo, new=a.commit, previous=previous[1] if previous else None,
                previous_label=f"attempt #{previous[0]}" if previous else "", base=self.migration.base_commit,
                attempt_id=a.id))
            yield self._pane("Log", lambda: LogPane(self.app.db_path, a.log_id))
            with Pane("Verdicts", id="verdicts"):
                yield VerdictList(Option(Text("Loading the verdicts…", style="dim"), disabled=True),
                                  id="verdict-list")
            yield self._pane("Curves", lambda: CurvesPane(
                self.app.db_path, [(f"#{a.seq}", a.id)],
                reference.attempt.id if reference and reference.attempt.id != a.id else None, self.migration.id))
        yield Footer()

    def _pane(self, title: str, make: Callable[[], Widget]) -> Pane:
        """The pane shown first with its content; another made when first shown (`LazyPane`)."""
        name = title.lower()
        return Pane(title, make(), id=name) if name == self.pane else LazyPane(title, make, id=name)

    def verify_scope(self) -> Scope:
        slug, seq = self.migration.slug, self.summary.attempt.seq
        return slug, seq, f"{clean(slug)} #{seq}"

    def reference_ids(self) -> set[int]:
        a = self.summary.attempt
        return {a.id} if a.source is AttemptSource.REFERENCE else set()

    def effort_target(self) -> tuple[Migration, int | None, str]:
        """For the effort keys (screens/effort.py): this attempt."""
        return self.migration, self.summary.attempt.id, f"{self.migration.slug} #{self.summary.attempt.seq}"

    def effort_level(self) -> int | None:
        """The verdict highlighted on the verdicts pane, for `o`; from another pane, none (the
        form then opens on the first level not passed)."""
        verdicts = self.query_one(VerdictList)
        if self.pane != "verdicts" or verdicts.highlighted is None:
            return None
        option_id = verdicts.get_option_at_index(verdicts.highlighted).id or ""
        match = re.match(r"(?:level|ev):(\d+)", option_id)
        return int(match.group(1)) if match else None

    def effort_saved(self, what: str) -> None:
        super().effort_saved(what)
        if what == "override":
            self.load_facts(self.app.db_path, self.summary.attempt.id, self.migration.repo,
                            self.summary.attempt.commit)

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        runs = self.query_one(RunsTable)
        for label, key in render.RUN_COLUMNS:
            runs.add_column(label, key=key)
        runs.display = self.query_one("#runs-title").display = False
        self.load_facts(self.app.db_path, self.summary.attempt.id, self.migration.repo,
                        self.summary.attempt.commit)
        self.call_after_refresh(self._focus_pane)

    @work(thread=True, exclusive=True, exit_on_error=False, group="attempt")
    def load_facts(self, path: Path, attempt_id: int, repo: str, commit: str, subject: str | None = None) -> None:
        """The attempt as this reviewer may see it now; the commit's subject from git unless known."""
        from storage.explanations import latest_explanation
        from workbench.blind import attempt_seen_by, runs_seen_by
        from workbench.diffs import commit_subject
        from workbench.ranwith import compare

        reviewer = config.reviewer()
        view = read(path, lambda db: attempt_seen_by(db, reviewer, attempt_id))
        if isinstance(view, LoadFailed):
            self.post_message(view)
            return
        if view is None:
            self.post_message(LoadFailed(f"attempt {attempt_id} is no longer in the study"))
            return
        environment = read(path, lambda db: compare(db, view.summary.attempt))
        explanation = read(path, lambda db: latest_explanation(db, attempt_id))
        runs = read(path, lambda db: runs_seen_by(db, reviewer, attempt_id))
        self.post_message(AttemptFacts(attempt_id, view, commit_subject(repo, commit) if subject is None else subject,
                                       None if isinstance(environment, LoadFailed) else environment,
                                       None if isinstance(explanation, LoadFailed) else explanation,
                                       () if isinstance(runs, LoadFailed) else tuple(runs)))

    @property
    def hidden(self) -> bool:
        """Judged blind and not yet by this reviewer (or not read yet): verdicts, claim and cause
        stay hidden."""
        return self.facts is None or self.summary.hidden

    def on_attempt_facts(self, message: AttemptFacts) -> None:
        if message.attempt_id != self.summary.attempt.id or message == self.facts:
            return
        self.facts = message
        view = message.view
        self.summary = view.summary
        rerun_of = next((run.seq for run in message.runs if run.id == view.summary.attempt.rerun_of), None)
        self.query_one("#attempt-header", Static).update(render.attempt_heading(self.migration, view.summary, rerun_of))
        self.query_one("#overview-text", Static).update(
            render.attempt_overview(view.summary, view.verification, message.subject, view.judgement,
                                    message.environment))
        for curves in self.query(CurvesPane):  # none until the curves pane is first shown
            curves.sync_blind(view.summary.hidden)
        self._show_runs(message.runs)
        verdict_list = self.query_one(VerdictList)
        verdict_list.clear_options()
        verdict_list.add_options(verdict_options(view.verdicts, () if view.summary.hidden else view.decided,
                                                  view.counted_for))
        if message.explanation and not view.summary.hidden:
            from screens.explain import explanation_text

            verdict_list.add_option(Option(explanation_text(message.explanation), id="explanation", disabled=True))
        if view.summary.hidden:
            verdict_list.add_option(Option(Text("The verdicts are hidden while you judge this attempt blind: "
                                                "press J to record your judgement, then they show beside it.",
                                                style="dim"), disabled=True))
        elif not view.verdicts and self.summary.attempt.source is AttemptSource.REFERENCE:
            verdict_list.add_option(Option(Text("The reference run has no verdicts: the agent's "
                                                "attempts are judged against it.", style="dim"),
                                           disabled=True))
        elif not view.verdicts and not view.decided:
            verdict_list.add_option(Option(Text("No verdicts yet: run workbench verify on the study.",
                                                style="dim"), disabled=True))

    def _show_runs(self, runs: tuple) -> None:
        """The runs table under the overview, when the attempt has re-runs; the cursor stays on
        the same run when it is read again."""
        table = self.query_one(RunsTable)
        title = self.query_one("#runs-title", Static)
        table.display = title.display = len(runs) > 1
        if len(runs) < 2:
            return
        kept = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value if table.row_count else None
        counted = sum(r.counted for r in runs)
        title.update(Text(f"\nRuns of this attempt: {counted} counted as one (its counted verdict takes"
                          " each level from a reviewer's override, else the latest run that passed or failed"
                          " it) · R focuses, enter opens", style="bold"))
        table.clear()
        for run in runs:
            table.add_row(*render.run_row(run, self.summary.attempt.id), key=str(run.id))
        keys = [str(r.id) for r in runs]
        table.move_cursor(row=keys.index(kept) if kept in keys else keys.index(str(self.summary.attempt.id))
                          if str(self.summary.attempt.id) in keys else 0, animate=False)

    def action_runs(self) -> None:
        table = self.query_one(RunsTable)
        if not table.display:
            self.app.notify("This attempt has no re-runs: r re-runs it", markup=False)
            return
        if self.tabs.active != "overview":
            self.action_pane("overview")
        table.focus()
        table.scroll_visible()

    @on(DataTable.RowSelected, "#runs-table")
    def _run_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        run_id = int(event.row_key.value or 0)
        if run_id and run_id != self.summary.attempt.id:
            self.open_run(self.app.db_path, run_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="open-run")
    def open_run(self, path: Path, run_id: int) -> None:
        """The run's own attempt screen, its summary read as this reviewer may see it."""
        from storage.queries import attempt_summary
        from workbench.blind import as_seen_by

        reviewer = config.reviewer()
        found = read(path, lambda db: as_seen_by(db, reviewer, [s for s in [attempt_summary(db, run_id)] if s]))
        if isinstance(found, LoadFailed):
            self.post_message(found)
        elif found:
            self.app.call_from_thread(self.app.push_screen, AttemptScreen(self.migration, found[0], self.cursor))

    def study_changed(self) -> None:
        """Another reviewer or process wrote: read again (blind mode may have changed), without
        asking git for the subject again."""
        self.load_facts(self.app.db_path, self.summary.attempt.id, self.migration.repo,
                        self.summary.attempt.commit, self.facts.subject if self.facts else None)

    def action_brief(self) -> None:
        from screens.brief import BriefScreen

        if self.hidden:
            self.app.notify("The brief reads the agent's claim: judge this attempt first (J)", markup=False)
            return
        self.app.push_screen(BriefScreen(self.migration, self.summary.attempt))

    def action_judge(self) -> None:
        from screens.forms import JudgementForm

        a = self.summary.attempt
        if a.source is AttemptSource.REFERENCE:
            self.app.notify("The reference run is the yardstick: judge the agent's attempts", markup=False)
            return
        self.app.push_screen(JudgementForm(self.migration.slug, a.seq, started=self.shown_at,
                                           attempt_label=f"{self.migration.slug} #{a.seq}"), self._judged)

    def _judged(self, new_id: int | None) -> None:
        """Saved: every screen reads its rows again (this one through `study_changed`), and this
        one now reveals what was hidden, beside the judgement."""
        if new_id is not None:
            self.app.effort.study_changed()

    # --- panes ------------------------------------------------------------------------------------
    @property
    def tabs(self) -> TabbedContent:
        return self.query_one(TabbedContent)

    def _focus_pane(self, *, keep_inside: bool = False) -> None:
        """Focus the shown pane's widget, so its keys (j/k/g/G, the log's and the diff's) work
        however the pane was reached. At once, not after a refresh: TabbedContent shows the pane
        that holds the focus, so a focus still on its way to the pane left (or Textual moving the
        focus off the widget the switch hid, to its hidden sibling) brought the old pane back or
        left the new one without focus. `keep_inside`: leave the focus where it is when it is
        already in the shown pane (the diff's file list, the log's search box)."""
        if not self.is_current:
            return
        try:
            pane = self.tabs.active
        except NoMatches:  # recomposing: `show` focuses once the new panes are there
            return
        try:
            target = self.query_one(PANE_WIDGETS.get(pane, "#overview-scroll"))
        except NoMatches:  # the pane's content is being made (`_filled` focuses it): a focus left
            if self._pane_of(self.focused) != pane:  # in another pane would bring that one back
                self.set_focus(None)
            return
        if not (keep_inside and self._pane_of(self.focused) == pane):
            self.set_focus(target)

    @staticmethod
    def _pane_of(widget: Widget | None) -> str | None:
        """The id of the pane `widget` is in (None: outside the panes, or no widget)."""
        node = widget
        while node is not None and not isinstance(node, TabPane):
            node = node.parent
        return node.id if isinstance(node, TabPane) else None

    def watch_focused(self, focused: Widget | None) -> None:
        """Focus lost (the focused widget hidden or recomposed) or gone to a pane not shown: back
        to the shown pane's widget, once the screen has settled."""
        if not self.app.app_focus or not self.is_current:
            return  # the app lost the focus (Textual gives it back), or another screen is on top
        pane = self._pane_of(focused)
        if focused is None or (pane is not None and pane != self.pane):
            self.call_after_refresh(self._focus_pane, keep_inside=True)

    def on_screen_resume(self) -> None:
        """Back from the help, a form or another screen."""
        self._focus_pane(keep_inside=True)

    def action_pane(self, name: str) -> AwaitMount | None:
        """Show the pane and focus its widget; a pane shown for the first time is made first,
        and what it returns awaits that (the key's action waits on it, and the focus follows)."""
        filling = self._fill(name)
        self.tabs.active = name
        self.pane = name
        self._focus_pane()
        return filling

    def _fill(self, name: str) -> AwaitMount | None:
        """Make the pane's content if it is a `LazyPane` not shown yet; its widget takes the focus
        once mounted, if its pane is still the one shown."""
        try:
            pane = self.query_one(f"#{name}", TabPane)
        except NoMatches:
            return None
        filling = pane.fill() if isinstance(pane, LazyPane) else None
        if filling is not None:
            self.call_next(self._filled, filling)
        return filling

    async def _filled(self, filling: AwaitMount) -> None:
        await filling
        self._focus_pane(keep_inside=True)

    def action_next_pane(self) -> AwaitMount | None:
        index = PANES.index(self.tabs.active) if self.tabs.active in PANES else 0
        return self.action_pane(PANES[(index + 1) % len(PANES)])

    def action_previous_pane(self) -> AwaitMount | None:
        index = PANES.index(self.tabs.active) if self.tabs.active in PANES else 0
        return self.action_pane(PANES[(index - 1) % len(PANES)])

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        """Whatever showed the pane (a key, a click on its tab, the tab bar's arrows)."""
        self.pane = self.tabs.active or self.pane  # not the event's: a later key may have moved on
        self._fill(self.pane)
        self._focus_pane(keep_inside=True)

    # --- moving between attempts --------------------------------------------------------------------
    async def show(self, summary: AttemptSummary | None) -> None:
        if summary is None or summary.attempt.id == self.summary.attempt.id:
            return
        self.summary = summary
        self.migration = self.cursor.migration_of(summary) or self.migration  # a queue spans migrations
        self.facts = None
        self.shown_at = time.monotonic()
        self.app.post_message(AttemptShown(self.migration.id, summary.attempt.id))
        await self.recompose()
        self.on_mount()

    @property
    def anchor(self) -> int:
        """Where this attempt stands in the list: itself, or for a re-run (not a row of its own)
        the attempt it re-ran."""
        a = self.summary.attempt
        return a.rerun_of if a.rerun_of is not None and self.cursor.index(a.id) < 0 else a.id

    async def action_step(self, step: int) -> None:
        found = self.cursor.step(self.anchor, step)
        if found is None:
            self.app.notify(self.cursor.NO_MORE, markup=False)
        await self.show(found)

    async def action_failure(self, step: int) -> None:
        found = self.cursor.failure(self.anchor, step)
        if found is None:
            self.app.notify("No more failures that way", markup=False)
        await self.show(found)

    async def action_silent(self) -> None:
        found = self.cursor.failure(self.anchor, 1, silent=True)
        if found is None:
            self.app.notify("No silent failure after this one", markup=False)
        await self.show(found)

    def action_explain(self) -> None:
        from screens.explain import ExplainConfirm

        a = self.summary.attempt
        if self.hidden:
            self.app.notify("Explain reads the verdicts: judge this attempt first (J)", markup=False)
            return
        if a.source is AttemptSource.REFERENCE:
            self.app.notify("The reference run is the yardstick: nothing to explain", markup=False)
            return
        self.app.push_screen(ExplainConfirm(self.migration, a),
                             lambda go: self.run_explain(self.app.db_path, self.migration.slug, a.seq) if go else None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="explain")
    def run_explain(self, path: Path, slug: str, seq: int) -> None:
        """`workbench explain` with the screen's defaults; its runs are jobs, its result is stored
        with the attempt, and the verdicts pane shows it when the study is read again."""
        import os

        from screens.explain import MAX_RUNS, MINUTES
        from storage.database import open_study
        from workbench.explain import default_find_links, explain

        notify = lambda text: self.app.call_from_thread(self.app.notify, text, markup=False)  # noqa: E731
        notify(f"Explaining {slug} #{seq}: the runs are listed on the jobs screen")
        study = open_study(path)
        try:
            result = explain(study, slug, seq, config.reviewer(), max_runs=MAX_RUNS, minutes=MINUTES,
                             venv=os.environ.get("WORKBENCH_TARGET_VENV") or None, echo=notify,
                             find_links=default_find_links())
        except Exception as exc:  # noqa: BLE001 - shown to the reviewer, the stored runs stay
            notify(f"Explain stopped: {exc}")
            return
        finally:
            study.close()
        notify(result["sentence"])
        self.app.call_from_thread(self.study_changed)

    def action_rerun(self) -> None:
        from screens.rerun import open_launcher

        open_launcher(self, self.migration, self.summary.attempt)

    def action_compare(self) -> None:
        other = self.cursor.compare_partner(self.summary.attempt.id)
        if other is None and self.anchor != self.summary.attempt.id:  # a re-run: with the attempt it re-ran
            other = self.cursor.get(self.anchor)
        if other is None:
            self.app.notify("Nothing to compare with: mark an attempt with c on the migration screen",
                            markup=False)
            return
        from screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(self.migration, other, self.summary, self.cursor.reference()))

    # --- evidence --------------------------------------------------------------------------------------
    def on_evidence_log_line_wanted(self, message: EvidenceLogLineWanted) -> None:
        self.jump_to_log_line_of(message.option_id)

    @on(OptionList.OptionSelected, "#verdict-list")
    def _evidence_chosen(self, event: OptionList.OptionSelected) -> None:
        self.jump_to(event.option.id or "")

    def _evidence(self, option_id: str):
        if not option_id.startswith("ev:") or self.facts is None:
            return None
        _, level, index = option_id.split(":")
        for verdict in self.facts.view.verdicts:
            if verdict.level == int(level):
                return verdict.evidence[int(index)]
        return None

    def jump_to(self, option_id: str) -> None:
        evidence = self._evidence(option_id)
        if evidence is None:
            return
        if evidence.kind in ("log_line", "probe"):
            digits = re.search(r"\d+", evidence.ref)
            if digits:
                self.show_log_line(int(digits.group()))
                return
        if evidence.kind == "metric" and "@" in evidence.ref:
            name, _, step = evidence.ref.rpartition("@")
            if step.isdigit():
                self.action_pane("curves")
                self.query_one(CurvesPane).show_point(name, int(step))
                return
        self.action_pane("overview")

    def jump_to_log_line_of(self, option_id: str) -> None:
        evidence = self._evidence(option_id)
        if evidence is None:
            return
        match = LOG_LINE.search(evidence.text)
        if evidence.kind in ("log_line", "probe"):
            match = re.search(r"(\d+)", evidence.ref)
        if match:
            self.show_log_line(int(match.group(1)))
        else:
            self.app.notify("This evidence names no log line", markup=False)

    def show_log_line(self, line: int) -> None:
        self.action_pane("log")
        self.query_one(LogPane).go_to_line(line)

