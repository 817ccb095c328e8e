"""A study that cannot be written (an archive on a read-only mount, a file or folder shared
read-only) opens read-only: it is listed, reviewed and reported, and every write is refused in
one line. A file that is not a study (empty, or not SQLite) is refused.

The tests run as root, whom file modes do not stop: the study is put under a real read-only bind
mount (`mount --bind`, then `remount,ro`), which stops root too (EROFS), where the test may mount;
a user who is not root gets the same by file modes (a 0444 file in a 0555 folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import SIZE, build, column, screen_text, settle
from test_cli import fails_cleanly, workbench

from domain.errors import WorkbenchError
from screens.app import WorkbenchApp
from screens.forms import RecordForm
from screens.migration import MigrationScreen
from storage.database import open_study


def _mount_read_only(source: Path, target: Path) -> bool:
    """`source` seen read-only at `target`; False where this process may not mount."""
    target.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode:
        return False
    if subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)
        return False
    return True


@pytest.fixture
def read_only_db(small_bundle: BundleBuilder, tmp_path: Path):
    """The small study, closed cleanly (no -wal, no -shm beside it), where it cannot be written."""
    source = tmp_path / "archive"
    source.mkdir()
    db = build(small_bundle, source)
    assert sorted(p.name for p in source.iterdir()) == ["study.db"]
    if os.geteuid() != 0:
        db.chmod(0o444)
        source.chmod(0o555)
        try:
            yield db
        finally:
            source.chmod(0o755)
            db.chmod(0o644)
        return
    mounted = tmp_path / "ro"
    if not _mount_read_only(source, mounted):
        pytest.skip("running as root without the right to mount: no way to make a study read-only for root")
    try:
        yield mounted / "study.db"
    finally:
        subprocess.run(["umount", "-l", str(mounted)], capture_output=True)


def test_the_study_is_seen_as_read_only(read_only_db: Path) -> None:
    from storage.fastread import read_only_reason

    assert read_only_reason(read_only_db) in ("on a read-only file system", "the file is not writable")
    study = open_study(read_only_db)
    try:
        assert study.read_only is not None
        assert [r[0] for r in study.db.execute("SELECT slug FROM migration ORDER BY slug")] == ["cnn-xla", "mlp-xla"]
        with pytest.raises(WorkbenchError, match="read-only.*nothing was recorded"):
            study.require_writable()
    finally:
        study.close()


def test_a_read_only_study_is_listed_and_reported(read_only_db: Path, tmp_path: Path) -> None:
    """It used to be 'not a readable study database (unable to open database file)'."""
    db = str(read_only_db)
    done = workbench("migrations", db)
    assert done.returncode == 0 and "mlp-xla" in done.stdout, done.stderr
    done = workbench("attempts", db, "mlp-xla")
    assert done.returncode == 0 and "agent" in done.stdout, done.stderr
    done = workbench("report", db, "--format", "md")
    assert done.returncode == 0 and "mlp-xla" in done.stdout, done.stderr
    out = tmp_path / "report.json"
    done = workbench("report", db, "--format", "json", "-o", str(out))
    assert done.returncode == 0 and out.stat().st_size > 0, done.stderr
    assert workbench("agreement", db).returncode == 0
    assert workbench("queue", db).returncode == 0
    assert workbench("jobs", db).returncode == 0


@pytest.mark.parametrize("args", [
    ("judge", "{db}", "mlp-xla", "1", "--levels", "pass,fail,unknown,unknown,unknown", "--cause", "other"),
    ("decide", "{db}", "mlp-xla", "continue", "--reason", "x"),
    ("intervene", "{db}", "mlp-xla", "--kind", "hint", "--minutes", "3", "--note", "look at the loss"),
    ("verify", "{db}"),
    ("assign", "{db}", "--reviewers", "ana,ben"),
    ("blind", "{db}", "on"),
    ("adjudicate", "{db}", "mlp-xla", "1", "--level", "1", "--outcome", "pass", "--reason", "x"),
])
def test_each_write_is_refused_in_one_line(read_only_db: Path, args: tuple[str, ...]) -> None:
    before = read_only_db.read_bytes()
    fails_cleanly(workbench(*(a.format(db=read_only_db) for a in args)), "read-only", "nothing was recorded")
    assert read_only_db.read_bytes() == before


def test_an_import_into_a_read_only_study_is_refused(read_only_db: Path, small_bundle: BundleBuilder) -> None:
    fails_cleanly(workbench("import", "bundle", str(small_bundle.root), "--db", str(read_only_db)), "read-only")


async def test_the_app_says_read_only_and_refuses_each_write(read_only_db: Path) -> None:
    app = WorkbenchApp(read_only_db, keymap_path=Path("/nonexistent"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert screen_text(app).splitlines()[0].lstrip(" ⭘").startswith("read-only Test study")  # the header
        assert column(app, "slug") == ["cnn-xla", "mlp-xla"]  # read as usual
        assert any("read-only" in n.message for n in app._notifications)  # why, at start
        app._notifications.clear()
        await pilot.press("N")  # a new migration: its form is not opened
        await settle(pilot)
        assert not isinstance(app.screen, RecordForm)
        assert [n.message for n in app._notifications] == ["study.db is read-only "
                                                            f"({app.read_only}): nothing can be recorded"]
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)  # reviewed as usual
        for key in ("i", "a", "x", "C", "B"):
            app._notifications.clear()
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, MigrationScreen), key
            assert len(app._notifications) == 1 and "read-only" in next(iter(app._notifications)).message, key
        app._notifications.clear()
        await pilot.press("V")  # verify writes verdicts
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert "read-only" in next(iter(app._notifications)).message


def test_a_write_ahead_log_that_cannot_be_read_is_said_not_skipped(small_bundle: BundleBuilder,
                                                                     tmp_path: Path) -> None:
    """A study copied while open (its -wal holds commits, no -shm) onto a read-only mount: SQLite
    can read the log only with a -shm it cannot make, and `immutable=1` would read the file without
    the log's commits, silently. The open says so instead."""
    import sqlite3

    source = tmp_path / "copied-live"
    source.mkdir()
    live = build(small_bundle, tmp_path)
    conn = sqlite3.connect(live)
    try:
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("UPDATE migration SET title = 'retitled' WHERE slug = 'mlp-xla'")
        conn.commit()
        for suffix in ("", "-wal"):
            shutil.copy(f"{live}{suffix}", source / f"study.db{suffix}")
    finally:
        conn.close()
    assert (source / "study.db-wal").stat().st_size > 0
    if os.geteuid() != 0:
        pytest.skip("the read-only mount needs root (file modes would let SQLite read the log)")
    mounted = tmp_path / "ro"
    if not _mount_read_only(source, mounted):
        pytest.skip("running as root without the right to mount")
    try:
        fails_cleanly(workbench("migrations", str(mounted / "study.db")), "write-ahead log study.db-wal",
                      "copy both somewhere writable")
        with pytest.raises(WorkbenchError, match="write-ahead log"):
            open_study(mounted / "study.db")
    finally:
        subprocess.run(["umount", "-l", str(mounted)], capture_output=True)


