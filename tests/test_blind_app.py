"""Blind review in the app and the CLI (issue 17, docs/judgements.md): Pilot on the real demo
study with the study's blind mode on, judgements through the `J` form, the CLI in another process.

Until ana judges an attempt, nothing on the attempt screen, its panes, the palette's commands, the
compare screen or an export shows its claim, expected level, verdicts or cause; once she has, all
of it shows beside her judgement with the differences marked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from test_app import screen_text, settle
from test_effort_app import open_migration, until
from test_lists import type_filter
from textual.widgets import Input, Select

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.compare import CompareScreen
from screens.export import ExportScreen
from screens.forms import InterventionForm, JudgementForm, OverrideForm
from screens.migration import AttemptTable
from storage import queries
from storage.database import open_study
from storage.judgements import set_study_blind

ROOT = Path(__file__).resolve().parent.parent
SLUG, SEQ = "mlp-classifier", 3
"""The demo's silent failure: the agent claims L4 ("Training now runs data-parallel on 4 XLA
devices"), the verifier fails L2 (numerical_mismatch)."""
SECRETS = ("data-parallel", "expects L", "numerical", "mismatch", "over-claim", "✗", "✓")
"""What would give the claim, expected level, verdicts or cause away on this attempt's screens."""


def workbench(*args: str, reviewer: str = "ana") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def blind(demo_source: Path, tmp_path: Path, monkeypatch) -> Path:
    """The demo study with its blind mode on; this app's reviewer is ana, who has judged nothing."""
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    try:
        set_study_blind(study.db, True, "lead")
    finally:
        study.close()
    return path


def shown(renderable) -> str:
    """A widget's content as plain text, however wide."""
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def everything(app: WorkbenchApp) -> str:
    """The attempt screen's header, overview and verdicts pane, whichever pane is on screen."""
    screen = app.screen
    verdicts = screen.query_one("#verdict-list")
    options = [str(verdicts.get_option_at_index(i).prompt) for i in range(verdicts.option_count)]
    return "\n".join([shown(screen.query_one("#attempt-header").content),
                      shown(screen.query_one("#overview-text").content), *options, screen_text(app)])


async def open_attempt(pilot, slug: str = SLUG, seq: int = SEQ) -> AttemptScreen:
    migration = await open_migration(pilot, slug)
    table = migration.query_one(AttemptTable)
    await until(pilot, lambda: table.row_count > seq)
    rows = [table.get_cell_at((r, 0)).plain for r in range(table.row_count)]
    table.move_cursor(row=rows.index(str(seq)))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(pilot.app.screen, AttemptScreen))
    screen = pilot.app.screen
    await until(pilot, lambda: screen.facts is not None)
    await settle(pilot)
    return screen


async def judge(pilot, levels: tuple[str, ...], cause: str | None = None, note: str = "") -> None:
    await pilot.press("J")
    await until(pilot, lambda: isinstance(pilot.app.screen, JudgementForm))
    form = pilot.app.screen
    await pilot.press(*(value[0] for value in levels))  # p, f or u: one key a level, on to the next
    assert [form.query_one(f"#judge-level{level}", Select).value for level in range(1, 6)] == list(levels)
    assert form.focused is form.query_one("#judge-cause")
    if cause:
        form.query_one("#judge-cause", Select).value = cause
    form.query_one("#judge-note", Input).value = note
    await pilot.press("ctrl+s")
    await until(pilot, lambda: not isinstance(pilot.app.screen, JudgementForm))
    await settle(pilot)


