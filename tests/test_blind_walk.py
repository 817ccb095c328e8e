"""Blind review walked whole (issue 37): as a reviewer dealt every agent attempt of the demo study
blind, and having judged none, every screen, pane, dialog, CLI command and export is opened and
what it shows is searched for anything derived from the verifier's verdicts or the agents'
claims: verdict glyphs, the best level, the rules' suggestion, the curves against the tolerance,
causes, silent flags, over-claims, agreement against the verifier, and each hidden attempt's own
claim and verdict reasons (read from the database, so a new field that leaks them is caught).
The served app is this same App behind textual-serve: walking it here walks that too.

Another reviewer (ben, not blind) has judged two attempts, so the agreement has pairs with the
verifier to show: at n=2 taking ben's judgement away would give the verifier's verdicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from test_app import screen_text, settle
from test_effort_app import open_migration, until
from textual.widgets import DataTable, Input, OptionList, Select, Static, TabbedContent

from screens.agreement import AgreementScreen
from screens.app import WorkbenchApp
from screens.attempt import PANES, AttemptScreen
from screens.compare import CompareScreen
from screens.export import ExportScreen
from screens.migration import AttemptTable
from storage.database import open_study
from workbench.blind import HIDDEN_FIELDS, MIGRATION_HIDDEN

ROOT = Path(__file__).resolve().parent.parent
REVIEWER = "ana"

GENERIC = ("✓", "✗", "expects L", "best level L", r"Level L\d", "rules suggest", "suggests ", "suggested",
           "highest_level", "×tol", r"tol r\d", "(silent)", "new silent failure", "new over-claim",
           r"over-claims \d", "kappa", "verifier pass", "verifier fail", "agree with",
           r"(?<!unknown )level \d(?![\s│]*is unknown)")
"""What only a verdict, a claim or a figure against the verifier puts on screen or in output."""
STATIC = ("✓ pass ✗ fail ? unknown · no verdict yet", "(kappa, alpha, with the verifier)")
"""Fixed text that names those words about nobody's attempt: the help's legend, a key's description."""


def workbench(*args: str, reviewer: str = REVIEWER) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT),
                               "COLUMNS": "200"})


@pytest.fixture
def dealt(demo_source: Path, tmp_path: Path, monkeypatch) -> Path:
    """The demo study with every agent attempt dealt to ana blind; ben has judged two openly."""
    monkeypatch.setenv("WORKBENCH_REVIEWER", REVIEWER)
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    done = workbench("assign", str(path), "--reviewers", REVIEWER, "--overlap", "0", "--blind", reviewer="lead")
    assert done.returncode == 0, done.stderr
    for slug, seq in (("mlp-classifier", 3), ("bow-classifier", 1)):
        done = workbench("judge", str(path), slug, str(seq), "--levels", "pass,pass,fail,pass,fail",
                         "--cause", "wrong_configuration", reviewer="ben")
        assert done.returncode == 0, done.stderr
    return path


def secrets(path: Path) -> dict[str, str]:
    """Each hidden attempt's claim and verdict reasons (their first words) and causes, by what
    they are: read from the study so the walk knows what must not show."""
    study = open_study(path)
    try:
        db = study.db
        found: dict[str, str] = {}
        for slug, seq, claim in db.execute(
                "SELECT m.slug, a.seq, a.claim FROM attempt a JOIN migration m ON m.id = a.migration_id"
                " WHERE a.source != 'reference' AND a.claim != ''"):
            found[claim[:30]] = f"the claim of {slug} #{seq}"
        for slug, seq, reason in db.execute(
                "SELECT m.slug, a.seq, v.reason FROM verdict v JOIN attempt a ON a.id = v.attempt_id"
                " JOIN migration m ON m.id = a.migration_id WHERE v.superseded_by IS NULL AND a.source != 'reference'"):
            found[reason[:28]] = f"a verdict reason of {slug} #{seq}"
        for slug, seq, cause in db.execute(
                "SELECT m.slug, a.seq, v.cause FROM verification v JOIN attempt a ON a.id = v.attempt_id"
                " JOIN migration m ON m.id = a.migration_id WHERE v.cause IS NOT NULL AND a.source != 'reference'"):
            found[cause] = f"the cause of {slug} #{seq}"
    finally:
        study.close()
    found = {re.escape(" ".join(k.split())): v for k, v in found.items()}
    found.update({word if "\\" in word else re.escape(word): "a verdict-derived word" for word in GENERIC})
    assert len(found) > len(GENERIC) + 10
    return found


