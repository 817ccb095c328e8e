"""Logs stored in fixed-size chunks with a sparse line index.

A 1 GB log is never read whole: showing its end or line N reads one index row and the
chunks that hold the wanted lines. Bytes are stored as they came (a non-UTF-8 or binary log
loses nothing); decoding happens only for display, with replacement characters.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from storage.sqlite import Database

CHUNK = 256 * 1024
"""Bytes per stored chunk."""
INDEX_EVERY = 1024
"""Every INDEX_EVERY-th line start is indexed..."""
INDEX_GAP = CHUNK
"""...and any line start this many bytes past the last indexed one, so huge lines stay cheap."""
CACHED_CHUNKS = 8
MAX_LINE_BYTES = 16 * 1024
"""Longer lines are cut for display; the stored log keeps them whole."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def store_log(db: Database, path: Path) -> int:
    """Store the file's bytes once (deduplicated by content); returns the log id.

    Call inside the caller's transaction.
    """
    sha = file_sha256(path)
    row = db.execute("SELECT id FROM log WHERE sha256 = ?", [sha]).fetchone()
    if row:
        return row[0]
    with path.open("rb") as fh:
        return _store_stream(db, fh, sha)


def store_log_bytes(db: Database, data: bytes) -> int:
    """`store_log` for bytes already in memory (a transcript's tool output)."""
    import io

    sha = hashlib.sha256(data).hexdigest()
    row = db.execute("SELECT id FROM log WHERE sha256 = ?", [sha]).fetchone()
    if row:
        return row[0]
    return _store_stream(db, io.BytesIO(data), sha)


def log_chunks(db: Database, log_id: int, batch: int = 1) -> Iterator[bytes]:
    """A stored log's 256 KiB chunks in order, `batch` chunks joined at a time; one cursor, so SQLite
    walks the table once."""
    cursor = db.execute("SELECT data FROM log_chunk WHERE log_id = ? ORDER BY seq", [log_id])
    while rows := cursor.fetchmany(batch):
        yield rows[0][0] if len(rows) == 1 else b"".join(r[0] for r in rows)


