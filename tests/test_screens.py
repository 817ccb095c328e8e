"""The review screens, driven by Pilot over the demo study (real runs), verified once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BundleBuilder, git
from test_app import EVIL, EVIL_SHOWN, build, column, screen_text, settle, table

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.compare import CompareScreen
from screens.file import FileScreen
from screens.help import HelpScreen
from screens.migration import MigrationScreen
from screens.widgets.curves import CurvesPane
from screens.widgets.diff_view import DiffPane, DiffView
from screens.widgets.log_view import LogPane, LogView
from screens.widgets.verdict_list import VerdictList
from storage.database import open_study
from workbench.verify import verify_study


async def open_attempt(pilot, migration_row: int, attempt_row: int) -> AttemptScreen:
    """From the study screen: open a migration (by row), then an attempt (by row)."""
    await settle(pilot)
    await pilot.press(*["j"] * migration_row, "enter")
    await settle(pilot)
    await pilot.press(*["j"] * attempt_row, "enter")
    await settle(pilot)
    assert isinstance(pilot.app.screen, AttemptScreen)
    return pilot.app.screen


async def test_study_screen_counts_as_the_paper_reports_them(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "failed 6/6 · silent 5 (83%) · over-claims 4 · interventions 0.0/migration" in text
        assert column(app, "slug") == ["bow-classifier", "mlp-classifier"]
        assert column(app, "failed") == ["2", "4"]
        assert column(app, "silent") == ["2", "3"]
        assert column(app, "level") == ["L4", "L4"]
        assert all(cost.startswith("$") for cost in column(app, "cost"))


async def test_migration_screen_flags_and_failure_keys(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert column(app, "seq") == ["0", "1", "2", "3", "4"]  # the reference pinned first
        assert column(app, "ladder") == ["·····", "✗?✗??", "✓✓✗✓✗", "✓✗✓✗✗", "✓✓✓✓✗"]
        assert column(app, "over") == ["", "over", "", "over", ""]
        assert column(app, "failure")[1] == "api_misuse"  # not silent: it crashed
        assert column(app, "failure")[3] == "numerical_mismatch silent"
        await pilot.press("n")
        assert table(app).cursor_row == 1
        await pilot.press("s")
        assert table(app).cursor_row == 2  # the next silent failure
        await pilot.press("n", "n")
        assert table(app).cursor_row == 4
        await pilot.press("p")
        assert table(app).cursor_row == 3
        await pilot.press("n", "n")  # nothing further: stays, says so
        assert table(app).cursor_row == 4


async def test_attempt_overview_and_panes(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 1, 3)  # mlp #3: silent numerical mismatch, over-claim
        text = screen_text(app)
        assert "mlp-classifier  #3 agent · ok · ✓✗✓✗✗ L1 · numerical_mismatch silent · over" in text
        assert "command   CPU_NUM_DEVICES=4 PJRT_DEVICE=CPU python train.py" in text
        assert "status    ok (exit code from process)" in text
        assert "claim     expects L4 project goal" in text
        assert "verified  L1 runs" in text and "over-claim" in text
        assert "failure   numerical_mismatch silent" in text
        assert "→ metric loss@5 loss = 1.26126 (log line 6); reference 1.16112" in text
        panes = []
        for _ in range(5):
            await pilot.press("tab")
            await settle(pilot)
            panes.append(screen.tabs.active)
        assert panes == ["diff", "log", "verdicts", "curves", "overview"]
        await pilot.press("shift+tab")
        assert screen.tabs.active == "curves"
        await pilot.press("3")
        assert screen.tabs.active == "log"


async def test_the_overview_gives_the_counted_level_after_an_override(demo_study) -> None:
    """The Overview's `verified` line reads as the attempt's row and header: overrides count; the
    verifier's own level stays beside it, marked as such."""
    from domain.kinds import Outcome
    from storage import queries, records

    db = demo_study.db
    third = queries.attempt_id_by_seq(db, queries.get_migration(db, "mlp-classifier").id, 3)
    for lvl in (2, 4):  # #3 fails them: L1, an over-claim of its expected L4
        verdict = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = ? AND superseded_by IS NULL",
                             [third, lvl]).fetchone()[0]
        records.add_verdict_override(db, verdict_id=verdict, outcome=Outcome.PASS,
                                     justification="within the reference's noise", reviewer="ana")
    demo_study.close()
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_attempt(pilot, 1, 3)
        text = screen_text(app)
        assert "mlp-classifier  #3 agent · ok · ✓✓✓✓✗ L4 · numerical_mismatch silent" in text
        assert "verified  L4 project goal  ✓✓✓✓✗  (the verifier on this run: L1)" in text
        assert "over-claim" not in text and "· over" not in text  # it reached the L4 it expected