def plain(renderable) -> str:
    console = Console(width=240, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def everything(app: WorkbenchApp) -> str:
    """What the screen shows and every widget holds, scrolled out of view or not; not a Select's
    closed list of choices (the judgement form's causes are choices, not anyone's verdict)."""
    parts = [screen_text(app)]
    for widget in app.screen.query("*"):
        if any(isinstance(a, Select) for a in widget.ancestors):
            continue
        if isinstance(widget, DataTable):
            parts += [" ".join(str(getattr(c, "plain", c)) for c in widget.get_row_at(r)) for r in range(widget.row_count)]
            parts += [str(getattr(c.label, "plain", c.label)) for c in widget.columns.values()]
        elif isinstance(widget, OptionList):
            parts += [plain(widget.get_option_at_index(i).prompt) for i in range(widget.option_count)]
        elif isinstance(widget, Static):
            parts.append(plain(widget.render()))
    parts += [str(n.message) for n in app._notifications]
    return "\n".join(parts)


class Walk:
    def __init__(self, app: WorkbenchApp, pilot, found: dict[str, str]) -> None:
        self.app, self.pilot, self.found = app, pilot, found
        self.places: list[str] = []
        self.leaks: list[str] = []

    def look(self, where: str, shown: str) -> None:
        self.places.append(where)
        flat = " ".join(shown.replace("│", " ").split())  # a table's borders cut a wrapped line: read across
        for fixed in STATIC:
            flat = flat.replace(fixed, "")
        for secret, what in self.found.items():
            hit = re.search(secret, flat)
            if hit:
                at = hit.start()
                self.leaks.append(f"{where}: {what} ({hit[0]!r}) in ...{flat[max(0, at - 60):at + 60]}...")

    async def screen(self, where: str) -> None:
        await settle(self.pilot)
        self.look(where, everything(self.app))
        self.app.clear_notifications()

    async def dialog(self, key: str, where: str, ready=lambda screen: True) -> None:
        """Press `key`, look at what opens (or the toast that refuses it), close it."""
        below = self.app.screen
        await self.pilot.press(key)
        await settle(self.pilot)
        if self.app.screen is not below:
            opened = self.app.screen
            await until(self.pilot, lambda: ready(opened), timeout=10.0)
        await self.screen(f"{where} {key}")
        while self.app.screen is not below:
            await self.pilot.press("escape")
            await settle(self.pilot)


def decision_read(screen) -> bool:
    found = screen.query("#decision-standing")
    return not found or "Reading" not in plain(found.first().render())


async def walk_attempt(walk: Walk, slug: str, seq: int, *, dialogs: bool) -> None:
    """Every pane of the attempt; with `dialogs`, every dialog it opens and the compare screen's
    panes (with the attempt before it)."""
    app, pilot = walk.app, walk.pilot
    migration = app.screen
    table = migration.query_one(AttemptTable)
    rows = [table.get_cell_at((r, 0)).plain for r in range(table.row_count)]
    table.move_cursor(row=rows.index(str(seq)))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
    screen = app.screen
    await until(pilot, lambda: screen.facts is not None)
    where = f"{slug} #{seq}"
    for pane in PANES:
        screen.action_pane(pane)
        await settle(pilot)
        await walk.screen(f"{where} pane {pane}")
    for key in ("a", "x", "C") if dialogs else ():
        await walk.dialog(key, where, decision_read)
    for key in ("o", "b", "B", "i", "J") if dialogs else ():
        await walk.dialog(key, where)
    if dialogs:
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        for pane in ("differences", "curves", "diff"):
            compare.query_one(TabbedContent).active = pane
            await settle(pilot)
            await walk.screen(f"{where} compare {pane}")
        await pilot.press("escape")
        await settle(pilot)
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is migration)