def indexed_line_before(db: Database, log_id: int, offset: int) -> tuple[int, int]:
    """The sparse index's last line start at or before byte `offset`: (line, its offset), lines
    counted from 0; count the newlines from there to `offset` for the line that holds it."""
    row = db.execute("SELECT line, offset FROM log_line WHERE log_id = ? AND offset <= ? ORDER BY line DESC LIMIT 1",
                     [log_id, offset]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _store_stream(db: Database, fh: BinaryIO, sha: str) -> int:
    log_id = db.execute("INSERT INTO log (sha256, size, line_count) VALUES (?, 0, 0)", [sha]).lastrowid
    if log_id is None:
        raise TypeError("log: the new row has no id")
    offset = 0
    index = _LineIndex(log_id)
    last_byte = b""
    seq = 0
    insert = db.conn.execute
    while block := fh.read(CHUNK):
        insert("INSERT INTO log_chunk (log_id, seq, data) VALUES (?, ?, ?)", (log_id, seq, block))
        index.block(block, offset)
        offset += len(block)
        last_byte = block[-1:]
        seq += 1
    index_rows = index.rows
    line_count = index.newlines + (1 if offset and last_byte != b"\n" else 0)
    if index_rows[-1][1] >= line_count and line_count:
        index_rows.pop()  # an index entry past the last line points at nothing
    db.conn.executemany("INSERT INTO log_line (log_id, line, offset) VALUES (?, ?, ?)", index_rows)
    db.execute(
        "UPDATE log SET size = ?, line_count = ? WHERE id = ?", [offset, line_count, log_id]
    )
    return log_id


class _LineIndex:
    """The sparse line index of a log fed block by block: a row at every INDEX_EVERY-th line
    start and at the first line start INDEX_GAP bytes or more past the last row.

    Newlines are counted with `bytes.count` and the indexed ones located by counting halves
    of the stretch before them, so no Python code runs per line."""

    __slots__ = ("log_id", "rows", "newlines", "last_line", "last_offset")

    def __init__(self, log_id: int) -> None:
        self.log_id = log_id
        self.rows: list[tuple[int, int, int]] = [(log_id, 0, 0)]
        self.newlines = 0
        self.last_line = 0
        self.last_offset = 0

    def block(self, block: bytes, offset: int) -> None:
        pos, size = 0, len(block)
        while True:
            # the first newline at or past `gap` starts a line INDEX_GAP bytes past the last row
            gap = self.last_offset + INDEX_GAP - 1 - offset
            by_gap = block.find(b"\n", max(pos, gap)) if gap < size else -1
            end = size if by_gap == -1 else by_gap + 1
            found = block.count(b"\n", pos, end)
            need = self.last_line + INDEX_EVERY - self.newlines  # newlines until the next counted row
            if found >= need:
                at = _nth_newline(block, pos, end, need, found)
                found = need
            elif by_gap != -1:
                at = by_gap
            else:
                self.newlines += found
                return
            self.newlines += found
            self.last_line, self.last_offset = self.newlines, offset + at + 1
            self.rows.append((self.log_id, self.last_line, self.last_offset))
            pos = at + 1


def _nth_newline(block: bytes, lo: int, hi: int, k: int, count: int) -> int:
    """Position of the k-th newline (from 1) in block[lo:hi], which holds `count` >= k of them."""
    while True:
        if k <= 32:
            at = lo - 1
            for _ in range(k):
                at = block.find(b"\n", at + 1)
            return at
        if count - k < 32:
            at = hi
            for _ in range(count - k + 1):
                at = block.rfind(b"\n", lo, at)
            return at
        mid = lo + (hi - lo) * k // count
        before = block.count(b"\n", lo, mid)
        if before >= k:
            hi, count = mid, before
        else:
            lo, k, count = mid, k - before, count - before


class LogReader:
    """Reads lines of a stored log by number, touching only the chunks it needs."""

    def __init__(self, db: Database, log_id: int) -> None:
        self.db = db
        self.log_id = log_id
        row = db.execute("SELECT size, line_count FROM log WHERE id = ?", [log_id]).fetchone()
        if row is None:
            raise KeyError(f"log {log_id} does not exist")
        self.size, self.line_count = row
        self._cache: OrderedDict[int, bytes] = OrderedDict()

    def _chunk(self, seq: int) -> bytes | None:
        """A chunk, from a small cache: neighbouring lines share their chunk."""
        if seq in self._cache:
            self._cache.move_to_end(seq)
            return self._cache[seq]
        row = self.db.execute(
            "SELECT data FROM log_chunk WHERE log_id = ? AND seq = ?", [self.log_id, seq]
        ).fetchone()
        if row is None:
            return None
        self._cache[seq] = row[0]
        if len(self._cache) > CACHED_CHUNKS:
            self._cache.popitem(last=False)
        return row[0]

    def _blocks_from(self, offset: int) -> Iterator[tuple[bytes, int]]:
        """(chunk, position in it) from offset on, without copying chunks."""
        seq, start = divmod(offset, CHUNK)
        while (data := self._chunk(seq)) is not None:
            yield data, start
            start = 0
            seq += 1

    def _next_indexed(self, line: int) -> tuple[int, int] | None:
        return self.db.execute(
            "SELECT line, offset FROM log_line WHERE log_id = ? AND line > ? ORDER BY line LIMIT 1",
            [self.log_id, line],
        ).fetchone()

    def raw_lines(self, start: int, count: int) -> list[bytes]:
        """Lines start..start+count-1 (0-based) without their newline, each cut at MAX_LINE_BYTES."""
        start = max(0, start)
        end = min(self.line_count, start + count)
        if start >= end:
            return []
        line, offset = self.db.execute(
            "SELECT line, offset FROM log_line WHERE log_id = ? AND line <= ?"
            " ORDER BY line DESC LIMIT 1",
            [self.log_id, start],
        ).fetchone()
        out: list[bytes] = []
        while line < end:
            text, offset = self._read_line(offset, line)
            if line >= start:
                out.append(text)
            line += 1
        return out

    def _read_line(self, offset: int, line: int) -> tuple[bytes, int]:
        """One line starting at offset (cut for display), and the offset of the next line."""
        parts: list[bytes] = []
        kept = 0
        position = offset
        line_end = None
        for block, start in self._blocks_from(offset):
            pos = block.find(b"\n", start)
            stop = len(block) if pos == -1 else pos
            if kept < MAX_LINE_BYTES:
                parts.append(block[start : min(stop, start + MAX_LINE_BYTES - kept)])
                kept += len(parts[-1])
            if pos != -1:
                line_end = position + pos - start
                break
            position += len(block) - start
            if kept >= MAX_LINE_BYTES:
                jump = self._next_indexed(line)
                if jump is not None and jump[0] == line + 1:
                    line_end = jump[1] - 1
                    break
        if line_end is None:
            line_end = position
        text = b"".join(parts).rstrip(b"\r")
        cut = line_end - offset - kept
        if cut > 0:
            text += f" … [{cut} more bytes]".encode()
        return text, line_end + 1

    def lines(self, start: int, count: int) -> list[str]:
        """Decoded lines for display; invalid UTF-8 becomes U+FFFD, nothing is dropped."""
        return [raw.decode("utf-8", errors="replace") for raw in self.raw_lines(start, count)]

    def tail(self, count: int) -> list[str]:
        return self.lines(self.line_count - count, count)