async def test_the_shown_pane_has_the_focus_however_it_was_reached(demo_db: Path) -> None:
    """The shown pane's keys work whether it was reached with tab (after the help, as reported),
    its number, a click on its tab, or while a focus made a moment before is still on its way:
    TabbedContent shows the pane a focus lands in, and that used to bring the left pane back or
    leave the shown one without focus."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 0, 1)  # bow #1: a 265-line log
        assert not screen.query(LogView)  # made when its pane is first shown
        await pilot.press("tab", "question_mark", "escape", "tab")
        await settle(pilot)
        view = screen.query_one(LogView)
        assert screen.tabs.active == "log" and screen.focused is view
        await pilot.press("G")
        assert view.cursor == view.line_count - 1 == 264
        await pilot.press("1")
        await settle(pilot)
        await pilot.click("#--content-tab-log")
        await settle(pilot)
        assert screen.tabs.active == "log" and screen.focused is view
        await pilot.press("g")
        assert view.cursor == 0
        await pilot.press("2")
        await settle(pilot)
        screen.set_focus(view)  # its message reaches the panes after the next key's change
        screen.action_pane("curves")
        await settle(pilot)
        assert screen.tabs.active == "curves" and screen.focused is screen.query_one("#curves-table")


async def test_previous_and_next_attempt_and_failures_from_inside(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_attempt(pilot, 1, 1)
        assert screen.summary.attempt.seq == 1
        await pilot.press("2")  # the diff pane stays chosen while stepping
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert app.screen is screen and screen.summary.attempt.seq == 2
        assert screen.tabs.active == "diff"
        assert "#2 agent" in screen_text(app)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await settle(pilot)
        assert screen.summary.attempt.seq == 0  # the reference run
        await pilot.press("left_square_bracket")  # nothing before it
        await settle(pilot)
        assert screen.summary.attempt.seq == 0
        await pilot.press("s")
        await settle(pilot)
        assert screen.summary.attempt.seq == 2  # #1 failed loudly, #2 silently
        await pilot.press("n")
        await settle(pilot)
        assert screen.summary.attempt.seq == 3
        await pilot.press("p")
        await settle(pilot)
        assert screen.summary.attempt.seq == 2
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert table(app).cursor_row == 2  # the migration screen followed


async def test_no_screen_holds_another(demo_db: Path) -> None:
    """The attempt and compare screens get data (the cursor, the reference), never the screen
    that opened them; they move it through the app."""
    from textual.screen import Screen

    def held(screen: Screen) -> list[str]:
        return [name for name, value in vars(screen).items() if isinstance(value, Screen)]

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 1, 2)
        assert held(screen) == []
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert held(app.screen) == []
        assert [held(s) for s in app.screen_stack] == [[]] * len(app.screen_stack)


async def test_diff_pane_toggles_base_and_opens_the_whole_file(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 1, 4)  # mlp #4: the clipping fix
        await pilot.press("2")
        await settle(pilot)
        pane = app.screen.query_one(DiffPane)
        text = screen_text(app)
        assert "93f8f40 → e248af8 against attempt #3 · 1 file" in text
        assert "M train.py" in text
        view = app.screen.query_one(DiffView)
        assert view.has_focus
        lines = pane.diff.lines
        assert lines[0] == "diff --git a/train.py b/train.py"
        assert not pane.diff.partner  # a moved line: nothing replaced
        await pilot.press("v")
        await settle(pilot)
        assert pane.against_base
        assert "370c605 → e248af8 against the base commit" in screen_text(app)
        assert len(pane.diff.lines) > len(lines)
        # changed words are highlighted on paired lines, not the whole line
        minus = min(pane.diff.partner)
        word = view.get_component_rich_style("diff-view--removed-word").bgcolor
        rendered = view.line_text(minus)
        marked = [s for s in rendered.spans if s.style.bgcolor == word]
        assert marked and sum(s.end - s.start for s in marked) < len(rendered.plain) - 1
        await pilot.press("v")
        await settle(pilot)
        assert not pane.against_base
        # the cursor on a changed line, `o` opens train.py at that commit and line
        target = next(i for i, line in enumerate(pane.diff.lines) if line.startswith("+") and i > 4)
        view.go_to(target)
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, FileScreen)
        assert app.screen.commit.startswith("e248af8") and app.screen.path == "train.py"
        assert "train.py at e248af8" in screen_text(app)
        assert pane.diff.lines[target][1:].strip() in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen


async def test_log_pane_search_errors_warnings_and_wrap(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_attempt(pilot, 1, 1)  # mlp #1: crashed with a traceback
        await pilot.press("3")
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        view = app.screen.query_one(LogView)
        assert view.line_count == 13
        assert "line 1 of 13 · 2 error lines, 0 warnings" in screen_text(app)
        await pilot.press("e")
        assert view.cursor == 1  # "Traceback (most recent call last):"
        await pilot.press("e")
        assert view.cursor == 12  # the RuntimeError
        await pilot.press("g", "slash")
        await pilot.press(*"sync", "enter")
        await settle(pilot)
        assert pane.found == [5, 6, 7, 8]
        assert view.cursor == 5
        assert "/sync 4 lines" in screen_text(app)
        await pilot.press("n")
        assert view.cursor == 6
        await pilot.press("N", "N")
        assert view.cursor == 8  # wraps round to the last match
        await pilot.press("w")
        await settle(pilot)
        assert view.wrap
        await pilot.press("G")
        await pilot.pause()
        shown = screen_text(app)
        # the rest of line 13, broken at a word, and scrolled so that all its rows show
        assert "   have an NVIDIA GPU and installed a driver from" in shown
        assert "   http://www.nvidia.com/Download/index.aspx" in shown
        await pilot.press("w")
        # bow #1: XLA's GSPMD warnings
        await pilot.press("escape", "escape")
        await settle(pilot)
        await pilot.press("k", "enter")
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.screen.query_one(LogPane)
        assert len(pane.warnings) > 10
        await pilot.press("t")
        assert app.screen.query_one(LogView).cursor == pane.warnings[0]
        assert "W external/xla/xla/service/sharding_propagatio" in screen_text(app)
        await pilot.press("t", "T")
        assert app.screen.query_one(LogView).cursor == pane.warnings[0]


async def test_verdict_evidence_jumps_to_log_line_and_metric_point(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 1, 1)
        await pilot.press("4")
        await settle(pilot)
        text = screen_text(app)
        assert "L1 runs ✗ fail" in text
        assert "exited with status 1 and its log holds a traceback or fatal error" in text
        assert "→ log line 13 RuntimeError: Found no NVIDIA driver" in text
        verdicts = app.screen.query_one(VerdictList)
        assert verdicts.has_focus
        index = next(i for i in range(verdicts.option_count)
                     if verdicts.get_option_at_index(i).id == "ev:1:1")
        verdicts.highlighted = index
        await pilot.press("enter")
        await settle(pilot)
        assert screen.tabs.active == "log"
        assert app.screen.query_one(LogView).cursor == 12
        # mlp #3: a metric point's evidence opens the curves at that step
        await pilot.press("right_square_bracket", "right_square_bracket")
        await settle(pilot)
        assert screen.summary.attempt.seq == 3
        await pilot.press("4")
        await settle(pilot)
        verdicts = app.screen.query_one(VerdictList)
        index = next(i for i in range(verdicts.option_count)
                     if verdicts.get_option_at_index(i).id == "ev:2:0")
        verdicts.highlighted = index
        await pilot.press("enter")
        await settle(pilot)
        assert screen.tabs.active == "curves"
        curves = app.screen.query_one(CurvesPane)
        assert curves.marker == 5 and curves.metric == "loss"
        assert "│ step 5" in screen_text(app)
        await pilot.press("4")
        await settle(pilot)
        verdicts.highlighted = index
        await pilot.press("l")  # the log line the metric point was read from
        await settle(pilot)
        assert screen.tabs.active == "log"
        assert app.screen.query_one(LogView).cursor == 5


async def test_curves_plot_the_band_and_the_largest_deviations(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_attempt(pilot, 1, 3)
        await pilot.press("5")
        await settle(pilot)
        text = screen_text(app)
        assert "loss (1/3, m: next)" in text
        assert "#3 (40)" in text and "reference (40)" in text and "tol r0.01 a0.0001" in text
        assert any(ch in text for ch in "⠁⠂⠄⡀⣿")  # braille drawn
        rows = [line for line in text.splitlines() if line.strip().startswith("loss ")]
        assert rows[1].split()[1] == "33"  # under the legend: the worst step first
        await pilot.press("m")
        await settle(pilot)
        assert "grad_norm (2/3, m: next)" in screen_text(app)


async def test_curves_of_an_attempt_without_series_say_so_in_one_line(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_attempt(pilot, 1, 1)  # mlp #1 stopped at exit 1 before its first step
        await pilot.press("5")
        await settle(pilot)
        text = screen_text(app)
        assert "No metric series recorded for this attempt." in text
        assert "No series to plot" not in text and "×tol" not in text  # no empty plot or table
        await pilot.press("]")  # #2 has series: plot and table come back
        await settle(pilot)
        assert "loss (1/3, m: next)" in screen_text(app) and "×tol" in screen_text(app)


async def test_compare_two_attempts(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        await pilot.press("j", "j", "c")  # mark #2 (1 device) ...
        await pilot.press("j", "j", "c")  # ... and compare with #4 (4 devices)
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        text = screen_text(app)
        assert "compare #2 ✓✓✗✓✗ with #4 ✓✓✓✓✗" in text
        assert "observed hardware" in text and "cpu x 1" in text and "cpu x 4" in text
        assert "env CPU_NUM_DEVICES" in text
        assert "other fields are the same" in text
        assert "intended hardware" not in text  # the same on both: not shown
        await pilot.press("tab")
        await settle(pilot)
        assert "#2 (40)" in screen_text(app) and "#4 (40)" in screen_text(app)
        await pilot.press("tab")
        await settle(pilot)
        assert "4b4bd65 → e248af8 against attempt #2" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        # `c` inside an attempt compares with the previous one
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert app.screen.left.attempt.seq == 3 and app.screen.right.attempt.seq == 4


async def test_palette_jumps_to_an_attempt_and_runs_actions(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"mlp #3")
        await settle(pilot)
        assert "Open attempt mlp-classifier #3" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        assert app.screen.summary.attempt.seq == 3
        await pilot.press("ctrl+p")
        await pilot.press(*"Next failure")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.summary.attempt.seq == 4


async def test_help_lists_the_focused_widgets_keys(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_attempt(pilot, 1, 1)
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Keys: attempt" in screen_text(app)
        text = " | ".join(description.lower() for _, description, _ in app.screen.rows)
        for words in ("search", "next match", "error", "xla warning", "wrap", "silent",
                      "compare", "prev", "pane"):
            assert words in text
        assert "next failure" not in text  # in the log, n is the next match
        await pilot.press("escape")
        await pilot.press("4", "question_mark")
        await pilot.pause()
        text = " | ".join(description.lower() for _, description, _ in app.screen.rows)
        assert "go to evidence" in text and "search" not in text and "next failure" in text


async def test_a_keymap_file_remaps_a_binding(demo_db: Path, tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keymap]\n"attempt.next" = "ctrl+n"\n')
    app = WorkbenchApp(demo_db, keymap_path=keymap)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_attempt(pilot, 1, 1)
        await pilot.press("ctrl+n")
        await settle(pilot)
        assert screen.summary.attempt.seq == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[keymap\n")
    app = WorkbenchApp(demo_db, keymap_path=bad)
    assert "keymap not read" in app.keymap_problem


@pytest.fixture
def evil_study(bundle: BundleBuilder, tmp_path: Path) -> Path:
    """Markup and terminal escapes in a log, a diff, a commit message, a claim, a metric name."""
    folder, shas = bundle.add_migration("evil", commits=2, title=f"Title {EVIL}")
    repo = folder / "repo"
    (repo / "train.py").write_text(f"print('{EVIL}')\n# \x1b[2J clear\n")
    git(repo, "commit", "-q", "-am", f"Commit {EVIL}")
    evil_sha = git(repo, "rev-parse", "HEAD")
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "1.log").write_text(
        f"step 1 loss 0.5\nLine {EVIL}\n\x1b[2J cleared? \x1b[31mred\x1b[0m\nTraceback (most recent call last):\n"
        f"ValueError: {EVIL}\n")
    (folder / "metrics").mkdir(exist_ok=True)
    (folder / "metrics" / "1.jsonl").write_text(
        '{"name": "loss", "step": 1, "value": 0.5}\n{"name": "[b]x[/]\\u001b]0;t\\u0007", "step": 1, "value": 1}\n')
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0]),
        bundle.attempt(1, evil_sha, claim=f"Claim {EVIL}", status="nonzero_exit", exit_code=1),
    ])
    path = build(bundle, tmp_path)
    study = open_study(path)
    try:
        verify_study(study.db, "ana")
    finally:
        study.close()
    return path


async def test_untrusted_text_is_inert_on_every_new_screen(evil_study: Path) -> None:
    app = WorkbenchApp(evil_study)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_attempt(pilot, 0, 1)

        def check() -> str:
            text = screen_text(app)
            assert "\x1b" not in text and "\x07" not in text
            assert app.is_running
            return text

        assert "Commit [/] [@click=app.quit]x[/] ␛]0;x␇" in check()  # the commit subject
        assert "Claim [/] [@click=app.quit]x[/]" in check()
        await pilot.press("2")
        await settle(pilot)
        text = check()
        assert "print('[/] [@click=app.quit]x[/] ␛]0;x␇')" in text
        assert "␛[2J clear" in text
        await pilot.press("o")
        await settle(pilot)
        assert "␛[2J clear" in check()
        await pilot.press("escape", "3")
        await settle(pilot)
        text = check()
        for shown in EVIL_SHOWN:
            assert shown in text
        assert "␛[2J cleared? red" in text  # colours kept, the clear-screen made visible
        await pilot.press("slash", *"[/]", "enter")
        await settle(pilot)
        assert app.screen.query_one(LogPane).found == [1, 4]
        await pilot.press("e", "4")
        await settle(pilot)
        check()
        await pilot.click("#verdict-list")
        await pilot.press("5")
        await settle(pilot)
        check()
        seen = ""
        for _ in range(3):
            await pilot.press("m")
            await settle(pilot)
            seen += check()
        assert "[b]x[/]␛]0;t␇" in seen  # the metric's name, literally
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        check()
        await pilot.press("tab", "tab")
        await settle(pilot)
        check()
        await pilot.press("question_mark")
        await pilot.pause()
        check()
        await pilot.press("escape", "escape")  # the help, then the comparison
        await pilot.press("ctrl+p", *"evil #1")
        await settle(pilot)
        check()
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and screen.is_attached


def test_a_20000_line_diff_and_a_large_log_paint_at_once(bundle: BundleBuilder, tmp_path: Path) -> None:
    import asyncio

    folder, shas = bundle.add_migration("big", commits=1)
    repo = folder / "repo"
    (repo / "big.py").write_text("".join(f"value_{n} = {n}\n" for n in range(10_000)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add")
    added = git(repo, "rev-parse", "HEAD")
    (repo / "big.py").write_text("".join(f"value_{n} = {n + 1}\n" for n in range(10_000)))
    git(repo, "commit", "-q", "-am", "change every line")
    head = git(repo, "rev-parse", "HEAD")
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "2.log").write_text("".join(f"step {n} loss {1 / (n + 1):.6f}\n" for n in range(300_000)))
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, added),
                                   bundle.attempt(2, head)])
    path = build(bundle, tmp_path)

    async def run() -> None:
        app = WorkbenchApp(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_attempt(pilot, 0, 2)
            await pilot.press("2")
            await settle(pilot)
            pane = app.screen.query_one(DiffPane)
            assert len(pane.diff.lines) > 20_000
            await pilot.press("G")
            await pilot.pause()
            assert "+value_9999 = 10000" in screen_text(app)
            await pilot.press("3")
            await settle(pilot)
            view = app.screen.query_one(LogView)
            assert view.line_count == 300_000
            await pilot.press("G")
            await pilot.pause()
            assert "step 299999 loss" in screen_text(app)
            assert len(view._blocks) <= 4  # only the blocks on screen were read

    asyncio.run(run())


async def test_the_diff_file_list_follows_the_diff(bundle: BundleBuilder, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("files", commits=1)
    repo = folder / "repo"
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text("".join(f"{name[0]}_{n} = {n}\n" for n in range(60)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "three files")
    head = git(repo, "rev-parse", "HEAD")
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, head)])
    path = build(bundle, tmp_path)
    app = WorkbenchApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_attempt(pilot, 0, 1)
        await pilot.press("2")
        await settle(pilot)
        pane = app.screen.query_one(DiffPane)
        files = app.screen.query_one("#diff-files")
        view = app.screen.query_one(DiffView)
        assert [f.path for f in pane.diff.files] == ["a.py", "b.py", "c.py"]
        await pilot.press(*["j"] * 70)  # past a.py's 60 lines and its header
        await settle(pilot)
        assert files.highlighted == 1 and view.cursor == 70  # b.py; the cursor stayed put
        await pilot.press("pagedown", "pagedown")
        await settle(pilot)
        assert files.highlighted == 2
        view.scroll_to(y=0, animate=False)  # the wheel: the cursor is off screen, the top leads
        await settle(pilot)
        assert files.highlighted == 0 and view.cursor > 100
        # choosing a file in the list still moves the diff to it
        files.focus()
        await pilot.press("down", "enter")
        await settle(pilot)
        assert view.cursor == pane.diff.files[1].start


async def test_b_is_the_brief_on_every_pane_and_v_toggles_the_diff(demo_db: Path) -> None:
    from screens.brief import BriefScreen

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attempt(pilot, 1, 4)
        for pane in ("1", "2", "3", "4", "5"):
            await pilot.press(pane)
            await settle(pilot)
            await pilot.press("b")
            await settle(pilot)
            assert isinstance(app.screen, BriefScreen), pane
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen is screen
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert screen.query_one(DiffPane).against_base


async def test_counts_follow_records_written_elsewhere(demo_db: Path, tmp_path: Path) -> None:
    """Another reviewer's intervention: the migration's and the study's Intv columns and the
    totals change within a poll, with the cursor where it was."""
    import asyncio
    import shutil

    from storage import records

    path = tmp_path / "copy.db"
    shutil.copy(demo_db, path)
    app = WorkbenchApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        await pilot.press("j", "j")
        screen = app.screen
        assert isinstance(screen, MigrationScreen)
        assert column(app, "interventions")[2] == "0"
        study = open_study(path)
        try:
            attempt_id = int(table(app).coordinate_to_cell_key((2, 0)).row_key.value)
            records.add_intervention(study.db, migration_id=screen.migration.id, kind="hint",
                                     minutes=3, note="from ben's terminal", reviewer="ben",
                                     attempt_id=attempt_id)
        finally:
            study.close()
        loop = asyncio.get_running_loop()
        end = loop.time() + 6
        while column(app, "interventions")[2] != "1":
            assert loop.time() < end, column(app, "interventions")
            await pilot.pause(0.1)
        assert table(app).cursor_row == 2
        await pilot.press("escape")
        await settle(pilot)
        assert column(app, "interventions") == ["0", "1"]
        assert "interventions 0.5/migration" in screen_text(app)


def test_compare_shortens_long_commands_around_the_change() -> None:
    from screens.presenters.compare import difference_table, shorten

    long = "CPU_NUM_DEVICES=4 PJRT_DEVICE=CPU python train.py --steps 40 --batch-size 128 --seed 3"
    at = long.index("--seed")
    cut, spans = shorten(long, [(at, at + 6)], 27)
    assert len(cut) == 27 and cut.startswith("…") and cut[spans[0][0]:spans[0][1]] == "--seed"
    assert shorten("short", [(0, 1)], 27) == ("short", [(0, 1)])
    from rich.console import Console

    console = Console(width=80, record=True)
    console.print(difference_table("#1", "#2", {"command": long}, {"command": long.replace("3", "4")},
                                   width=80))
    rows = [line for line in console.export_text().splitlines() if "command" in line]
    assert len(rows) == 1 and "--seed 3" in rows[0] and "--seed 4" in rows[0]


async def test_the_log_pane_keeps_a_few_screens_of_lines_and_draws_them_the_same(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """Paging through a log keeps at most 512 rendered lines (and wrapped lines): 2,000 kept 20,000
    objects more for the garbage collector (issue 19). Back at the top, the pane shows
    what it showed at first, wrapped or not (the lines are alike in width, so that the horizontal
    scroll bar, which follows the widest line drawn so far, stays as it was)."""
    folder, shas = bundle.add_migration("long", commits=1)
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "1.log").write_text("".join(
        f"step {n:04d} loss {1 / (n + 1):.6f}" + (" lr 0.001 tokens_per_second 1834" * 6 if n % 7 == 0 else "") + "\n"
        for n in range(3000)))
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, shas[0], log="logs/1.log")])
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await open_attempt(pilot, 0, 1)
        await pilot.press("3")
        await settle(pilot)
        view = app.screen.query_one(LogView)
        assert view.line_count == 3000
        for wrap in (False, True):
            first = screen_text(app)
            for _ in range(4):
                await pilot.press(*["pagedown"] * 30)
                await settle(pilot)
            assert view.cursor > 2000
            assert len(view._cache) <= 512 and len(view._wraps) <= 512
            await pilot.press("g")
            await settle(pilot)
            assert screen_text(app) == first
            if not wrap:
                await pilot.press("w")
                await settle(pilot)
        assert view.wrap and len(view._wraps) > 0


async def test_q_goes_back_a_screen_and_quits_from_the_study(demo_db: Path) -> None:
    """`q` as in a pager: attempt to migration to study, then quit; a dialog stays open."""
    from screens.brief import BriefScreen
    from screens.study import StudyScreen

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await open_attempt(pilot, 0, 0)
        await pilot.press("b")  # the brief, a dialog
        await settle(pilot)
        assert isinstance(app.screen, BriefScreen)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, BriefScreen)
        await pilot.press("escape", "q")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, StudyScreen)
        await pilot.press("question_mark")  # the help says what the header's words mean; q closes it
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        app.screen.query_one("#help-words").scroll_visible(animate=False)
        await settle(pilot)
        assert "Silent  failed attempts that raised no error" in screen_text(app)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, StudyScreen)
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0 and not app.is_running


async def palette_hits(pilot, query: str) -> list[str]:
    """The names the command palette lists for `query` (it is closed again after)."""
    from textual.command import CommandList

    await pilot.press("ctrl+p", *query)
    await settle(pilot)
    found = pilot.app.screen.query_one(CommandList)
    names = [str(found.get_option_at_index(n).prompt).split("\n")[0] for n in range(found.option_count)]
    await pilot.press("escape")
    await settle(pilot)
    return names


async def test_the_palette_lists_each_command_once_with_its_key(demo_db: Path) -> None:
    """Every key's action once, with its key once: Textual's own Quit and a hand-made list (My queue,
    Agreement, Help, Go back) used to repeat some without their key, and `V` was missing because the
    app asked the palette, not the screen under it, whether Verify applies."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert await palette_hits(pilot, "v") == ["Verify (V)"]
        assert await palette_hits(pilot, "Ve") == ["Verify (V)"]
        assert sorted(await palette_hits(pilot, "q")) == ["My queue (Q)", "Quit (q)"]
        assert await palette_hits(pilot, "agree") == ["Agreement (A)"]
        assert await palette_hits(pilot, "help") == ["Help (?)"]
        assert await palette_hits(pilot, "new") == ["New (N)"]  # `+` runs it too: listed once
        assert await palette_hits(pilot, "back") == []  # nothing to go back to from the study
        # what a command does, in its help's words: `report` finds Export, whose help says it writes one
        assert await palette_hits(pilot, "report") == ["Export (e)"]
        assert (await palette_hits(pilot, "exp"))[0] == "Export (e)"  # a hit on the name ranks first
        for keys in (("j", "enter"), ("j", "enter")):  # a migration's attempts, then its first agent attempt
            await pilot.press(*keys)
            await settle(pilot)
            for screen_binding in app.screen.active_bindings.values():
                binding = screen_binding.binding
                if binding.id is None or not binding.show:
                    continue
                names = await palette_hits(pilot, binding.description)
                assert len(names) == len(set(names)), names
                named = [n for n in names if n.rpartition(" (")[0] == binding.description]
                assert named == [f"{binding.description} ({app.get_key_display(binding)})"], (binding.id, names)
            assert await palette_hits(pilot, "My queue") == ["My queue"]  # no key for it here: once, without
        assert "Verify (V)" in await palette_hits(pilot, "Verify")
        await pilot.press("ctrl+p", *"Verify")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        for _ in range(600):  # the verify run is a worker thread: wait for its toast, not for a time
            if any(n.message.startswith("Verified") for n in app._notifications):
                break
            await pilot.pause(0.1)
        shown = app.screen.summary
        assert [n.message for n in app._notifications][-1].startswith(
            f"Verified mlp-classifier #{shown.attempt.seq}: 1 attempt")


async def test_help_keeps_the_descriptions_capitals(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert "Re-run unknown L3" in screen_text(app) and "unknown l3" not in screen_text(app)
