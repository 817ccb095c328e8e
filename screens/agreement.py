"""Agreement: per level, how far the reviewers agree with each other (Cohen's kappa on the pairs,
Krippendorff's alpha) and with the verifier (kappa and the confusion matrix), each with its
bootstrap interval and number of items; the blind and not-blind figures; the disagreements left
to adjudicate. The same numbers as `workbench agreement --json` (workbench.judging.agreement),
computed in a worker. `enter` on a disagreement opens the adjudication dialog: a final verdict
and a reason, recorded as an override (workbench.judging.adjudicate).

Closed to a reviewer still blind to an attempt (domain.blind.Sight.sees_scope): the figures set
the verifier's verdicts beside the judgements, and taking one's own away from a few gives the
verdicts of the rest; the disagreements name them (docs/judgements.md, "Blind mode")."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Label, Select, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from domain.agreement import AgreementReport, BlindFigure, Disagreement, LevelAgreement, Statistic
from domain.blind import Sight
from domain.models import LADDER, Outcome
from domain.text import plural
from screens.base import WorkbenchScreen
from screens.data import read
from screens.forms import RecordForm, Save
from screens.messages import LoadFailed
from screens.text import text
from screens.typeahead import Input
from screens.widgets.footer import Footer
from screens.widgets.nav_table import NavTable
from workbench import config

PANES = ("figures", "disagreements")
COLUMNS = (("Migration", "migration"), ("#", "seq"), ("Level", "level"), ("Verifier", "verifier"),
           ("Judgements", "judgements"))
OUTCOME_WORDS = {Outcome.PASS.value: "pass", Outcome.FAIL.value: "fail", Outcome.UNKNOWN.value: "unknown"}


def figure(s: Statistic) -> str:
    """`0.500 [0.12, 0.88] n=4`, as `workbench agreement` prints it (`–` when undefined)."""
    if s.value is None:
        return f"–  (undefined) n={s.n}"
    interval = f"  95% [{s.interval[0]:.2f}, {s.interval[1]:.2f}]" if s.interval else "  95% –"
    return f"{s.value:.3f}{interval}  n={s.n}"


def confusion_rows(la: LevelAgreement) -> Text:
    """The level's confusion matrix: the verifier's outcome by row, the reviewers' by column."""
    outcomes = [o.value for o in Outcome]
    out = Text(f"  {'confusion':<19}{'reviewers:':>11}", style="dim")
    out.append("".join(f"{'?' if o == Outcome.UNKNOWN.value else o:>7}" for o in outcomes) + "\n", style="dim")
    for machine in outcomes:
        out.append(f"    {'verifier ' + machine:<28}", style="dim")
        out.append("".join(f"{la.confusion[machine][human]:>7}" for human in outcomes) + "\n")
    return out


def rate(k: int, n: int, interval: tuple[float, float] | None) -> str:
    if not n:
        return "– (none)"
    ci = f" 95% [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return f"{k}/{n} ({k / n:.0%}){ci}"


def blind_block(figures: list[BlindFigure]) -> Text:
    out = Text("Blind and not blind: how often judgements agree with the verifier and with the claim\n",
               style="bold")
    for b in figures:
        out.append(f"  {'blind' if b.blind else 'not blind':<10}", style="bold")
        out.append(plural(b.judgements, "judgement") + "\n")
        out.append("    with the verifier  ", style="dim")
        out.append(rate(b.verifier_agree, b.verifier_n, b.verifier_interval) + "\n")
        out.append("    with the claim     ", style="dim")
        out.append(rate(b.claim_agree, b.claim_n, b.claim_interval) + "\n")
    return out


def figures_text(report: AgreementReport) -> Text:
    out = Text(f"{plural(report.judgements, 'current judgement')}"
               f" · intervals: {report.resamples} bootstrap resamples, seed {report.seed}"
               " (docs/judgements.md)\n\n", style="dim")
    for la in report.levels:
        block = Text(f"L{la.level} {LADDER.get(la.level, '')}\n", style="bold")
        block.append("  reviewers  Cohen's kappa         ", style="dim")
        block.append(figure(la.human_kappa) + "\n")
        block.append("             Krippendorff's alpha  ", style="dim")
        block.append(figure(la.human_alpha) + "\n")
        block.append("  verifier   Cohen's kappa         ", style="dim")
        block.append(figure(la.verifier_kappa) + "\n")
        block.append(f"  verifier pass / reviewer fail {la.confusion['pass']['fail']}"
                     f" · verifier fail / reviewer pass {la.confusion['fail']['pass']}\n")
        block.append_text(confusion_rows(la))
        out.append_text(block)
        out.append("\n")
    out.append_text(blind_block(report.blind))
    return out


