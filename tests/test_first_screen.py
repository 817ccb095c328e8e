"""The app's first screen reads on the standard sqlite3 module and loads no other screen (issue 19).

The study screen's reads (screens.data.read_plain) give what the full open's reads give, on the
demo study and on seeded studies with blind reviewers and filters; a study the read-only
connection cannot take (missing, empty, unreadable, older, newer, foreign, half-made) gets the
full open's answer; and the first page shows without importing sqlite-utils or another screen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlite_utils import Database

from domain.errors import WorkbenchError
from screens.data import read, read_plain
from screens.messages import LoadFailed
from screens.study import StudyScreen
from storage import queries, review, schema
from storage.database import open_study
from storage.judgements import add_assignments, set_study_blind
from tests.test_launch_queries import build_study

ROOT = Path(__file__).resolve().parent.parent
FILTERS = ("", "m-0", "status:in", "level:>=2", "level:none", "silent:yes", "overclaim:yes", "cause:crash",
           "source:agent", "m-03 level:<=4", "nothing-matches")


def first_screen_reads(db) -> tuple:
    """Everything the study screen and the app read before and just after the first page."""
    pages = []
    for raw in FILTERS:
        wanted = review.parse_filter(raw)
        first = StudyScreen._page(db, wanted, None, 3)
        pages.append((raw, first, StudyScreen._page(db, wanted, first[-1].migration.slug, 3) if first else []))
    slug = db.execute("SELECT slug FROM migration ORDER BY slug").fetchone()
    return (queries.get_study(db), queries.count_migrations(db), pages, StudyScreen._counts(db),
            queries.attempt_names(db), slug and queries.get_migration(db, slug[0]))


def assert_same_reads(path: Path) -> None:
    plain, full = read_plain(path, first_screen_reads), read(path, first_screen_reads)
    assert not isinstance(plain, LoadFailed), plain
    assert plain == full


@pytest.mark.parametrize("seed", range(4))
def test_the_first_screens_reads_match_the_full_opens(tmp_path: Path, seed: int, monkeypatch) -> None:
    path = tmp_path / "study.db"
    study = build_study(path, seed)
    try:
        attempts = [r[0] for r in study.db.execute("SELECT id FROM attempt WHERE source = 'agent' ORDER BY id")]
        add_assignments(study.db, [(a, "blind-ana") for a in attempts[::3]], blind=True, seed=seed,
                        overlap=0.0, assigned_by="lead")
    finally:
        study.close()
    for reviewer in ("lead", "blind-ana"):  # blind-ana sees blinded rows and no totals
        monkeypatch.setenv("WORKBENCH_REVIEWER", reviewer)
        assert_same_reads(path)
    study = open_study(path)
    try:
        set_study_blind(study.db, True, "lead")
    finally:
        study.close()
    monkeypatch.setenv("WORKBENCH_REVIEWER", "lead")
    assert_same_reads(path)


def test_the_first_screens_reads_match_on_the_demo_study(demo_db: Path, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "demo.db"
    shutil.copy(demo_db, path)
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    assert_same_reads(path)


def _make(kind: str, path: Path) -> None:
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"this is not sqlite" * 100)
    elif kind == "older":
        schema.migrations.apply(Database(path), stop_before=schema.known()[-1])
    elif kind == "newer":
        open_study(path, create=True).close()
        Database(path)["_sqlite_migrations"].insert(
            {"migration_set": "workbench", "name": "m900_new", "applied_at": "x"})
    elif kind == "foreign":
        Database(path)["t"].insert({"a": 1})
    elif kind == "half":
        schema.migrations.ensure_migrations_table(Database(path))
    elif kind == "directory":
        path.mkdir()


@pytest.mark.parametrize("kind", ["missing", "empty", "garbage", "older", "newer", "foreign", "half", "directory"])
def test_what_the_plain_read_cannot_take_gets_the_full_opens_answer(tmp_path: Path, kind: str) -> None:
    """The same rows or the same one-line problem, the same files left (an older study upgraded
    in place with its backup beside it; an empty file refused, not read as an empty study)."""
    answers, left = [], []
    for reader in (read_plain, read):
        folder = tmp_path / reader.__name__
        folder.mkdir()
        _make(kind, folder / "s.db")
        got = reader(folder / "s.db", first_screen_reads)
        answers.append(got.problem.replace(str(folder), "<dir>") if isinstance(got, LoadFailed) else got)
        left.append(sorted(p.name.split(".schema")[0] + (".bak" if p.name.endswith(".bak") else "")
                           for p in folder.iterdir()))
    assert answers[0] == answers[1]
    assert left[0] == left[1]
    if kind in ("missing", "empty", "garbage", "newer", "foreign", "half", "directory"):
        assert isinstance(read_plain(tmp_path / "read_plain" / "s.db", queries.count_migrations), LoadFailed)
    else:
        assert read_plain(tmp_path / "read_plain" / "s.db", queries.count_migrations) == 0


FIRST_SCREEN = """
import asyncio, sys
from pathlib import Path
from screens.app import WorkbenchApp
from textual.widgets import DataTable

WorkbenchApp._warm_imports = lambda self: None  # what the first page needs, not what it loads after

