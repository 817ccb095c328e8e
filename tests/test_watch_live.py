"""Issue 14's Done-when for following live: lines of a real-format transcript (the shared sample's
lines, moved to the project) are appended in steps, a half line included, while `workbench watch`
runs as a real subprocess, or while the app's own watch (`W`) runs; the attempts, their exit codes
and verdicts reach the database once each, and the open app shows them without reopening, with
the toast and the mark for a new silent failure. Waits are polls with generous limits, never
assertions about speed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from test_app import settle

from screens.app import WorkbenchApp
from screens.migration import MigrationScreen
from tests.test_watch import VERIFIED, query, wait_for
from tests.watch_helpers import live_study, sample_session, stop

SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"
"""The sample's session id: the file is named after it, as Claude Code names its transcripts."""
RUNS = [
    ("python train.py", "step 1 loss 0.9\nstep 2 loss 0.5\nstep 2 eval_accuracy 0.91\n", 0),
    ("python train.py --fast", "Traceback (most recent call last):\nRuntimeError: boom", 1),
    ("python train.py --steps 9", "step 1 loss 0.9\n", 0),  # exit 0 without the goal metric: silent
]


async def until(pilot, condition, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"the app did not show {what}"
        await pilot.pause(0.1)


def shown(app: WorkbenchApp) -> dict[int, tuple]:
    """seq -> (status, exit code, has a verdict, silent failure) of the agent rows on screen."""
    screen = app.screen
    if not isinstance(screen, MigrationScreen):
        return {}
    return {s.attempt.seq: (s.attempt.status.value, s.attempt.exit_code, any(o is not None for o in s.ladder),
                            bool(s.failure and s.failure.silent))
            for s in screen.summaries.values() if s.attempt.source.value == "agent"}


def write(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


async def open_migration(pilot, app: WorkbenchApp) -> MigrationScreen:
    await settle(pilot)
    app.open_migration("mlp")
    await until(pilot, lambda: isinstance(app.screen, MigrationScreen), "the migration screen")
    await settle(pilot)
    assert isinstance(app.screen, MigrationScreen)
    return app.screen


async def follow_the_steps(pilot, app: WorkbenchApp, db: Path, session: Path, lines: list[bytes]) -> None:
    """Append the session in steps; after each, the database and the open screen agree."""
    write(session, b"".join(lines[:3]))  # the prompt, a call and its result
    await asyncio.to_thread(wait_for, db, VERIFIED, [(1, "ok", 0, 1)], 30)
    await until(pilot, lambda: shown(app).get(1) == ("ok", 0, True, False), "attempt 1 verified")
    half = len(lines[4]) // 2
    write(session, lines[3] + lines[4][:half])  # a call, and half of its result's line
    await until(pilot, lambda: shown(app).get(2) == ("no_result", None, False, False), "the call without a result")
    await asyncio.sleep(1.0)  # several rounds: the half line is neither read nor counted as bad
    assert shown(app).get(2) == ("no_result", None, False, False)
    write(session, lines[4][half:])
    await until(pilot, lambda: shown(app).get(2) == ("nonzero_exit", 1, True, False), "attempt 2's exit code")
    write(session, b"".join(lines[5:]))
    await until(pilot, lambda: shown(app).get(3) == ("ok", 0, True, True), "the silent failure")
    screen = app.screen
    assert isinstance(screen, MigrationScreen)
    await until(pilot, lambda: any("mlp #3: new silent failure" in n.message for n in app._notifications),
                "the silent failure's toast")
    assert any(screen.summaries[k].attempt.seq == 3 for k in screen.fresh)  # the row is marked
    assert sorted(shown(app)) == [1, 2, 3]


def once_each(db: Path) -> None:
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT external_id) FROM attempt WHERE source = 'agent'") == [(3, 3)]
    assert query(db, "SELECT a.seq, a.status, a.exit_code, f.silent FROM attempt a LEFT JOIN failure f"
                     " ON f.attempt_id = a.id AND f.superseded_by IS NULL WHERE a.source = 'agent' ORDER BY a.seq") == [
        (1, "ok", 0, None), (2, "nonzero_exit", 1, 0), (3, "ok", 0, 1)]
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT attempt_id) FROM verification WHERE superseded_by IS NULL"
                     " AND attempt_id IN (SELECT id FROM attempt WHERE source = 'agent')") == [(3, 3)]


