"""Several reviewers on one database: concurrent writers lose nothing; a killed app loses nothing saved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage import queries
from storage.database import open_study
from workbench.bundle import import_bundle

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PER_PROCESS = 300

WRITER = textwrap.dedent("""
    import sys
    from storage import queries, records
    from storage.database import open_study

    path, reviewer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    study = open_study(path)
    db = study.db
    migration = queries.get_migration(db, "mlp-xla")
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for n in range(count):
        records.record_intervention(db, migration_id=migration.id, kind="hint", minutes=1,
                                    note=f"{reviewer} {n}", reviewer=reviewer)
        if n % 50 == 0:  # read between writes, as the app does
            queries.migration_standing(db, migration.id)
    study.close()
    print("done", flush=True)
""")


@pytest.fixture
def study_path(small_bundle, tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    study = open_study(path, create=True)
    try:
        assert import_bundle(study, small_bundle.root, "ana").problems == []
    finally:
        study.close()
    return path


def test_two_processes_writing_hundreds_each_lose_nothing(study_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(study_path), name, str(PER_PROCESS)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT, env=env)
        for name in ("ana", "ben")
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    study = open_study(study_path)
    try:
        db = study.db
        for name in ("ana", "ben"):
            notes = {r[0] for r in db.execute("SELECT note FROM intervention WHERE reviewer = ?", [name])}
            assert notes == {f"{name} {n}" for n in range(PER_PROCESS)}
        audited = db.execute("SELECT count(*) FROM audit WHERE entity = 'intervention'").fetchone()[0]
        assert audited == 2 * PER_PROCESS
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        study.close()


def test_data_version_shows_another_connections_commit(study_path: Path) -> None:
    from storage.records import record_intervention

    watcher, writer = open_study(study_path), open_study(study_path)
    try:
        before = watcher.data_version()
        assert watcher.data_version() == before
        m = queries.get_migration(writer.db, "mlp-xla")
        record_intervention(writer.db, migration_id=m.id, kind="hint", minutes=1, note="", reviewer="ben")
        assert watcher.data_version() != before
    finally:
        watcher.close()
        writer.close()


APP_SAVER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from screens.app import WorkbenchApp
    from screens.forms import InterventionForm

    async def main():
        app = WorkbenchApp(Path(sys.argv[1]))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            app.open_migration("mlp-xla")
            for _ in range(100):
                await pilot.pause(0.05)
                if app.screen.__class__.__name__ == "MigrationScreen":
                    break
            await pilot.app.workers.wait_for_complete()
            await pilot.press("i")
            for _ in range(100):
                await pilot.pause(0.05)
                if isinstance(app.screen, InterventionForm):
                    break
            form = app.screen
            form.query_one("#intervention-kind").value = "hint"
            form.query_one("#intervention-minutes").value = "17"
            form.query_one("#intervention-note").value = "killed right after this"
            await pilot.press("ctrl+s")
            for _ in range(500):
                await pilot.pause(0.02)
                if form.saved_id is not None:
                    break
            # the app has said it was saved (the notification); kill it now
            print("SAVED", form.saved_id, [n.message for n in app._notifications], flush=True)
            await asyncio.sleep(60)

    asyncio.run(main())
""")


def test_sigkill_just_after_a_save_keeps_the_record(study_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_REVIEWER": "ana"}
    proc = subprocess.Popen([sys.executable, "-c", APP_SAVER, str(study_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("SAVED") or not line:
                break
        assert line.startswith("SAVED") and "None" not in line, proc.stderr.read() if not line else line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    saved_id = int(line.split()[1])
    assert f"Saved intervention #{saved_id}" in line  # what the app told the reviewer
    study = open_study(study_path)
    try:
        db = study.db
        row = db.execute("SELECT minutes, note, reviewer FROM intervention WHERE id = ?", [saved_id]).fetchone()
        assert row == (17.0, "killed right after this", "ana")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        study.close()
