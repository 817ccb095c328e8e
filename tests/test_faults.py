"""Faults: SIGKILL in the middle of a write, a full disk, several writers at once.

Each kill is deterministic: the child process runs the real code path (the CLI, the importer, the
verifier, the re-run runner) with `storage.records.audits` wrapped so that at the N-th audit row of
a given kind it prints FAULT and sleeps *inside the still-open write transaction* (every write
audits itself in its own transaction, docs/storage.md). The test then SIGKILLs it and reopens the
database. `assert_intact` is the definition of "nothing half-written" (docs/reliability.md).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage.database import open_study
from storage.logs import CHUNK
from workbench.bundle import import_bundle

ROOT = Path(__file__).resolve().parents[1]

HOOK = textwrap.dedent("""
    import os, sys, time
    from storage import records

    _spec = os.environ.get("FAULT_AT")  # entity:action:nth (action may be empty: any)
    if _spec:
        _entity, _action, _nth = _spec.split(":")
        _nth, _seen = int(_nth), [0]
        _orig = records.audits

        def _audits(db, reviewer, rows):
            _orig(db, reviewer, rows)
            for action, entity, _id, _detail in rows:
                if entity == _entity and (not _action or action == _action):
                    _seen[0] += 1
                    if _seen[0] == _nth:
                        print("FAULT", "in-transaction" if db.conn.in_transaction else "committed", flush=True)
                        time.sleep(600)

        records.audits = _audits
""")


def run_child(code: str, *, fault: str | None = None, timeout: float = 120, env: dict | None = None
              ) -> tuple[str, subprocess.Popen]:
    """Run HOOK + code; with `fault`, SIGKILL it when it reports FAULT. Returns (stdout, proc)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_REVIEWER": "ana", **(env or {})}
    full_env.pop("FAULT_AT", None)
    if fault:
        full_env["FAULT_AT"] = fault
    proc = subprocess.Popen([sys.executable, "-c", HOOK + textwrap.dedent(code)], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not fault:
        out, err = proc.communicate(timeout=timeout)
        return out + err, proc
    lines = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("FAULT"):
                assert line.split()[1] == "in-transaction", line
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, (fault, "".join(lines), err)
    return "".join(lines), proc


def count(db, sql: str, params=()) -> int:
    return db.execute(sql, list(params)).fetchone()[0]


def assert_intact(path: Path) -> None:
    """integrity_check clean, and no record half-written: each row and its audit row, logs whole,
    verifications whole, at most one current verification per attempt."""
    study = open_study(path)
    try:
        db = study.db
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        # logs: every one whole (its chunks add up to its size, in sequence) and used by something
        for log_id, size, lines in db.execute("SELECT id, size, line_count FROM log").fetchall():
            chunks = db.execute("SELECT seq, length(data) FROM log_chunk WHERE log_id = ? ORDER BY seq",
                                [log_id]).fetchall()
            assert [s for s, _ in chunks] == list(range(math.ceil(size / CHUNK)))
            assert sum(n for _, n in chunks) == size
            assert count(db, "SELECT count(*) FROM log_line WHERE log_id = ?", [log_id]) >= 1
            users = count(db, "SELECT count(*) FROM attempt WHERE log_id = ?", [log_id])
            if "job" in db.table_names():
                users += count(db, "SELECT count(*) FROM job WHERE log_id = ?", [log_id])
            assert users, f"log {log_id} stored but used by nothing (a half-written import)"
        assert count(db, "SELECT count(*) FROM log_chunk WHERE log_id NOT IN (SELECT id FROM log)") == 0
        # every audited row: its row exists, and every row was audited (one transaction each)
        for table in ("attempt", "intervention", "decision", "verification", "verdict", "job"):
            if table not in db.table_names():
                continue
            rows = {r[0] for r in db.execute(f"SELECT id FROM {table}")}
            audited = {r[0] for r in db.execute(
                "SELECT entity_id FROM audit WHERE entity = ? AND action = 'insert'", [table])}
            assert rows == audited, (table, rows ^ audited)
        # verifications: five verdicts each; one current per attempt, with its current verdicts
        for vid, attempt_id, superseded in db.execute(
                "SELECT id, attempt_id, superseded_by FROM verification").fetchall():
            assert count(db, "SELECT count(*) FROM verdict WHERE verification_id = ?", [vid]) == 5
        for (attempt_id,) in db.execute("SELECT DISTINCT attempt_id FROM verification").fetchall():
            current = db.execute("SELECT id FROM verification WHERE attempt_id = ? AND superseded_by IS NULL",
                                 [attempt_id]).fetchall()
            assert len(current) == 1, (attempt_id, current)
            verdicts = db.execute("SELECT DISTINCT verification_id FROM verdict WHERE attempt_id = ?"
                                  " AND superseded_by IS NULL", [attempt_id]).fetchall()
            assert verdicts == current, (attempt_id, verdicts, current)
            failures = db.execute("SELECT verification_id FROM failure WHERE attempt_id = ?"
                                  " AND superseded_by IS NULL", [attempt_id]).fetchall()
            assert set(failures) <= set(current)
    finally:
        study.close()


# --------------------------------------------------------------------------- a study to hurt

ATTEMPTS = 6
BIG = 3  # this attempt's log is large enough to spill uncommitted pages into the WAL


@pytest.fixture
def fault_bundle(bundle):
    folder, shas = bundle.add_migration("mlp-xla", commits=3)
    records = [bundle.attempt(seq, shas[min(seq, 2)]) for seq in range(ATTEMPTS)]
    line = b"step %d/9000 loss 0.%06d grad_norm 1.5 step_time 0.01 " + b"x" * 60 + b"\n"
    (folder / f"logs/{BIG}.log").write_bytes(b"".join(line % (s, s) for s in range(60_000)))
    bundle.write_attempts(folder, records)
    return bundle


def imported_seqs(path: Path) -> list[int]:
    study = open_study(path)
    try:
        return [r[0] for r in study.db.execute("SELECT seq FROM attempt ORDER BY seq")]
    finally:
        study.close()


IMPORT = """
    from cli.main import main
    main(["import", "bundle", sys.argv[1], "--db", sys.argv[2]])
"""


def cli_child(code: str, *args: str) -> str:
    return f"import sys\nsys.argv = ['workbench', *{list(args)!r}]\n" + textwrap.dedent(code)


# --------------------------------------------------------------------------- SIGKILL: import


def test_sigkill_during_import_loses_no_committed_attempt_and_half_writes_none(fault_bundle, tmp_path):
    db = tmp_path / "s.db"
    # killed while attempt seq BIG is written (its 6 MB log stored, its metrics being replaced)
    run_child(cli_child(IMPORT, str(fault_bundle.root), str(db)), fault=f"metric_point:replace:{BIG + 1}")
    assert imported_seqs(db) == list(range(BIG))  # those committed before it, none of it
    assert_intact(db)
    study = open_study(db)
    try:
        assert count(study.db, "SELECT count(*) FROM log") == BIG  # the big log went with its attempt
    finally:
        study.close()
    out, proc = run_child(cli_child(IMPORT, str(fault_bundle.root), str(db)))  # the import again: completes
    assert proc.returncode == 0, out
    assert f"{ATTEMPTS - BIG} new, 0 updated, {BIG + 2} unchanged" in out
    assert imported_seqs(db) == list(range(ATTEMPTS))
    assert_intact(db)


def test_sigkill_while_the_first_records_are_written_leaves_an_openable_study(fault_bundle, tmp_path):
    db = tmp_path / "s.db"
    run_child(cli_child(IMPORT, str(fault_bundle.root), str(db)), fault="migration:insert:1")
    assert imported_seqs(db) == []
    assert_intact(db)
    study = open_study(db)
    try:  # the study row was committed on its own; the migration was not
        assert count(study.db, "SELECT count(*) FROM migration") == 0
    finally:
        study.close()


# --------------------------------------------------------------------------- SIGKILL: verification

VERIFY = """
    from cli.main import main
    main(["verify", sys.argv[1], *sys.argv[2:]])
"""


@pytest.fixture
def imported(fault_bundle, tmp_path) -> Path:
    db = tmp_path / "s.db"
    study = open_study(db, create=True)
    try:
        assert import_bundle(study, fault_bundle.root, "ana").problems == []
    finally:
        study.close()
    return db


def current_verifications(path: Path) -> dict[int, int]:
    study = open_study(path)
    try:
        return dict(study.db.execute(
            "SELECT a.seq, v.id FROM verification v JOIN attempt a ON a.id = v.attempt_id"
            " WHERE v.superseded_by IS NULL").fetchall())
    finally:
        study.close()


def test_sigkill_during_verification_keeps_whole_verifications_only(imported):
    agent = ATTEMPTS - 1  # seq 0 is the reference
    # killed at the 3rd verdict of the 2nd attempt's verification: verdicts are committed a batch
    # of attempts at a time (issue 19), so none of that batch is visible, and nothing half-written
    run_child(cli_child(VERIFY, str(imported)), fault="verdict:insert:8")
    assert list(current_verifications(imported)) == []
    assert_intact(imported)
    out, proc = run_child(cli_child(VERIFY, str(imported)))
    assert proc.returncode == 0, out
    first = current_verifications(imported)
    assert sorted(first) == list(range(1, agent + 1))
    assert_intact(imported)
    # a forced re-verification killed while it supersedes the 2nd attempt's verdicts
    run_child(cli_child(VERIFY, str(imported), "--force"), fault="verdict:supersede:7")
    assert current_verifications(imported) == first  # the killed batch rolled back whole
    assert_intact(imported)


# --------------------------------------------------------------------------- SIGKILL: intervention save

INTERVENE = """
    from cli.main import main
    main(["intervene", sys.argv[1], "mlp-xla", "--kind", "hint", "--minutes", "5", "--note", sys.argv[2]])
"""

SAVES = """
    from storage import queries, records
    from storage.database import open_study
    study = open_study(sys.argv[1])
    m = queries.get_migration(study.db, "mlp-xla")
    for n in range(10):
        records.record_intervention(study.db, migration_id=m.id, kind="hint", minutes=n, note=f"note {n}",
                                    reviewer="ana")
"""


def notes(path: Path) -> list[str]:
    study = open_study(path)
    try:
        return [r[0] for r in study.db.execute("SELECT note FROM intervention ORDER BY id")]
    finally:
        study.close()


def test_sigkill_during_an_intervention_save(imported):
    run_child(cli_child(INTERVENE, str(imported), "never saved"), fault="intervention:insert:1")
    assert notes(imported) == []
    assert_intact(imported)
    out, proc = run_child(cli_child(INTERVENE, str(imported), "saved"))
    assert proc.returncode == 0, out
    run_child(cli_child(SAVES, str(imported)), fault="intervention:insert:7")  # 6 saved, the 7th in flight
    assert notes(imported) == ["saved"] + [f"note {n}" for n in range(6)]
    assert_intact(imported)


# --------------------------------------------------------------------------- SIGKILL: re-run

RUNNER = """
    import runpy
    sys.argv = ["runner", sys.argv[1], sys.argv[2]]
    runpy.run_module("workbench.rerun.runner", run_name="__main__")
"""


@pytest.fixture
def rerun_study(tmp_path):
    from tests.rerun_helpers import study_with_script

    study = study_with_script(tmp_path)
    yield study
    study.close()


def _queued_job(study):
    from tests.rerun_helpers import attempt
    from workbench.rerun import jobs

    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"),
                             argv=("python3", "train.py", "20"))
    return jobs.create_job(study.db, study.path, spec, "ana")


