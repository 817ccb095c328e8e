"""The agreement screen (issue 17): Pilot on a real study built from raw judgements (two reviewers,
six attempts), its figures checked against workbench.judging.agreement, the CLI's `--json` and
values computed here by the textbook formulas; adjudication through the dialog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import screen_text, settle
from test_effort_app import until
from test_judgements import _verify
from textual.widgets import Input, Select

from domain.models import Outcome
from screens.agreement import AdjudicationForm, AgreementScreen, DisagreementTable, figure
from screens.app import WorkbenchApp
from storage.database import open_study
from workbench import judging

ROOT = Path(__file__).resolve().parent.parent
P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN
HOSTILE = "[red]x[/red]\x1b[2J"
VERIFIER = "ppfppf"
"""The verifier's level 1 on attempts 1 to 6 (levels 2 to 5: unknown)."""
JUDGED = {"ana": "ppffpf", HOSTILE: "pfffpp"}
"""Each reviewer's level 1 on attempts 1 to 6 (levels 2 to 5: can't tell)."""
WORD = {"p": P, "f": F}


def workbench(*args: str, reviewer: str = "lead") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT)})


def kappa(pairs: list[tuple[str, str]]) -> float:
    """Cohen (1960): (p_o - p_e) / (1 - p_e), p_e from the two raters' margins."""
    n = len(pairs)
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_o = sum(a == b for a, b in pairs) / n
    p_e = sum(first[v] * second[v] for v in first) / n**2
    return (p_o - p_e) / (1 - p_e)


def alpha(units: list[tuple[str, str]]) -> float:
    """Krippendorff's nominal alpha for two coders, no missing values: 1 - D_o / D_e with D_o the
    share of disagreeing pairable values and D_e = sum_c!=k n_c n_k / (n (n - 1))."""
    values = [v for unit in units for v in unit]
    n = len(values)
    d_o = sum(2 for a, b in units if a != b) / n
    counts = Counter(values)
    d_e = sum(counts[c] * counts[k] for c in counts for k in counts if c != k) / (n * (n - 1))
    return 1 - d_o / d_e


@pytest.fixture
def study_path(bundle: BundleBuilder, tmp_path: Path, monkeypatch) -> Path:
    """A reference run and six agent attempts, verified (VERIFIER), judged raw (JUDGED)."""
    from storage.judgements import add_judgement
    from workbench.bundle import import_bundle

    monkeypatch.setenv("WORKBENCH_REVIEWER", "lead")
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0])] + [bundle.attempt(s, shas[s % 3]) for s in range(1, 7)])
    path = tmp_path / "study.db"
    study = open_study(path, create=True)
    try:
        assert import_bundle(study, bundle.root, "ana").problems == []
        ids = {seq: study.db.execute("SELECT id FROM attempt WHERE seq = ?", [seq]).fetchone()[0] for seq in range(1, 7)}
        for seq, first in enumerate(VERIFIER, start=1):
            _verify(study.db, ids[seq], (WORD[first], U, U, U, U))
        for reviewer, firsts in JUDGED.items():
            for seq, first in enumerate(firsts, start=1):
                add_judgement(study.db, attempt_id=ids[seq], reviewer=reviewer, levels=(WORD[first], U, U, U, U),
                              cause=None, note=f"note {HOSTILE}", blind=False, active_seconds=30.0)
    finally:
        study.close()
    return path


async def open_agreement(pilot) -> AgreementScreen:
    await settle(pilot)
    await pilot.press("A")
    await until(pilot, lambda: isinstance(pilot.app.screen, AgreementScreen))
    screen = pilot.app.screen
    await until(pilot, lambda: screen.hidden is not None and not screen.computing, timeout=20.0)
    await settle(pilot)
    return screen


def figures(screen: AgreementScreen) -> str:
    return screen.query_one("#agreement-figures").render().plain