def test_an_empty_file_is_refused_not_read_as_an_empty_study(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    fails_cleanly(workbench("migrations", str(empty)), "empty file, not a study database")
    fails_cleanly(workbench("report", str(empty)), "empty file")
    assert empty.read_bytes() == b""  # left as it was
    with pytest.raises(WorkbenchError, match="empty file"):
        open_study(empty)
    open_study(empty, create=True).close()  # an import or `init` into it makes it a study
    assert workbench("migrations", str(empty)).returncode == 0


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("these are my notes, not a database\n" * 50)
    fails_cleanly(workbench("migrations", str(notes)), "not an SQLite database")
    fails_cleanly(workbench("decide", str(notes), "m", "stop", "--reason", "x"), "not an SQLite database")
    assert "notes, not a database" in notes.read_text()



async def test_a_read_only_studys_footer_leaves_out_the_keys_that_record(read_only_db: Path, tmp_path: Path) -> None:
    """The footer of a read-only study shows the keys that read (Open, Filter, Compare), not those
    that would record (New, Verify, Intervene, Accept, Stop); a writable study shows them."""
    from textual.widgets._footer import FooterKey

    def shown(app: WorkbenchApp) -> set[str]:
        return {key.description for key in app.screen.query(FooterKey) if key.display}

    writable = tmp_path / "writable.db"
    shutil.copy(read_only_db, writable)
    for path, read_only in ((read_only_db, True), (writable, False)):
        app = WorkbenchApp(path, keymap_path=Path("/nonexistent"))
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            assert bool(app.read_only) is read_only
            study = shown(app)
            await pilot.press("j", "enter")
            await settle(pilot)
            assert isinstance(app.screen, MigrationScreen)
            migration = shown(app)
        assert {"Open", "Filter"} <= study and {"Open", "Compare"} <= migration
        if read_only:
            assert not {"New", "Verify"} & study, study
            assert not {"Verify", "Intervene", "Accept", "Stop", "Reference"} & migration, migration
        else:
            assert {"New", "Verify"} <= study and {"Verify", "Intervene", "Accept", "Stop"} <= migration, migration