@pytest.mark.parametrize("fault, stored", [
    ("attempt:insert:1", False),      # inside the transaction that stores the new attempt
    ("verification:insert:1", True),  # the attempt committed; its verification in flight
])
def test_sigkill_of_the_rerun_runner_while_it_stores_the_result(rerun_study, fault, stored):
    from workbench.rerun import jobs
    from workbench.rerun.jobs import JobState

    job = _queued_job(rerun_study)
    before = count(rerun_study.db, "SELECT count(*) FROM attempt")
    run_child(f"import sys\nsys.argv = ['x', {str(rerun_study.path)!r}, '{job.id}']\n" + textwrap.dedent(RUNNER),
              fault=fault)
    rerun_study.close()
    assert_intact(rerun_study.path)
    db = rerun_study.db
    result = db.execute("SELECT id FROM attempt WHERE external_id = ?", [f"rerun:job-{job.id}"]).fetchone()
    assert count(db, "SELECT count(*) FROM attempt") == before + stored
    assert (result is not None) is stored
    assert jobs.recover(db, "ana") == [job.id]
    job = jobs.get_job(db, job.id)
    assert job.log_id is not None  # the run's output is kept either way
    if stored:  # the result was committed: the job points at it, and the attempt is verified
        assert job.state is JobState.FINISHED and job.result_attempt_id == result[0]
        assert count(db, "SELECT count(*) FROM verification WHERE attempt_id = ?", [result[0]]) == 1
    else:
        assert job.state is JobState.INTERRUPTED and job.result_attempt_id is None
    rerun_study.close()
    assert_intact(rerun_study.path)


