"""Interventions recorded while a watch is live concern the attempt that was latest at that moment:
`workbench watch` and `workbench intervene` as real subprocesses on one real SQLite study."""

from __future__ import annotations

import datetime
import sqlite3
from pathlib import Path

from storage.database import open_study
from storage.ledger import ledger_page
from storage.review import ListFilter
from tests.import_helpers import Transcript
from tests.test_cli import workbench
from tests.test_watch import append, query, wait_for
from tests.watch_helpers import live_study, stop

LINKED = "SELECT i.id, a.seq FROM intervention i LEFT JOIN attempt a ON a.id = i.attempt_id ORDER BY i.id"


def intervene(db: Path, *extra: str) -> str:
    done = workbench("intervene", str(db), "mlp", "--kind", "fix_environment", "--minutes", "5", "--note", "x",
                     *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_interventions_while_watching_link_to_the_latest_attempt(tmp_path: Path) -> None:
    live = live_study(tmp_path)
    t = Transcript(cwd=str(live.repo.resolve()))
    t.bash("python train.py", "step 2 eval_accuracy 0.91\n")
    t.bash("python train.py --fast", "Traceback\nRuntimeError: boom", exit_code=1)
    session = live.folder / f"{t.session}.jsonl"
    session.write_text("")
    assert intervene(live.db) == "intervention 1 recorded"  # no watch yet: the migration as a whole
    watch = live.watch()
    try:
        wait_for(live.db, "SELECT COUNT(*) FROM watch", [(1,)])
        append(session, t.lines)
        wait_for(live.db, "SELECT MAX(seq) FROM attempt WHERE source = 'agent'", [(2,)])
        assert intervene(live.db) == "intervention 2 recorded, on attempt 2 (the latest: a watch is live)"
        assert intervene(live.db, "--attempt", "1") == "intervention 3 recorded"  # an explicit attempt stays
        t.bash("python train.py --steps 3", "step 3\n")
        append(session, t.lines[4:])
        wait_for(live.db, "SELECT MAX(seq) FROM attempt WHERE source = 'agent'", [(3,)])
        assert intervene(live.db).endswith("on attempt 3 (the latest: a watch is live)")
    finally:
        stop(watch)
    assert query(live.db, "SELECT COUNT(*) FROM watch") == [(0,)]  # a stopped watch removes its row
    assert intervene(live.db) == "intervention 5 recorded"
    assert query(live.db, LINKED) == [(1, None), (2, 2), (3, 1), (4, 3), (5, None)]
    study = open_study(live.db)
    try:
        entries = ledger_page(study.db, None, ListFilter(), limit=None)
    finally:
        study.close()
    assert sorted((e.id, e.seq) for e in entries if e.kind == "intervention") == [
        (1, None), (2, 2), (3, 1), (4, 3), (5, None)]


def test_a_stale_heartbeat_does_not_count(tmp_path: Path) -> None:
    live = live_study(tmp_path)
    t = Transcript(cwd=str(live.repo.resolve()))
    t.bash("python train.py", "ok\n")
    t.dump(live.folder / f"{t.session}.jsonl")
    assert workbench("import", "claude-code", "--db", str(live.db), "--migration", "mlp", "--project",
                     str(live.repo), env={"CLAUDE_CONFIG_DIR": str(live.config)}).returncode == 0
    old = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=45)).isoformat(timespec="milliseconds")
    fresh = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=5)).isoformat(timespec="milliseconds")
    con = sqlite3.connect(live.db)
    with con:  # a watcher killed without stopping: its row stays, its heartbeat ages
        con.execute("INSERT INTO watch (migration_id, pid, host, started_at, heartbeat_at) VALUES (1, 1, 'h', ?, ?)",
                    [old, old])
    assert intervene(live.db) == "intervention 1 recorded"
    with con:  # a watcher on another machine, alive
        con.execute("UPDATE watch SET heartbeat_at = ?", [fresh])
    con.close()
    assert intervene(live.db).endswith("on attempt 1 (the latest: a watch is live)")
    # a correction keeps what the reviewer chose, watch or not
    assert intervene(live.db, "--corrects", "1") == "intervention 3 recorded"
    assert query(live.db, LINKED) == [(1, None), (2, 1), (3, None)]


async def test_the_apps_intervention_while_a_watch_runs_concerns_the_latest_attempt(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    from textual.widgets import Select

    from screens.app import WorkbenchApp
    from screens.forms import InterventionForm
    from tests.test_effort_app import open_form, open_migration, save, type_into, until

    live = live_study(tmp_path)
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    t = Transcript(cwd=str(live.repo.resolve()))
    t.bash("python train.py", "step 2 eval_accuracy 0.91\n")
    t.bash("python train.py --fast", "Traceback\nRuntimeError: boom", exit_code=1)
    t.dump(live.folder / f"{t.session}.jsonl")
    watch = live.watch()  # `workbench watch` in another process
    try:
        wait_for(live.db, "SELECT COUNT(*), MAX(seq) FROM attempt WHERE source = 'agent'", [(2, 2)], 30)
        wait_for(live.db, "SELECT COUNT(*) FROM watch", [(1,)], 30)
        app = WorkbenchApp(live.db)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_migration(pilot, "mlp", row=1)  # the cursor on an older row, not the latest
            form = await open_form(pilot, "i", InterventionForm)
            assert form.query_one("#intervention-attempt", Select).value == Select.NULL
            assert any("A watch is live" in n.message for n in app._notifications)
            form.query_one("#intervention-kind", Select).value = "fix_environment"
            await type_into(pilot, form, "#intervention-minutes", "5")
            await save(pilot, form)
            await until(pilot, lambda: not isinstance(app.screen, InterventionForm))
    finally:
        stop(watch)
    assert query(live.db, LINKED) == [(1, 2)]
