"""The study database: versions, upgrades, connections, append-only records, audit, logs."""

from __future__ import annotations

import hashlib
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
    with pytest.raises(WorkbenchError, match="not a readable study database"):
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
    decision = records.add_decision(
        db, migration_id=migration.id, kind=DecisionKind.CONTINUE, reason="one more try",
        figures={"attempts": 3}, reviewer="ana",
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