# --------------------------------------------------------------------------- a full disk

LIMITED = """
    import sqlite3
    from storage import database

    _connect = database._connect
    def _limited(path, *args, **kwargs):
        db = _connect(path, *args, **kwargs)
        db.execute(f"PRAGMA max_page_count = {int(sys.argv[-1])}")
        return db
    database._connect = _limited
    from cli.main import main
    main(["import", "bundle", sys.argv[1], "--db", sys.argv[2]])
"""


def _pages(path: Path) -> int:
    study = open_study(path, create=True)
    try:
        return count(study.db, "PRAGMA page_count")
    finally:
        study.close()


def _assert_clean_failure(out: str, proc: subprocess.Popen, message: str) -> None:
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    assert f"workbench: database error: {message}" in out, out


def test_disk_full_during_import_is_a_clear_error_and_the_study_stays_intact(fault_bundle, tmp_path):
    """The database may not grow past ~1 MiB more (SQLite's max_page_count, SQLITE_FULL as on a
    full disk): the 6 MB log does not fit."""
    db = tmp_path / "s.db"
    limit = _pages(db) + 250
    out, proc = run_child(cli_child(LIMITED, str(fault_bundle.root), str(db), str(limit)))
    _assert_clean_failure(out, proc, "database or disk is full")
    assert imported_seqs(db) == list(range(BIG))
    assert_intact(db)
    out, proc = run_child(cli_child(IMPORT, str(fault_bundle.root), str(db)))  # space again: it completes
    assert proc.returncode == 0, out
    assert imported_seqs(db) == list(range(ATTEMPTS))
    assert_intact(db)


FSIZE = """
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    limit = int(sys.argv[-1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from cli.main import main
    main(["import", "bundle", sys.argv[1], "--db", sys.argv[2]])
"""


def test_file_size_limit_during_import_is_a_clear_error(fault_bundle, tmp_path):
    """RLIMIT_FSIZE: no file this process writes may pass 2 MiB (the WAL fills first)."""
    db = tmp_path / "s.db"
    _pages(db)
    out, proc = run_child(cli_child(FSIZE, str(fault_bundle.root), str(db), str(2 << 20)))
    _assert_clean_failure(out, proc, "disk I/O error")  # EFBIG is SQLITE_IOERR_WRITE
    assert "is the disk full, or a file-size limit reached?" in out
    assert imported_seqs(db) == list(range(BIG))
    assert_intact(db)


