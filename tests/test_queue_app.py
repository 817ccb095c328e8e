"""My queue in the app (issue 17): Pilot on the real demo study, its attempts dealt with the real
`workbench.judging.assign`, judgements recorded through the service the CLI calls and by the CLI
itself in another process."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_app import screen_text, settle
from test_effort_app import until

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.queue import QueueScreen, QueueTable
from storage.database import open_study
from storage.judgements import queue
from workbench import judging

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "[red]x[/red]\x1b[2J"


def workbench(*args: str, reviewer: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in another process, seeing this tree."""
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def dealt(demo_source: Path, tmp_path: Path, monkeypatch) -> Path:
    """The demo study (two migrations, six agent attempts) dealt to ana and ben, half of it to both;
    ana has judged her first attempt."""
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    try:
        judging.assign(study.db, ["ana", "ben"], overlap=0.5, migration_id=None, blind=False, seed=3,
                       assigned_by="lead")
        first = queue(study.db, "ana")[0]
        judging.record_judgement(study.db, first.migration, first.seq, levels="pass,pass,unknown,unknown,unknown",
                                 cause=None, note=None, reviewer="ana")
    finally:
        study.close()
    return path


def items(path: Path, reviewer: str = "ana"):
    study = open_study(path)
    try:
        return queue(study.db, reviewer)
    finally:
        study.close()


async def open_queue(pilot) -> QueueScreen:
    await settle(pilot)
    await pilot.press("Q")
    await until(pilot, lambda: isinstance(pilot.app.screen, QueueScreen))
    screen = pilot.app.screen
    await until(pilot, lambda: screen.counts is not None and not screen.pager.loading)
    await settle(pilot)
    return screen


def shown_rows(screen: QueueScreen) -> list[tuple[str, ...]]:
    table = screen.query_one(QueueTable)
    return [tuple(table.get_cell_at((r, c)).plain for c in range(len(table.columns))) for r in range(table.row_count)]


async def test_the_queue_counts_done_and_left_and_lists_no_verdict(dealt: Path) -> None:
    expected = items(dealt)
    done = sum(i.done for i in expected)
    assert done == 1 and len(expected) >= 4
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_queue(pilot)
        assert (screen.done, screen.left) == (done, len(expected) - done)
        assert f"{done} done, {len(expected) - done} left" in screen_text(app)
        rows = shown_rows(screen)
        assert [(r[0], r[1]) for r in rows] == [(i.migration, f"#{i.seq}") for i in expected]
        assert [r[3] for r in rows] == ["✓ done" if i.done else "· left" for i in expected]
        assert {r[2] for r in rows} <= {"agent", "rerun"}
        text = screen_text(app)
        for word in ("✗", "over", "claim", "Level"):  # no verdict, claim or cause on the queue
            assert word not in text


