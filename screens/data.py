"""Database access for the UI's worker threads.

Every read runs in a thread worker and opens the study for the length of that read, in
that thread: sqlite3 connections must be used and closed in the thread that made them, and
a thread worker's thread ends with the worker. Opening costs under a millisecond (WAL).

The study screen's reads take a plain connection (`read_plain`): the first screen paints
without importing sqlite-utils (about 50 ms, issue 19); `read` opens it as the writers do.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from domain.errors import WorkbenchError
from domain.text import clean
from screens.messages import LoadFailed

if TYPE_CHECKING:
    from storage.queries import Reader
    from storage.sqlite import Database

T = TypeVar("T")


@contextmanager
def reading(path: Path) -> Iterator[Database]:
    """The study at `path`, open for this thread only; never creates a database."""
    from storage.database import open_study

    study = open_study(path)
    try:
        yield study.db
    finally:
        study.close()


def describe_error(error: BaseException) -> str:
    """One line for the user, with control characters made visible."""
    if isinstance(error, WorkbenchError):
        return clean(str(error))
    if isinstance(error, sqlite3.Error):
        if getattr(error, "sqlite_errorname", "").startswith("SQLITE_READONLY"):
            return "the study is read-only: nothing was recorded"
        return f"database error: {clean(str(error))}"
    return f"unexpected error: {type(error).__name__}: {clean(str(error))}"


def read(path: Path, query: Callable[[Database], T]) -> T | LoadFailed:
    """`query` run on the study at `path`; a problem the user can act on comes back as a
    `LoadFailed` message to post, so a worker only fails on a bug."""
    try:
        with reading(path) as db:
            return query(db)
    except (WorkbenchError, sqlite3.Error) as exc:
        return LoadFailed(describe_error(exc))


def read_plain(path: Path, query: Callable[[Reader], T]) -> T | LoadFailed:
    """`read` for a query that takes a plain sqlite3 connection (storage.queries' `Reader`): on
    a read-only connection of the standard module when the study is up to date
    (storage.fastread.open_readonly, which refuses a newer, half-made or foreign file with the
    full open's words); else (missing, empty, older, unreadable) through `read`, whose full open
    upgrades the study or says what is wrong."""
    from storage.fastread import open_readonly

    try:
        conn = open_readonly(path)
        if conn is None:
            return read(path, query)
        try:
            return query(conn)
        finally:
            conn.close()
    except (WorkbenchError, sqlite3.Error) as exc:
        return LoadFailed(describe_error(exc))


FIRST_PAGE_WAIT_S = 5.0
"""The longest a worker waits for the first page before it reads anyway."""


def after_first_page(app) -> None:
    """In a thread worker: wait until the study screen has painted its first page
    (`app.first_page_shown`), at most FIRST_PAGE_WAIT_S, returning early if the worker is cancelled."""
    from textual.worker import get_current_worker

    worker = get_current_worker()
    deadline = time.monotonic() + FIRST_PAGE_WAIT_S
    while not app.first_page_shown.wait(0.02):
        if worker.is_cancelled or time.monotonic() > deadline:
            return