async def test_a_blind_reviewer_sees_nothing_derived_from_the_verdicts_anywhere(dealt: Path, tmp_path: Path) -> None:
    found = secrets(dealt)
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(160, 50)) as pilot:
        walk = Walk(app, pilot, found)
        await walk.screen("study")
        await walk.dialog("A", "study", lambda s: not isinstance(s, AgreementScreen) or s.hidden is not None)
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, AgreementScreen) and app.screen.hidden is not None)
        await pilot.press("2")
        await walk.screen("agreement disagreements")
        await pilot.press("escape")
        for key in ("Q", "L", "question_mark", "U", "ctrl+p"):
            await walk.dialog(key, "study")
        await pilot.press("e")  # the export: asked to write, it is refused
        await until(pilot, lambda: isinstance(app.screen, ExportScreen))
        app.screen.query_one("#export-path", Input).value = str(tmp_path / "export.md")
        await pilot.click("#export-run")
        await until(pilot, lambda: "closed to ana" in screen_text(app))
        await walk.screen("study export")
        await pilot.press("escape")
        for slug, seqs in (("mlp-classifier", (1, 2, 3, 4)), ("bow-classifier", (1, 2))):
            await open_migration(pilot, slug)
            await walk.screen(slug)
            for key in ("a", "x", "C"):
                await walk.dialog(key, slug, decision_read)
            for key in ("B", "i", "L", "U"):
                await walk.dialog(key, slug)
            for seq in seqs:
                await walk_attempt(walk, slug, seq, dialogs=seq == seqs[-1])
            await pilot.press("escape")
            await settle(pilot)

    outputs = {
        "migrations": workbench("migrations", str(dealt)),
        "migrations --json": workbench("migrations", str(dealt), "--json"),
        "queue": workbench("queue", str(dealt)),
        "queue --json": workbench("queue", str(dealt), "--json"),
        "agreement": workbench("agreement", str(dealt)),
        "agreement --json": workbench("agreement", str(dealt), "--json"),
        "agreement --migration": workbench("agreement", str(dealt), "--migration", "mlp-classifier"),
        "report": workbench("report", str(dealt)),
        "report -o": workbench("report", str(dealt), "--format", "json", "-o", str(tmp_path / "out.json")),
        "jobs": workbench("jobs", str(dealt)),
        "assist claims --dry-run": workbench("assist", "claims", str(dealt), "--dry-run"),
        "decide (no reason)": workbench("decide", str(dealt), "mlp-classifier", "continue"),
        "decide": workbench("decide", str(dealt), "mlp-classifier", "continue", "--reason", "x"),
        "verify": workbench("verify", str(dealt), "--force", "--reasons"),
        "verify --json": workbench("verify", str(dealt), "--json", "--force"),
    }
    for slug in ("mlp-classifier", "bow-classifier"):
        outputs[f"attempts {slug}"] = workbench("attempts", str(dealt), slug)
        outputs[f"attempts {slug} --json"] = workbench("attempts", str(dealt), slug, "--json")
        outputs[f"assist brief {slug}"] = workbench("assist", "brief", str(dealt), slug, "1", "--dry-run")
    for name, result in outputs.items():
        assert "Traceback" not in result.stderr, (name, result.stderr)
        shown = result.stdout + "\n" + result.stderr
        if name.startswith(("attempts", "migrations")) and name.endswith("--json"):
            rows = [row for row in json.loads(result.stdout) if row.get("source") != "reference"]
            fields = HIDDEN_FIELDS if name.startswith("attempts") else MIGRATION_HIDDEN
            assert rows and all(row[k] == "hidden" for row in rows for k in fields), (name, rows)
            shown = json.dumps([{k: v for k, v in row.items() if k not in fields} for row in rows])
        elif name.startswith("verify"):  # the table's header names columns it lists no hidden row under
            shown = shown.replace("silent over-claim", "")
        walk.look(f"workbench {name}", shown)
    assert not walk.leaks, "\n".join(walk.leaks)
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "export.md").exists()
    assert outputs["decide"].returncode == 0 and outputs["decide (no reason)"].returncode == 2
    assert outputs["agreement"].returncode == 2 and outputs["report"].returncode != 0


