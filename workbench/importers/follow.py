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
        file read earlier changed since."""
        if self.offset == 0:
            return False
        if (stat.st_dev, stat.st_ino) != self.inode or stat.st_size < self.offset:
            return True
        if fh.read(len(self.head)) != self.head:
            return True
        return any(_size(path) != size for path, size in self.agents.items())

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

    def read(self, sessions: list[Path]) -> int:
        """Read what was added to these sessions; returns the lines read."""
        read = 0
        with self.importer.group():
            for path in sessions:
                tail = self.tails.get(path)
                if tail is None:
                    tail = self.tails[path] = SessionTail(self.importer, path)
                read += tail.read()
        return read
