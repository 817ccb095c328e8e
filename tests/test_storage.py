"""The study database: versions, upgrades, connections, append-only records, audit, logs."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlite_utils import Database

from domain.errors import SchemaTooNew, WorkbenchError
from domain.models import DecisionKind
from storage import queries, records, schema
from storage.database import open_study
from storage.logs import CHUNK, LogReader, store_log
from workbench.bundle import import_bundle


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def first_version_db(path: Path) -> None:
    """A database as the first schema version left it, with a study, a migration and an attempt."""
    db = Database(path)
    schema.migrations.apply(db, stop_before=schema.known()[1])
    db["study"].insert({"id": 1, "slug": "old", "title": "Old study"})
    db["migration"].insert(
        {"slug": "m", "title": "M", "repo": "/r", "base_commit": "abc", "accelerator": "tpu-v5e",
         "chips": 4, "runtime": "torch_xla", "goal_metric": "acc", "goal_reference": 0.9,
         "goal_direction": "max", "goal_tolerance": 0.0, "status": "in_progress"}
    )
    db["attempt"].insert(
        {"migration_id": 1, "seq": 1, "source": "agent", "commit_sha": "abc",
         "argv": '["python", "train.py"]', "status": "ok", "exit_code": 0}
    )
    db.close()


def test_first_version_is_backed_up_then_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "study.db"
    first_version_db(path)
    study = open_study(path)
    backups = list(tmp_path.glob("study.db.schema1-*.bak"))
    assert len(backups) == 1
    old = Database(backups[0])
    assert "verdict" not in old.table_names() and old["attempt"].count == 1
    assert {"verdict", "intervention", "audit"} <= set(study.db.table_names())
    assert [m.name for m in schema.migrations.applied(study.db)] == schema.known()
    summaries = queries.migration_summaries(study.db)
    assert [s.migration.slug for s in summaries] == ["m"] and summaries[0].attempts == 1
    study.close()


def test_a_newer_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "study.db"
    open_study(path, create=True).close()
    db = Database(path)
    db["_sqlite_migrations"].insert(
        {"migration_set": "workbench", "name": "m999_from_the_future", "applied_at": "2030-01-01"}
    )
    db.close()
    before = sha(path)
    with pytest.raises(SchemaTooNew, match="newer workbench.*m999_from_the_future"):
        open_study(path)
    assert sha(path) == before
    assert not list(tmp_path.glob("*.bak"))


def test_missing_foreign_and_corrupt_files_give_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="no such study database"):
        open_study(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(WorkbenchError, match="not an SQLite database"):
        open_study(garbage)
    other = tmp_path / "other.db"
    Database(other)["things"].insert({"a": 1})
    with pytest.raises(WorkbenchError, match="not a workbench study database"):
        open_study(other)
    with pytest.raises(WorkbenchError, match="not a file"):
        open_study(tmp_path)


def test_every_connection_is_per_thread_with_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    seen = {}

    def look() -> None:
        db = study.db
        seen["conn"] = db.conn
        seen["fk"] = db.execute("PRAGMA foreign_keys").fetchone()[0]
        seen["busy"] = db.execute("PRAGMA busy_timeout").fetchone()[0]

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    assert seen["conn"] is not study.db.conn
    assert seen["fk"] == 1 and seen["busy"] >= 1000
    assert study.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert study.db.journal_mode == "wal"
    with pytest.raises(sqlite3.IntegrityError):
        with study.db.atomic():
            study.db.execute(
                "INSERT INTO attempt (migration_id, seq, source, commit_sha, argv, status)"
                " VALUES (42, 1, 'agent', 'x', '[]', 'ok')"
            )
    study.close()


def test_group_commits_skip_the_fsync_and_an_open_transaction_keeps_its_level(tmp_path: Path) -> None:
    """`relaxed_sync` (imports and verify runs) sets synchronous=NORMAL and puts the level back;
    inside a transaction, where SQLite refuses the change, it leaves the level alone."""
    study = open_study(tmp_path / "s.db", create=True)
    db = study.db

    def level() -> int:
        return db.execute("PRAGMA synchronous").fetchone()[0]

    db.execute("PRAGMA synchronous=FULL")
    with records.relaxed_sync(db):
        assert level() == 1
        with records.immediate(db):
            with records.relaxed_sync(db):
                assert level() == 1
    assert level() == 2
    with records.immediate(db):
        with records.relaxed_sync(db):
            assert level() == 2
    assert level() == 2
    study.close()


def test_human_records_are_append_only_and_corrections_are_new_records(
    small_bundle, tmp_path: Path
) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, small_bundle.root, "ana")
    db = study.db
    migration = queries.get_migration(db, "mlp-xla")
    first = records.add_intervention(
        db, migration_id=migration.id, kind="fix_environment", minutes=10, note="pinned jax",
        reviewer="ana",
    )
    decision = records.record_decision(
        db, migration_id=migration.id, kind=DecisionKind.CONTINUE, reason="one more try", reviewer="ana",
    )
    for sql in (
        "UPDATE intervention SET minutes = 1 WHERE id = ?",
        "DELETE FROM intervention WHERE id = ?",
        "UPDATE decision SET reason = 'x' WHERE id = ?",
        "DELETE FROM audit WHERE id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            with db.atomic():
                db.execute(sql, [first if "intervention" in sql else decision])
    records.add_intervention(
        db, migration_id=migration.id, kind="fix_environment", minutes=25,
        note="it took longer", reviewer="ben", corrects=first,
    )
    history = queries.interventions(db, migration.id)
    assert [(i.minutes, i.corrects) for i in history] == [(10.0, None), (25.0, first)]
    summary = {s.migration.slug: s for s in queries.migration_summaries(db)}["mlp-xla"]
    assert summary.interventions == 1  # the correction replaces, it does not add
    study.close()


def test_every_write_is_audited_with_reviewer_and_time(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(study, small_bundle.root, "ana")
    db = study.db
    audit = list(db.query("SELECT * FROM audit ORDER BY id"))
    inserts = [(a["entity"], a["action"]) for a in audit if a["entity"] in ("study", "migration", "attempt")]
    assert len(inserts) == report.inserted == 1 + 2 + 4
    assert all(a["reviewer"] == "ana" and a["at"].startswith("20") for a in audit)
    migration = queries.get_migration(db, "cnn-xla")
    new_id = records.add_intervention(
        db, migration_id=migration.id, kind="hint", minutes=3, note="try SPMD", reviewer="ben"
    )
    last = list(db.query("SELECT * FROM audit ORDER BY id DESC LIMIT 1"))[0]
    assert (last["reviewer"], last["entity"], last["entity_id"]) == ("ben", "intervention", new_id)
    assert '"note": "try SPMD"' in last["detail"]
    study.close()


def test_failed_write_leaves_no_audit_record(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, small_bundle.root, "ana")
    before = study.db["audit"].count
    with pytest.raises(sqlite3.IntegrityError):
        records.add_intervention(
            study.db, migration_id=999, kind="hint", minutes=1, note="", reviewer="ana"
        )
    assert study.db["audit"].count == before
    study.close()


def read_chunks(db: Database) -> list[str]:
    seen: list[str] = []
    db.conn.set_trace_callback(lambda sql: seen.append(sql) if "FROM log_chunk" in sql else None)
    return seen


def test_a_big_log_is_read_only_where_it_is_shown(tmp_path: Path) -> None:
    lines = [f"step {n} loss {1 / (n + 1):.6f}".encode() for n in range(400_000)]
    lines[123_456] = b"Traceback (most recent call last): \xff\xfe not utf-8"
    path = tmp_path / "big.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    study = open_study(tmp_path / "s.db", create=True)
    db = study.db
    with db.atomic():
        log_id = store_log(db, path)
        assert store_log(db, path) == log_id  # same bytes, same log
    reader = LogReader(db, log_id)
    assert reader.size == path.stat().st_size > 20 * CHUNK
    assert reader.line_count == 400_000
    seen = read_chunks(db)
    assert reader.tail(2) == ["step 399998 loss 0.000003", "step 399999 loss 0.000003"]
    assert reader.lines(123_456, 1) == ["Traceback (most recent call last): \ufffd\ufffd not utf-8"]
    assert reader.lines(7, 2) == ["step 7 loss 0.125000", "step 8 loss 0.111111"]
    assert len(seen) <= 6, "each read touches one or two chunks, never the whole log"
    raw = b"".join(row[0] for row in db.execute(
        "SELECT data FROM log_chunk WHERE log_id = ? ORDER BY seq", [log_id]))
    assert raw == path.read_bytes()
    study.close()


def test_huge_lines_are_cut_for_display_and_the_next_line_is_found_directly(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    path.write_bytes(b"first\n" + b"x" * (5 * CHUNK) + b"\nafter\nlast")
    study = open_study(tmp_path / "s.db", create=True)
    with study.db.atomic():
        reader = LogReader(study.db, store_log(study.db, path))
    assert reader.line_count == 4
    huge = reader.lines(1, 1)[0]
    assert huge.startswith("xxx") and huge.endswith("more bytes]") and len(huge) < 20_000
    seen = read_chunks(study.db)
    assert reader.lines(2, 2) == ["after", "last"]
    assert len(seen) <= 2
    study.close()


KILL_AFTER_STEP = """
import os, signal, sys
from sqlite_utils import Migrations
from storage.database import open_study

