"""The study and migration lists at 80x24: ladder headers, verify from the app, filters, the
empty study and its forms, live refresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import build, recorded_toasts, screen_text, settle, table, workers_done

from screens.app import WorkbenchApp
from screens.migration import MigrationScreen
from screens.presenters import render
from storage.database import open_study
from storage.review import LadderCounts, ladder_counts
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE


@pytest.fixture
def unverified(tmp_path: Path) -> Path:
    """The demo bundle imported, nothing verified yet."""
    study = open_study(tmp_path / "fresh.db", create=True)
    assert not import_bundle(study, DEMO_BUNDLE, "ana").problems
    study.close()
    return tmp_path / "fresh.db"


def test_the_app_verifies_a_scope_as_the_cli_does(unverified: Path, tmp_path: Path) -> None:
    """`V` runs the batch verifier over its scope: the verdicts `workbench verify` writes, progress
    counted in attempts with the migration being verified, nothing judged twice."""
    import shutil

    from screens.verifying import verify_scope
    from storage import queries
    from workbench.verify import verify_study

    shutil.copy(unverified, tmp_path / "cli.db")
    steps: list[tuple[int, int, str]] = []
    assert verify_scope(unverified, (None, None, "the whole study"), lambda *step: steps.append(step)) == (6, 6, [])
    cli = open_study(tmp_path / "cli.db")
    verify_study(cli.db, "ana")

    def verdicts(db) -> dict:
        ids = [r[0] for r in db.execute("SELECT id FROM attempt ORDER BY id")]
        return {aid: [(d.level, d.outcome, d.reason, d.evidence) for d in queries.verdicts(db, aid)] for aid in ids}

    app = open_study(unverified)
    assert verdicts(app.db) == verdicts(cli.db) and any(verdicts(app.db).values())
    slugs = {r[0] for r in app.db.execute("SELECT slug FROM migration")}
    assert steps[-1] == (6, 6, "done") and all(total == 6 for _, total, _ in steps)
    assert [done for done, _, _ in steps] == sorted(done for done, _, _ in steps)
    assert {label for _, _, label in steps[:-1]} <= slugs and len(steps) > 1
    assert verify_scope(unverified, ("mlp-classifier", None, "mlp-classifier"), lambda *step: None)[0] == 0


async def test_the_app_judges_a_big_scope_in_worker_processes(bundle, tmp_path: Path, monkeypatch) -> None:
    """Enough attempts for a pool (batch.POOL_MIN), from the app's thread worker under Textual,
    whose capture of stderr has no descriptor: the pool's processes come from a fork server, and
    every attempt gets its verdicts."""
    from storage import queries
    from workbench.verify import batch

    folder, shas = bundle.add_migration("mlp-xla")
    n = batch.POOL_MIN + 6
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0])] + [bundle.attempt(i, shas[1]) for i in range(1, n + 1)])
    study = open_study(tmp_path / "big.db", create=True)
    assert not import_bundle(study, bundle.root, "ana").problems
    study.close()
    monkeypatch.setattr(batch, "default_workers", lambda: 2)  # a pool even on one core
    app = WorkbenchApp(tmp_path / "big.db")
    toasts = recorded_toasts(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("V")
        await until(pilot, lambda: any(t.startswith(("Verified", "Verify failed")) for t, _ in toasts), timeout=60)
        assert f"Verified the whole study: {n} attempts, {n} with new verdicts" in [t for t, _ in toasts]
    db = open_study(tmp_path / "big.db").db
    ids = [r[0] for r in db.execute("SELECT id FROM attempt WHERE source = 'agent'")]
    assert len(ids) == n and all(len(queries.verdicts(db, aid)) == 5 for aid in ids)


async def test_an_attempt_the_app_cannot_judge_is_named_in_a_warning_and_the_others_verified(unverified: Path) -> None:
    """`V` over a study where one attempt's log breaks the judging: a warning names it, the
    other attempts get their verdicts (not an error that says the run failed)."""
    from test_verify_batch import _break_log

    from storage import queries

    study = open_study(unverified)
    broken = study.db.execute("SELECT a.id, a.seq, m.slug FROM attempt a JOIN migration m ON m.id = a.migration_id"
                              " WHERE a.source = 'agent' ORDER BY a.id LIMIT 1").fetchone()
    _break_log(study.db, broken[0])
    study.close()
    app = WorkbenchApp(unverified)
    toasts = recorded_toasts(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("V")
        await until(pilot, lambda: any(t.startswith(("Verified", "Verify failed")) for t, _ in toasts), timeout=60)
    [(said, severity)] = [(t, severity) for t, severity in toasts if t.startswith(("Verified", "Verify failed"))]
    assert severity == "warning"
    assert said.startswith(f"Verified the whole study, but 1 attempt not verified: {broken[2]}#{broken[1]} could not"
                           " be judged (a number in its log has more than 4300 digits)")
    db = open_study(unverified).db
    ids = [r[0] for r in db.execute("SELECT id FROM attempt WHERE source = 'agent'")]
    assert [len(queries.verdicts(db, aid)) for aid in ids] == [0 if aid == broken[0] else 5 for aid in ids]


async def test_news_are_said_once_they_stop_coming_each_row_once(unverified: Path, monkeypatch) -> None:
    """A whole study verified from the app: the rows are marked as their verdicts come, and the
    toasts wait for the news to stop (one per row, or one for them all when there are many)."""
    from screens.base import NewsToasts

    monkeypatch.setattr(NewsToasts, "QUIET_S", 0.5)
    app = WorkbenchApp(unverified)
    toasts = recorded_toasts(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        study = app.screen
        await pilot.press("V")
        await workers_done(app)
        await until(pilot, lambda: bool(study.fresh) and not study.news.pending)
        news = [t for t, _ in toasts if "new silent failure" in t or "new over-claim" in t]
        assert any("Verified the whole study: 6 attempts, 6 with new verdicts" in t for t, _ in toasts)
        assert sorted(t.split(":")[0] for t in news) == sorted(study.fresh)  # each marked row said once


def test_many_rows_with_news_in_one_refresh_are_said_in_one_toast() -> None:
    news = [(f"m-{i}", "new silent failure") for i in range(render.NEWS_TOASTS + 2)]
    assert render.news_toasts(news[:2], "migrations") == ["m-0: new silent failure", "m-1: new silent failure"]
    (one,) = render.news_toasts(news, "migrations")
    assert one.startswith(f"{len(news)} migrations with a new silent failure") and "m-4, …" in one
    assert render.news_toasts([], "attempts") == []


def test_ladder_counts_group_verified_attempts_by_highest_level(demo_db: Path) -> None:
    db = open_study(demo_db).db
    counts = ladder_counts(db)
    assert counts.levels == {0: 1, 1: 1, 2: 2, 4: 2} and counts.unverified == 0
    assert counts.failed == 6 and counts.judged == 6
    one = ladder_counts(db, 1)
    assert one.attempts == sum(one.levels.values()) < counts.attempts


async def test_headers_show_the_ladder(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "L0 " in text and "L5 " in text and "0 unverified" in text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        header = str(app.screen.query_one("#migration-header").render())
        assert "unverified" in header and "failed " in header


def test_unverified_attempts_never_read_as_failed_none() -> None:
    totals = {"migrations": 1, "attempts": 5, "failed": 0, "silent": 0, "over_claims": 0,
              "interventions": 0}
    shown = render.study_totals(totals, LadderCounts({}, 5, 0, 0)).plain
    assert "failed 0/5" not in shown and "5 unverified" in shown and "nothing verified" in shown


async def test_verify_from_the_study_migration_and_attempt_screens(demo_db: Path) -> None:
    from screens.attempt import AttemptScreen
    from screens.verifying import VerifyProgress

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "V Verify" in screen_text(app)
        await pilot.press("V")
        assert isinstance(app.verifying, VerifyProgress)  # the progress dialog was shown
        await workers_done(app)
        await settle(pilot)
        assert not isinstance(app.screen, VerifyProgress)  # done: the dialog went
        assert app.verifying is not None and app.verifying.progress == (6, 6, "done")
        toasts = [n.message for n in app._notifications]
        assert any("Verified the whole study: 6 attempts" in t for t in toasts)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        await pilot.press("V")
        await pilot.pause()
        await workers_done(app)
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        toasts = [n.message for n in app._notifications]
        assert any("Verified bow-classifier #1: 1 attempt" in t for t in toasts)


async def test_verify_on_the_migration_screen_fills_the_ladder(unverified: Path) -> None:
    app = WorkbenchApp(unverified)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "6 unverified" in text and "failed 0/" not in text
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        header = app.screen.query_one("#migration-header")
        assert "4 unverified" in str(header.render())
        await pilot.press("V")
        await workers_done(app)
        await settle(pilot)
        await workers_done(app)
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert "0 unverified" in str(header.render()) and "failed 4/4" in str(header.render())
        assert "✓✓✓✓✗" in screen_text(app)  # the rows were read again in place
        toasts = [n.message for n in app._notifications]
        assert any("Verified mlp-classifier: 4 attempts, 4 with new verdicts" in t for t in toasts)


def test_filters_parse_and_narrow_in_sql(demo_db: Path) -> None:
    from storage.review import filtered_attempts, filtered_migrations, parse_filter

    db = open_study(demo_db).db
    mlp = db.execute("SELECT id FROM migration WHERE slug = 'mlp-classifier'").fetchone()[0]

    def seqs(raw: str) -> list[int]:
        return [a.attempt.seq for a in filtered_attempts(db, mlp, parse_filter(raw), after=None, limit=50)]

    assert seqs("") == [0, 1, 2, 3, 4]
    assert seqs("silent:yes") == [2, 3, 4] and seqs("over-claim:yes") == [1, 3]
    assert seqs("level:4") == [4] and seqs("level:<=1") == [1, 3] and seqs("cause:num") == [3]
    assert seqs("source:ref") == [0] and seqs("status:nonzero") == [1] and seqs("level:none") == [0]
    assert seqs("steps silent:no") == [0, 1]
    assert seqs("silent:yes") [1:] == [a.attempt.seq for a in filtered_attempts(
        db, mlp, parse_filter("silent:yes"), after=2, limit=50)]  # keyset paging
    slugs = [m.migration.slug for m in filtered_migrations(db, parse_filter("MLP"), after=None, limit=9)]
    assert slugs == ["mlp-classifier"]
    assert [m.migration.slug for m in filtered_migrations(db, parse_filter("cause:num"), after=None,
                                                          limit=9)] == ["mlp-classifier"]
    for bad in ("foo:1", "level:9", "silent:maybe", "cause:"):
        with pytest.raises(ValueError):
            parse_filter(bad)
    # a pattern-like word is taken literally, and in linear time on a 1 MB word
    assert seqs("%") == [] and seqs("x" * 1_000_000) == []


async def type_filter(pilot, value: str) -> None:
    """`/`, the filter typed, enter."""
    from screens.widgets.filter_bar import FilterBar

    await pilot.press("slash")
    bar = pilot.app.screen.query_one(FilterBar)
    assert bar.display and bar.has_focus
    bar.value = value
    await pilot.press("enter")
    await settle(pilot)


async def test_filter_the_lists_and_keep_it_across_an_attempt(demo_db: Path) -> None:
    from test_app import column

    from screens.attempt import AttemptScreen
    from screens.study import StudyScreen

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await type_filter(pilot, "cause:num")
        assert column(app, "slug") == ["mlp-classifier"]
        assert "filter cause:num · 1 shown" in screen_text(app)
        await type_filter(pilot, "x:1")  # a bad term: said, the filter unchanged
        assert any("filter terms are key:value" in n.message for n in app._notifications)
        assert column(app, "slug") == ["mlp-classifier"]
        app.screen.query_one("#migrations").focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        await type_filter(pilot, "silent:yes level:>=3")
        assert column(app, "seq") == ["4"]
        assert "filter silent:yes level:>=3" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert column(app, "seq") == ["4"]  # the filter survived the attempt
        await pilot.press("slash", "escape")  # escape in the input clears it
        await settle(pilot)
        assert column(app, "seq") == ["0", "1", "2", "3", "4"]
        assert "filter" not in str(app.screen.query_one("#migration-header").render())
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, StudyScreen) and column(app, "slug") == ["mlp-classifier"]


async def fill(pilot, values: dict[str, str]) -> None:
    from textual.widgets import Input

    for selector, value in values.items():
        pilot.app.screen.query_one(selector, Input).value = value
    await pilot.press("ctrl+s")
    await workers_done(pilot.app)
    await settle(pilot)


async def test_an_empty_study_says_what_next_and_the_forms_set_it_up(tmp_path: Path) -> None:
    import json

    from conftest import make_repo
    from test_app import column

    from screens.setup import NewMigrationForm, ReferenceForm
    from workbench.studies import init_study

    db = tmp_path / "s.db"
    init_study(db, "My study", {"tpu-v5e": 1.2}, slug=None, reviewer="ana")
    make_repo(tmp_path / "project", [{"train.py": "print('train')\n"}])
    app = WorkbenchApp(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "No migrations in this study yet" in text and "workbench migration add" in text and "N or +" in text
        assert "workbench reference" in text and "claude-code" in text and "workbench watch" in text
        assert not app.screen.query_one("#migrations").display  # no empty table
        await pilot.press("N")
        await settle(pilot)
        assert isinstance(app.screen, NewMigrationForm)
        await fill(pilot, {"#new-repo": str(tmp_path / "nope")})  # the first empty field is named first
        assert "Slug is required" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#new-slug": "mlp", "#new-repo": str(tmp_path / "nope"),
                           "#new-target": "tpu-v5e:4", "#new-goal": "eval_accuracy",
                           "#new-reference": "0.9", "#new-command": "python train.py", "#new-base": "HEAD"})
        assert isinstance(app.screen, NewMigrationForm)  # the service's one line, on the form
        assert "--repo" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#new-reference": "lots"})
        assert "--reference-value: 'lots' is not a number" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#new-reference": "0.9", "#new-repo": str(tmp_path / "project")})
        assert not isinstance(app.screen, NewMigrationForm)
        await settle(pilot)
        assert column(app, "slug") == ["mlp"] and app.screen.query_one("#migrations").display
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ReferenceForm)
        log, metrics = tmp_path / "ref.log", tmp_path / "ref.jsonl"
        log.write_text("step 1 loss 0.9\nstep 2 eval_accuracy 0.91\n")
        metrics.write_text(json.dumps({"name": "eval_accuracy", "step": 2, "value": 0.91}) + "\n")
        await fill(pilot, {"#ref-log": str(tmp_path / "none.log")})
        assert "cannot read" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#ref-log": str(log), "#ref-wall": "60"})
        assert isinstance(app.screen, MigrationScreen)
        await settle(pilot)
        assert column(app, "source") == ["ref"]
        await pilot.press("R")  # two logs: replicates, seeds 1 and 2, the last the reference
        await settle(pilot)
        (tmp_path / "my ref.log").write_text("step 1 loss 0.8\nstep 2 eval_accuracy 0.92\n")
        await fill(pilot, {"#ref-log": f"{log} '{tmp_path / 'my ref.log'}'", "#ref-wall": "60 61"})
        assert isinstance(app.screen, MigrationScreen), str(app.screen.query_one("#form-error").render())
        await settle(pilot)
        assert column(app, "source") == ["ref"] * 3
    from storage import verify_inputs
    from storage.database import open_study

    study = open_study(db)
    reference = verify_inputs.reference_attempt(study.db, 1)
    replicates = verify_inputs.replicates(study.db, reference)
    study.close()
    assert reference.command.env == {"WORKBENCH_SEED": "2"} and [a.command.env for a in replicates] == [
        {"WORKBENCH_SEED": "1"}]


async def test_the_reference_form_runs_replicates_here(tmp_path: Path) -> None:
    """R, "Run it here", 3 replicates: the migration's command runs three times at its base commit
    in the save's worker, seed N in WORKBENCH_SEED and for {seed}; the last is the reference."""
    import shlex
    import sys

    from conftest import make_repo
    from textual.widgets import Checkbox

    from screens.setup import ReferenceForm
    from storage import verify_inputs
    from workbench.studies import init_study

    db = tmp_path / "s.db"
    init_study(db, "My study", {"tpu-v5e": 1.2}, slug=None, reviewer="ana")
    script = ("import os, sys\nseed = int(os.environ['WORKBENCH_SEED'])\nassert sys.argv[2] == str(seed)\n"
              "print(f'step 1 loss {0.9 + seed / 100}')\nprint('step 2 loss 0.5 eval_accuracy 0.93')\n")
    make_repo(tmp_path / "project", [{"train.py": script}])
    workbench("migration", "add", str(db), "m", "--repo", str(tmp_path / "project"), "--base", "HEAD",
              "--target", "cpu", "--goal", "eval_accuracy", "--direction", "max", "--command",
              f"{shlex.quote(sys.executable)} train.py --seed {{seed}}")
    app = WorkbenchApp(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ReferenceForm)
        app.screen.query_one("#ref-run", Checkbox).value = True
        await fill(pilot, {"#ref-replicates": "3", "#ref-log": "x.log"})
        assert "leave the log, metrics and wall empty" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#ref-replicates": "3", "#ref-log": ""})
        assert isinstance(app.screen, MigrationScreen), str(app.screen.query_one("#form-error").render())
    study = open_study(db)
    reference = verify_inputs.reference_attempt(study.db, 1)
    replicates = verify_inputs.replicates(study.db, reference)
    study.close()
    assert reference.command.env == {"WORKBENCH_SEED": "3"} and reference.command.argv[-1] == "3"
    assert [a.command.env["WORKBENCH_SEED"] for a in replicates] == ["1", "2"]