async def test_enter_opens_the_first_item_and_brackets_step_through_the_queue(dealt: Path) -> None:
    expected = items(dealt)
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(100, 30)) as pilot:
        queue_screen = await open_queue(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        attempt = app.screen
        assert attempt.summary.attempt.id == expected[0].attempt_id
        assert attempt.migration.slug == expected[0].migration
        for item in expected[1:]:  # across migrations: the screen's migration follows
            await pilot.press("right_square_bracket")
            await settle(pilot)
            assert attempt.summary.attempt.id == item.attempt_id
            assert attempt.migration.slug == item.migration
            assert item.migration in screen_text(app)
        assert len({i.migration for i in expected}) == 2
        await pilot.press("right_square_bracket")  # past the last: it stays, and says so
        await settle(pilot)
        assert attempt.summary.attempt.id == expected[-1].attempt_id
        assert [n.message for n in app._notifications][-1:] == ["No more attempts in your queue that way"]
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert attempt.summary.attempt.id == expected[-2].attempt_id
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is queue_screen
        assert queue_screen.current().attempt.id == expected[-2].attempt_id  # the queue's cursor followed


async def test_next_left_skips_judged_attempts(dealt: Path) -> None:
    expected = items(dealt)
    left = [i for i in expected if not i.done]
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_queue(pilot)
        assert "u Next left" in screen_text(app)  # the footer names the key the hint names
        assert "u, here or there, opens the next left" in screen_text(app)
        await pilot.press("u")  # from the first row, which is done: the first one left
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        attempt = app.screen
        assert attempt.summary.attempt.id == left[0].attempt_id
        await pilot.press("u")  # on the attempt screen: the queue's next one left
        await settle(pilot)
        assert attempt.summary.attempt.id == left[1].attempt_id


async def test_a_judgement_from_another_process_updates_the_counts(dealt: Path) -> None:
    expected = items(dealt)
    target = next(i for i in expected if not i.done)
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_queue(pilot)
        before = screen.done
        result = await asyncio.to_thread(workbench, "judge", str(dealt), target.migration, str(target.seq),
                                         "--levels", "pass,fail,unknown,unknown,unknown", reviewer="ana")
        assert result.returncode == 0, result.stderr
        await until(pilot, lambda: screen.done == before + 1, timeout=10.0)
        await settle(pilot)
        assert f"{before + 1} done, {len(expected) - before - 1} left" in screen_text(app)
        row = screen.query_one(QueueTable).get_row_index(str(target.attempt_id))
        assert screen.query_one(QueueTable).get_cell_at((row, 3)).plain == "✓ done"
        assert target.attempt_id in screen.cursor.done


async def test_the_queue_pages_from_sql(dealt: Path) -> None:
    expected = items(dealt)
    app = WorkbenchApp(dealt, page_size=2)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_queue(pilot)
        assert 2 <= len(screen.items) < len(expected)  # the first page (and one prefetched) only
        while not screen.pager.complete:
            await pilot.press("G")
            await settle(pilot)
        assert list(screen.items) == [str(i.attempt_id) for i in expected]


async def test_an_empty_queue_says_what_to_do(dealt: Path, monkeypatch) -> None:
    monkeypatch.setenv("WORKBENCH_REVIEWER", "zoe")
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_queue(pilot)
        text = screen_text(app)
        assert "Nothing is dealt to zoe" in text and "workbench assign" in text


def test_the_empty_queues_command_works_when_pasted(demo_source: Path, tmp_path: Path) -> None:
    """The hint named the file alone (`workbench assign demo.db ...`, the demo lives in the user
    data folder) with `[--overlap 0.2]` in it: pasted, it failed. It is the whole path, quoted."""
    import shlex

    from screens.queue import empty_queue

    folder = tmp_path / "my studies; $(echo x)"
    folder.mkdir()
    study = folder / "demo.db"
    shutil.copy(demo_source, study)
    hint = empty_queue("zoe", study).plain
    line = next(line for line in hint.splitlines() if line.strip().startswith("workbench assign"))
    command = shlex.split(line)
    assert command[:3] == ["workbench", "assign", str(study)]
    done = subprocess.run([sys.executable, "-m", "cli", *command[1:]], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path.parent, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert items(study, "zoe")  # dealt to zoe


async def test_a_hostile_reviewer_name_shows_as_text(dealt: Path, monkeypatch) -> None:
    study = open_study(dealt)
    try:
        from storage.judgements import add_assignments

        attempt_id = items(dealt)[0].attempt_id
        add_assignments(study.db, [(attempt_id, HOSTILE)], blind=True, seed=0, overlap=0.0, assigned_by="lead")
    finally:
        study.close()
    monkeypatch.setenv("WORKBENCH_REVIEWER", HOSTILE)
    app = WorkbenchApp(dealt)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_queue(pilot)
        assert screen.counts == (0, 1)
        text = screen_text(app)
        assert "[red]x[/red]␛[2J" in text and "\x1b" not in text
        assert shown_rows(screen)[0][4] == "blind"


async def test_the_palette_opens_the_queue_from_the_study_and_from_a_migration(dealt: Path) -> None:
    from test_effort_app import open_migration

    app = WorkbenchApp(dealt)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"My queue")
        await settle(pilot)
        assert "My queue (Q)" in screen_text(app)  # the study screen's binding
        await pilot.press("escape")
        await open_migration(pilot, "mlp-classifier")
        await pilot.press("ctrl+p", *"My queue")
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, QueueScreen))
        await until(pilot, lambda: app.screen.counts is not None)
        assert app.screen.counts[1] == len(items(dealt))


async def test_brackets_read_the_queues_next_page_as_they_step(dealt: Path) -> None:
    expected = items(dealt)
    app = WorkbenchApp(dealt, page_size=2)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_queue(pilot)
        assert len(screen.items) < len(expected)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        attempt = app.screen
        for item in expected[1:]:
            await pilot.press("right_square_bracket")
            await settle(pilot)
            assert attempt.summary.attempt.id == item.attempt_id


def test_failure_jumps_in_the_queue_skip_attempts_still_judged_blind() -> None:
    from dataclasses import replace

    from domain.blind import blinded
    from domain.models import Attempt, AttemptSource, AttemptStatus, AttemptSummary, Command, Failure, FailureCause
    from screens.navigation import QueueCursor

    def summary(attempt_id: int, failed: bool) -> AttemptSummary:
        attempt = Attempt(id=attempt_id, migration_id=1, seq=attempt_id, source=AttemptSource.AGENT, commit="c",
                          command=Command(argv=("python",)), status=AttemptStatus.OK)
        failure = Failure(id=attempt_id, attempt_id=attempt_id, cause=FailureCause.CRASH, silent=False,
                          note="", evidence=()) if failed else None
        return AttemptSummary(attempt=attempt, ladder=(None,) * 5, failure=failure, interventions=0)

    rows = [summary(1, False), summary(2, True), summary(3, True)]
    cursor = QueueCursor(rows=[rows[0], blinded(rows[1]), rows[2]])  # as workbench.blind.as_seen_by reads them
    found = cursor.failure(1, 1)
    assert found is not None and found.attempt.id == 3 and cursor.current == 3
    assert replace(cursor, rows=rows).failure(1, 1).attempt.id == 2