async def test_the_migration_list_hides_every_attempts_verdicts_but_not_the_reference(blind: Path) -> None:
    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 30)) as pilot:
        migration = await open_migration(pilot, SLUG)
        table = migration.query_one(AttemptTable)
        await until(pilot, lambda: table.row_count == 5)
        rows = [[table.get_cell_at((r, c)).plain for c in range(len(table.columns))] for r in range(5)]
        ladders = [row[3] for row in rows]
        assert ladders[0] != "hidden" and ladders[1:] == ["hidden"] * 4  # the reference is the yardstick
        assert all(row[4] == row[5] == row[7] == "" for row in rows[1:])  # failure, over-claim, expected
        shown_text = screen_text(app)
        assert "numerical" not in shown_text and "api_misuse" not in shown_text and "data-parallel" not in shown_text
        # a filter on verdicts or claims must not tell which hidden attempts match: they are left out
        for raw in ("cause:numerical", "data-parallel", "silent:yes"):
            await type_filter(pilot, raw)
            await until(pilot, lambda: not migration.pager.loading)
            assert table.row_count == 0, raw
        await type_filter(pilot, "source:reference")  # the reference run is never hidden
        await until(pilot, lambda: not migration.pager.loading)
        assert table.row_count == 1


async def test_the_attempt_screen_hides_until_judged_then_reveals_with_differences_marked(blind: Path) -> None:
    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot)
        before = everything(app)
        assert "hidden until you judge (J)" in before
        assert "judge this attempt blind" in before  # the verdicts pane says why it is empty
        for secret in SECRETS:
            assert secret not in before, secret
        for pane in ("diff", "log", "curves"):  # the evidence stays: code, log, metrics
            screen.action_pane(pane)
            await settle(pilot)
        assert "loss" in screen_text(app) or "accuracy" in screen_text(app)
        curves = screen.query_one("#curves-table")
        assert "ratio" not in curves.columns and "tol r" not in screen_text(app)  # no ×tol: level 2 by another name

        # nothing that would show them is reachable: the brief, an override, nor through the palette
        for key in ("b", "o"):
            await pilot.press(key)
            await settle(pilot)
            assert app.screen is screen, key
        await pilot.press("ctrl+p", *"Override")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, OverrideForm)
        while app.screen is not screen:
            await pilot.press("escape")
            await settle(pilot)

        await judge(pilot, ("pass", "pass", "pass", "fail", "fail"), cause="slower_or_costlier",
                    note="looks fine to me")
        await until(pilot, lambda: not screen.hidden)
        await until(pilot, lambda: "ratio" in curves.columns)  # judged: the tolerance shows again
        await settle(pilot)
        toasts = [n.message for n in app._notifications]
        assert "Saved judgement" in " ".join(toasts)
        assert not any("new silent failure" in t for t in toasts)  # revealed, not new
        after = everything(app)
        assert "hidden until you judge" not in after
        assert "expects L4" in after and "data-parallel" in after and "numerical_mismatch" in after
        assert "Your judgement" in after and "(given blind)" in after
        assert "differs from the verifier at 1 level" in after  # L2: you pass, the verifier fails
        reveal = {line.split()[0]: line for line in shown(screen.query_one("#overview-text").content).splitlines()
                  if line.strip().startswith("L") and line.split()[0] in ("L1", "L2", "L3", "L4", "L5")}
        assert "fail ≠" in reveal["L2"] and reveal["L2"].count("≠") == 1  # the verifier; the agent claimed it too
        assert reveal["L4"].rstrip().endswith("pass ≠")  # the agent expected L4; ana found it failing
        assert "≠" not in reveal["L1"] + reveal["L3"] + reveal["L5"]
        assert "cause: you slower_or_costlier · verifier numerical_mismatch ≠" in after
        await pilot.press("o")  # now an override opens, showing the verdict
        await until(pilot, lambda: isinstance(app.screen, OverrideForm))

    study = open_study(blind)
    try:
        from storage.judgements import current_judgements

        [judgement] = current_judgements(study.db)
        assert judgement.reviewer == "ana" and judgement.blind and judgement.note == "looks fine to me"
        assert [o.value for o in judgement.levels] == ["pass", "pass", "pass", "fail", "fail"]
        assert judgement.active_seconds > 0
    finally:
        study.close()