def judgements_cell(d: Disagreement) -> Text:
    out = Text()
    for n, (judgement_id, reviewer, outcome) in enumerate(d.judgements):
        if n:
            out.append(", ")
        out.append_text(text(reviewer))
        out.append(f"={outcome} (#{judgement_id})")
    return out


def disagreement_cells(d: Disagreement) -> tuple[Text, ...]:
    return (text(d.migration), Text(f"#{d.seq}"), Text(f"L{d.level}"), Text(d.verifier or "–"),
            judgements_cell(d))


def disagreement_key(d: Disagreement) -> str:
    return f"{d.attempt_id}:{d.level}"


class AdjudicationForm(RecordForm):
    """The final verdict of one level the reviewers (or a reviewer and the verifier) disagree on,
    with a reason: recorded as an adjudication and the override it makes."""

    form_title = "Adjudicate"
    record_name = "adjudication"

    def __init__(self, disagreement: Disagreement) -> None:
        super().__init__()
        self.disagreement = disagreement

    def compose_fields(self) -> ComposeResult:
        d = self.disagreement
        head = text(d.migration, "bold")
        head.append(f" #{d.seq} · L{d.level} {LADDER.get(d.level, '')}", style="bold")
        yield Static(head, classes="form-info")
        said = Text("verifier: ", style="dim")
        said.append(OUTCOME_WORDS.get(d.verifier or "", "no verdict"))
        for judgement_id, reviewer, outcome in d.judgements:
            said.append("\n")
            said.append_text(text(reviewer))
            said.append(f": {OUTCOME_WORDS.get(outcome, outcome)} (judgement #{judgement_id})", style="dim")
        yield Static(said, classes="form-info")
        yield Label("Final verdict")
        yield Select([("pass", "pass"), ("fail", "fail")], prompt="Choose pass or fail", id="adjudication-outcome")
        yield Label("Reason (required)")
        yield Input(placeholder="why this is the final verdict", id="adjudication-reason")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#adjudication-outcome", Select).focus()

    def build(self) -> Save:
        from workbench.judging import adjudicate

        value = self.query_one("#adjudication-outcome", Select).value
        if value is Select.NULL:
            raise ValueError("final verdict: choose pass or fail")
        reason = self.query_one("#adjudication-reason", Input).value
        if not reason.strip():
            raise ValueError("reason: say why this is the final verdict")
        d, reviewer, outcome = self.disagreement, config.reviewer(), str(value)
        return lambda db: adjudicate(db, d.migration, d.seq, level=d.level, outcome=outcome, reason=reason,
                                     reviewer=reviewer)[0]


class DisagreementTable(NavTable):
    BINDINGS = [
        Binding("enter", "select_cursor", "Adjudicate", id="agreement.adjudicate",
                tooltip="Record the final verdict of the highlighted level, with a reason (an override)"),
    ]


