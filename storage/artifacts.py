"""Files an attempt saved (checkpoints), kept in a content-addressed store beside the database.

A study database `DIR/s.db` keeps them in `DIR/s.artifacts/<sha256>`, as it keeps its clones in
`DIR/s.repos`. The `artifact` table (one row per attempt and kind) names the stored copy relative
to the database's folder, so the two move together. Storing only hashes and copies bytes: nothing
here unpickles or otherwise interprets a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from storage import records
from storage.sqlite import Database

BLOCK = 1 << 20


def store_dir(db_path: Path) -> Path:
    """`<db stem>.artifacts` beside the database file."""
    return db_path.parent / f"{db_path.stem}.artifacts"


def sha256_of(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _copy_in(source: Path, store: Path, sha256: str) -> Path:
    """The stored copy of `source` (whose hash is `sha256`), copied now unless already there."""
    target = store / sha256
    if target.is_file() and target.stat().st_size == source.stat().st_size:
        return target
    store.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=store, prefix=".incoming-")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, source.open("rb") as fh:
            while block := fh.read(BLOCK):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != sha256:
            raise ValueError(f"{source.name} changed while it was being stored")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def store_artifact(db: Database, db_path: Path, attempt_id: int, kind: str, source: Path, name: str,
                   reviewer: str) -> str:
    """Copy `source` into the store and record it as the attempt's `kind` artifact.

    Returns "insert", "update" or "same" (the same file again changes nothing). Call it inside
    the attempt's transaction: a copy whose row is rolled back stays in the store unreferenced,
    which is harmless (the next import of the same bytes finds it)."""
    sha256, size = sha256_of(source)
    stored = _copy_in(source, store_dir(db_path), sha256)
    row = {"name": name, "sha256": sha256, "size": size,
           "path": os.path.relpath(stored, db_path.parent)}
    _, what = records.upsert_by_key(db, "artifact", {"attempt_id": attempt_id, "kind": kind}, row, reviewer)
    return what


def drop_artifact(db: Database, attempt_id: int, kind: str, reviewer: str) -> bool:
    """Forget the attempt's `kind` artifact (its record no longer names one); the stored copy stays."""
    row = db.execute("SELECT id FROM artifact WHERE attempt_id = ? AND kind = ?", [attempt_id, kind]).fetchone()
    if row is None:
        return False
    db.execute("DELETE FROM artifact WHERE id = ?", [row[0]])
    records.audit(db, reviewer, "delete", "artifact", row[0], {"attempt_id": attempt_id, "kind": kind})
    return True


def database_dir(db: Database) -> Path | None:
    """The folder of the connection's main database file (None in memory)."""
    for _, name, file in db.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            return Path(file).parent
    return None


def artifact_of(db: Database, attempt_id: int, kind: str = "checkpoint") -> dict[str, Any] | None:
    """The attempt's artifact row, with `file`: the stored copy's absolute path."""
    rows = records.select_rows(db, "SELECT * FROM artifact WHERE attempt_id = ? AND kind = ?", [attempt_id, kind])
    if not rows:
        return None
    row = rows[0]
    base = database_dir(db)
    row["file"] = str((base / row["path"]) if base is not None else Path(row["path"]))
    return row