def workbench(*args: str) -> None:
    """The CLI in another process, as a second reviewer's terminal would run it."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "cli", *args], cwd=root, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)}, timeout=300)
    assert done.returncode == 0, done.stderr


async def until(pilot, condition, timeout: float = 20.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "the screen did not catch up"
        await pilot.pause(0.1)


async def test_lists_follow_another_process_in_place(unverified: Path, tmp_path: Path) -> None:
    import asyncio

    from test_app import column

    from screens.study import StudyScreen

    app = WorkbenchApp(unverified)
    toasts = recorded_toasts(app)  # every toast said, kept: a toast expires after 5 s, and a loaded machine is slower
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        study = app.screen
        assert isinstance(study, StudyScreen)
        await pilot.press("j")  # the cursor on mlp-classifier
        await asyncio.to_thread(workbench, "verify", str(unverified), "--migration", "bow-classifier")
        await until(pilot, lambda: column(app, "level")[0] == "L4" and "4 unverified" in screen_text(app))
        assert study.query_one("#migrations").cursor_row == 1  # the cursor stayed
        await until(pilot, lambda: any(t.startswith("bow-classifier: new silent failure") for t, _ in toasts))
        assert "bow-classifier" in study.fresh and "4 unverified" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen) and app.screen.migration.slug == "mlp-classifier"
        await pilot.press("j", "j")  # on #2
        await asyncio.to_thread(workbench, "verify", str(unverified), "--migration", "mlp-classifier")
        # the verifier commits attempt by attempt: wait for the last one
        await until(pilot, lambda: column(app, "ladder") == ["·····", "✗?✗??", "✓✓✗✓✗", "✓✗✓✗✗", "✓✓✓✓✗"])
        await until(pilot, lambda: "0 unverified" in str(app.screen.query_one("#migration-header").render()))
        screen = app.screen
        assert screen.current().attempt.seq == 2  # the cursor stayed on its attempt
        await until(pilot, lambda: any(t.startswith("mlp-classifier #3: new silent failure") for t, _ in toasts))
        assert any("#1: new over-claim" in t for t, _ in toasts)
        assert {"#1", "#3"} <= {f"#{screen.summaries[k].attempt.seq}" for k in screen.fresh}
        assert "0 unverified" in str(screen.query_one("#migration-header").render())
        log = tmp_path / "ref.log"
        log.write_text("step 2 eval_accuracy 0.91\n")
        await asyncio.to_thread(workbench, "reference", str(unverified), "mlp-classifier", "--log", str(log),
                                "--command", "python train.py")
        await until(pilot, lambda: len(column(app, "seq")) == 6)  # a new reference run, pinned first
        assert column(app, "source")[:2] == ["ref", "ref"] and screen.current().attempt.seq == 2


def many_attempts(bundle: BundleBuilder, tmp_path: Path, count: int) -> WorkbenchApp:
    """The app on a study whose one migration has `count` attempts."""
    folder, shas = bundle.add_migration("many", commits=2)
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1]) for seq in range(count)])
    return WorkbenchApp(build(bundle, tmp_path))


def drawn(t) -> list:
    """Every line of a table as it draws it now: each segment's text and style."""
    from textual.geometry import Region

    return [[(seg.text, seg.style) for seg in strip] for strip in t.render_lines(Region(0, 0, *t.size))]