async def test_the_compare_screen_hides_the_blinded_side(blind: Path) -> None:
    app = WorkbenchApp(blind)
    async with app.run_test(size=(140, 40)) as pilot:
        await open_attempt(pilot)
        await pilot.press("c")  # with the previous attempt, #2
        await until(pilot, lambda: isinstance(app.screen, CompareScreen))
        await settle(pilot)
        text = shown(app.screen.query_one("#differences-text").content) + screen_text(app)
        assert "hidden" in shown(app.screen.query_one("#compare-header").content)  # both sides' ladders
        for secret in ("expects", "numerical", "wrong_configuration", "L4", "✗"):
            assert secret not in text, secret
        await pilot.press("escape")
        await settle(pilot)
        await judge(pilot, ("pass", "fail", "pass", "fail", "fail"), cause="numerical_mismatch")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen))
        await settle(pilot)
        text = shown(app.screen.query_one("#differences-text").content)
        assert "numerical_mismatch" in text and "L4" in text  # this side is judged now; #2 still hidden
        assert "wrong_configuration" not in text and "hidden until you judge (J)" in text


async def test_export_is_refused_while_blind_then_written(blind: Path, tmp_path: Path) -> None:
    """Refused while ana judges blind; written once the lead turns blind mode off elsewhere."""
    out = tmp_path / "report.md"
    app = WorkbenchApp(blind)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.push_screen(ExportScreen(blind))
        await settle(pilot)
        app.screen.query_one("#export-path", Input).value = str(out)
        await pilot.click("#export-run")
        await settle(pilot)
        await until(pilot, lambda: "closed to ana" in screen_text(app))
        assert not out.exists()
        status = shown(app.screen.query_one("#export-status").content)
        assert "6 attempts are still hidden" in " ".join(status.split())
        assert workbench("blind", str(blind), "off", reviewer="lead").returncode == 0
        await pilot.click("#export-run")
        await until(pilot, lambda: out.exists())
        assert "| Attempts below the agent's expected level (over-claims) | 4 |" in out.read_text()


def test_the_cli_hides_them_from_a_blind_reviewer_too(blind: Path) -> None:
    attempts = workbench("attempts", str(blind), SLUG, "--json")
    assert attempts.returncode == 0, attempts.stderr
    rows = {row["seq"]: row for row in json.loads(attempts.stdout)}
    assert rows[SEQ]["claim"] == rows[SEQ]["expected_level"] == rows[SEQ]["ladder"] == "hidden"
    assert rows[0]["ladder"] != "hidden"  # the reference run
    assert "data-parallel" not in attempts.stdout and "numerical" not in attempts.stdout

    report = workbench("report", str(blind))
    assert report.returncode != 0 and "closed to ana while they judge blind" in report.stderr
    assert "numerical" not in report.stdout

    verify = workbench("verify", str(blind), "--migration", SLUG, "--force")
    assert verify.returncode == 0, verify.stderr
    assert "not listed: you judge them blind" in verify.stderr
    assert "numerical" not in verify.stdout and "api_misuse" not in verify.stdout

    brief = workbench("assist", "brief", str(blind), SLUG, str(SEQ), "--dry-run")
    assert brief.returncode != 0 and "you judge it blind" in brief.stderr

    judged = workbench("judge", str(blind), SLUG, str(SEQ), "--levels", "pass,pass,unknown,unknown,unknown")
    assert judged.returncode == 0, judged.stderr
    rows = {row["seq"]: row for row in json.loads(workbench("attempts", str(blind), SLUG, "--json").stdout)}
    assert rows[SEQ]["expected_level"] == 4 and "data-parallel" in rows[SEQ]["claim"]
    assert rows[SEQ - 1]["claim"] == "hidden"  # the others stay hidden
    # ben has judged nothing: ana's judgement opens nothing for him
    assert workbench("attempts", str(blind), SLUG, "--json", reviewer="ben").stdout.count('"hidden"') >= 4 * 5