class AgreementScreen(WorkbenchScreen):
    """Pushed with `A` from the study screen (or the palette)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="agreement.back", tooltip="Back to the study's migrations"),
        Binding("tab", "next_pane", "Pane", id="agreement.next_pane",
                tooltip="Figures, then the disagreements to adjudicate"),
        Binding("shift+tab", "next_pane", "Pane", show=False, id="agreement.previous_pane",
                tooltip="The other pane"),
        Binding("1", "pane('figures')", "Figures", show=False, id="agreement.pane_figures",
                tooltip="Show the figures"),
        Binding("2", "pane('disagreements')", "Disagreements", show=False, id="agreement.pane_disagreements",
                tooltip="Show the disagreements to adjudicate"),
    ]
    FOOTER_FIRST = ("agreement.back", "agreement.next_pane", "agreement.adjudicate", "app.help")
    help_title = "agreement"

    def __init__(self, *, reviewer: str | None = None, resamples: int | None = None) -> None:
        super().__init__(classes="agreement")
        self.reviewer = reviewer or config.reviewer()
        self.resamples = resamples
        """Bootstrap resamples (None: the study's default, as `workbench agreement`)."""
        self.report: AgreementReport | None = None
        self.hidden: int | None = None
        """How many attempts this reviewer is still blind to (they see no disagreements until 0)."""
        self.rows: dict[str, Disagreement] = {}
        self.computing = False
        self.stale = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("Computing the agreement…", style="dim"), id="agreement-header")
        yield Static(id="problem", classes="problem")
        with TabbedContent(initial="figures", id="agreement-panes"):
            with TabPane("Figures", id="figures"):
                with VerticalScroll(id="figures-scroll"):
                    yield Static(id="agreement-figures")
            with TabPane("Disagreements", id="disagreements"):
                yield Static(id="disagreement-note")
                table = DisagreementTable(id="disagreement-table")
                for label, key in COLUMNS:
                    table.add_column(label, key=key)
                yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#problem").display = False
        self.query_one("#disagreement-note").display = False
        self.computing = True
        self.compute(self.app.db_path)
        self.call_after_refresh(self._focus_pane)

    # --- the figures -----------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="agreement")
    def compute(self, path: Path) -> None:
        from workbench.blind import sight
        from workbench.judging import agreement

        reviewer = self.reviewer
        kw = {} if self.resamples is None else {"resamples": self.resamples}

        def measure(db) -> tuple[AgreementReport | None, Sight]:
            seen = sight(db, reviewer, scope=True)
            return (agreement(db, **kw) if seen.sees_scope else None), seen

        result = read(path, measure)
        if get_current_worker().is_cancelled:
            return
        if isinstance(result, LoadFailed):
            self.post_message(result)
            self.app.call_from_thread(self._done_computing)
        else:
            self.app.call_from_thread(self._computed, *result)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        if event.worker.group == "agreement" and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self.computing = False

    def _done_computing(self) -> None:
        self.computing = False
        if self.stale:
            self.study_changed()

    def _computed(self, report: AgreementReport | None, seen: Sight) -> None:
        self.report, self.hidden = report, seen.pending
        closed = Text(seen.closed("Agreement") + ". Its figures set the verifier's verdicts beside the"
                      " judgements: taking yours away from them would tell the verdicts of attempts you"
                      " have not judged.", style="bold")
        self.query_one("#agreement-figures", Static).update(closed if report is None else figures_text(report))
        self._show_disagreements(closed)
        self._show_header()
        self._done_computing()

    def _show_header(self) -> None:
        report = self.report
        out = Text("Agreement", style="bold")
        if self.hidden:
            out.append(" · closed while you judge blind", style="dim")
        elif report is None:
            out.append(" · computing…", style="dim")
        else:
            out.append(f" · {plural(report.judgements, 'judgement')}", style="bold")
            count = len(report.disagreements)
            out.append(f" · {plural(count, 'disagreement')} to adjudicate", style="bold")
            out.append(" · tab switches pane", style="dim")
        self.query_one("#agreement-header", Static).update(out)

    def _show_disagreements(self, closed: Text) -> None:
        note = self.query_one("#disagreement-note", Static)
        table = self.query_one(DisagreementTable)
        if self.report is None:
            note.update(closed)
            note.display, table.display = True, False
            table.clear()
            self.rows = {}
            return
        found = {disagreement_key(d): d for d in self.report.disagreements}
        note.display = not found
        note.update(Text("No disagreement left to adjudicate.", style="dim"))
        table.display = bool(found)
        if list(found) == list(self.rows):
            self.rows = found
            return
        at = table.cursor_row if table.row_count else 0
        current = table.coordinate_to_cell_key((at, 0)).row_key.value if table.row_count else None
        with self.app.batch_update():
            table.clear()
            for key, d in found.items():
                table.add_row(*disagreement_cells(d), key=key)
        self.rows = found
        if current in found:
            table.move_cursor(row=table.get_row_index(current), animate=False)
        elif found:
            table.move_cursor(row=min(at, len(found) - 1), animate=False)

    # --- records changed: computed again --------------------------------------------------------------
    def study_changed(self) -> None:
        if self.computing:
            self.stale = True
            return
        self.stale = False
        self.computing = True
        self.compute(self.app.db_path)

    # --- panes -------------------------------------------------------------------------------------
    def action_pane(self, name: str) -> None:
        self.query_one(TabbedContent).active = name
        self.call_after_refresh(self._focus_pane)

    def action_next_pane(self) -> None:
        active = self.query_one(TabbedContent).active
        self.action_pane(PANES[(PANES.index(active) + 1) % len(PANES)] if active in PANES else "figures")

    def _focus_pane(self) -> None:
        if self.query_one(TabbedContent).active == "disagreements":
            self.query_one(DisagreementTable).focus()
        else:
            self.query_one("#figures-scroll").focus()

    # --- adjudication ---------------------------------------------------------------------------------
    @on(DataTable.RowSelected, "#disagreement-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        d = self.rows.get(event.row_key.value or "")
        if d is not None and not self.hidden:
            self.app.push_screen(AdjudicationForm(d), self._adjudicated)

    def _adjudicated(self, new_id: int | None) -> None:
        if new_id is not None:
            self.study_changed()