def drawn_as_afresh(t) -> bool:
    """The table draws what it draws with its caches emptied (they are emptied)."""
    kept = drawn(t)
    t._clear_caches()
    return drawn(t) == kept


async def attempt_table(pilot):
    """The first migration's attempt table, opened from the study screen."""
    await settle(pilot)
    await pilot.press("enter")
    await settle(pilot)
    return table(pilot.app)


async def test_a_table_draws_from_its_cache_after_a_move_what_it_draws_afresh(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """NavTable asks DataTable for a row the cursor is not on with one location for "elsewhere",
    so a move of the cursor redraws two rows, not all of them (issue 19): every line, with its
    styles (cursor, hover, zebra stripes), is what the table draws with its caches emptied."""
    from screens.widgets.nav_table import ELSEWHERE, NavTable

    app = many_attempts(bundle, tmp_path, 40)

    async with app.run_test(size=(120, 40)) as pilot:
        t = await attempt_table(pilot)
        await pilot.hover(NavTable, offset=(4, 6))
        for keys in ("jjjjj", "kk", "j" * 20, "g", "jjj"):
            await pilot.press(*keys)
            await settle(pilot)
            assert drawn_as_afresh(t), keys

        def kept_lines() -> set:
            return {k for k in t._line_cache.keys() if k[0] == ELSEWHERE}

        t._draw_ahead = lambda *_: None  # what a move itself draws (its caches emptied above)
        before, lines = len(t._row_render_cache), kept_lines()
        await pilot.press("j")
        await settle(pilot)
        t.refresh()  # every line drawn again, as when the detail below the table changes height
        drawn(t)
        assert 0 < len(t._row_render_cache) - before <= 2  # the rows the cursor left and reached
        assert 0 < len(kept_lines() - lines) <= 2
        await pilot.press(*"j" * 30)  # the table scrolls a row each press
        await settle(pilot)
        lines = kept_lines()
        await pilot.press("j")
        await settle(pilot)
        assert t.scroll_y > 0 and 0 < len(kept_lines() - lines) <= 3  # and the row scrolled into view


async def test_a_move_draws_ahead_what_the_next_move_the_same_way_shows(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """Once a move is on screen, the rows the next move the same way shows are drawn (issue 19),
    so that move draws no cell, and shows what the table draws with its caches emptied."""
    from textual.widgets import DataTable

    app = many_attempts(bundle, tmp_path, 60)

    async with app.run_test(size=(120, 40)) as pilot:
        t = await attempt_table(pilot)
        cells: list = []
        for keys in ("j", "j" * 30, "k", "k" * 25):
            await pilot.press(*keys)  # the table scrolls in the middle two
            await settle(pilot)
            t._draw_ahead = lambda *_: None
            t._render_cell = lambda *args, **kw: cells.append(args) or DataTable._render_cell(t, *args, **kw)
            row = t.cursor_row
            await pilot.press(keys[-1])
            await settle(pilot)
            assert t.cursor_row != row and cells == [], keys
            del t._draw_ahead, t._render_cell
            assert drawn_as_afresh(t), keys


async def test_a_tables_render_caches_stay_within_two_screens_and_draw_the_same(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """DataTable's render caches (1,000 rows and lines, 10,000 cells) filled up as the cursor moved
    and kept ~100,000 objects for the garbage collector (issue 19); NavTable keeps two screens'
    worth, also after the terminal shrinks, and the rows look as they did."""
    app = many_attempts(bundle, tmp_path, 80)

    def within_two_screens() -> None:
        t = table(app)
        lines = 2 * max(t.size.height, 20)
        for cache in (t._row_render_cache, t._row_renderable_cache):
            assert len(cache) <= lines
        assert len(t._line_cache) <= 2 * lines  # DataTable's entry and NavTable's for each line
        assert len(t._cell_render_cache) <= lines * max(len(t.columns) + 1, 16)

    async with app.run_test(size=(120, 40)) as pilot:
        assert (await attempt_table(pilot)).row_count == 80 and isinstance(app.screen, MigrationScreen)
        first = screen_text(app)
        for _ in range(4):
            await pilot.press(*"j" * 19)
            await settle(pilot)
        await pilot.press(*"k" * 40)
        await settle(pilot)
        within_two_screens()
        await pilot.press("g")
        await settle(pilot)
        assert screen_text(app) == first
        await pilot.resize_terminal(120, 24)
        await settle(pilot)
        await pilot.press(*"j" * 30)
        await settle(pilot)
        within_two_screens()
        await pilot.resize_terminal(120, 40)
        await pilot.press("g")
        await settle(pilot)
        assert screen_text(app) == first


async def test_the_detail_under_a_list_only_grows_and_draws_what_a_layout_would(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """The attempt detail keeps the most lines it has shown, so a move to an attempt with a
    shorter detail draws the detail and two rows instead of laying the screen out again (issue
    19): the table never grows back, the detail always names the highlighted attempt, and the
    screen is what a full layout pass draws."""
    folder, shas = bundle.add_migration("varied", commits=2)
    claims = ["short", "a claim long enough to wrap at this width " * 4, "", "two\nlines", "short"]
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1], claim=claims[seq % len(claims)])
                                   for seq in range(12)])
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        detail = app.screen.query_one("#attempt-detail")
        heights, rows = [detail.size.height], [table(app).size.height]
        for _ in range(11):
            await pilot.press("j")
            await settle(pilot)
            seq = app.screen.current().attempt.seq
            assert screen_text(app).count(f"#{seq} ") >= 1 and str(detail.render()).startswith(f"#{seq} ")
            heights.append(detail.size.height)
            rows.append(table(app).size.height)
            drawn = screen_text(app)
            app.screen.refresh(layout=True)
            await settle(pilot)
            assert screen_text(app) == drawn and detail.size.height == heights[-1]
        assert heights == sorted(heights) and rows == sorted(rows, reverse=True)
        assert len(set(heights)) > 1  # the long claim made it grow


