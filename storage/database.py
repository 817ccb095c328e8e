"""Opening a study database: version checks, backup before upgrade, one connection per thread."""

from __future__ import annotations

import datetime
import glob
import os
import secrets
import sqlite3
import threading
from pathlib import Path

from domain.errors import ReadOnlyStudy, WorkbenchError
from storage import schema
from storage.fastread import (
    BUSY_TIMEOUT_S,
    check_study,
    companions,
    connect_readonly,
    read_only_reason,
    way_out,
)
from storage.sqlite import Database


def _connect(path: Path, read_only: bool = False) -> Database:
    try:
        # Each thread gets its own connection; check_same_thread=False only lets close() run anywhere.
        if read_only:
            conn = connect_readonly(path)
        else:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    except sqlite3.Error as exc:
        raise WorkbenchError(f"{path}: cannot open the database ({exc})") from None
    return Database(conn, execute_plugins=False)


class StudyDatabase:
    """A study's SQLite file. `db` gives the calling thread its own connection."""

    def __init__(self, path: Path, read_only: str | None = None) -> None:
        self.path = path
        self.read_only = read_only
        """Why this process cannot write the study (storage.fastread.read_only_reason), or None:
        then every connection is read-only and `require_writable` refuses a write up front."""
        self._local = threading.local()
        self._connections: list[Database] = []
        self._lock = threading.Lock()

    @property
    def db(self) -> Database:
        db = getattr(self._local, "db", None)
        if db is None:
            db = _connect(self.path, self.read_only is not None)
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def require_writable(self) -> None:
        """Refuse, in one line, a write to a study that cannot be written, before any work."""
        if self.read_only is not None:
            raise ReadOnlyStudy(f"{self.path}: the study is read-only ({self.read_only}); nothing was recorded")

    def data_version(self) -> int:
        """Changes when another connection commits: cheap polling for other reviewers' writes."""
        return self.db.execute("PRAGMA data_version").fetchone()[0]


def open_study(path: Path | str, *, create: bool = False) -> StudyDatabase:
    """Open (or with `create`, make) a study database, upgrading an older schema in place.

    An older database is backed up beside itself first; a newer one is refused. An empty file is
    made a study only with `create`, and a file that is not an SQLite database is refused. A study
    this process cannot write opens read-only (`StudyDatabase.read_only` says why).
    """
    path = Path(path)
    if not path.exists():
        if not create:
            raise WorkbenchError(f"{path}: no such study database")
        path.parent.mkdir(parents=True, exist_ok=True)
        _refuse_an_orphan_log(path)
        _create(path)
    elif not path.is_file():
        raise WorkbenchError(f"{path}: not a file")
    elif path.stat().st_size == 0:  # made by hand, mktemp or sqlite3.connect: a study only when asked
        if not create:
            raise WorkbenchError(f"{path}: an empty file, not a study database (`workbench init` or an import makes one)")
        _create(path, replace=True)
    # Never a header read of our own: closing any descriptor of the file drops every SQLite lock
    # this process holds on it (POSIX locks are per process), and other threads' connections then
    # wrote over each other ("database disk image is malformed"); SQLite says SQLITE_NOTADB instead.
    study = StudyDatabase(path, read_only_reason(path))
    try:
        _prepare(study)
    except sqlite3.DatabaseError as exc:
        study.close()
        if exc.sqlite_errorname == "SQLITE_NOTADB":
            raise WorkbenchError(f"{path}: not an SQLite database, so not a study database") from None
        raise WorkbenchError(f"{path}: not a readable study database ({exc})") from None
    except BaseException:
        study.close()
        raise
    return study


def _create(path: Path, *, replace: bool = False) -> None:
    """Build the whole schema under a temporary name beside `path`, then give it the name.

    A crash (kill -9, power cut) leaves no study file or a complete one, never a half-made one
    that every command would refuse. Without `replace`, a study another process made meanwhile
    is kept and this one dropped.
    """
    _drop_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.new")
    try:
        try:
            db = _connect(tmp)
            try:
                with db.atomic():  # one commit (one sync) for the whole schema; nobody else sees it yet
                    schema.migrations.apply(db)
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise WorkbenchError(f"{path}: cannot create the study database ({exc})") from None
        if replace:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # never overwrites: fails if the name was taken meanwhile
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _refuse_an_orphan_log(path: Path) -> None:
    """A write-ahead log left by a crash whose database was then removed would be replayed into a
    new study of that name and break it: say so instead of creating one."""
    wal = companions(path)[0]
    if wal.exists() and not path.exists():  # in this order: a live study's log appears after it
        raise WorkbenchError(
            f"{path}: no study file, but the write-ahead log {wal.name} of a removed one remains"
            f" (it would be replayed into a new study); remove it and import again: {way_out(path)}"
        )


def _drop_stale_temporaries(path: Path) -> None:
    """Remove what a creation killed earlier left beside `path` (its process is gone)."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*-*.new*"):
        pid = stale.name[len(path.name) + 2:].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prepare(study: StudyDatabase) -> None:
    db = study.db
    applied = [m.name for m in schema.migrations.applied(db)]
    check_study(study.path, applied, db.table_names())
    pending = schema.migrations.pending(db)
    if pending and study.read_only is not None:
        raise WorkbenchError(f"{study.path}: written by an older workbench, and read-only ({study.read_only}),"
                             " so it cannot be upgraded: copy it where it can be written")
    if study.read_only is not None:
        return
    if not pending:
        _enable_wal(db)
        return
    if applied:
        backup(study, f"schema{len(applied)}")
    _enable_wal(db)
    schema.migrations.apply(db)


def _enable_wal(db: Database) -> None:
    if db.journal_mode != "wal":
        db.enable_wal()


def backup(study: StudyDatabase, label: str) -> Path:
    """Copy the database with SQLite's online backup, safe while others read it."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = study.path.with_name(f"{study.path.name}.{label}-{stamp}.bak")
    dest = sqlite3.connect(str(target))
    try:
        study.db.conn.backup(dest)
    finally:
        dest.close()
    return target