def test_summaries_are_blinded_in_one_place(blind: Path) -> None:
    """`as_seen_by` blinds what the rule hides, and nothing else: the same rows otherwise."""
    from workbench.blind import as_seen_by

    study = open_study(blind)
    try:
        migration = queries.get_migration(study.db, SLUG)
        rows = list(queries.iter_attempt_summaries(study.db, migration.id))
        seen = as_seen_by(study.db, "ana", rows)
        assert [s.hidden for s in seen] == [False, True, True, True, True]
        for raw, blinded in zip(rows[1:], seen[1:]):
            assert blinded.attempt.claim == "" and blinded.attempt.expected_level is None
            assert blinded.failure is None and set(blinded.ladder) == {None} and blinded.over_claim is None
            assert (blinded.attempt.command, blinded.attempt.status, blinded.attempt.commit) == \
                (raw.attempt.command, raw.attempt.status, raw.attempt.commit)
        set_study_blind(study.db, False, "lead")
        assert as_seen_by(study.db, "ana", rows) == rows
    finally:
        study.close()


async def test_counts_notes_and_the_ledger_of_a_migration_being_judged_blind_are_hidden(blind: Path) -> None:
    """The study's rows and totals, the migration's header and effort panel, and the ledger would
    tell a hidden attempt's verdicts in sum, or through a note: none shows until it is judged."""
    from test_app import column

    from screens.ledger import LedgerScreen
    from storage import records

    study = open_study(blind)
    try:
        mlp = queries.get_migration(study.db, SLUG)
        records.record_intervention(study.db, migration_id=mlp.id, kind="fix_code", minutes=5,
                                    note="fixed the loss mismatch on 4 chips", reviewer="lead")
    finally:
        study.close()
    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: "verdict totals hidden" in screen_text(app))
        assert column(app, "level") == ["hidden", "hidden"] and set(column(app, "failed")) == {""}
        migration = await open_migration(pilot, SLUG)
        await settle(pilot)
        text = screen_text(app)
        assert "verdict counts hidden while you judge blind" in text
        assert "Level, suggestion and notes hidden while you judge blind" in text
        assert "mismatch" not in text and "suggests" not in text
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        await settle(pilot)
        text = screen_text(app)
        assert "left out until you have judged them" in text and "mismatch" not in text
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is migration
        await pilot.press("i")  # a new intervention, yes; the earlier ones' notes, to correct, no
        await until(pilot, lambda: isinstance(app.screen, InterventionForm))
        await settle(pilot)
        assert app.screen.history == [] and "mismatch" not in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)

    for seq in (1, 2, 3, 4):  # ana judges the whole migration: its counts, panel and ledger open
        result = workbench("judge", str(blind), SLUG, str(seq), "--levels", "pass,fail,unknown,unknown,unknown")
        assert result.returncode == 0, result.stderr
    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: "hidden" in column(app, "level") and "L" in "".join(column(app, "level")))
        assert "verdict totals hidden" in screen_text(app)  # bow-classifier is still hidden
        await open_migration(pilot, SLUG)
        await until(pilot, lambda: "suggests" in screen_text(app))
        assert "verdict counts hidden" not in screen_text(app)
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        await until(pilot, lambda: "mismatch" in screen_text(app))

    listed = workbench("migrations", str(blind), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["migration"]["slug"]: row for row in json.loads(listed.stdout)}
    assert rows["bow-classifier"]["highest_level"] == rows["bow-classifier"]["failed"] == "hidden"
    assert rows[SLUG]["failed"] == 4 and rows[SLUG]["hidden"] is False