async def main():
    app = WorkbenchApp(Path(sys.argv[1]), keymap_path=Path("/nonexistent"))
    async with app.run_test(size=(120, 40)) as pilot:
        while not (app.screen.query(DataTable) and app.screen.query_one(DataTable).row_count
                   and app.screen.query("FooterKey")):
            await pilot.pause(0.01)
        loaded = sorted(m for m in sys.modules if m.startswith(("sqlite_utils", "screens", "domain")))
        await app.workers.wait_for_complete()
    print(" ".join(loaded))

asyncio.run(main())
"""


def test_the_first_page_shows_without_sqlite_utils_or_the_other_screens(demo_db: Path, tmp_path: Path) -> None:
    """Nor the records of attempts (domain/attempts.py: some ten dataclasses to create), which the
    study screen does not show. The blind rule (domain/blind.py) is loaded: the study's totals ask it
    whether the reviewer may see them; it loads attempt records only when it blanks one. (The app
    imports the other screens once the first page is shown, `_warm_imports`: switched off here, the
    modules left are the ones the first page needed; the next test has the warm-up.)"""
    loaded = _modules_loaded(FIRST_SCREEN, demo_db, tmp_path)
    assert "screens.study" in loaded and "screens.app" in loaded
    assert not loaded & {"sqlite_utils", "screens.migration", "screens.attempt", "screens.help",
                         "screens.verifying", "screens.forms", "screens.effort", "screens.widgets.effort_panel",
                         "domain.attempts"}


WARMED = """
import asyncio, sys
from pathlib import Path
from screens.app import WorkbenchApp

async def main():
    app = WorkbenchApp(Path(sys.argv[1]), keymap_path=Path("/nonexistent"))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        loaded = sorted(m for m in sys.modules if m.startswith(("screens", "storage", "workbench")))
    print(" ".join(loaded))

asyncio.run(main())
"""


def test_the_screens_a_first_enter_opens_are_imported_once_the_first_page_shows(demo_db: Path,
                                                                               tmp_path: Path) -> None:
    """The migration and attempt screens and what their first reads import, loaded in a worker after
    the first page: the first Enter no longer waits on ~140 ms of imports (issue 39)."""
    loaded = _modules_loaded(WARMED, demo_db, tmp_path)
    assert {"screens.migration", "screens.attempt", "workbench.blind", "storage.explanations"} <= loaded


PREPARE = """
import sys
from pathlib import Path
from cli.app import prepare
prepare(Path(sys.argv[1]))
print(sorted({m.split(".")[0] for m in sys.modules} & {"sqlite_utils", "textual"}), "workbench.rerun" in sys.modules)
"""


def test_workbench_open_checks_read_only_and_recovers_only_a_study_with_active_jobs(tmp_path: Path) -> None:
    """`workbench open` (cli.app.prepare): a study with no queued or running re-run is checked on
    the standard sqlite3 module; one with a re-run whose runner is gone has it marked interrupted,
    as before; a missing or foreign file gets the full open's error."""
    from cli.app import prepare
    from tests.rerun_helpers import attempt, study_with_script
    from workbench.rerun import jobs

    study = study_with_script(tmp_path)
    try:
        check = subprocess.run([sys.executable, "-c", PREPARE, str(study.path)], capture_output=True, text=True,
                               timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert check.returncode == 0, check.stderr
        assert check.stdout.split() == ["[]", "False"]
        job = jobs.create_job(study.db, study.path, jobs.spec_for(study.db, attempt(study, "toy", 1), "local"), "ana")
        with study.db.conn:  # queued long ago, and no runner ever reported: abandoned
            study.db.execute("UPDATE job SET created_at = '2026-01-01T00:00:00.000+00:00' WHERE id = ?", [job.id])
        assert jobs.get_job(study.db, job.id).state is jobs.JobState.QUEUED
        prepare(study.path)
        assert jobs.get_job(study.db, job.id).state is jobs.JobState.INTERRUPTED
    finally:
        study.close()
    with pytest.raises(WorkbenchError, match="no such study database"):
        prepare(tmp_path / "missing.db")
    _make("foreign", tmp_path / "foreign.db")
    with pytest.raises(WorkbenchError, match="not a workbench study database"):
        prepare(tmp_path / "foreign.db")


async def test_the_collector_runs_again_once_the_first_page_is_shown_or_cannot_be(demo_db: Path, tmp_path: Path) -> None:
    """The app pauses the cyclic garbage collector from its start to its first page (or a
    failure to read it), never beyond; from then on what the launch built is frozen and the
    thresholds are the app's, and its end leaves the collector as it found it."""
    import gc

    from screens.app import GC_THRESHOLDS, WorkbenchApp

    path = tmp_path / "demo.db"
    shutil.copy(demo_db, path)
    found = gc.get_threshold()
    assert gc.isenabled() and gc.get_freeze_count() == 0 and found != GC_THRESHOLDS
    for study in (path, tmp_path / "missing.db"):
        app = WorkbenchApp(study, keymap_path=tmp_path / "no-keymap.toml")
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(1000):
                if app.first_page_shown.is_set():
                    break
                await pilot.pause(0.01)
            await pilot.pause()
            assert app.first_page_shown.is_set() and gc.isenabled()
            assert gc.get_freeze_count() > 0 and gc.get_threshold() == GC_THRESHOLDS
        assert gc.isenabled() and gc.get_freeze_count() == 0 and gc.get_threshold() == found


def _modules_loaded(script: str, demo_db: Path, tmp_path: Path) -> set[str]:
    """The modules `script` prints, run in a fresh process on a copy of the demo study."""
    path = tmp_path / "demo.db"
    shutil.copy(demo_db, path)
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())