path, after = sys.argv[1], int(sys.argv[2])
steps = 0
ensure, record = Migrations.ensure_migrations_table, Migrations._record_applied

def step():
    global steps
    if steps == after:
        os.kill(os.getpid(), signal.SIGKILL)
    steps += 1

def ensure_then_step(self, db):
    ensure(self, db)
    step()

def record_then_step(self, db, name):
    record(self, db, name)   # inside the migration's transaction: the kill lands before its commit
    step()

Migrations.ensure_migrations_table = ensure_then_step
Migrations._record_applied = record_then_step
open_study(path, create=True).close()
"""


def assert_absent_or_a_study(path: Path) -> None:
    if not path.exists():
        return
    study = open_study(path)
    try:
        assert schema.migrations.pending(study.db) == []
        assert queries.count_migrations(study.db) >= 0
    finally:
        study.close()


def test_a_kill_at_any_step_of_creating_a_study_leaves_no_file_or_a_whole_study(tmp_path: Path) -> None:
    """Issue 20 item 9: SIGKILL after the migrations table, inside each migration's transaction,
    and after the last one; the old code left a file every command refused."""
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    outcomes = []
    for after in range(len(schema.known()) + 2):
        path = tmp_path / f"kill-{after}" / "study.db"
        path.parent.mkdir()
        done = subprocess.run([sys.executable, "-c", KILL_AFTER_STEP, str(path), str(after)], cwd=root,
                              env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True,
                              timeout=60)
        assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()
        assert_absent_or_a_study(path)
        outcomes.append((done.returncode, path.exists()))
    assert outcomes[0] == (-signal.SIGKILL, False)   # killed while creating: no file at all
    assert outcomes[-1] == (0, True)                  # never killed: a study
    study = open_study(tmp_path / "kill-0" / "study.db", create=True)  # and the next import starts afresh
    study.close()


def test_a_kill_during_the_first_import_leaves_no_file_or_a_study(small_bundle, tmp_path: Path) -> None:
    """The real first import (`import bundle --db NEW`), killed at moments after its first file
    appears in the folder: while the schema is built, and while attempts are written."""
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    for n, delay in enumerate((0.0, 0.02, 0.05, 0.1, 0.2, 0.4)):
        folder = tmp_path / f"first-{n}"
        folder.mkdir()
        path = folder / "study.db"
        child = subprocess.Popen([sys.executable, "-m", "cli", "import", "bundle", str(small_bundle.root),
                                  "--db", str(path)], cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not any(folder.iterdir()) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert_absent_or_a_study(path)
    study = open_study(tmp_path / "first-0" / "study.db", create=True)
    try:
        assert import_bundle(study, small_bundle.root, "r").problems == []  # the import can simply run again
    finally:
        study.close()
    assert not [p for p in (tmp_path / "first-0").iterdir() if p.name.startswith(".")]  # killed temporaries gone


def test_a_half_made_study_from_an_older_version_is_named_with_a_way_out(tmp_path: Path) -> None:
    path = tmp_path / "half.db"
    schema.migrations.ensure_migrations_table(Database(path))  # what a kill -9 used to leave
    for create in (False, True):
        with pytest.raises(WorkbenchError) as caught:
            open_study(path, create=create)
        message = str(caught.value)
        assert "\n" not in message and "half-made" in message and f"rm -f {path} {path}-wal {path}-shm" in message
    path.unlink()
    open_study(path, create=True).close()
    assert_absent_or_a_study(path)


def test_a_write_ahead_log_left_without_its_study_is_never_replayed_into_a_new_one(tmp_path: Path) -> None:
    """Killed with the log open, then only the study file removed by hand: a new study of that
    name would take the old log's pages and lose its schema."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "study.db"
    code = ("import os, signal\nfrom sqlite_utils import Database\nfrom storage import schema\n"
            f"db = Database({str(path)!r}); db.enable_wal(); schema.migrations.ensure_migrations_table(db)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root)}, timeout=60)
    assert done.returncode == -signal.SIGKILL and (tmp_path / "study.db-wal").exists()
    path.unlink()
    with pytest.raises(WorkbenchError) as caught:
        open_study(path, create=True)
    assert "\n" not in str(caught.value) and f"rm -f {path} {path}-wal {path}-shm" in str(caught.value)
    assert not path.exists()
    subprocess.run(f"rm -f {path} {path}-wal {path}-shm", shell=True, check=True)  # the way out, as printed
    study = open_study(path, create=True)
    try:
        assert schema.migrations.pending(study.db) == [] and "attempt" in study.db.table_names()
    finally:
        study.close()


def test_two_processes_creating_one_study_at_once_share_it(tmp_path: Path) -> None:
    path = tmp_path / "both.db"
    errors: list[BaseException] = []

    def make() -> None:
        try:
            open_study(path, create=True).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert_absent_or_a_study(path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


SQL = re.compile(r"\b(?:SELECT|INSERT INTO|DELETE FROM|PRAGMA|BEGIN IMMEDIATE)\b|\bUPDATE \w+ SET\b"
                 r"|\.execute\(|\.query\(|\.conn\b|\bdb\[")
SQL_FREE = ("workbench/rerun", "workbench/importers", "workbench/bundle.py", "workbench/assist",
            "workbench/repos.py", "workbench/diffs.py")
"""Services whose reads and writes are storage's named functions (issue 16): no SQL of their own."""


def test_the_re_run_import_and_assist_services_hold_no_sql() -> None:
    root = Path(__file__).resolve().parents[1]
    found = []
    for name in SQL_FREE:
        where = root / name
        for path in sorted(where.rglob("*.py")) if where.is_dir() else [where]:
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if SQL.search(line) and "subprocess" not in line:
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert found == []