async def test_the_figures_match_the_service_the_cli_and_the_formulas(study_path: Path) -> None:
    reviewers = list(JUDGED.values())
    pairs = list(zip(*reviewers))
    by_hand_kappa = kappa(pairs)
    by_hand_alpha = alpha(pairs)
    by_hand_verifier = kappa([(v, h) for h in reviewers for v, h in zip(VERIFIER, h)])
    assert by_hand_kappa == pytest.approx(1 / 3) and by_hand_alpha == pytest.approx(7 / 18)

    study = open_study(study_path)
    try:
        service = judging.agreement(study.db)
    finally:
        study.close()
    cli = workbench("agreement", str(study_path), "--json")
    assert cli.returncode == 0, cli.stderr

    app = WorkbenchApp(study_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_agreement(pilot)
        assert screen.report == service
        assert json.loads(json.dumps(judging.agreement_dict(screen.report))) == json.loads(cli.stdout)
        level1 = screen.report.levels[0]
        assert level1.human_kappa.value == pytest.approx(by_hand_kappa) and level1.human_kappa.n == 6
        assert level1.human_alpha.value == pytest.approx(by_hand_alpha) and level1.human_alpha.n == 6
        assert level1.verifier_kappa.value == pytest.approx(by_hand_verifier) and level1.verifier_kappa.n == 12
        shown = figures(screen)
        for la in screen.report.levels:
            for stat in (la.human_kappa, la.human_alpha, la.verifier_kappa):
                assert figure(stat) in shown
        assert f"{by_hand_kappa:.3f}" in shown and f"{by_hand_alpha:.3f}" in shown
        assert f"{by_hand_verifier:.3f}" in shown
        # verifier pass / reviewer fail: ana on 4, the other on 2 and 4; the reverse: the other on 6
        assert "verifier pass / reviewer fail 3 · verifier fail / reviewer pass 1" in shown
        assert "3 disagreements to adjudicate" in screen_text(app)


async def test_adjudicating_in_the_dialog_records_an_override_and_clears_the_item(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_agreement(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = screen.query_one(DisagreementTable)
        assert table.has_focus and [k for k in screen.rows] == [f"{a}:1" for a in sorted(
            d.attempt_id for d in screen.report.disagreements)]
        text = screen_text(app)
        assert "[red]x[/red]␛[2J=pass" in text and "\x1b" not in text  # a hostile name, shown as text
        first = screen.report.disagreements[0]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AdjudicationForm))
        form = app.screen
        await settle(pilot)
        text = screen_text(app)
        assert "[red]x[/red]␛[2J" in text and "\x1b" not in text  # the dialog names the reviewers as text
        form.query_one("#adjudication-outcome", Select).value = "fail"
        await pilot.press("ctrl+s")  # no reason: one line, nothing written
        await settle(pilot)
        assert "reason: say why" in str(form.query_one("#form-error").render())
        form.query_one("#adjudication-reason", Input).value = "the loss diverges at step 3"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: len(screen.rows) == 2 and not screen.computing, timeout=20.0)
        assert f"{first.attempt_id}:1" not in screen.rows
        assert "2 disagreements to adjudicate" in screen_text(app)

    study = open_study(study_path)
    try:
        from storage.queries import verdicts

        row = study.db.execute("SELECT attempt_id, level, outcome, reason, reviewer, override_id FROM adjudication"
                               ).fetchall()
        assert [tuple(r[:5]) for r in row] == [(first.attempt_id, 1, "fail", "the loss diverges at step 3", "lead")]
        level1 = verdicts(study.db, first.attempt_id)[0]
        assert level1.effective is F and level1.overrides[-1].id == row[0][5]
        assert level1.overrides[-1].reviewer == "lead"
    finally:
        study.close()


async def test_the_agreement_is_closed_to_a_blind_reviewer(study_path: Path, monkeypatch) -> None:
    """Neither figures nor disagreements: taking one's own judgements away from the per-level
    counts against the verifier would give the verdicts of attempts one has not judged."""
    from storage.judgements import set_study_blind

    study = open_study(study_path)
    try:
        set_study_blind(study.db, True, "lead")
    finally:
        study.close()
    monkeypatch.setenv("WORKBENCH_REVIEWER", "chen")  # has judged nothing: blind to all six
    app = WorkbenchApp(study_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_agreement(pilot)
        assert screen.hidden == 6 and screen.report is None
        closed = figures(screen)
        assert "Agreement is closed to chen while they judge blind: 6 attempts are still hidden" in " ".join(closed.split())
        assert "kappa" not in closed and "verifier pass" not in closed
        await pilot.press("2")
        await settle(pilot)
        text = screen_text(app)
        assert "closed to chen" in text
        assert not screen.query_one(DisagreementTable).display and not screen.rows
        assert "mlp-xla" not in text and "ana=" not in text
        await pilot.press("enter")  # nothing to adjudicate from here
        await settle(pilot)
        assert app.screen is screen


async def test_the_figures_scroll_at_80x24(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_agreement(pilot)
        scroll = screen.query_one("#figures-scroll")
        assert scroll.has_focus and scroll.max_scroll_y > 0
        assert "L1" in screen_text(app) and "not blind" not in screen_text(app)
        await pilot.press("end")
        await settle(pilot)
        assert "not blind" in screen_text(app)


async def test_the_palette_opens_the_agreement_from_a_migration(study_path: Path) -> None:
    from test_effort_app import open_migration

    app = WorkbenchApp(study_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_migration(pilot, "mlp-xla")
        await pilot.press("ctrl+p", *"Agreement")
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AgreementScreen))
        await until(pilot, lambda: app.screen.report is not None, timeout=20.0)
        assert len(app.screen.report.disagreements) == 3


async def test_one_judgement_is_counted_in_the_singular(demo_db: Path) -> None:
    """'1 judgement', not '1 judgements' (domain.text.plural, used for every count shown)."""
    from domain.text import plural

    assert (plural(1, "judgement"), plural(0, "attempt"), plural(6, "attempt")) == (
        "1 judgement", "0 attempts", "6 attempts")
    study = open_study(demo_db)
    try:
        judging.record_judgement(study.db, "mlp-classifier", 1, levels="pass,fail,unknown,unknown,unknown",
                                 cause="api_misuse", note=None, reviewer="ana")
    finally:
        study.close()
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, AgreementScreen) and app.screen.report is not None,
                    timeout=20.0)
        # ana against the verifier: one disagreement (L2), said in the singular too
        await until(pilot, lambda: "Agreement · 1 judgement · 1 disagreement to adjudicate" in screen_text(app))
        assert "1 current judgement ·" in screen_text(app)
        await pilot.press("2", "enter")  # the disagreement's form names the level as everywhere: L2, unknown
        await until(pilot, lambda: isinstance(app.screen, AdjudicationForm))
        shown = screen_text(app)
        assert "mlp-classifier #1 · L" in shown and "level " not in shown and "can't tell" not in shown
