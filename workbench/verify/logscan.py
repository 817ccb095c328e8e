"""One streaming pass over a run's log: the evidence the verifier reads itself.

The log arrives as byte chunks (storage/logs.py's stored chunks, or a file read in blocks) and
is never held whole. Each chunk is cut at its last newline and the rest carried into the next
one, so every search sees whole lines. Rare markers (tracebacks, fatal errors, torch_xla's
metrics report and debug output, probe lines, sharding specs) are found in one pass over each
piece by a multi-pattern engine (workbench/verify/markers.py: Hyperscan, else google-re2);
Python only runs per hit, and only hits get line numbers.

This module is the pass itself (`LogScanner`: chunks cut into pieces, the head and tail windows);
what it reads from a piece is apart: markerlines.py (the markers' hits), steplines.py (step lines
and the step a hit belongs to), extract.py with shapes.py and patterns.py (metric points),
logfacts.py (what it found), loglines.py (line numbers).

Line numbers in the evidence are 1-based, as `grep -n` prints them.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.verify import extract
from workbench.verify.extract import MetricExtraction, Standing
from workbench.verify.logfacts import Hit, LogFacts
from workbench.verify.loglines import _Deferred
from workbench.verify.markerlines import _DEVICES, _PROBE, _TRACEBACK, MARKERS, MarkerLines
from workbench.verify.markers import Markers
from workbench.verify.patterns import DEFAULT_PATTERNS, _Compiled, _gate_markers, compile_patterns
from workbench.verify.shapes import _Marks
from workbench.verify.steplines import _STEP_LINES, _TOTAL_HINTS, StepLines

if TYPE_CHECKING:
    from workbench.verify.shapes import _Shape


FATAL_TAIL = 4 << 20
HEAD = 4 << 20
"""Probe lines and sharding specs are read from the first HEAD and last FATAL_TAIL bytes: the
probe writes at start and exit, and a run prints its mesh when it sets it up."""


class LogScanner(StepLines, MetricExtraction, MarkerLines):
    """Feed byte chunks in order with `feed`, then `finish` for the facts."""

    def __init__(self, patterns: list[_Compiled] | None = None, *, extract_metrics: bool = True,
                 standing: Standing | None = None, steps_only: bool = False,
                 markers: Markers | None = None) -> None:
        self.facts = LogFacts()
        self._markers = markers or _markers()
        self.patterns = patterns if patterns is not None else compile_patterns()
        self.steps_only = steps_only and extract_metrics
        """Extraction of the step lines alone (the plain pattern's step and total, no metric values):
        the facts of a full extraction but `points`, for a log that `steps_only_suits`."""
        if self.steps_only and [c.pattern for c in self.patterns] != list(DEFAULT_PATTERNS):
            raise ValueError("steps_only reads the default patterns' step lines only")
        self.step_lines: list[tuple[int, int, list[int], Sequence[int] | None]] = []
        """With `steps_only`: for each piece with step lines, in log order, its byte offset in the
        log, its length, the steps of its step lines and where each starts in the piece (None
        where the C module is not built: `PointLines` finds them)."""
        self._offset = 0  # byte offset in the log of the next piece
        self._standing = standing
        """Several processes' copies of each step line (topology.Standing): a step-less metric
        line is credited only where every process stands at one step, else dropped."""
        self.extract = extract_metrics
        self._carry = b""
        self._line = 1  # line number of the first line of the next piece
        self._in_traceback: Hit | None = None
        self._sequence: dict[str, int] = {}
        self._pending: list[tuple[str, float, int, int]] = []
        self._epoch: int | None = None
        """The last epoch a line stated (`Epoch 3`, `Train Epoch: 3 [...]`) before any step line: where a
        step-less value printed before any step line belongs (`MetricExtraction._credit_pending`)."""
        self._stated: tuple[bytes, int] | None = None
        """The last piece read before any step line that may state an epoch after `_epoch`'s, and
        from where: read only when a later value needs it."""
        self._per_epoch: dict[str, int] = {}
        """How many step-less values of each name came before any step line and any epoch statement."""
        self._recent_step: int | None = None
        """Step of the last step-bearing line read so far: where a step-less metric line belongs."""
        self._lines = _Deferred()
        self._tail: deque[tuple[bytes, int, list[list[int]]]] = deque()
        self._tail_bytes = 0
        self._head_bytes = 0
        self._head_end_line = 0
        plain = [p for p in self.patterns if p.pattern.name == "plain"]
        self._plain = plain[0].regex if plain else None
        first = self.patterns[0] if self.patterns else None
        self._shapes = first if extract.SHAPES and first is not None and first.pattern == DEFAULT_PATTERNS[0] else None
        """The plain pattern, read by line shape (`_shaped`): where it runs first, so that every
        point its lines give is written after the earlier pieces' and before the other patterns'."""
        self._gates = _gate_markers(tuple(g for c in self.patterns for g in c.gate))
        self._shape: _Shape | None = None  # the last piece's

    # ------------------------------------------------------------------ feeding
    def feed(self, chunk: bytes | bytearray) -> None:
        self.facts.size += len(chunk)
        carry = self._carry
        if carry:
            cut = chunk.rfind(b"\n")
            if cut == -1:  # the line goes on: grown in place (a copy of it at every chunk was quadratic)
                if not isinstance(carry, bytearray):
                    carry = self._carry = bytearray(carry)
                carry += chunk
                if len(carry) > (64 << 20):  # a monstrous line: scan what we have
                    self._piece(carry)
                    self._carry = b""
                return
            if cut > 0:
                before = chunk.rfind(b"\n", 0, cut)
                if before != -1 and not chunk.startswith((b"Counter: ", b"Metric: "), before + 1):
                    # what the lines below do, with the piece copied once rather than twice
                    self._piece(b"".join((carry, memoryview(chunk)[: cut + 1])))
                    self._carry = bytes(chunk[cut + 1 :])
                    return
            data = carry + chunk
        else:
            data = chunk
        cut = data.rfind(b"\n")
        if cut == -1:
            self._carry = data
            if len(self._carry) > (64 << 20):  # a monstrous line: scan what we have
                self._piece(self._carry)
                self._carry = b""
            return
        # keep a trailing "Counter: X" / "Metric: X" line with the next piece: its value follows
        tail_start = data.rfind(b"\n", 0, cut) + 1
        if data.startswith((b"Counter: ", b"Metric: "), tail_start) and len(data) - tail_start < (1 << 20):
            if tail_start == 0:
                self._carry = data
                return
            cut = tail_start - 1
        self._piece(data if cut + 1 == len(data) else data[: cut + 1])
        self._carry = bytes(data[cut + 1 :])

    def finish(self) -> LogFacts:
        if self._carry:
            self._piece(self._carry + b"\n")
            self._carry = b""
        self.facts.lines = self._line - 1
        skip = max(0, self._tail_bytes - FATAL_TAIL)
        for piece, base, hits in self._tail:
            start = min(skip, len(piece))
            skip -= start
            if start:  # begin at a line start
                start = piece.find(b"\n", start - 1) + 1 or len(piece)
            self._fatal(piece, base, hits, start)
            if base > self._head_end_line:  # not already read as part of the head
                self._probes(piece, base, hits[_PROBE], start)
                self._sharding(piece, base, hits[_DEVICES], start)
        self._tail.clear()
        return self.facts

    # ------------------------------------------------------------------ one piece of whole lines
    def _piece(self, piece: bytes) -> None:
        base = self._line
        before = self.facts.last_step
        known: tuple[dict[int, int], int] | tuple[()] = ()
        if self.steps_only:
            step_at, last = self._steps_only(piece)
        elif self.extract:
            marks: list[tuple[int, int]] = []  # (position, step) of step-bearing lines in this piece
            step_lines = _Marks(piece, marks, self._metrics(piece, base, marks))
            recent = self._recent_step
            if step_lines.shaped is not None:  # lines counted already
                known = (step_lines.known, step_lines.shaped.newlines)

            def step_at(pos: int) -> int | None:
                return step_lines.step_before(pos, recent)

            if self._standing is not None:
                self._credit_standing(step_lines.pairs())
            last = step_lines.highest()
            self._credit_pending(piece, step_at, ahead=last is None and self._recent_step is None)
            if last is not None:
                self._recent_step = step_lines.last()
        else:
            # no per-line work: a rare event's step is found by looking back for a step line
            walks: dict[int, tuple[re.Match[bytes] | None, int]] = {}

            def step_at(pos: int) -> int | None:
                found = self._step_before(piece, pos, walks)
                return before if found is None else found

            last = self._step_before(piece, len(piece), walks)
            if last is not None:
                self._recent_step = last
            planned = self._planned_total(piece)
            if planned is not None:  # what metric extraction would have set
                self.facts.total_steps = planned
        hits = self._markers.scan(piece)
        self._tracebacks(piece, hits[_TRACEBACK])
        self._tail.append((piece, base, hits))
        self._tail_bytes += len(piece)
        while self._tail_bytes - len(self._tail[0][0]) >= FATAL_TAIL:
            self._tail_bytes -= len(self._tail.popleft()[0])
        self._xla(piece, hits, step_at)
        if self._head_bytes < HEAD:
            self._head_bytes += len(piece)
            self._head_end_line = base
            self._probes(piece, base, hits[_PROBE])
            self._sharding(piece, base, hits[_DEVICES])
        if last is not None:
            self.facts.last_step = last if before is None else max(before, last)
        self._line = base + self._lines.resolve(piece, base, *known)
        self._offset += len(piece)

    def _planned_total(self, piece: bytes) -> int | None:
        """The planned step count of the piece's last `step N/M` line, without metric extraction:
        looked for among its last 64 step lines; in the log's first HEAD bytes, while none is
        known, also on every line a literal-led hint points at (a total printed once at start)."""
        m = self._step_line(piece, len(piece), total=True)
        if m is None and self.facts.total_steps is None and self._head_bytes < HEAD and self._plain is not None:
            hints = sorted((h.start() for p in _TOTAL_HINTS for h in p.finditer(piece)), reverse=True)
            line_start = len(piece) + 1
            for pos in hints:
                if pos >= line_start:
                    continue  # this line was read
                line_start = piece.rfind(b"\n", 0, pos) + 1
                stop = piece.find(b"\n", pos)
                m = self._plain.search(piece, line_start, len(piece) if stop == -1 else stop)
                if m is not None and m.group("total") is not None:
                    break
                m = None
        return None if m is None else int(m.group("total"))


_MARKERS: list[Markers] = []


def _markers() -> Markers:
    """The scan's engine, compiled once per process (and thread: `Markers`); and the gates of the
    default patterns that `steps_only_suits` refuses."""
    if not _MARKERS:
        _MARKERS.append(Markers(MARKERS))
        _MARKERS.append(Markers([g.encode() for p in DEFAULT_PATTERNS if p.name not in _STEP_ONLY_PATTERNS
                                 for g in p.gate]))
    return _MARKERS[0]


_STEP_ONLY_PATTERNS = ("plain", "summary")
"""Default patterns whose points `PointLines` finds without extraction: the others (sequential
Trainer dicts, JSON lines, progress bars) number or place their points in ways only a full pass
knows, so a log where their gates appear is extracted."""


def steps_only_suits(patterns: list[_Compiled], data: bytes) -> bool:
    """Whether a scan with `steps_only` plus `PointLines` gives what full extraction would: the
    default patterns alone, and none but `plain` and `summary` can match in `data`."""
    if [c.pattern for c in patterns] != list(DEFAULT_PATTERNS):
        return False
    if not _MARKERS:
        _markers()
    return not _MARKERS[1].found(data) and not _summary_before_steps(data)


def _summary_before_steps(data: bytes) -> bool:
    """Whether a line that may be a summary line comes before the log's first step line: its
    value is counted per epoch (`MetricExtraction._credit_pending`), which `PointLines` does not
    place; such a log is extracted."""
    first = _STEP_LINES.search(data)
    end = len(data) if first is None else first.start()
    if end > 0 and data.startswith(_SUMMARY_LEADS):
        return True
    return any(data.find(b"\n" + lead, 0, end) != -1 for lead in _SUMMARY_LEADS)


_SUMMARY_LEADS = (b"eval", b"val", b"test", b"final")


def scan_chunks(chunks: Iterable[bytes], **kwargs: Any) -> LogFacts:
    scanner = LogScanner(**kwargs)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes | bytearray]:
    """The file in blocks of about `size` bytes that end at a line end, read into fresh buffers
    and trimmed in place, so neither this nor the scanner copies them; a line longer than
    `size` is cut anyway."""
    with path.open("rb", buffering=0) as fh:
        while True:
            block = bytearray(size)
            n = fh.readinto(block)
            if not n:
                return
            del block[n:]
            if n == size and not block.endswith(b"\n"):
                nl = block.rfind(b"\n")
                if nl != -1:
                    fh.seek(nl + 1 - n, 1)
                    del block[nl + 1 :]
            yield block
