"""Read growing Claude Code transcripts from where the last look stopped (`workbench watch`).

Each session keeps its importer state (the calls still waiting for their results, the edits and
context calls since the last attempt, the open claim) and the byte offset after the last whole
line read. A look reads only the bytes added since: a half-written last line waits for its end.
A file that shrank, was replaced (another inode) or whose first bytes changed is read again
from the start with a fresh state, as is a session whose sub-agent file changed after it was
read; the attempts' external ids make that re-read change nothing that was already right.
What a look leaves in the database is what an import of the whole file so far would leave.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from workbench.importers.claude_code import ClaudeCodeImporter, FileReport, SessionImporter, parse_line

CHUNK = 1 << 20
"""Bytes read at a time from a transcript."""
HEAD = 256
"""Bytes at the start of a file kept to notice a file rewritten in place."""


class SessionTail:
    """One session's transcript, read on from its last whole line."""

    def __init__(self, importer: ClaudeCodeImporter, path: Path) -> None:
        self.importer = importer
        self.path = path
        self.restarts = 0
        self.dirty = False
        """A write of this session failed (its group rolled back, the study was busy): the next
        look reads the file again from the start, so nothing read is lost."""
        self._reset()

    def _reset(self) -> None:
        self.session = SessionImporter(self.importer, self.path)
        self.report = FileReport(self.path)
        self.reports = [self.report]
        self.offset = 0
        self.inode: tuple[int, int] | None = None
        self.head = b""
        self.agents: dict[Path, int] = {}

    def _agent_sizes(self) -> dict[Path, int]:
        """Sizes of the sub-agent files this session may read (both layouts)."""
        nested = self.path.with_suffix("") / "subagents"
        files = [*(nested.glob("agent-*.jsonl") if nested.is_dir() else []), *self.path.parent.glob("agent-*.jsonl")]
        return {f: _size(f) for f in files}

    def _stale(self, stat: os.stat_result, fh: BinaryIO) -> bool:
        """The file is not the one read so far: replaced, cut shorter, rewritten, or a sub-agent
        file read earlier changed since; or a write failed."""
        if self.dirty:
            return True
        if self.offset == 0:
            return False
        if (stat.st_dev, stat.st_ino) != self.inode or stat.st_size < self.offset:
            return True
        if fh.read(len(self.head)) != self.head:
            return True
        return any(_size(path) != size for path, size in self.agents.items())

    def failed(self) -> int:
        """Attempts of this session not written so far."""
        return sum(r.attempts_failed for r in self.reports)

    def read(self) -> int:
        """Read the whole lines added since the last call and write what they change; returns
        the number of lines read (0: nothing new)."""
        try:
            fh = self.path.open("rb")
        except OSError as exc:
            self.report.problems.append(f"{self.path}: cannot read ({exc.strerror})")
            return 0
        with fh:
            stat = os.fstat(fh.fileno())
            if self._stale(stat, fh):
                self._reset()
                self.restarts += 1
                self.dirty = False
            self.inode = (stat.st_dev, stat.st_ino)
            fh.seek(self.offset)
            before = self.report.lines
            known = len(self.reports)
            sizes = self._agent_sizes()
            self.session.feed(self._records(fh), self.report, self.reports)
            for sub in self.reports[known:]:  # sub-agent files read in this look: -1 if unknown
                self.agents[sub.path] = sizes.get(sub.path, -1)
            read = self.report.lines - before
            if read:
                self.session.snapshot()
            return read

    def _records(self, fh: BinaryIO) -> Iterator[dict]:
        """The records of the whole lines from the offset on; the offset follows them."""
        rest = b""
        while chunk := fh.read(CHUNK):
            data = rest + chunk
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                raw = data[start:end + 1]
                start = end + 1
                if self.offset < HEAD:
                    self.head = (self.head + raw)[:HEAD]
                self.offset += len(raw)
                self.report.lines += 1
                record = parse_line(raw, self.report.lines, self.report)
                if record is not None:
                    yield record
            rest = data[start:]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


class Follower:
    """The sessions of one migration being followed, each read on from where it stopped."""

    def __init__(self, importer: ClaudeCodeImporter) -> None:
        self.importer = importer
        self.tails: dict[Path, SessionTail] = {}

    def read(self, sessions: list[Path]) -> list[Path]:
        """Read what was added to these sessions; returns those to look at again even if their
        files do not change (a write failed: they are read from the start next time)."""
        tails = []
        for path in sessions:
            if path not in self.tails:
                self.tails[path] = SessionTail(self.importer, path)
            tails.append(self.tails[path])
        failed = [tail.failed() for tail in tails]
        with self.importer.group():
            for tail in tails:
                try:
                    tail.read()
                except sqlite3.Error as exc:  # a busy or failing study: this session is read again
                    tail.dirty = True
                    tail.report.problems.append(f"{tail.path}: not read ({type(exc).__name__}: {exc})")
        for tail, before in zip(tails, failed, strict=True):
            if tail.failed() > before:
                tail.dirty = True
        return [tail.path for tail in tails if tail.dirty]
