"""The CLI's listings read on the standard sqlite3 module (issue 19): same rows, same refusals,
and sqlite-utils never imported."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlite_utils import Database

from domain.errors import SchemaTooNew, WorkbenchError
from storage import queries, schema
from storage.database import open_study
from storage.fastread import open_readonly

LISTS = """
import runpy, sys
sys.argv = ["workbench", *sys.argv[1:]]
try:
    runpy.run_module("cli", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"sqlite_utils", "numpy", "pandas", "dateutil", "textual", "rich"})
print("loaded:", heavy, file=sys.stderr)
print("commands:", sorted(m for m in sys.modules if m.startswith("cli.")), file=sys.stderr)
print("records:", sorted({"domain.verdicts", "domain.effort", "domain.transcript", "domain.agreement"} & set(sys.modules)),
      file=sys.stderr)
print("unread:", sorted({"domain.attempts", "domain.study", "tempfile"} & set(sys.modules)), file=sys.stderr)
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LISTS, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": "ana"})


@pytest.fixture
def demo_copy(demo_db: Path, tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    shutil.copy(demo_db, path)
    return path


def test_listing_commands_import_no_sqlite_utils(demo_copy: Path) -> None:
    conn = open_readonly(demo_copy)
    assert conn is not None
    slug = conn.execute("SELECT slug FROM migration ORDER BY slug").fetchone()[0]
    conn.close()
    for args in (["migrations", str(demo_copy)], ["migrations", str(demo_copy), "--json"],
                 ["assist", "cost", str(demo_copy)], ["attempts", str(demo_copy), slug],
                 ["queue", str(demo_copy)], ["queue", str(demo_copy), "--json"]):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert "loaded: []" in done.stderr, (args, done.stderr)  # attempts asks workbench.blind, also light
        assert done.stdout.strip()



def test_a_listing_loads_only_its_own_command_module_and_records(demo_copy: Path) -> None:
    """The main group imports a command's module when that command runs (cli/main.py), so a list
    pays for none of the others' imports; nor for the dataclasses it does not read (verdicts, effort
    and transcript records, agreement figures: domain/models.py says why)."""
    conn = open_readonly(demo_copy)
    assert conn is not None
    slug = conn.execute("SELECT slug FROM migration ORDER BY slug").fetchone()[0]
    conn.close()
    for args, own in ((["migrations", str(demo_copy)], "cli.study"), (["attempts", str(demo_copy), slug], "cli.study"),
                      (["queue", str(demo_copy)], "cli.judge")):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert f"commands: {sorted(['cli.common', 'cli.main', own])}" in done.stderr, (args, done.stderr)
        assert "records: []" in done.stderr, (args, done.stderr)

def test_the_migration_list_creates_no_attempt_records_and_spools_in_memory(demo_copy: Path) -> None:
    """`workbench migrations` creates none of an attempt's dataclasses nor the study's (domain.models
    hands them out on first use), and keeps its short table in memory without importing tempfile
    (issue 19). The blind rule (domain.blind) is loaded: every list asks it what the reviewer may
    see; it loads no attempt record unless it blanks one."""
    for args in (["migrations", str(demo_copy)], ["migrations", str(demo_copy), "--json"]):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert "unread: []" in done.stderr, (args, done.stderr)


def test_the_records_domain_models_hands_out_later_are_the_defining_modules_own() -> None:
    import domain.attempts
    import domain.models
    import domain.study

    for name, module in domain.models._ELSEWHERE.items():
        assert getattr(domain.models, name) is getattr(sys.modules[module], name)
    assert domain.models.Attempt is domain.attempts.Attempt and domain.models.Study is domain.study.Study
    with pytest.raises(AttributeError):
        domain.models.NoSuchRecord  # noqa: B018


def test_the_readonly_connection_lists_what_the_full_open_lists(demo_copy: Path) -> None:
    study = open_study(demo_copy)
    try:
        full = list(queries.iter_migration_summaries(study.db))
        attempts = {s.migration.id: list(queries.iter_attempt_summaries(study.db, s.migration.id)) for s in full}
    finally:
        study.close()
    conn = open_readonly(demo_copy)
    assert conn is not None
    try:
        assert list(queries.iter_migration_summaries(conn)) == full
        assert {i: list(queries.iter_attempt_summaries(conn, i)) for i in attempts} == attempts
        assert queries.get_migration(conn, full[0].migration.slug) == full[0].migration
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM intervention")
    finally:
        conn.close()


def test_refusals_are_the_full_opens(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    open_study(newer, create=True).close()
    Database(newer)["_sqlite_migrations"].insert({"migration_set": "workbench", "name": "m900_new", "applied_at": "x"})
    with pytest.raises(SchemaTooNew, match="newer workbench.*m900_new"):
        open_readonly(newer)
    foreign = tmp_path / "foreign.db"
    Database(foreign)["t"].insert({"a": 1})
    with pytest.raises(WorkbenchError, match="not a workbench study database"):
        open_readonly(foreign)
    half = tmp_path / "half.db"
    schema.migrations.ensure_migrations_table(Database(half))
    with pytest.raises(WorkbenchError, match="half-made.*rm -f"):
        open_readonly(half)


def test_what_the_full_open_must_handle_is_left_to_it(tmp_path: Path) -> None:
    """Missing, empty, unreadable and older files: None, so the CLI opens them the full way."""
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "garbage.db").write_bytes(b"this is not sqlite" * 100)
    older = tmp_path / "older.db"
    schema.migrations.apply(Database(older), stop_before=schema.known()[-1])
    for name in ("missing.db", "empty.db", "garbage.db", "older.db"):
        assert open_readonly(tmp_path / name) is None, name
    done = run_cli("migrations", str(older), "--json")  # upgraded in place, a backup beside it
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stderr
    assert list(tmp_path.glob("older.db.schema*.bak"))
    conn = open_readonly(older)
    assert conn is not None
    conn.close()


def test_missing_and_foreign_files_still_fail_cleanly_on_the_cli(tmp_path: Path) -> None:
    for name, expected in (("missing.db", "no such study database"), ("garbage.db", "not an SQLite database")):
        if name == "garbage.db":
            (tmp_path / name).write_bytes(b"this is not sqlite" * 100)
        done = subprocess.run([sys.executable, "-m", "cli", "migrations", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr
