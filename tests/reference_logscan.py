"""REFERENCE ONLY (tests/test_scan_engines.py): workbench/verify/logscan.py as it was before its
markers were found in one pass (issue 19), a `bytes.find` pass per marker. Not used by the package.

One streaming pass over a run's log: the evidence the verifier reads itself.

The log arrives as byte chunks (storage/logs.py's stored chunks, or a file read in blocks) and
is never held whole. Each chunk is cut at its last newline and the rest carried into the next
one, so every search sees whole lines. Rare markers (tracebacks, fatal errors, torch_xla's
metrics report and debug output, probe lines) are found with `bytes.find` and compiled
patterns that start with a literal, which scan at C speed; Python only runs per hit.

Line numbers in the evidence are 1-based, as `grep -n` prints them.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

NUMBER = rb"[-+]?+(?:\d++\.?+\d*+|\.\d++)(?:[eE][-+]?+\d++)?+"
"""A number taken whole and never given back: a shorter one would be followed by a digit, a dot or
an exponent, which no pattern here accepts after a value."""
# Metric patterns as the package defines them (issue 38: qualifier words, named and computed
# values, MNIST's lines, configuration echoes): this reference tests how lines are found, not them.
from workbench.verify.patterns import (  # noqa: E402, F401 (Pattern: the tests build theirs)
    _KV,
    DEFAULT_PATTERNS,
    Pattern,
    _Compiled,
    compile_patterns,
    is_setting,
    metric_name,
    skipped,
)

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

FATAL_TAIL = 4 << 20
HEAD = 4 << 20
"""Probe lines and sharding specs are read from the first HEAD and last FATAL_TAIL bytes: the
probe writes at start and exit, and a run prints its mesh when it sets it up."""


class Standing(Protocol):
    """Where several processes stand in their steps (topology.Standing)."""

    def advance(self, step: int) -> None: ...
    def only(self) -> int | None: ...


SKIP_NAMES = frozenset({"step", "epoch", "total", "it", "v_num", "global_step", "learning_rate", "lr"})
"""Numbers on a metric line that are not metrics of the run (kept out of comparisons)."""

_EPOCH = re.compile(rb"\b(?:[Ee]poch|EPOCH)\b[ \t:=#\[]{0,8}+(\d{1,9})(?!\d)")
_COUNTER = re.compile(rb"Counter: (\S+)\s+Value: (\d+)")
_METRIC = re.compile(rb"Metric: (\S+)\s+TotalSamples: (\d+)")
_SHARDING = re.compile(rb"devices=\[([\d,]+)\]([\d,]+)")
_EXCEPTION = re.compile(rb"^([A-Za-z_][\w.]*)(?::|$)")


@dataclass
class Hit:
    line: int
    text: str
    step: int | None = None


@dataclass
class LogFacts:
    """What one pass over a log found."""

    size: int = 0
    lines: int = 0
    tracebacks: list[Hit] = field(default_factory=list)
    """The `Traceback (most recent call last):` lines."""
    exceptions: list[Hit] = field(default_factory=list)
    """The exception line that ends each traceback (`RuntimeError: ...`)."""
    fatal: list[tuple[str, Hit]] = field(default_factory=list)
    """(kind, line): fatal, oom, killed, timeout."""
    points: dict[str, dict[int, tuple[float, int]]] = field(default_factory=dict)
    """name -> step -> (value, line)."""
    total_steps: int | None = None
    last_step: int | None = None
    counters: dict[str, Hit] = field(default_factory=dict)
    """Last value of each metrics-report counter (`text` is the value)."""
    counter_series: dict[str, list[Hit]] = field(default_factory=dict)
    """UncachedCompile and CompileTime samples each time a report printed them, with the step."""
    compile_causes: list[Hit] = field(default_factory=list)
    """`Compilation Analysis: Compilation Cause` blocks (PT_XLA_DEBUG_LEVEL), with the step."""
    profiler: list[Hit] = field(default_factory=list)
    """`pt-xla-profiler:` lines (PT_XLA_DEBUG=1): too-frequent compiles or transfers, ops not lowered."""
    probes: list[tuple[Hit, dict[str, Any]]] = field(default_factory=list)
    """`workbench-probe {json}` lines written by the probe (workbench/probe)."""
    sharding: list[Hit] = field(default_factory=list)
    """Sharding specs `{devices=[4,1]0,1,2,3}`; `text` is the number of devices named."""
    batch_splits: list[Hit] = field(default_factory=list)
    """Sharding specs that replicate over their last tile dim (`devices=[2,1,1,2]0,1,2,3
    last_tile_dim_replicate`); `text` is `SPLIT of N`: the tensor's first dim (the batch of an
    input) split SPLIT ways over the N devices named, each part held by N / SPLIT of them."""
    reports: int = 0
    """How many metrics reports (blocks with `Counter:` lines) the log holds."""

    def point_series(self) -> dict[str, dict[int, float]]:
        return {name: {s: v for s, (v, _) in steps.items()} for name, steps in self.points.items()}


class LogScanner:
    """Feed byte chunks in order with `feed`, then `finish` for the facts."""

    def __init__(self, patterns: list[_Compiled] | None = None, *, extract_metrics: bool = True,
                 standing: Standing | None = None, steps_only: bool = False) -> None:
        self.facts = LogFacts()
        self.steps_only = steps_only and extract_metrics
        """Extraction of the step lines alone (the plain pattern's step and total, no metric values):
        the facts of a full extraction but `points`, for a log that `steps_only_suits`."""
        self.step_marks: list[tuple[int, int]] = []
        """With `steps_only`: (byte offset in the log, step) of each step line, in log order."""
        self._offset = 0  # byte offset in the log of the next piece
        self._standing = standing
        """Several processes' copies of each step line (topology.Standing): a step-less metric
        line is credited only where every process stands at one step, else dropped."""
        self.patterns = patterns if patterns is not None else compile_patterns()
        self.extract = extract_metrics
        self._carry = b""
        self._line = 1  # line number of the first line of the next piece
        self._in_traceback: Hit | None = None
        self._sequence: dict[str, int] = {}
        self._pending: list[tuple[str, float, int, int]] = []
        self._epoch: int | None = None  # the last epoch stated in the pieces read so far
        self._per_epoch: dict[str, int] = {}
        self._recent_step: int | None = None
        """Step of the last step-bearing line read so far: where a step-less metric line belongs."""
        self._lines = _Deferred()
        self._tail: deque[tuple[bytes, int]] = deque()
        self._tail_bytes = 0
        self._head_bytes = 0
        self._head_end_line = 0
        plain = [p for p in self.patterns if p.pattern.name == "plain"]
        self._plain = plain[0].regex if plain else None

    # ------------------------------------------------------------------ feeding
    def feed(self, chunk: bytes | bytearray) -> None:
        self.facts.size += len(chunk)
        data = self._carry + chunk if self._carry else chunk
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
        for piece, base in self._tail:
            start = min(skip, len(piece))
            skip -= start
            if start:  # begin at a line start
                start = piece.find(b"\n", start - 1) + 1 or len(piece)
            self._fatal(piece, base, start)
            if base > self._head_end_line:  # not already read as part of the head
                self._probes(piece, base, start)
                self._sharding(piece, base, start)
        self._tail.clear()
        return self.facts

    # ------------------------------------------------------------------ one piece of whole lines
    def _piece(self, piece: bytes) -> None:
        base = self._line
        before = self.facts.last_step
        if self.extract:
            marks: list[tuple[int, int]] = []  # (position, step) of step-bearing lines in this piece
            if self.steps_only:
                self._step_marks(piece, marks)
            else:
                self._metrics(piece, base, marks)
            marks.sort()
            positions = [p for p, _ in marks]

            recent = self._recent_step

            def step_at(pos: int) -> int | None:
                i = bisect.bisect_left(positions, pos)
                return marks[i - 1][1] if i else recent

            if self._standing is not None:
                self._credit_standing(marks)
            # issue 38: a value with no step line before it counts at the epoch stated last before its
            # line's end, else 1, 2, ... per name, in the order they appear
            stated = [(m.start(), int(m.group(1))) for m in _EPOCH.finditer(piece)]
            early = []
            for name, value, line, pos in self._pending:
                step = step_at(pos)
                if step is None:
                    early.append((name, value, line, pos))
                else:
                    _keep_later(self.facts.points.setdefault(name, {}), step, value, line)
            for name, value, line, pos in sorted(early, key=lambda p: p[3]):
                end = piece.find(b"\n", pos)
                end = len(piece) if end == -1 else end
                earlier = [epoch for at, epoch in stated if at < end]
                step = earlier[-1] if earlier else self._epoch
                if step is None:
                    step = self._per_epoch[name] = self._per_epoch.get(name, 0) + 1
                _keep_later(self.facts.points.setdefault(name, {}), step, value, line)
            if stated:
                self._epoch = stated[-1][1]
            self._pending.clear()
            last = max((s for _, s in marks), default=None)
            if marks:
                self._recent_step = marks[-1][1]
        else:
            # no per-line work: a rare event's step is found by looking back for a step line
            def step_at(pos: int) -> int | None:
                found = self._step_before(piece, pos)
                return before if found is None else found

            last = self._step_before(piece, len(piece))
            if last is not None:
                self._recent_step = last
            planned = self._planned_total(piece)
            if planned is not None:  # what metric extraction would have set
                self.facts.total_steps = planned
        self._tracebacks(piece, base)
        self._tail.append((piece, base))
        self._tail_bytes += len(piece)
        while self._tail_bytes - len(self._tail[0][0]) >= FATAL_TAIL:
            self._tail_bytes -= len(self._tail.popleft()[0])
        self._xla(piece, base, step_at)
        if self._head_bytes < HEAD:
            self._head_bytes += len(piece)
            self._head_end_line = base
            self._probes(piece, base)
            self._sharding(piece, base)
        if last is not None:
            self.facts.last_step = last if before is None else max(before, last)
        self._line = base + self._lines.resolve(piece, base)
        self._offset += len(piece)

    def _step_marks(self, piece: bytes, marks: list[tuple[int, int]]) -> None:
        """The plain pattern's step lines, as `_fields` reads them, without their metrics."""
        if self._plain is None:
            return
        facts, offset, out = self.facts, self._offset, self.step_marks
        for m in self._plain.finditer(piece):
            start, step = m.start(), int(m.group("step"))
            marks.append((start, step))
            out.append((offset + start, step))
            if m.group("total") is not None:
                facts.total_steps = int(m.group("total"))

    def _credit_standing(self, marks: list[tuple[int, int]]) -> None:
        """Step-less metric lines of several processes' interleaved output, credited in line
        order to the one step every process stands at (`Standing.only`); with processes at
        different steps the line is dropped: the last step line before it may be another
        process's, and crediting it there would depend on how the writes interleaved."""
        standing = self._standing
        assert standing is not None
        i, previous = 0, -1
        for name, value, line, pos in sorted(self._pending, key=lambda p: p[3]):
            while i < len(marks) and marks[i][0] < pos:
                if marks[i][0] != previous:  # one line matched by two patterns is one copy
                    standing.advance(marks[i][1])
                previous = marks[i][0]
                i += 1
            step = standing.only()
            if step is not None:
                _keep_later(self.facts.points.setdefault(name, {}), step, value, line)
        for pos, step in marks[i:]:
            if pos != previous:
                standing.advance(step)
            previous = pos
        self._pending.clear()

    def _hit(self, pos: int, text: str, step: int | None = None) -> Hit:
        """A hit at a byte position of the current piece; its line is set when the piece is done."""
        return self._lines.at(pos, Hit(0, text, step))

    def _step_before(self, piece: bytes, pos: int) -> int | None:
        """The step of the last step line that starts before pos in this piece, if any."""
        m = self._step_line(piece, pos)
        return None if m is None else int(m.group("step"))

    def _step_line(self, piece: bytes, pos: int, *, total: bool = False) -> re.Match[bytes] | None:
        """The plain pattern's match on the last step line before pos in this piece (with `total`,
        the last that gives the planned `step N/M` total), looking back over at most 64 lines
        that mention a step."""
        plain = self._plain
        if plain is None:
            return None
        end = pos
        gone: set[bytes] = set()  # words not found before `end`: not looked for again
        for _ in range(64):
            i = -1
            for word in (b"step", b"Step"):
                if word not in gone:
                    at = piece.rfind(word, max(i, 0), end)
                    if at == -1 and i == -1:
                        gone.add(word)
                    i = max(i, at)
            if i == -1:
                return None
            start = piece.rfind(b"\n", 0, i) + 1
            stop = piece.find(b"\n", i)
            m = plain.search(piece, start, len(piece) if stop == -1 else stop)
            if m is not None and m.start("step") < pos and (not total or m.group("total") is not None):
                return m
            end = start
        return None

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

    def _metrics(self, piece: bytes, base: int, marks: list[tuple[int, int]]) -> None:
        for compiled in self.patterns:
            if compiled.gate and not any(g in piece for g in compiled.gate):
                continue
            pattern = compiled.pattern
            if not pattern.json:
                self._fields(compiled, piece, base, marks)
                continue
            counter = _LineCounter(piece, base)
            for m in compiled.regex.finditer(piece):
                start = m.start()
                step = None
                try:
                    record = json.loads(m.group(0))
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                raw_step = record.get("step", record.get("global_step"))
                if isinstance(raw_step, int) and not isinstance(raw_step, bool):
                    step = raw_step
                pairs = [
                    (k, float(v)) for k, v in record.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in SKIP_NAMES
                ]
                if step is not None and not pattern.sequential:
                    marks.append((start, step))
                line = counter.at(start)
                for name, value in pairs:
                    self._point(name, value, step, line, start, pattern.sequential)

    def _point(self, name: str, value: float, step: int | None, line: int, start: int, sequential: bool) -> None:
        if step is not None:
            _keep_later(self.facts.points.setdefault(name, {}), step, value, line)
        elif sequential:
            n = self._sequence.get(name, 0) + 1
            self._sequence[name] = n
            self.facts.points.setdefault(name, {})[n] = (value, line)
        else:
            self._pending.append((name, value, line, start))

    def _fields(self, compiled: _Compiled, piece: bytes, base: int, marks: list[tuple[int, int]]) -> None:
        """A regex pattern's matches: the per-line loop of metric extraction, kept lean (no
        Python call per metric beyond `float`; names decoded once)."""
        facts = self.facts
        points = facts.points
        groups = compiled.groups
        pattern = compiled.pattern
        sequential = pattern.sequential
        has_step = "step" in groups
        has_epoch = "epoch" in groups
        has_name = "name" in groups
        has_body = "body" in groups
        own, value_of = compiled.own, compiled.value_of
        summary = pattern.name == "summary" and pattern in DEFAULT_PATTERNS
        plain = pattern.name == "plain"
        kv = _KV.findall
        skip = _SKIP_BYTES
        names = _NAMES
        count = piece.count
        line, last = base, 0
        for m in compiled.regex.finditer(piece):
            start = m.start()
            step = None
            if has_step:
                raw = m.group("step")
                if raw is not None:
                    step = int(raw)
                    if has_epoch and m.group("epoch") is not None and m.group("total"):
                        step = int(m.group("epoch")) * int(m.group("total")) + step
            if plain and m.group("total") is not None:
                facts.total_steps = int(m.group("total"))
            if has_name:
                found = [(m.group("name"), m.group("value"))]
                if summary and is_setting(found[0][0].decode("utf-8", "replace")):
                    continue
            elif own is not None:
                found = [(own, value_of(m))]
            else:
                found = kv(m.group("body") if has_body else m.group(0))
            if step is not None and not sequential:
                marks.append((start, step))
            line += count(b"\n", last, start)
            last = start
            for key, raw_value in found:
                if not has_name and own is None and (key in skip or skipped(key)):
                    continue
                name = names.get(key)
                if name is None:
                    name = metric_name(key)
                    if len(names) < 4096:
                        names[key] = name
                try:
                    value = float(raw_value)
                except (TypeError, ValueError):
                    continue
                if step is not None:
                    dest = points.get(name)
                    if dest is None:
                        dest = points[name] = {}
                    old = dest.get(step)
                    if old is None or old[1] <= line:
                        dest[step] = (value, line)
                else:
                    self._point(name, value, step, line, start, sequential)

    def _tracebacks(self, piece: bytes, base: int) -> None:
        facts = self.facts
        if self._in_traceback is not None:
            self._end_traceback(piece, 0)
        pos = piece.find(b"Traceback (most recent call last)")
        while pos != -1:
            facts.tracebacks.append(self._hit(pos, _line_text(piece, pos)))
            self._in_traceback = facts.tracebacks[-1]
            nl = piece.find(b"\n", pos)
            self._end_traceback(piece, nl + 1)
            pos = piece.find(b"Traceback (most recent call last)", nl + 1 if nl != -1 else len(piece))

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

    def _fatal(self, piece: bytes, base: int, start: int = 0) -> None:
        """Fatal lines in line order, each once, whatever the chunking: a line that several
        markers match takes the kind of the first of them in FATAL_MARKERS."""
        found: dict[int, tuple[int, str]] = {}  # line start -> (position of its marker, kind)
        for marker, kind in FATAL_MARKERS:
            pos = piece.find(marker, start)
            while pos != -1:
                found.setdefault(piece.rfind(b"\n", 0, pos) + 1, (pos, kind))
                nl = piece.find(b"\n", pos)
                pos = -1 if nl == -1 else piece.find(marker, nl)
        counter = _LineCounter(piece, base)
        for line_start in sorted(found):
            pos, kind = found[line_start]
            self.facts.fatal.append((kind, Hit(counter.at(pos), _line_text(piece, pos))))

    def _xla(self, piece: bytes, base: int, step_at) -> None:
        facts = self.facts
        if b"Counter: " in piece:
            for m in _COUNTER.finditer(piece):
                name = m.group(1).decode("utf-8", "replace")
                hit = self._hit(m.start(), m.group(2).decode(), step_at(m.start()))
                facts.counters[name] = hit
                if name == "UncachedCompile":
                    facts.counter_series.setdefault(name, []).append(hit)
            for m in _METRIC.finditer(piece):
                name = m.group(1).decode("utf-8", "replace")
                if name in ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime"):
                    hit = self._hit(m.start(), m.group(2).decode(), step_at(m.start()))
                    facts.counter_series.setdefault(name, []).append(hit)
            facts.reports = max(len(facts.counter_series.get("UncachedCompile", [])), facts.reports)
        for marker, target in ((b"Compilation Cause", facts.compile_causes), (b"pt-xla-profiler:", facts.profiler)):
            pos = piece.find(marker)
            if pos == -1:
                continue
            while pos != -1:
                target.append(self._hit(pos, _line_text(piece, pos), step_at(pos)))
                nl = piece.find(b"\n", pos)
                pos = -1 if nl == -1 else piece.find(marker, nl)

    def _sharding(self, piece: bytes, base: int, start: int = 0) -> None:
        if piece.find(b"devices=[", start) == -1:
            return
        counter = _LineCounter(piece, base)
        for m in _SHARDING.finditer(piece, start):
            ids = [x for x in m.group(2).split(b",") if x]
            self.facts.sharding.append(Hit(counter.at(m.start()), str(len(ids))))
            tiles = [x for x in m.group(1).split(b",") if x]
            if len(tiles) > 1 and piece.startswith(b" last_tile_dim_replicate", m.end()):
                self.facts.batch_splits.append(Hit(self.facts.sharding[-1].line, f"{int(tiles[0])} of {len(ids)}"))

    def _probes(self, piece: bytes, base: int, start: int = 0) -> None:
        pos = piece.find(b"workbench-probe ", start)
        if pos == -1:
            return
        counter = _LineCounter(piece, base)
        while pos != -1:
            end = piece.find(b"\n", pos)
            line = piece[piece.rfind(b"\n", 0, pos) + 1 : len(piece) if end == -1 else end]
            try:  # the whole line: a probe summary (trace version 2) is longer than a cited line's 300
                record = json.loads(line.split(b"workbench-probe ", 1)[1])
            except (ValueError, IndexError):
                record = None
            if isinstance(record, dict):
                self.facts.probes.append((Hit(counter.at(pos), _clip(line)), record))
            nl = piece.find(b"\n", pos)
            pos = -1 if nl == -1 else piece.find(b"workbench-probe ", nl)


_TOTAL_HINTS = (re.compile(rb"tep[ :=#]*+\d++/\d"), re.compile(rb"TEP[ :=#]*+\d++/\d"))
"""Where a `step N/M` line may be: patterns that start with a literal, so they scan at C speed."""
_SKIP_BYTES = frozenset(n.encode() for n in SKIP_NAMES)
_NAMES: dict[bytes, str] = {}
"""Metric names as read (bytes) and decoded, shared by all scans (at most 4096): a log repeats
a few names."""


class _Deferred:
    """Hits of one piece keep their byte position until the piece is done; then one pass over
    the piece's newlines gives every hit its line number and the piece its line count."""

    __slots__ = ("hits",)

    def __init__(self) -> None:
        self.hits: list[tuple[int, Hit]] = []

    def at(self, pos: int, hit: Hit) -> Hit:
        self.hits.append((pos, hit))
        return hit

    def resolve(self, piece: bytes, base: int) -> int:
        """Sets each hit's line; returns the number of newlines in the piece."""
        line, last = base, 0
        for pos, hit in sorted(self.hits, key=lambda item: item[0]):
            line += piece.count(b"\n", last, pos)
            last = pos
            hit.line = line
        self.hits.clear()
        return line - base + piece.count(b"\n", last)


class _LineCounter:
    """Line number of a position, counting newlines from the last position asked."""

    __slots__ = ("data", "base", "pos", "line")

    def __init__(self, data: bytes, base: int) -> None:
        self.data, self.base, self.pos, self.line = data, base, 0, base

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.line -= self.data.count(b"\n", pos, self.pos)
        else:
            self.line += self.data.count(b"\n", self.pos, pos)
        self.pos = pos
        return self.line


def _keep_later(series: dict[int, tuple[float, int]], step: int, value: float, line: int) -> None:
    """A step logged twice keeps its later line, whatever order the patterns ran in."""
    old = series.get(step)
    if old is None or old[1] <= line:
        series[step] = (value, line)


def _line_text(piece: bytes, pos: int) -> str:
    start = piece.rfind(b"\n", 0, pos) + 1
    end = piece.find(b"\n", pos)
    return _clip(piece[start : len(piece) if end == -1 else end])


def _clip(raw: bytes, limit: int = 300) -> str:
    text = raw.rstrip(b"\r").decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "…"


_STEP_ONLY_PATTERNS = ("plain", "summary")
"""Default patterns whose points `PointLines` finds without extraction: the others (sequential
Trainer dicts, JSON lines, progress bars) number or place their points in ways only a full pass
knows, so a log where their gates appear is extracted."""


def steps_only_suits(patterns: list[_Compiled], data: bytes) -> bool:
    """Whether a scan with `steps_only` plus `PointLines` gives what full extraction would: the
    default patterns alone, and none but `plain` and `summary` can match in `data`."""
    if [c.pattern for c in patterns] != list(DEFAULT_PATTERNS):
        return False
    return not any(g in data for c in patterns if c.pattern.name not in _STEP_ONLY_PATTERNS for g in c.gate)


class PointLines:
    """The log line a full extraction would cite for a metric point, found without extracting
    (issue 19): the last line that gives `name` at `step`, which is a step line of that step
    (`marks`, from a `steps_only` scan) whose pairs name it, or a summary line of that name whose
    last step line before it has that step. `line_of(offset)` numbers the line at a byte offset
    (from the stored sparse line index); `extract` is the full extraction's facts, for a name
    whose summary lines only a piece-by-piece pass places (a `valid...` name: see `_gated`)."""

    def __init__(self, data: bytes, marks: list[tuple[int, int]], patterns: list[_Compiled],
                 line_of: Callable[[int], int], extract: Callable[[], LogFacts]) -> None:
        self.data, self.marks, self.line_of, self._extract = data, marks, line_of, extract
        self._offsets = [pos for pos, _ in marks]
        self._by_step: dict[int, list[int]] | None = None
        self._plain = [c for c in patterns if c.pattern.name == "plain"]
        self._summary = next(c for c in patterns if c.pattern.name == "summary").regex
        self._extracted: LogFacts | None = None

    def line(self, name: str, step: int) -> int | None:
        if name in SKIP_NAMES or not name.isascii():
            return None  # never a pair's name: pairs and summary names are ASCII words
        if self._gated(name):
            if self._extracted is None:
                self._extracted = self._extract()
            found = self._extracted.points.get(name, {}).get(step)
            return None if found is None else found[1]
        best = max(self._step_line(name, step), self._summary_line(name, step))
        return None if best < 0 else self.line_of(best)

    @staticmethod
    def _gated(name: str) -> bool:
        """A `valid_`/`valid/` summary line holds none of the summary pattern's gates, so whether
        it is read depends on the other lines of its piece."""
        return name.startswith("valid")

    def _bounds(self, pos: int) -> tuple[int, int]:
        start = self.data.rfind(b"\n", 0, pos) + 1
        end = self.data.find(b"\n", pos)
        return start, len(self.data) if end == -1 else end + 1

    def _step_line(self, name: str, step: int) -> int:
        """Start of the last step line of `step` whose pairs give `name`, else -1."""
        if self._by_step is None:
            self._by_step = {}
            for pos, s in self.marks:
                self._by_step.setdefault(s, []).append(pos)
        raw = name.encode().rsplit(b"_", 1)[-1]  # `train_loss` is printed `train loss` too
        for pos in reversed(self._by_step.get(step, ())):
            start, end = self._bounds(pos)
            if raw in self.data[start:end]:
                facts = scan_chunks([self.data[start:end]], patterns=self._plain)
                if step in facts.points.get(name, {}):
                    return start
        return -1

    def _summary_line(self, name: str, step: int) -> int:
        """Start of the last summary line of `name` whose last step line before it has `step`
        (no step line before it: step 0), else -1."""
        if not re.match(r"(?:eval|val|valid|test|final)[_/]", name):
            return -1
        data, lead = self.data, b"\n" + name.encode()
        end = len(data)
        while True:
            at = data.rfind(lead, 0, end)
            start = at + 1 if at != -1 else (0 if data.startswith(lead[1:]) else -1)
            if start == -1:
                return -1
            _, stop = self._bounds(start)
            m = self._summary.match(data, start, stop - 1 if data[stop - 1 : stop] == b"\n" else stop)
            if m is not None and m.group("name") == lead[1:] and _number(m.group("value")):
                i = bisect.bisect_left(self._offsets, start)
                if (self.marks[i - 1][1] if i else 0) == step:
                    return start
            if start == 0:
                return -1
            end = at


def _number(raw: bytes) -> bool:
    try:
        float(raw)
    except ValueError:
        return False
    return True


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
