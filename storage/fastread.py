"""A study opened read-only on the standard sqlite3 module, for commands that only list.

Importing sqlite-utils costs 60-80 ms, and hundreds more when numpy and pandas are installed
(issue 19): `workbench migrations DB` reads with a plain connection instead. storage.queries'
list reads take either connection. The checks that refuse a newer, half-made or foreign file
live here, and storage.database's full open runs the same ones.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from domain.errors import SchemaTooNew, WorkbenchError
from storage import schema

BUSY_TIMEOUT_S = 10.0
"""How long a writer waits for another process's lock before giving up."""


def companions(path: Path) -> tuple[Path, Path]:
    """SQLite's write-ahead log and shared-memory index beside the database."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def way_out(path: Path) -> str:
    """The shell line that removes a study file and its companions."""
    import shlex

    return "rm -f " + " ".join(shlex.quote(str(p)) for p in (path, *companions(path)))


def read_only_reason(path: Path) -> str | None:
    """Why this process cannot write the study at PATH, or None when it can. SQLite writes the file
    and, in WAL mode, makes its -wal and -shm beside it, so a file system mounted read-only, a file
    or a folder this user cannot write each make the study read-only. The kernel answers
    (statvfs, access), so root is told of a read-only mount too, though it ignores file modes."""
    folder = path.resolve().parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "on a read-only file system"
    except OSError:
        pass
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    if not os.access(folder, os.W_OK):
        return "its folder is not writable"
    return None


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection (`mode=ro`). Where SQLite cannot make the -shm a WAL study needs beside
    the file (a read-only folder or file system) it cannot open that way: then `immutable=1`, which
    reads the file as it is, with no locks and no log (an archive, which nobody writes); refused
    when a write-ahead log beside it holds changes that such a read would miss."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        reason = read_only_reason(path) if exc.sqlite_errorname == "SQLITE_CANTOPEN" and path.is_file() else None
        if reason is None:
            raise
    wal = companions(path)[0]
    if wal.is_file() and wal.stat().st_size:  # immutable=1 would read the study without them, silently
        raise WorkbenchError(f"{path}: read-only ({reason}), and its write-ahead log {wal.name} holds changes that"
                             f" SQLite reads only where it can make {path.name}-shm: copy both somewhere writable")
    return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, check_same_thread=False)


def check_study(path: Path, applied: list[str], tables: list[str]) -> None:
    """Refuse a study written by a newer workbench, one an interrupted creation left half-made,
    and an SQLite file that is not a study. `applied`: its migrations; `tables`: its tables."""
    known = schema.known()
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaTooNew(
            f"{path}: written by a newer workbench (schema {len(applied)}, this one knows"
            f" {len(known)}: unknown {', '.join(unknown)}); upgrade workbench to open it"
        )
    if not applied and tables == [schema.MIGRATIONS_TABLE]:
        raise WorkbenchError(
            f"{path}: a study file left half-made by an interrupted first import (it holds no data);"
            f" remove it and import again: {way_out(path)}"
        )
    if not applied and tables:
        raise WorkbenchError(f"{path}: an SQLite file, but not a workbench study database")


def has_active_jobs(conn: sqlite3.Connection) -> bool:
    """Whether any re-run job is queued or running (domain.jobs.ACTIVE): only then can
    workbench.rerun.jobs.recover find one whose runner died."""
    from domain.jobs import ACTIVE

    marks = ", ".join("?" * len(ACTIVE))
    return bool(conn.execute(f"SELECT EXISTS (SELECT 1 FROM job WHERE state IN ({marks}))",
                             [state.value for state in ACTIVE]).fetchone()[0])


def open_readonly(path: Path | str) -> sqlite3.Connection | None:
    """A read-only connection to an up-to-date study, after check_study.

    None when the file is missing, empty, unreadable or of an older schema: the full open
    (storage.database.open_study) then creates, upgrades or gives its error. A study that cannot
    be written (read_only_reason) is read the same way.
    """
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return None
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        applied = []
        if schema.MIGRATIONS_TABLE in tables:
            applied = [r[0] for r in conn.execute(
                f"SELECT name FROM {schema.MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
                [schema.migrations.name])]
        check_study(path, applied, tables)
    except sqlite3.Error:
        conn.close()
        return None
    except BaseException:
        conn.close()
        raise
    if set(schema.known()) - set(applied):
        conn.close()
        return None
    return conn