def test_the_walk_finds_a_leak_where_there_is_one(dealt: Path) -> None:
    """The same search on what ben, who is not blind, is shown: the secrets are there."""
    found = secrets(dealt)
    walk = Walk(None, None, found)  # type: ignore[arg-type]
    for args in (("migrations", str(dealt)), ("attempts", str(dealt), "mlp-classifier", "--json"),
                 ("decide", str(dealt), "mlp-classifier", "continue", "--reason", "x"),
                 ("agreement", str(dealt))):
        result = workbench(*args, reviewer="ben")
        walk.look(args[0], result.stdout + result.stderr)
    said = " ".join(walk.leaks)
    assert "highest_level" in said and "kappa" in said and "suggested" in said and re.search(r"the claim of", said)


def test_the_rule_blanks_what_it_hides_and_nothing_else() -> None:
    """domain.blind.Sight, pure: a migration's standing and decision figures, a re-run's result
    and a watched attempt's line lose what the verdicts gave them for whom is blind, only there."""
    import datetime

    from domain.blind import Sight
    from domain.effort import EffortInputs, standing
    from domain.jobs import JobResult, result_line
    from domain.models import Budgets, DecisionKind
    from workbench.watch import Seen

    inputs = EffortInputs(budgets=Budgets(), acceptance_level=4, staff_hourly_rate=100.0, runs=(),
                          intervention_minutes=30.0, review_seconds=0.0, agent_attempts=3,
                          first_at="2026-12-01T00:00:00+00:00", highest_level=4)
    now = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)
    stands = standing(inputs, now)
    assert stands.suggestion is DecisionKind.ACCEPT and not stands.needs_reason(DecisionKind.ACCEPT)
    rule = Sight("ana", hidden=frozenset({7}), hidden_migrations=frozenset({2}), pending=1)
    blind = rule.standing(2, stands)
    assert blind.hidden and blind.highest_level is None and blind.reasons == ()
    assert blind.limits == stands.limits and blind.needs_reason(DecisionKind.ACCEPT)  # a reason always
    assert rule.standing(1, stands) is stands
    figures = stands.figures()
    assert "highest_level" not in rule.figures(2, figures) and rule.figures(1, figures) == figures
    assert rule.suggested(2, DecisionKind.ACCEPT) is None and rule.suggested(1, DecisionKind.STOP) is DecisionKind.STOP
    made = JobResult(seq=5, level=2, outcomes=("pass", "pass", "fail"), cause="cpu_fallback", silent=True)
    assert result_line(rule.job_result(8, made)) == result_line(made) and "✗" in result_line(made)
    hidden = result_line(rule.job_result(7, made))
    assert "#5" in hidden and "hidden" in hidden and not re.search(r"level|✓|✗|cpu_fallback|silent", hidden)
    assert not rule.sees_scope and Sight("ana").sees_scope and "1 attempt is still hidden" in rule.closed("Agreement")
    line = Seen(5, "ok", 0, 4, "numerical_mismatch", True, True, hidden=True).line()
    assert "hidden" in line and not re.search(r"level|numerical|SILENT|OVER", line)
    assert "SILENT FAILURE" in Seen(5, "ok", 0, 4, "numerical_mismatch", True, True).line()