def test_agreement_from_the_cli_is_closed_to_a_blind_reviewer(blind: Path) -> None:
    """Its figures set the verifier's verdicts beside the judgements: closed (one line, status 2)
    while the reviewer is blind to any attempt in its scope, open once they are blind to none."""
    for reviewer in ("ben", "chen"):  # two reviewers disagree with each other and the verifier on #3
        outcome = "pass" if reviewer == "ben" else "fail"
        result = workbench("judge", str(blind), SLUG, str(SEQ), "--levels",
                           f"pass,{outcome},pass,fail,fail", reviewer=reviewer)
        assert result.returncode == 0, result.stderr
    for who in ("ana", "ben"):  # ben judged #3, and is still blind to the other five
        for args in (("--json",), (), ("--migration", SLUG)):
            closed = workbench("agreement", str(blind), *args, reviewer=who)
            assert closed.returncode == 2 and closed.stdout == "", (who, args, closed.stdout)
            assert f"Agreement is closed to {who} while they judge blind" in closed.stderr
    study = open_study(blind)
    try:
        set_study_blind(study.db, False, "lead")
    finally:
        study.close()
    opened = json.loads(workbench("agreement", str(blind), "--json").stdout)["disagreements"]
    assert [(d["seq"], d["level"]) for d in opened] == [(SEQ, 2)]


async def test_blind_mode_turned_on_by_another_process_hides_an_open_attempt(blind: Path) -> None:
    import asyncio

    assert workbench("blind", str(blind), "off", reviewer="lead").returncode == 0
    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot)
        assert not screen.hidden and "expects L4" in everything(app)
        result = await asyncio.to_thread(workbench, "blind", str(blind), "on", reviewer="lead")
        assert result.returncode == 0, result.stderr
        await until(pilot, lambda: screen.hidden, timeout=10.0)
        await settle(pilot)
        text = everything(app)
        assert "hidden until you judge (J)" in text and "expects L4" not in text and "data-parallel" not in text


async def test_the_judge_form_asks_for_the_cause_of_a_failed_level_once(blind: Path) -> None:
    """A failing level with no cause is not saved without a word: the form says which level and
    moves to the cause; a second ctrl+s records it as it is (the reviewer may not know)."""
    from storage.judgements import current_judgements

    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_attempt(pilot)
        await pilot.press("J")
        await until(pilot, lambda: isinstance(app.screen, JudgementForm))
        form = app.screen
        await pilot.press("p", "f", "f", "u", "u", "ctrl+s")
        await settle(pilot)
        assert app.screen is form
        problem = shown(form.query_one("#form-error").render())
        assert "L2, L3 fail with no cause" in " ".join(problem.split())
        assert form.focused is form.query_one("#judge-cause")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, JudgementForm))
    study = open_study(blind)
    try:
        [judgement] = current_judgements(study.db)
        assert judgement.cause is None and [o.value for o in judgement.levels][:3] == ["pass", "fail", "fail"]
    finally:
        study.close()
    told = workbench("judge", str(blind), SLUG, "2", "--levels", "pass,fail,unknown,unknown,unknown")
    assert told.returncode == 0 and "warning: cause: L2 fails with no cause" in told.stderr
    named = workbench("judge", str(blind), SLUG, "1", "--levels", "pass,fail,unknown,unknown,unknown",
                      "--cause", "other")
    assert named.returncode == 0 and "warning" not in named.stderr


async def test_a_blind_decision_asks_for_a_reason_and_names_no_suggestion(blind: Path) -> None:
    """The dialog shows the budgets but not the best level or the suggestion; a reason is always
    asked (whether one is asked would tell the suggestion), and the refusal names none."""
    from screens.forms import DecisionForm

    app = WorkbenchApp(blind)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_migration(pilot, SLUG)
        await pilot.press("x")  # stop: against the rules (L4 reached: they suggest accept)
        await until(pilot, lambda: isinstance(app.screen, DecisionForm) and app.screen.standing is not None)
        form = app.screen
        await settle(pilot)
        text = screen_text(app)
        assert "required while you judge blind" in text and "best level L" not in text and "suggest:" not in text
        await pilot.press("ctrl+s")
        await settle(pilot)
        problem = " ".join(shown(form.query_one("#form-error").render()).split())
        assert "required while you judge" in problem and "accept" not in problem
        form.query_one("#decision-reason", Input).value = "out of budget"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, DecisionForm))
    study = open_study(blind)
    try:
        [made] = queries.decisions(study.db, queries.get_migration(study.db, SLUG).id)
        assert made.kind.value == "stop" and made.reason == "out of budget"
    finally:
        study.close()