async def test_the_cursor_stays_in_view_when_the_detail_grows_under_a_burst_of_keys(
        bundle: BundleBuilder, tmp_path: Path) -> None:
    """Keys as a held `j` delivers them, all queued at once: the detail grows on the way (a long
    claim), the table shrinks, and its last scroll must still show the cursor's row."""
    from textual import events

    folder, shas = bundle.add_migration("burst", commits=2)
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1], claim="a long claim that wraps " * 8 if seq == 14
                                                  else "short") for seq in range(40)])
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        t = table(app)
        before = t.size.height
        for _ in range(18):
            app.post_message(events.Key("j", "j"))
        await settle(pilot)
        shown = t.scrollable_content_region.height - t.header_height  # rows between header and scrollbar
        assert t.size.height < before and t.cursor_row == 18  # the detail grew
        assert t.scroll_y <= t.cursor_row < t.scroll_y + shown


async def test_a_detail_is_drawn_once_for_the_same_content(bundle: BundleBuilder, tmp_path: Path,
                                                            monkeypatch) -> None:
    """A table sets its cursor again for every row it adds, and the screen asked its detail for
    the same migration each time: a hundred draws for a first page (issue 19). Each content is
    drawn once in a row, and the detail still follows the cursor."""
    from rich.text import Text

    from screens.widgets.detail import Detail

    for n in range(30):
        bundle.add_migration(f"m-{n:02d}", commits=1)
    drawn: list[str] = []
    update = Detail.update
    monkeypatch.setattr(Detail, "update", lambda self, content="", **kw: drawn.append(str(content))
                        or update(self, content, **kw))
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert table(app).row_count == 30 and drawn and drawn[-1].startswith("m-00")
        assert len(drawn) <= 2 and all(a != b for a, b in zip(drawn, drawn[1:]))
        await pilot.press("j")
        await settle(pilot)
        assert drawn[-1].startswith("m-01")
        detail, count = app.screen.query_one("#migration-detail", Detail), len(drawn)
        detail.show(Text("a note"))
        detail.show(Text("a note", style="dim"))  # equal as Rich Text (text and spans), not alike
        assert len(drawn) == count + 2


