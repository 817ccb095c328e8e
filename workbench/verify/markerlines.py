"""The rare lines the markers find (workbench/verify/markers.py's engine) and what the scan reads
from each: tracebacks and the exception closing them, fatal errors, torch_xla's metrics reports,
compilation causes and profiler lines, probe lines and sharding specs (`MarkerLines`, part of
`LogScanner`).
"""

from __future__ import annotations

import json
import re

from workbench.verify.logfacts import Hit
from workbench.verify.loglines import _clip, _first_on_lines, _line_text, _LineCounter, _matches_at

FATAL_MARKERS: tuple[tuple[bytes, str], ...] = (
    (b"Fatal Python error", "fatal"),
    (b"Segmentation fault", "fatal"),
    (b"core dumped", "fatal"),
    (b"Check failed", "fatal"),
    (b"RESOURCE_EXHAUSTED", "oom"),
    (b"out of memory", "oom"),
    (b"MemoryError", "oom"),
    (b"Killed", "killed"),
    (b"timed out", "timeout"),
    (b"Timeout", "timeout"),
)
"""Byte strings that mark a fatal error anywhere in a line, and what kind of error each is.

They are looked for in the log's last FATAL_TAIL bytes only: an error that kills a run is among
its last words, and the same words earlier in a log that went on are not fatal."""


TRACEBACK = b"Traceback (most recent call last)"
_TRACEBACK, _COUNTER_AT, _COMPILE, _PROFILER, _PROBE, _DEVICES, _METRIC_AT = range(7)
MARKERS: tuple[bytes, ...] = (TRACEBACK, b"Counter: ", b"Compilation Cause", b"pt-xla-profiler:",
                              b"workbench-probe ", b"devices=[", b"Metric: ", *(m for m, _ in FATAL_MARKERS))
"""Every literal the scan looks for, found in one pass (`markers.Markers`); the fatal ones last.
A metrics report's `Counter: ` and `Metric: ` lines are read only where these start."""
_FATAL_AT = 7


_COUNTER = re.compile(rb"Counter: (\S+)\s+Value: (\d+)")
_METRIC = re.compile(rb"Metric: (\S+)\s+TotalSamples: (\d+)")
_SHARDING = re.compile(rb"devices=\[([\d,]+)\]([\d,]+)")
_EXCEPTION = re.compile(rb"^([A-Za-z_][\w.]*)(?::|$)")


class MarkerLines:
    """`LogScanner`'s reading of the markers' hits (its state is set in `LogScanner.__init__`)."""

    def _hit(self, pos: int, text: str, step: int | None = None) -> Hit:
        """A hit at a byte position of the current piece; its line is set when the piece is done."""
        return self._lines.at(pos, Hit(0, text, step))

    def _tracebacks(self, piece: bytes, positions: list[int]) -> None:
        facts = self.facts
        if self._in_traceback is not None:
            self._end_traceback(piece, 0)
        for pos in _first_on_lines(piece, positions):
            facts.tracebacks.append(self._hit(pos, _line_text(piece, pos)))
            self._in_traceback = facts.tracebacks[-1]
            self._end_traceback(piece, piece.find(b"\n", pos) + 1)

    def _end_traceback(self, piece: bytes, pos: int) -> None:
        """Find the exception line closing the open traceback: its first unindented line."""
        n = 0
        while pos < len(piece) and n < 2000:
            end = piece.find(b"\n", pos)
            end = len(piece) if end == -1 else end
            text = piece[pos:end]
            if text.startswith(b"Traceback"):
                return  # the next traceback takes over, wherever the chunks were cut
            if text and text[:1] not in (b" ", b"\t"):
                m = _EXCEPTION.match(text)
                if m and (b"Error" in m.group(1) or b"Exception" in m.group(1) or b"Interrupt" in m.group(1)
                          or b"Exit" in m.group(1) or b"Abort" in m.group(1)):
                    self.facts.exceptions.append(self._hit(pos, _clip(text)))
                    self._in_traceback = None
                    return
                if not text.startswith((b"During handling", b"The above exception")):
                    self.facts.exceptions.append(self._hit(pos, _clip(text)))
                    self._in_traceback = None
                    return
            pos = end + 1
            n += 1

    def _fatal(self, piece: bytes, base: int, hits: list[list[int]], start: int = 0) -> None:
        """Fatal lines in line order, each once, whatever the chunking: a line that several
        markers match takes the kind of the first of them in FATAL_MARKERS."""
        found: dict[int, tuple[int, str]] = {}  # line start -> (position of its marker, kind)
        for i, (_, kind) in enumerate(FATAL_MARKERS):
            for pos in _first_on_lines(piece, hits[_FATAL_AT + i], start):
                found.setdefault(piece.rfind(b"\n", 0, pos) + 1, (pos, kind))
        if not found:
            return
        counter = _LineCounter(piece, base)
        for line_start in sorted(found):
            pos, kind = found[line_start]
            self.facts.fatal.append((kind, Hit(counter.at(pos), _line_text(piece, pos))))

    def _xla(self, piece: bytes, hits: list[list[int]], step_at) -> None:
        facts = self.facts
        if hits[_COUNTER_AT]:
            for m in _matches_at(_COUNTER, piece, hits[_COUNTER_AT]):
                name = m.group(1).decode("utf-8", "replace")
                hit = self._hit(m.start(), m.group(2).decode(), step_at(m.start()))
                facts.counters[name] = hit
                if name == "UncachedCompile":
                    facts.counter_series.setdefault(name, []).append(hit)
            for m in _matches_at(_METRIC, piece, hits[_METRIC_AT]):
                name = m.group(1).decode("utf-8", "replace")
                if name in ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime"):
                    hit = self._hit(m.start(), m.group(2).decode(), step_at(m.start()))
                    facts.counter_series.setdefault(name, []).append(hit)
            facts.reports = max(len(facts.counter_series.get("UncachedCompile", [])), facts.reports)
        for marker, target in ((_COMPILE, facts.compile_causes), (_PROFILER, facts.profiler)):
            for pos in _first_on_lines(piece, hits[marker]):
                target.append(self._hit(pos, _line_text(piece, pos), step_at(pos)))

    def _sharding(self, piece: bytes, base: int, positions: list[int], start: int = 0) -> None:
        if not positions or positions[-1] < start:
            return
        counter = _LineCounter(piece, base)
        for m in _SHARDING.finditer(piece, start):
            ids = [x for x in m.group(2).split(b",") if x]
            self.facts.sharding.append(Hit(counter.at(m.start()), str(len(ids))))
            tiles = [x for x in m.group(1).split(b",") if x]
            if len(tiles) > 1 and piece.startswith(b" last_tile_dim_replicate", m.end()):
                self.facts.batch_splits.append(Hit(self.facts.sharding[-1].line, f"{int(tiles[0])} of {len(ids)}"))

    def _probes(self, piece: bytes, base: int, positions: list[int], start: int = 0) -> None:
        counter = _LineCounter(piece, base)
        for pos in _first_on_lines(piece, positions, start):
            end = piece.find(b"\n", pos)
            line = piece[piece.rfind(b"\n", 0, pos) + 1 : len(piece) if end == -1 else end]
            try:  # the whole line: a probe summary (trace version 2) is longer than a cited line's 300
                record = json.loads(line.split(b"workbench-probe ", 1)[1])
            except (ValueError, IndexError):
                record = None
            if isinstance(record, dict):
                self.facts.probes.append((Hit(counter.at(pos), _clip(line)), record))