async def test_watch_subprocess_while_the_app_is_open(tmp_path: Path, monkeypatch) -> None:
    live = live_study(tmp_path)
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    session = live.folder / f"{SESSION}.jsonl"
    session.write_bytes(b"")
    lines = sample_session(live.repo, RUNS)
    watch = live.watch()
    try:
        await asyncio.to_thread(wait_for, live.db, "SELECT COUNT(*) FROM watch", [(1,)], 30)
        app = WorkbenchApp(live.db)
        async with app.run_test(size=(120, 30)) as pilot:
            await open_migration(pilot, app)
            await follow_the_steps(pilot, app, live.db, session, lines)
    finally:
        out, _ = stop(watch)
    once_each(live.db)
    assert len(out.splitlines()) == 3 and "SILENT FAILURE" in out.splitlines()[2]


async def test_the_apps_watch_toggle(tmp_path: Path, monkeypatch) -> None:
    live = live_study(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(live.config))
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    session = live.folder / f"{SESSION}.jsonl"
    session.write_bytes(b"")
    lines = sample_session(live.repo, RUNS)
    app = WorkbenchApp(live.db)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_migration(pilot, app)
        assert screen.sub_title is None
        await pilot.press("W")
        await until(pilot, lambda: screen.sub_title == "watching 1 session", "the watch's subtitle")
        assert any(n.message.startswith("Watching mlp's Claude Code sessions") for n in app._notifications)
        await asyncio.to_thread(wait_for, live.db, "SELECT COUNT(*) FROM watch", [(1,)], 30)
        await follow_the_steps(pilot, app, live.db, session, lines)
        await pilot.press("escape")  # closing the screen keeps the watch
        await until(pilot, lambda: not isinstance(app.screen, MigrationScreen), "the study screen")
        assert app.live.get(screen.migration.id) is not None
        app.open_migration("mlp")
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen), "the migration screen again")
        again = app.screen
        await until(pilot, lambda: again.sub_title == "watching 1 session", "the subtitle on the new screen")
        await pilot.press("W")  # off: the watcher ends its round and removes its row
        await until(pilot, lambda: again.sub_title is None, "the subtitle gone")
        assert [n.message for n in app._notifications][-1] == "Stopped watching mlp's Claude Code sessions"
        await asyncio.to_thread(wait_for, live.db, "SELECT COUNT(*) FROM watch", [(0,)], 30)
        write(session, b"".join(sample_session(live.repo, [("python train.py --late", "x\n", 0)])[1:]))
        await asyncio.sleep(1.5)
        assert query(live.db, "SELECT COUNT(*) FROM attempt WHERE source = 'agent'") == [(3,)]
        await pilot.press("W")  # on again, then the app exits with it running
        await until(pilot, lambda: again.sub_title == "watching 1 session", "the watch on again")
    await asyncio.to_thread(wait_for, live.db, "SELECT COUNT(*) FROM watch", [(0,)], 30)
    assert query(live.db, "SELECT COUNT(*) FROM attempt WHERE source = 'agent'")[0][0] in (3, 4)


async def test_the_toggle_says_when_there_is_no_sessions_folder(tmp_path: Path, monkeypatch) -> None:
    live = live_study(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "elsewhere"))
    app = WorkbenchApp(live.db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_migration(pilot, app)
        await pilot.press("W")
        await until(pilot, lambda: screen.sub_title == "watching 0 sessions", "the subtitle")
        toasts = [n.message for n in app._notifications]
        assert any(t.startswith("No Claude Code sessions folder for ") and "\n" not in t for t in toasts), toasts
        await pilot.press("W")
        await until(pilot, lambda: screen.sub_title is None, "the watch stopped")