async def test_the_detail_follows_the_cursor_before_any_message_is_handled(demo_db: Path) -> None:
    """The study and migration screens' details change as the cursor moves, not when the
    table's RowHighlighted message arrives: both are drawn in one refresh (issue 19: the second
    refresh cost every `j` a pass over the whole screen)."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        t, detail = table(app), app.screen.query_one("#migration-detail")
        t.move_cursor(row=1)
        assert str(detail.render()).startswith(str(t.get_row_at(1)[0]))
        await pilot.press("enter")
        await settle(pilot)
        t, detail = table(app), app.screen.query_one("#attempt-detail")
        t.move_cursor(row=2)
        assert str(detail.render()).startswith(f"#{app.screen.current().attempt.seq} ")


def arrive_together(app: WorkbenchApp, keys: str) -> None:
    """Keys as a terminal delivers them over SSH: read by the app in one go, no pause between."""
    from textual import events

    names = {"/": "slash", ":": "colon", " ": "space", "\r": "enter", "\x7f": "backspace", "\x15": "ctrl+u"}
    for ch in keys:
        app.post_message(events.Key(names.get(ch, ch), None if ch == "\r" else ch))


async def test_keys_typed_ahead_of_the_filter_and_search_land_in_them(demo_db: Path) -> None:
    """`/mlp` sent at once filters by "mlp": the letters neither vanish nor reach the list's own keys
    (the `e` of a word once opened the export dialog); a `/` typed in the box is typed."""
    from test_app import column

    from screens.attempt import AttemptScreen
    from screens.widgets.filter_bar import FilterBar

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        arrive_together(app, "/mlx\x7fp e\r")  # a backspace among them deletes the x, not the e
        await settle(pilot)
        assert not app.screen._modal  # no export dialog
        assert column(app, "slug") == ["mlp-classifier"]
        arrive_together(app, "/")
        await settle(pilot)
        bar = app.screen.query_one(FilterBar)
        assert bar.has_focus and bar.value == "mlp e"
        arrive_together(app, "/x")  # typed in the open box (over the old filter, which focus selects)
        await settle(pilot)
        assert bar.value == "/x"
        arrive_together(app, "\x15bow")  # ctrl+u, then a word: the word stays
        await settle(pilot)
        assert bar.value == "bow"
        await pilot.press("escape")
        await settle(pilot)
        app.screen.query_one("#migrations").focus()
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        await pilot.press("3")  # the log
        await settle(pilot)
        arrive_together(app, "/step")
        await settle(pilot)
        search = app.screen.query_one("#log-search")
        assert search.has_focus and search.value == "step"


async def test_the_list_follows_the_filter_as_it_is_typed(demo_db: Path) -> None:
    """A pause in typing filters the list, the focus staying in the line; a half-written term
    changes nothing and says nothing until enter."""
    from test_app import column

    from screens.widgets.filter_bar import FilterBar

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"mlp")
        bar = app.screen.query_one(FilterBar)
        for _ in range(100):  # the pause, then the page read in a worker
            await pilot.pause(0.05)
            await settle(pilot)
            if column(app, "slug") == ["mlp-classifier"]:
                break
        assert column(app, "slug") == ["mlp-classifier"] and bar.has_focus and bar.display
        await pilot.press("space", *"level")
        await pilot.pause(FilterBar.LIVE_S * 3)
        await settle(pilot)
        assert column(app, "slug") == [] and not app._notifications  # "mlp level": no such word
        await pilot.press("colon")
        await pilot.pause(FilterBar.LIVE_S * 3)
        await settle(pilot)
        assert column(app, "slug") == [] and not app._notifications  # "level:" half written: kept, unsaid
        await pilot.press("enter")
        await settle(pilot)
        assert any("level" in n.message for n in app._notifications)  # said once it is asked for
