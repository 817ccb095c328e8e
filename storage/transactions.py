"""The write transaction every audited write runs in, and the timestamp it stamps.

Below storage.records and the modules it calls back (storage.watches), which both write.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.sqlite import Database


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


@contextmanager
def immediate(db: Database) -> Iterator[Database]:
    """A write transaction that takes the write lock at BEGIN (waiting up to the busy timeout).

    A deferred transaction that reads before it writes can fail at once with SQLITE_BUSY when
    another process commits in between; taking the lock first makes concurrent writers queue.
    Inside an open transaction it is a savepoint, as `db.atomic()` is.
    """
    if db.conn.in_transaction:
        with db.atomic():
            yield db
        return
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.conn.rollback()
        raise
    else:
        try:
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.rollback()
            raise