@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 3 MiB tmpfs, where this user may mount one (root in CI containers); else skipped."""
    where = tmp_path / "tiny"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_really_full_filesystem_during_import(fault_bundle, tiny_filesystem):
    db = tiny_filesystem / "s.db"
    out, proc = run_child(cli_child(IMPORT, str(fault_bundle.root), str(db)))
    _assert_clean_failure(out, proc, "database or disk is full")
    assert imported_seqs(db) == list(range(BIG))
    assert_intact(db)


# --------------------------------------------------------------------------- writers at once

APP_WRITER = """
    import asyncio
    from pathlib import Path
    from screens.app import WorkbenchApp
    from screens.forms import InterventionForm

    NAME, SAVES = sys.argv[2], int(sys.argv[3])

    async def until(pilot, test, tries=400):
        for _ in range(tries):
            await pilot.pause(0.05)
            if test():
                return
        raise SystemExit(f"{NAME}: timed out waiting")

    async def main():
        app = WorkbenchApp(Path(sys.argv[1]))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.app.workers.wait_for_complete()
            app.open_migration("mlp-xla")
            await until(pilot, lambda: app.screen.__class__.__name__ == "MigrationScreen")
            await pilot.app.workers.wait_for_complete()
            print("ready", flush=True)
            sys.stdin.readline()
            for n in range(SAVES):
                await pilot.press("i")
                await until(pilot, lambda: isinstance(app.screen, InterventionForm))
                form = app.screen
                form.query_one("#intervention-kind").value = "hint"
                form.query_one("#intervention-minutes").value = "3"
                form.query_one("#intervention-note").value = f"{NAME} {n}"
                await pilot.press("ctrl+s")
                await until(pilot, lambda: form.saved_id is not None and app.screen is not form)
        print("done", flush=True)

    asyncio.run(main())
"""

CLI_WRITER = """
    from click.testing import CliRunner
    from cli.main import main

    path, saves = sys.argv[1], int(sys.argv[2])
    sys.stdin.readline()
    runner = CliRunner()
    for n in range(saves):
        for args in (["intervene", path, "mlp-xla", "--kind", "hint", "--minutes", "2", "--note", f"cli {n}"],
                     ["verify", path, "--force"] if n == 1 else None):
            if args:
                result = runner.invoke(main, args)
                assert result.exit_code == 0, result.output
    print("done", flush=True)
"""


def test_two_app_processes_and_the_cli_writing_at_once(imported):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_REVIEWER": "ana"}
    saves = 3
    apps = [subprocess.Popen([sys.executable, "-c", "import sys\n" + textwrap.dedent(APP_WRITER), str(imported),
                              name, str(saves)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env) for name in ("ana", "ben")]
    cli = subprocess.Popen([sys.executable, "-c", "import sys\n" + textwrap.dedent(CLI_WRITER), str(imported),
                            str(saves * 2)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        for app in apps:
            assert app.stdout.readline().strip() == "ready", app.stderr.read()
        for proc in (*apps, cli):
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in (*apps, cli):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0 and out.strip().endswith("done"), err[-3000:]
    finally:
        for proc in (*apps, cli):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    got = notes(imported)
    want = {f"{name} {n}" for name in ("ana", "ben") for n in range(saves)} | {f"cli {n}" for n in range(saves * 2)}
    assert sorted(got) == sorted(want)
    assert_intact(imported)


DIVERGING = """\
import sys
for i in range(1, 6):
    print(f"step {i}/5 loss {'nan' if i > 2 else 1.0 / i} grad_norm 0.5", flush=True)
print("eval_accuracy 0.95", flush=True)
"""


def test_a_rerun_whose_loss_goes_nan_is_stored_and_fails_level_2(tmp_path):
    """A diverged re-run is stored with its NaN points, and the verifier names the first one."""
    from storage import queries
    from tests.rerun_helpers import attempt, study_with_script
    from workbench.rerun import jobs
    from workbench.rerun.jobs import JobState

    study = study_with_script(tmp_path, DIVERGING)
    try:
        spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"),
                                 argv=("python3", "train.py"))
        job = jobs.wait(study.db, jobs.launch(study, spec, "ana").id, timeout=120)
        assert job.state is JobState.FINISHED, job.error
        levels = {v.level: v.outcome.value for v in queries.verdicts(study.db, job.result_attempt_id)}
        assert levels[1] == levels[2] == "fail"
        loss = {p.step: p.value for p in queries.metric_series(study.db, job.result_attempt_id, "loss")}
        assert loss[2] == 0.5 and math.isnan(loss[3])
        failure = queries.current_failure(study.db, job.result_attempt_id)
        assert failure.cause.value == "non_finite" and "loss is NaN from step 3" in failure.note
    finally:
        study.close()
    assert_intact(study.path)
