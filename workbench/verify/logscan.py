"""One streaming pass over a run's log: the evidence the verifier reads itself.

The log arrives as byte chunks (storage/logs.py's stored chunks, or a file read in blocks) and
is never held whole. Each chunk is cut at its last newline and the rest carried into the next
one, so every search sees whole lines. Rare markers (tracebacks, fatal errors, torch_xla's
metrics report and debug output, probe lines, sharding specs) are found in one pass over each
piece by a multi-pattern engine (workbench/verify/markers.py: Hyperscan, else google-re2);
Python only runs per hit, and only hits get line numbers.

Line numbers in the evidence are 1-based, as `grep -n` prints them.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import re
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workbench.verify.markers import Markers

_shapewalk: Any
try:  # the walk of step lines in C (issue 19), built with the package where a C compiler was found
    from workbench.verify import _shapewalk
except ImportError:  # not built: the shape's regex reads the lines (`_walk_regex`), about 10x slower
    _shapewalk = None

NUMBER = rb"[-+]?+(?:\d++\.?+\d*+|\.\d++)(?:[eE][-+]?+\d++)?+"
"""A number taken whole and never given back: a shorter one would be followed by a digit, a dot or
an exponent, which no pattern here accepts after a value."""
_KV = re.compile(rb"(?<![\w./-])[\d./-]*+([A-Za-z_][\w./-]*+)['\"]?\s*+(?:[=:]\s*+)?['\"]?(" + NUMBER + rb"|nan|inf)(?![\w.])")
"""`name value`, `name=value`, `'name': value` pairs. Linear on any line: a name is a whole run of
name characters (digits, dots, dashes and slashes before its first letter skipped), tried once
from the run's start, and no part gives back what it took, so nothing is read twice."""

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

FATAL_TAIL = 4 << 20
HEAD = 4 << 20
"""Probe lines and sharding specs are read from the first HEAD and last FATAL_TAIL bytes: the
probe writes at start and exit, and a run prints its mesh when it sets it up."""


class Standing(Protocol):
    """Where several processes stand in their steps (topology.Standing)."""

    def advance(self, step: int) -> None: ...
    def only(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Pattern:
    """A metric pattern: `regex` finds a line's metrics; named groups say where they are.

    - `step`: the step number (else the last step seen, or for `sequential`, a counter per name);
    - `total`: the run's planned number of steps (`step 3/40`);
    - `epoch` with `total`: global step = epoch * total + step (progress bars);
    - `body`: where `name value` / `name=value` / `'name': value` pairs are read;
    - `name` and `value`: exactly one metric.
    """

    name: str
    regex: str
    sequential: bool = False
    json: bool = False
    """The match is a JSON object; its numeric fields are metrics, `step` its step."""
    gate: tuple[str, ...] = ()
    """Literals of which a piece must hold one for the regex to run on it (a cheap pre-check)."""


DEFAULT_PATTERNS: tuple[Pattern, ...] = (
    # plain prints: "step 3/40 loss 0.41 grad_norm 1.2", "Step: 3, loss=0.41"
    Pattern("plain", r"(?i)\bstep\b[ :=#]*(?P<step>\d+)(?:/(?P<total>\d+))?(?P<body>[^\n]*)"),
    # Hugging Face Trainer: {'loss': 0.69, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}
    Pattern("hf_trainer", r"\{'(?P<body>[^\n{}]*)\}", sequential=True, gate=("{'",)),
    # JSON lines: {"step": 3, "loss": 0.41}
    Pattern("json_lines", r'(?m)^\{"[^\n]*\}[ \t\r]*$', json=True, gate=('{"',)),
    # tqdm postfix and PyTorch Lightning bars: "Epoch 0:  50%|###  | 16/32 [00:01<00:00, 12.3it/s, loss=0.693, v_num=0]"
    Pattern(
        "tqdm",
        r"(?:Epoch (?P<epoch>\d++)(?:[^\r\n|E]|E(?!poch \d))*+)?\|[^\r\n|]*+\| *(?P<step>\d+)/(?P<total>\d+) \["
        r"(?>[^\r\n\]|]*?(?:it/s|s/it))\]?,? ?(?P<body>[^\r\n\]|]*+)\]",
        gate=("it/s", "s/it"),
    ),
    # bare summary lines: "eval_accuracy 0.9014", "test/acc: 0.91"
    Pattern(
        "summary",
        r"(?m)^(?P<name>(?:eval|val|valid|test|final)[_/][\w/.-]++)[ \t]*+(?:[=:][ \t]*+)?"
        r"(?P<value>" + NUMBER.decode() + r")[ \t\r]*$",
        gate=("eval", "val_", "val/", "test", "final"),
    ),
)

_STEP_LINES_PLAIN = DEFAULT_PATTERNS[0].regex.replace("(?P<body>[^\\n]*)", "[^\\n]*").encode()
_STEP_LINES = re.compile(
    _STEP_LINES_PLAIN.replace(rb"[ :=#]*(?P<step>\d+)(?:/(?P<total>\d+))?[^\n]*",
                              rb"[ :=#]*+(?P<step>\d++)(?:/(?P<total>\d++))?+[^\n]*+"))
"""The plain pattern without its body: the same matches, read for their step and total alone.
Its quantifiers are possessive (a fifth faster in `findall`): none can give back what it took
and let the match succeed otherwise, since `[ :=#]` and digits are disjoint and `[^\n]*`, last,
never fails, so the matches are the greedy pattern's (`tests/test_logscan_steps.py`)."""
assert _STEP_LINES.pattern != _STEP_LINES_PLAIN and _STEP_LINES.groups == 2
_STEPS = re.compile(_STEP_LINES.pattern.replace(rb"(?:/(?P<total>\d++))?+", rb"(?:/\d++)?+"))
"""The same matches again, for their step alone: `findall` gives a list of the steps' bytes
instead of a tuple per line, a quarter faster."""
assert _STEPS.groups == 1

SKIP_NAMES = frozenset({"step", "epoch", "total", "it", "v_num", "global_step", "learning_rate", "lr"})
"""Numbers on a metric line that are not metrics of the run (kept out of comparisons)."""

_COUNTER = re.compile(rb"Counter: (\S+)\s+Value: (\d+)")
_METRIC = re.compile(rb"Metric: (\S+)\s+TotalSamples: (\d+)")
_SHARDING = re.compile(rb"devices=\[([\d,]+)\]([\d,]+)")
_EXCEPTION = re.compile(rb"^([A-Za-z_][\w.]*)(?::|$)")


class SeriesView(Mapping[str, dict[int, float]]):
    """`point_series()` as a mapping that builds a metric's step -> value dict when it is first
    read (its floats converted then), for a reader of a few metrics of a finished scan (verify's
    ladder); its names are the columns' as they are when asked."""

    __slots__ = ("_columns", "_built")

    def __init__(self, columns: MetricColumns) -> None:
        self._columns = columns
        self._built: dict[str, dict[int, float]] = {}

    def __getitem__(self, name: str) -> dict[int, float]:
        steps = self._built.get(name)
        if steps is None:
            if name not in self._columns.ops:
                raise KeyError(name)
            steps = self._built[name] = self._columns.metric_series(name)
        return steps

    def __contains__(self, name: object) -> bool:
        return name in self._columns.ops

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns.ops)

    def __len__(self) -> int:
        return len(self._columns.ops)

    def __repr__(self) -> str:
        return f"SeriesView({dict(self)!r})"


class _Run:
    """Points one piece's lines of one shape wrote, in line order: the steps, the lines
    (`base` + `at`, a line's index in the piece; both lists, or int64 arrays from the C walk) and
    each value column's text as read, joined by spaces (a value is never empty and holds no space),
    converted to floats when first asked."""

    __slots__ = ("steps", "base", "at", "raw", "_floats")

    def __init__(self, steps: Any, base: int, at: Any, raw: bytes) -> None:
        self.steps, self.base, self.at, self.raw = steps, base, at, raw
        self._floats: list[float] | None = None

    def floats(self) -> list[float]:
        if self._floats is None:
            self._floats = list(map(float, self.raw.split(b" ")))
            self.raw = b""
        return self._floats

    def value(self, i: int) -> float:
        return self._floats[i] if self._floats is not None else float(self.raw.split(b" ")[i])

    def lines(self) -> Iterator[int]:
        return map(self.base.__add__, self.at)


class MetricColumns:
    """The extracted points as they were written, by metric: each metric's writes in order, a
    `_Run` for a stretch of shaped lines (written as with `dict.update`), a (step, value, line)
    tuple for a point that replaces an earlier one of its step only from a later line
    (a step logged twice keeps its later line, whatever order the patterns ran in), a
    (step, value, line, None) tuple for one that replaces it anyway (a
    sequential pattern's). `ops`' order is the order in which metrics were first written, as
    `points`' keys were; `points()` replays the writes, so it is the dict the writes would have
    built, to the order of every key. No object is made per point of a shaped line while scanning."""

    __slots__ = ("ops", "_points")

    def __init__(self, points: dict[str, dict[int, tuple[float, int]]] | None = None) -> None:
        self.ops: dict[str, list[Any]] = {}
        self._points = points
        if points is not None:
            for name, steps in points.items():
                self.ops[name] = [(step, value, line, None) for step, (value, line) in steps.items()]

    def changed(self) -> None:
        self._points = None

    def keep_later(self, name: str, step: int, value: float, line: int) -> None:
        self._points = None
        self.ops.setdefault(name, []).append((step, value, line))

    def put(self, name: str, step: int, value: float, line: int) -> None:
        self._points = None
        self.ops.setdefault(name, []).append((step, value, line, None))

    def points(self) -> dict[str, dict[int, tuple[float, int]]]:
        if self._points is None:
            self._points = {name: self._replay(ops) for name, ops in self.ops.items()}
        return self._points

    def point(self, name: str, step: int) -> tuple[float, int] | None:
        """`points()[name][step]` (None where there is none), from the writes of that step alone:
        a run's last line of the step (a search of its steps), the tuples by their rule."""
        if self._points is not None:
            steps = self._points.get(name)
            return None if steps is None else steps.get(step)
        found = None
        for op in self.ops.get(name, ()):
            if type(op) is _Run:
                keys = op.steps
                if step in keys:
                    i = len(keys) - 1 - keys[::-1].index(step)
                    found = (op.value(i), op.base + op.at[i])
            elif op[0] == step and (len(op) == 4 or found is None or found[1] <= op[2]):
                found = (op[1], op[2])
        return found

    def series(self) -> dict[str, dict[int, float]]:
        """name -> step -> value."""
        return {name: self.metric_series(name) for name in self.ops}

    def metric_series(self, name: str) -> dict[int, float]:
        """One metric's step -> value; where it has only runs of shaped lines, straight from the
        columns (the last write of a step wins, at its first write's place: `dict.update`'s)."""
        if self._points is not None:
            return {s: v for s, (v, _) in self._points[name].items()}
        ops = self.ops[name]
        if all(type(op) is _Run for op in ops):
            steps: dict[int, float] = {}
            for op in ops:
                steps.update(zip(op.steps, op.floats()))
            return steps
        return {s: v for s, (v, _) in self._replay(ops).items()}

    @staticmethod
    def _replay(ops: list[Any]) -> dict[int, tuple[float, int]]:
        steps: dict[int, tuple[float, int]] = {}
        for op in ops:
            if type(op) is _Run:
                steps.update(zip(op.steps, zip(op.floats(), op.lines())))
            elif len(op) == 3:
                old = steps.get(op[0])
                if old is None or old[1] <= op[2]:
                    steps[op[0]] = (op[1], op[2])
            else:
                steps[op[0]] = (op[1], op[2])
        return steps


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
    points: dict[str, dict[int, tuple[float, int]]] = field(default_factory=lambda: MetricColumns())  # type: ignore[assignment]
    """name -> step -> (value, line). Reading it builds the dict from the columns the scan wrote
    (`MetricColumns`, kept in `vars(facts)["points"]`) when first asked after a write, then
    keeps it (changes made to it hold until the next write); assigning a dict replaces them."""
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
    reports: int = 0
    """How many metrics reports (blocks with `Counter:` lines) the log holds."""

    @property
    def metrics(self) -> MetricColumns:
        """The points as the scan wrote them."""
        return self.__dict__["points"]

    def point_series(self) -> dict[str, dict[int, float]]:
        """name -> step -> value, the values of `points`."""
        return self.metrics.series()

    def series_view(self) -> SeriesView:
        """`point_series()`, each metric built when first read."""
        return SeriesView(self.metrics)

    def point(self, name: str, step: int) -> tuple[float, int] | None:
        """(value, line) of one point, reading only `name`'s columns."""
        return self.metrics.point(name, step)

    def has_metric(self, name: str) -> bool:
        return name in self.metrics.ops


def _get_points(facts: LogFacts) -> dict[str, dict[int, tuple[float, int]]]:
    return facts.__dict__["points"].points()


def _set_points(facts: LogFacts, points: Any) -> None:
    facts.__dict__["points"] = points if isinstance(points, MetricColumns) else MetricColumns(points)


LogFacts.points = property(_get_points, _set_points, doc="name -> step -> (value, line), built on demand")  # type: ignore[assignment]
"""Set after the class is made, so that the dataclass keeps `points` as a field (in `vars(facts)`,
at its place) and `__init__` assigns it through the setter."""


class _Compiled:
    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.regex = re.compile(pattern.regex.encode())
        self.groups = self.regex.groupindex
        self.gate = tuple(g.encode() for g in pattern.gate)
        self._gate = _gate_markers(self.gate)

    def opens(self, piece: bytes) -> bool:
        """Whether one of the gate's literals is in the piece."""
        return self._gate is None or self._gate.found(piece)


_GATES: dict[tuple[bytes, ...], Markers | None] = {}


def _gate_markers(literals: tuple[bytes, ...]) -> Markers | None:
    """Gate literals found in one pass of the markers' engine rather than a `bytes.find` pass each
    (the default patterns' nine took 6 ms/MiB, a third of a plain log's extraction once its lines
    went by shape); None where there are none, or an empty one, found everywhere. Kept per set."""
    try:
        return _GATES[literals]
    except KeyError:  # read once: another thread may clear the dict meanwhile
        if len(_GATES) >= 256:
            _GATES.clear()
        gate = _GATES[literals] = Markers(literals) if literals and all(literals) else None
        return gate


def compile_patterns(extra: Iterable[dict[str, Any] | Pattern] = (), *, defaults: bool = True) -> list[_Compiled]:
    out = [_Compiled(p) for p in (DEFAULT_PATTERNS if defaults else ())]
    for spec in extra:
        pattern = spec if isinstance(spec, Pattern) else Pattern(
            name=str(spec.get("name", "custom")),
            regex=str(spec["regex"]),
            sequential=bool(spec.get("sequential", False)),
            json=bool(spec.get("json", False)),
            gate=tuple(spec.get("gate", ())),
        )
        out.append(_Compiled(pattern))
    return out


class LogScanner:
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
        self._shapes = first if SHAPES and first is not None and first.pattern == DEFAULT_PATTERNS[0] else None
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
            for name, value, line, pos in self._pending:
                step = step_at(pos)
                self.facts.metrics.keep_later(name, 0 if step is None else step, value, line)
            self._pending.clear()
            last = step_lines.highest()
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

    def _steps_only(self, piece: bytes) -> tuple[Callable[[int], int | None], int | None]:
        """The plain pattern's step lines, as `_fields` reads them but without their metrics: the
        step a hit at a position belongs to and the piece's highest step, as extraction has them.
        The steps come from one pass (`step_numbers`); a hit's step is the last step line's that
        starts before it: found among the starts the C loop kept, else looked for on the hit's
        line and the lines before it, each line read once per piece."""
        recent = self._recent_step
        steps, total, starts = step_numbers(piece)
        if not steps:
            return (lambda pos: recent), None
        if total is not None:  # the planned total
            self.facts.total_steps = total
        self._recent_step = steps[-1]
        kept = None if starts is None else memoryview(starts).cast("q")
        self.step_lines.append((self._offset, len(piece), steps, kept))
        if kept is not None:
            def step_of(pos: int) -> int | None:
                k = bisect.bisect_left(kept, pos)
                return steps[k - 1] if k else recent

            return step_of, max(steps)
        before: dict[int, int | None] = {}  # line start -> step of the last step line before it

        def step_at(pos: int) -> int | None:
            start = piece.rfind(b"\n", 0, pos) + 1
            m = _STEP_LINES.search(piece, start, _line_end(piece, start))
            if m is not None and m.start() < pos:
                return int(m.group(1))
            walked, step, line = [], None, start
            while line > 0:
                if line in before:
                    step = before[line]
                    break
                walked.append(line)
                previous = piece.rfind(b"\n", 0, line - 1) + 1
                m = _STEP_LINES.search(piece, previous, line)
                if m is not None:
                    step = int(m.group(1))
                    break
                line = previous
            for line in walked:
                before[line] = step
            return recent if step is None else step

        return step_at, max(steps)

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
                self.facts.metrics.keep_later(name, step, value, line)
        for pos, step in marks[i:]:
            if pos != previous:
                standing.advance(step)
            previous = pos
        self._pending.clear()

    def _hit(self, pos: int, text: str, step: int | None = None) -> Hit:
        """A hit at a byte position of the current piece; its line is set when the piece is done."""
        return self._lines.at(pos, Hit(0, text, step))

    def _step_before(self, piece: bytes, pos: int, walks: dict[int, tuple[re.Match[bytes] | None, int]]) -> int | None:
        """The step of the last step line that starts before pos in this piece, if any."""
        m = self._step_line(piece, pos, walks=walks)
        return None if m is None else int(m.group("step"))

    def _step_line(self, piece: bytes, pos: int, *, total: bool = False,
                   walks: dict[int, tuple[re.Match[bytes] | None, int]] | None = None) -> re.Match[bytes] | None:
        """The plain pattern's match on the last step line before pos in this piece (with `total`,
        the last that gives the planned `step N/M` total), looking back over at most 64 lines
        that mention a step.

        `walks` (without `total`) keeps, for the start of each line looked at that does not hold
        `pos`, where the look back from that line ended: (the match, how many lines it read from
        there, that line included), or (None, 0) where it found none; a later look back that reaches
        the line ends there without reading the lines again (hits close together, a metrics report's
        lines, share their look back)."""
        plain = self._plain
        if plain is None:
            return None
        end = pos
        gone: set[bytes] = set()  # words not found before `end`: not looked for again
        walked: list[tuple[int, int]] = []  # (line start, its place in this look back) of lines to remember
        for n in range(1, 65):
            i = -1
            for word in (b"step", b"Step"):
                if word not in gone:
                    at = piece.rfind(word, max(i, 0), end)
                    if at == -1 and i == -1:
                        gone.add(word)
                    i = max(i, at)
            if i == -1:
                if walks is not None:
                    for line, _ in walked:
                        walks[line] = (None, 0)
                return None
            start = piece.rfind(b"\n", 0, i) + 1
            stop = piece.find(b"\n", i)
            if walks is not None and not total and stop != -1 and stop < pos:
                known = walks.get(start)
                if known is not None:
                    m, more = known
                    for line, place in walked:
                        walks[line] = (m, 0 if m is None else n - 1 + more - place + 1)
                    return m if m is not None and n - 1 + more <= 64 else None
                walked.append((start, n))
            m = plain.search(piece, start, len(piece) if stop == -1 else stop)
            if m is not None and m.start("step") < pos and (not total or m.group("total") is not None):
                if walks is not None:
                    for line, place in walked:
                        walks[line] = (m, n - place + 1)
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

    def _metrics(self, piece: bytes, base: int, marks: list[tuple[int, int]]) -> _Shaped | None:
        """Each pattern's points, pattern after pattern (a later pattern's point on the same line
        wins). The default plain pattern, when it runs first, goes by shape (`_shaped`) and gives
        its step lines back by line rather than in `marks`."""
        shaped = None
        gates = self._gates
        open_gates = gates is None or gates.found(piece)
        for compiled in self.patterns:
            if compiled.gate and not (open_gates and compiled.opens(piece)):
                continue
            pattern = compiled.pattern
            if compiled is self._shapes:
                shaped = self._shaped(compiled, piece, base, marks)
                continue
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
        return shaped

    def _shaped(self, compiled: _Compiled, piece: bytes, base: int, marks: list[tuple[int, int]]) -> _Shaped | None:
        """The plain pattern's points by the shape of a typical step line (`_Shape`): one walk of
        the piece (`_walk`, in C, else `_walk_regex`) gives the shape's lines as columns, steps as
        ints and values kept as text (`_Run`); any other line that holds a step line is read alone by
        `_fields`. Points are written in line order, as `_fields` over the piece writes them, so
        `MetricColumns` builds the same dicts, in the same order. Where no line has a shape, the
        piece goes to `_fields` whole."""
        regex = compiled.regex
        middle = piece.find(b"\n", len(piece) // 2) + 1  # a typical line: the piece's first may be a header
        m = regex.search(piece, middle) if middle else None
        if m is None:  # the first half (a line that starts there ends there)
            m = regex.search(piece, 0, middle or len(piece))
        if m is None:
            return None  # no step line
        start = piece.rfind(b"\n", 0, m.start()) + 1
        end = piece.find(b"\n", m.start())
        line = piece[start : len(piece) if end == -1 else end]
        shape = self._shape or _RECENT_SHAPE[0]
        if shape is None or not shape.covers(line):
            shape = _shape_of(line, regex) if len(piece) >= SHAPE_FROM else None
            if shape is None:
                self._fields(compiled, piece, base, marks)
                return None
        self._shape = _RECENT_SHAPE[0] = shape
        walked = _walk(shape, piece)
        if walked is None:
            walked = _walk_regex(shape, piece)
        rows, starts, at, steps, highest, others, text = walked
        alone: list[tuple[int, int, int]] = []  # (line in piece, position on it, step) of other step lines
        facts, ops, total = self.facts, self.facts.metrics.ops, shape.total
        done = 0
        for i, other in [*others, (rows, b"")]:
            if i < rows and regex.search(other) is None:
                continue
            upto = bisect.bisect_left(at, i, done)
            if upto > done:  # the shape's lines before line i
                whole = done == 0 and upto == len(at)
                keys = steps if whole else steps[done:upto]
                where = at if whole else at[done:upto]
                for column, name in enumerate(shape.names):
                    dest = ops.get(name)
                    if dest is None:
                        dest = ops[name] = []
                    dest.append(_Run(keys, base, where, text(column, done, upto)))
                if total:  # the planned total of the last of them (not a column: read from its line)
                    facts.total_steps = _total_on(piece, at[upto - 1], rows)
                done = upto
            if i < rows:
                found_alone: list[tuple[int, int]] = []
                self._fields(compiled, other, base + i, found_alone)
                alone += [(i, pos, step) for pos, step in found_alone]
        facts.metrics.changed()
        return _Shaped(at, steps, highest, shape.offset, alone, rows - 1, starts)

    def _point(self, name: str, value: float, step: int | None, line: int, start: int, sequential: bool) -> None:
        if step is not None:
            self.facts.metrics.keep_later(name, step, value, line)
        elif sequential:
            n = self._sequence.get(name, 0) + 1
            self._sequence[name] = n
            self.facts.metrics.put(name, n, value, line)
        else:
            self._pending.append((name, value, line, start))

    def _fields(self, compiled: _Compiled, piece: bytes, base: int, marks: list[tuple[int, int]]) -> None:
        """A regex pattern's matches: the per-line loop of metric extraction, kept lean (no
        Python call per metric beyond `float`; names decoded once)."""
        facts = self.facts
        facts.metrics.changed()
        ops = facts.metrics.ops
        groups = compiled.groups
        pattern = compiled.pattern
        sequential = pattern.sequential
        has_step = "step" in groups
        has_epoch = "epoch" in groups
        has_name = "name" in groups
        has_body = "body" in groups
        plain = pattern.name == "plain"
        kv = _KV.findall
        skip = _SKIP_BYTES
        names = _NAMES
        count = piece.count
        line, last = base, 0
        if SUMMARY_AT_LEADS and pattern == _SUMMARY:
            matches: Iterable[re.Match[bytes]] = _matches_at(compiled.regex, piece, _summary_starts(piece))
        else:
            matches = compiled.regex.finditer(piece)
        for m in matches:
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
            else:
                found = kv(m.group("body") if has_body else m.group(0))
            if step is not None and not sequential:
                marks.append((start, step))
            line += count(b"\n", last, start)
            last = start
            for key, raw_value in found:
                if not has_name and key in skip:
                    continue
                name = names.get(key)
                if name is None:
                    name = key.decode("utf-8", "replace")
                    if len(names) < 4096:
                        names[key] = name
                try:
                    value = float(raw_value)
                except ValueError:
                    continue
                if step is not None:
                    dest = ops.get(name)
                    if dest is None:
                        dest = ops[name] = []
                    dest.append((step, value, line))  # kept if from a later line (`MetricColumns`)
                else:
                    self._point(name, value, step, line, start, sequential)

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

    def _probes(self, piece: bytes, base: int, positions: list[int], start: int = 0) -> None:
        counter = _LineCounter(piece, base)
        for pos in _first_on_lines(piece, positions, start):
            text = _line_text(piece, pos)
            try:
                record = json.loads(text.split("workbench-probe ", 1)[1])
            except (ValueError, IndexError):
                record = None
            if isinstance(record, dict):
                self.facts.probes.append((Hit(counter.at(pos), _clip(text.encode())), record))


def _matches_at(regex: re.Pattern[bytes], piece: bytes, positions: list[int]) -> Iterator[re.Match[bytes]]:
    """`regex.finditer(piece)` for a regex whose every match starts at one of `positions`
    (ascending; where its leading literal occurs): tried there alone, past the last match's end."""
    end = 0
    match = regex.match
    for pos in positions:
        if pos >= end:
            m = match(piece, pos)
            if m is not None:
                yield m
                end = m.end()


def _first_on_lines(piece: bytes, positions: list[int], start: int = 0) -> Iterator[int]:
    """Of a marker's positions (ascending), the first on each line, from `start` on."""
    allowed = start
    for pos in positions:
        if pos < allowed:
            continue
        yield pos
        allowed = piece.find(b"\n", pos)
        if allowed == -1:
            return


_MARKERS: list[Markers] = []


def _lines_back(data: bytes, offset: int, end: int) -> Iterator[re.Match[bytes] | None]:
    """For each line between `offset` and `end` (line starts), last first, the plain pattern's
    step-line match on it, else None (a step line cannot span lines, so a search from a line's
    start finds what a pass over the whole piece finds on that line)."""
    while end > offset:
        start = max(data.rfind(b"\n", offset, end - 1) + 1, offset)
        yield _STEP_LINES.search(data, start, end)
        end = start


def _last_step_line(piece: bytes) -> re.Match[bytes] | None:
    """The plain pattern's match on the piece's last step line, if one of its last 64 lines is one."""
    return next(filter(None, itertools.islice(_lines_back(piece, 0, len(piece)), 64)), None)


def _step_numbers(piece: bytes) -> tuple[list[int], int | None, bytes | None]:
    """The steps of the piece's step lines (`_STEP_LINES`' matches, one a line at most) as ints, and
    the `/total` of the last of them that has one (None: none has). The regex engine's way: where
    the C module is built, `step_numbers` is its twin, which makes no bytes object per line and
    also gives where each match starts (here None: `PointLines` finds the few it cites)."""
    last = _last_step_line(piece)
    if last is not None and last.group("total") is not None:  # the last line's: steps alone
        return list(map(int, _STEPS.findall(piece))), int(last.group("total")), None
    found = _STEP_LINES.findall(piece)
    return [int(step) for step, _ in found], next((int(total) for _, total in reversed(found) if total), None), None


try:
    from workbench.verify._steplines import step_numbers
except ImportError:  # built without a C compiler
    step_numbers = _step_numbers


def _markers() -> Markers:
    """The scan's engine, compiled once per process (and thread: `Markers`); and the gates of the
    default patterns that `steps_only_suits` refuses."""
    if not _MARKERS:
        _MARKERS.append(Markers(MARKERS))
        _MARKERS.append(Markers([g.encode() for p in DEFAULT_PATTERNS if p.name not in _STEP_ONLY_PATTERNS
                                 for g in p.gate]))
    return _MARKERS[0]


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

    def resolve(self, piece: bytes, base: int, known: dict[int, int] | None = None, newlines: int | None = None) -> int:
        """Sets each hit's line; returns the number of newlines in the piece. `known` gives the
        newlines before some positions and `newlines` the piece's, where they were counted."""
        line, last = base, 0
        if self.hits:
            for pos, hit in sorted(self.hits, key=lambda item: item[0]):
                before = known.get(pos) if known else None
                line = base + before if before is not None else line + _newlines(piece, last, pos)
                last = pos
                hit.line = line
            self.hits.clear()
        return newlines if newlines is not None else line - base + _newlines(piece, last, len(piece))


_NUMPY_FROM = 8 << 10
"""Below this many bytes `bytes.count` counts newlines faster than numpy's call overhead allows;
above, numpy's vectorised compare and count is about 2.5x faster (0.13 against 0.33 ms/MiB)."""
_NUMPY_AFTER = 350 << 20
"""Bytes counted with `bytes.count` in long stretches before numpy is imported for them, where no
one imported it: the import (60-100 ms, in every verify worker) costs what numpy saves on about
350 MiB, so a process pays for it once it has counted that much, and a short run never does."""
_numpy: list[Any] = []
_counted = [0]


def _newlines(data: bytes | bytearray, start: int, end: int) -> int:
    """The number of newlines in data[start:end]: with numpy for long stretches once it is
    imported (see `_NUMPY_AFTER`)."""
    if end - start >= _NUMPY_FROM:
        if not _numpy:
            np = sys.modules.get("numpy")
            if np is None and _counted[0] >= _NUMPY_AFTER:
                try:
                    import numpy as np
                except ImportError:  # it comes with krippendorff; without it, bytes.count throughout
                    _counted[0] = -(1 << 62)
            if np is None:
                _counted[0] += end - start
                return data.count(b"\n", start, end)
            _numpy.append(np)
        np = _numpy[0]
        return int(np.count_nonzero(np.frombuffer(data, np.uint8, end - start, start) == 10))
    return data.count(b"\n", start, end)


class _LineCounter:
    """Line number of a position, counting newlines from the last position asked."""

    __slots__ = ("data", "base", "pos", "line")

    def __init__(self, data: bytes, base: int) -> None:
        self.data, self.base, self.pos, self.line = data, base, 0, base

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.line -= _newlines(self.data, pos, self.pos)
        else:
            self.line += _newlines(self.data, self.pos, pos)
        self.pos = pos
        return self.line


SUMMARY_AT_LEADS = True
"""The default summary pattern tried only at the line starts that `_summary_starts` finds, where
`finditer` ran it over the piece (a regex pass, some 5 ms/MiB, in every piece whose gate opens:
a study's logs end with `eval_accuracy`); False runs `finditer`, which tests compare it with."""
_SUMMARY = DEFAULT_PATTERNS[4]
assert _SUMMARY.regex.startswith("(?m)^(?P<name>(?:eval|val|valid|test|final)[_/]")
_SUMMARY_LEADS: list[Markers] = []


def _summary_starts(piece: bytes) -> list[int]:
    """The starts of the lines that begin with `eval`, `val` (`valid` too), `test` or `final`, in
    order: where the summary pattern (`(?m)^` then one of these) can match. One pass of the
    markers' engine over the piece for the four words after a newline, plus the piece's start."""
    if not _SUMMARY_LEADS:
        _SUMMARY_LEADS.append(Markers([b"\neval", b"\nval", b"\ntest", b"\nfinal"]))
    starts = [p + 1 for found in _SUMMARY_LEADS[0].scan(piece) for p in found]
    starts.sort()
    if piece.startswith((b"eval", b"val", b"test", b"final")):
        starts.insert(0, 0)
    return starts


SHAPES = True
"""The plain pattern's lines read by shape (`LogScanner._shaped`); False reads every line by the
general path (`_fields`), which tests compare it with."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """A step line's shape: its text with the step and each value a group (the `/total`, where
    there is one, matched but not kept: `_total_on` reads it), the other digit runs outside names
    any run of digits (before the step, one as long, so the step is
    `offset` bytes into every line). `regex` matches each line of a piece: a line of the shape
    gives its groups, any other its text in the last group.

    Why a line of the shape gives what `_fields` reads from it: it is the sample line with digit
    runs of other lengths, and neither the plain pattern nor `_KV` tells one digit from another or
    runs of different lengths apart (every class either holds all digits or none; a digit only
    ever meets a loop that takes the whole run, and nothing gives a run back), so both match the
    same way at the same places: one step line, the same names, values in the same groups.
    Built from possessive pieces and literals, tried at line starts only: linear."""

    regex: re.Pattern[bytes]
    offset: int
    total: bool
    values: tuple[int, ...]
    """Columns of the values kept (SKIP_NAMES' are matched, not kept)."""
    names: tuple[str, ...]
    ops: tuple[bytes | int, ...]
    """The shape alternative of `regex`, part by part, for the compiled walk (`_shapewalk.walk`):
    literal bytes, `_ANY_DIGITS` (`\\d++`), n > 0 (`\\d{n}`), `_OPEN` and `_CLOSE` (a group)."""

    def covers(self, line: bytes) -> bool:
        m = self.regex.match(line)
        return m is not None and bool(m.group(1))


@dataclass(frozen=True, slots=True)
class _Shaped:
    """The step lines a piece gave by shape: lines (index in the piece) and steps of the shape's,
    and (line, position on it, step) of the others."""

    at: Sequence[int]
    steps: Sequence[int]
    highest: int | None
    offset: int
    alone: list[tuple[int, int, int]]
    newlines: int
    """How many newlines the piece holds: the shape's `findall` gives one row a line start."""
    starts: Sequence[int] | None = None
    """Where each line starts (`_line_starts`), where the walk gave them."""


_DIGIT_RUN = re.compile(rb"\d++")
_SHAPES: dict[bytes, _Shape] = {}
_RECENT_SHAPE: list[_Shape | None] = [None]
"""The shape a scan used last, in any scanner of the process: the next log's scanner tries it first
(a study's logs mostly share one), as a scanner tries its last piece's. Any shape that covers a
piece's typical line reads it as the general path would (`_Shape`), so which one is tried only
changes how soon one is found."""
_ANY_DIGITS, _OPEN, _CLOSE = 0, -1, -2
SHAPE_LINE = 2048
"""Longest sample line that is given a shape (the regex grows with it)."""
SHAPE_FROM = 8 << 10
"""Shortest piece a new shape is made for: making one (about 0.2-0.3 ms, mostly compiling its
regex) costs what the general path takes on some 100 step lines; a known shape is used on any."""


def _digits(text: bytes, ops: list[bytes | int], *, fixed: bool = False) -> bytes:
    """`text` as a regex: literal, but each digit run any run of digits (`fixed`: as long); its ops
    (`_Shape.ops`) appended to `ops`."""
    out: list[bytes] = []
    last = 0
    for m in _DIGIT_RUN.finditer(text):
        out += (re.escape(text[last : m.start()]), b"\\d{%d}" % (m.end() - m.start()) if fixed else rb"\d++")
        _literal(ops, text[last : m.start()])
        ops.append(m.end() - m.start() if fixed else _ANY_DIGITS)
        last = m.end()
    out.append(re.escape(text[last:]))
    _literal(ops, text[last:])
    return b"".join(out)


def _literal(ops: list[bytes | int], text: bytes) -> None:
    """A literal op, joined to the one before it (a line from a bytearray's piece is one: made bytes)."""
    if text:
        last = ops[-1] if ops else None
        if type(last) is bytes:
            ops[-1] = last + text
        else:
            ops.append(bytes(text))


_Walked = tuple[int, Sequence[int] | None, Sequence[int], Sequence[int], int | None, list[tuple[int, bytes]],
                Callable[[int, int, int], bytes]]
"""A piece read by shape: how many rows the shape's `findall` gives (a line each, a piece that ends
with a newline an empty last one); where each starts (from the walk; None from the regex); the
shape's lines' indexes in the piece and their steps (lists, or int64 arrays from the walk: no
Python int per line until one is read), the highest step; (index, text) of the other lines the
plain pattern may match (non-empty; the walk gives only those with its word `step`); a function of
(value column, first, end) that gives the column's text on the shape's lines first..end-1, joined
by spaces (a value is never empty and holds no space)."""

WALK = True
"""The shape's lines read by the compiled walk (`_shapewalk`, where it was built); False reads them
by the shape's regex (`_walk_regex`), which tests compare it with."""
_STEP_WORD = b"step"
"""The word every match of the plain pattern holds, in any case (`(?i)\\bstep\\b`): the walk gives
only the other lines that hold it, the only ones `_shaped` reads alone (a test checks the pattern)."""


def _walk(shape: _Shape, piece: bytes) -> _Walked | None:
    """The compiled walk of the piece (`_shapewalk.walk`); None where it is not built or not used,
    or where a step has more than 18 digits."""
    if _shapewalk is None or not WALK:
        return None
    found = _shapewalk.walk(piece, shape.ops, _STEP_WORD)
    if found is None:
        return None
    rows, starts, at, steps, highest, spans, others = found
    join, count = _shapewalk.join, len(shape.values)
    return (rows, array("q", starts), array("q", at), array("q", steps), highest, others,
            lambda column, first, end: join(piece, spans, count, column, first, end))


def _walk_regex(shape: _Shape, piece: bytes) -> _Walked:
    """What `_walk` gives, from the shape's regex: its `findall` gives every line of the piece, the
    shape's lines as columns: steps converted a column at a time, values joined when asked for."""
    found_rows = shape.regex.findall(piece)
    rows = len(found_rows)
    found = list(map(operator.itemgetter(0), found_rows))  # a shape line's step, else b""
    at = list(itertools.compress(range(rows), found))
    steps = list(map(int, itertools.compress(found, found)))
    # a column at a time (not zip(*rows): its thousands of live iterators cost collections)
    values = [list(itertools.compress(map(operator.itemgetter(k), found_rows), found)) for k in shape.values]
    texts = list(map(operator.itemgetter(-1), found_rows))
    others = list(zip(itertools.compress(range(rows), texts), itertools.compress(texts, texts)))
    join = b" ".join

    def text(column: int, first: int, end: int) -> bytes:
        values_of = values[column]
        return join(values_of if first == 0 and end == len(values_of) else values_of[first:end])

    return rows, None, at, steps, max(steps, default=None), others, text


def _shape_of(line: bytes, plain: re.Pattern[bytes]) -> _Shape | None:
    """The shape of a step line (without its newline), if it has one; kept (the last 256)."""
    m = plain.search(line) if len(line) <= SHAPE_LINE else None
    if m is None:
        return None
    body = m.group("body")
    total = m.group("total") is not None
    ops: list[bytes | int] = []  # each part of the regex below as it is made, in its order
    parts = [_digits(line[: m.start("step")], ops, fixed=True), rb"(\d++)", rb"/\d++" if total else b""]
    ops += (_OPEN, _ANY_DIGITS, _CLOSE)
    if total:
        ops += (b"/", _ANY_DIGITS)
    names: list[str] = []
    values: list[int] = []
    last = 0
    for kv in _KV.finditer(body):
        key = kv.group(1)
        parts += (_digits(body[last : kv.start(1)], ops), re.escape(key), re.escape(body[kv.end(1) : kv.start(2)]))
        _literal(ops, body[kv.start(1) : kv.start(2)])
        keep = key not in _SKIP_BYTES
        if keep:
            ops.append(_OPEN)
        value = _digits(kv.group(2), ops)
        if keep:
            ops.append(_CLOSE)
            values.append(1 + len(values))
            names.append(key.decode("utf-8", "replace"))
            parts.append(b"(" + value + b")")
        else:
            parts.append(b"(?:" + value + b")")
        last = kv.end(2)
    parts.append(_digits(body[last:], ops))
    source = b"(?m)^(?:" + b"".join(parts) + rb"|([^\n]*+))$"
    shape = _SHAPES.get(source)
    if shape is None:
        if len(_SHAPES) >= 256:
            _SHAPES.clear()
        shape = _SHAPES[source] = _Shape(re.compile(source), m.start(), total, tuple(values), tuple(names),
                                         tuple(ops))
    return shape


class _Marks:
    """A piece's step lines, for `step_at` and the steps to credit: (position, step) pairs found by
    the general path and the lines `_Shaped` gave by their index in the piece, given positions
    only when a position is asked for (a marker's hit, a step-less point, several processes)."""

    __slots__ = ("piece", "found", "shaped", "_sorted", "_lists", "_counter", "_counted", "known")

    def __init__(self, piece: bytes, found: list[tuple[int, int]], shaped: _Shaped | None) -> None:
        self.piece, self.found, self.shaped = piece, found, shaped
        self._sorted: list[tuple[int, int]] | None = None
        self._lists: tuple[list[int], list[int]] | None = None
        self._counter: _LineCounter | None = None
        self._counted = 0
        self.known: dict[int, int] = {}
        """Positions asked for, and the newlines before each (the hits' lines, for `_Deferred`)."""

    def step_before(self, pos: int, recent: int | None) -> int | None:
        """The step of the last of them that starts before `pos` (none: `recent`). Where the
        shape's lines are all there are, by the line `pos` is on: its index (newlines counted
        from the last position asked) among the shape's lines, and on that line whether the step
        starts before `pos`; the positions of all of them are made only once the counting has
        read twice the piece (hits far apart, asked in no order)."""
        shaped = self.shaped
        if (self._lists is None and shaped is not None and not self.found and not shaped.alone
                and (shaped.starts is not None or self._counted <= 2 * len(self.piece))):
            if shaped.starts is not None:  # the walk's line starts: the last at or before pos
                line = self.known[pos] = bisect.bisect_right(shaped.starts, pos) - 1
            else:
                counter = self._counter
                if counter is None:
                    counter = self._counter = _LineCounter(self.piece, 0)
                self._counted += abs(pos - counter.pos)
                line = self.known[pos] = counter.at(pos)
            at = shaped.at
            i = bisect.bisect_left(at, line)
            if i < len(at) and at[i] == line and pos - (self.piece.rfind(b"\n", 0, pos) + 1) > shaped.offset:
                i += 1
            return shaped.steps[i - 1] if i else recent
        positions, steps = self.lists()
        i = bisect.bisect_left(positions, pos)
        return steps[i - 1] if i else recent

    def pairs(self) -> list[tuple[int, int]]:
        """All of them, in position order (and step order at one position)."""
        if self._sorted is None:
            pairs, shaped = self.found, self.shaped
            if shaped is not None:
                starts = _line_starts(self.piece) if shaped.starts is None else shaped.starts
                pairs += zip(self._positions(starts), shaped.steps)
                pairs += [(starts[i] + pos, step) for i, pos, step in shaped.alone]
            pairs.sort()
            self._sorted = pairs
        return self._sorted

    def _positions(self, starts: Sequence[int]) -> list[int]:
        shaped = self.shaped
        assert shaped is not None
        return list(map(operator.add, map(starts.__getitem__, shaped.at), itertools.repeat(shaped.offset)))

    def lists(self) -> tuple[list[int], list[int]]:
        """Positions and steps, in that order."""
        if self._lists is None:
            shaped = self.shaped
            if shaped is not None and not self.found and not shaped.alone:
                starts = _line_starts(self.piece) if shaped.starts is None else shaped.starts
                self._lists = (self._positions(starts), shaped.steps)
            else:
                pairs = self.pairs()
                self._lists = ([p for p, _ in pairs], [s for _, s in pairs])
        return self._lists

    def highest(self) -> int | None:
        """The highest step, None where there is none."""
        shaped = self.shaped
        steps = [s for _, s in self.found]
        if shaped is not None:
            steps += [s for _, _, s in shaped.alone]
            if shaped.highest is not None:
                steps.append(shaped.highest)
        return max(steps, default=None)

    def last(self) -> int:
        """The step of the last of them (by position, then step)."""
        shaped = self.shaped
        if shaped is not None and not self.found:  # one step line a line at most: the last line's
            if shaped.at and (not shaped.alone or shaped.at[-1] > shaped.alone[-1][0]):
                return shaped.steps[-1]
            return shaped.alone[-1][2]
        return self.pairs()[-1][1]


def _total_on(piece: bytes, index: int, rows: int) -> int:
    """The `step N/M` total on the piece's line `index` (from 0), a step line of a shape with a
    total, as the plain pattern reads it; `rows` is how many lines a shape's `findall` gave (a
    piece that ends with a newline has an empty last one). Found from the piece's end where the
    line is among its last 64, else from the starts of all its lines."""
    back = rows - 1 - index
    if piece.endswith(b"\n") and back <= 64:
        start = len(piece)
        for _ in range(back):
            start = piece.rfind(b"\n", 0, start - 1) + 1
    else:
        start = _line_starts(piece)[index]
    m = _STEP_LINES.search(piece, start, _line_end(piece, start))
    assert m is not None and m.group(2) is not None, "a shape with a total gave a line without one"
    return int(m.group(2))


def _line_starts(piece: bytes) -> list[int]:
    """Where each line of the piece starts: with numpy where `_newlines` counts with it, else
    from the lengths of the lines."""
    if _numpy and len(piece) >= _NUMPY_FROM:
        np = _numpy[0]
        return [0, *(np.flatnonzero(np.frombuffer(piece, np.uint8) == 10) + 1).tolist()]
    return list(itertools.accumulate(map((1).__add__, map(len, piece.split(b"\n"))), initial=0))


def _line_end(piece: bytes, start: int) -> int:
    end = piece.find(b"\n", start)
    return len(piece) if end == -1 else end


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
    if not _MARKERS:
        _markers()
    return not _MARKERS[1].found(data)


NEAR_END = 64
"""A cited step line this near an end of its piece is found from that end; deeper in, all of the
piece's are (`PointLines._nth_line`), unless its step is on no other step line of the piece."""

FIND_BY_STEP = True
"""A cited step line deep in its piece whose step no other step line of the piece has is found by
that step, in a window around where it would be (`PointLines._only_line_of`), not by finding all
of the piece's step lines. Off, every such line is found among all (tests compare the two)."""


class PointLines:
    """The log line a full extraction would cite for a metric point, found without extracting
    (issue 19): the last line that gives `name` at `step`, which is a step line of that step
    (`step_lines`, from a `steps_only` scan) whose pairs name it, or a summary line of that name whose
    last step line before it has that step. `line_of(offset)` numbers the line at a byte offset
    (from the stored sparse line index); `extract` is the full extraction's facts, for a name
    whose summary lines only a piece-by-piece pass places (a `valid...` name: see `_gated`)."""

    def __init__(self, data: bytes, step_lines: list[tuple[int, int, list[int], Sequence[int] | None]], patterns: list[_Compiled],
                 line_of: Callable[[int], int], extract: Callable[[], LogFacts]) -> None:
        self.data, self.step_lines, self.line_of, self._extract = data, step_lines, line_of, extract
        self._starts = [offset for offset, _, _, _ in step_lines]
        self._plain = next(c for c in patterns if c.pattern.name == "plain").regex
        self._summary = next(c for c in patterns if c.pattern.name == "summary").regex
        self._extracted: LogFacts | None = None
        self._all: dict[int, list[int]] = {}  # piece -> where each of its step lines starts

    def _nth_line(self, k: int, i: int) -> int:
        """Where the i-th step line (from 0) of the k-th piece with step lines starts: as the scan's
        C loop kept it, else by the regex engine alone: near either end of the piece (a cited step is most often among the
        last), from that end; from the end, the search starts at a line start a guessed number of
        lines back, widened until it holds enough step lines (a search from a line start finds the
        lines after it as the piece's scan did). Deeper in, every start of the piece is found
        once and kept: a failed level 2 cites neighbouring steps."""
        offset, size, steps, starts = self.step_lines[k]
        if starts is not None:  # the scan's C loop kept them
            return offset + starts[i]
        end = min(offset + size, len(self.data))
        back = len(steps) - i
        if min(i, back) > NEAR_END:
            if FIND_BY_STEP and k not in self._all and steps.count(steps[i]) == 1:
                return self._only_line_of(offset, end, len(steps), i, steps[i])
            if k not in self._all:
                self._all[k] = [m.start() for m in _STEP_LINES.finditer(self.data, offset, end)]
            return self._all[k][i]
        if i < back:
            return next(itertools.islice(_STEP_LINES.finditer(self.data, offset, end), i, None)).start()
        span = 2 * back * max(1, (end - offset) // len(steps))
        while True:
            start = end - span
            start = offset if start <= offset else max(offset, self.data.rfind(b"\n", offset, start) + 1)
            matches = list(_STEP_LINES.finditer(self.data, start, end))
            if len(matches) >= back:
                return matches[len(matches) - back].start()
            if start == offset:
                raise AssertionError("fewer step lines than the scan counted")
            span *= 4

    def _only_line_of(self, offset: int, end: int, count: int, i: int, step: int) -> int:
        """Where the piece's one step line of `step` starts, it being its i-th of `count`: searched
        for in a window of whole lines around where i-th of `count` would be if the lines were
        alike, widened until it is found. A search over whole lines finds their step lines as
        the piece's scan did, and no other step line of the piece has that step."""
        data = self.data
        per = max(1, (end - offset) // count)
        guess = offset + (end - offset) * i // count
        span = 8 * per
        while True:
            lo, hi = guess - span, guess + span
            lo = offset if lo <= offset else max(offset, data.rfind(b"\n", offset, lo) + 1)
            hi = end if hi >= end else (data.find(b"\n", hi, end) + 1 or end)
            for m in _STEP_LINES.finditer(data, lo, hi):
                if int(m.group(1)) == step:
                    return m.start()
            if lo == offset and hi == end:
                raise AssertionError("no step line of a step the scan found")
            span *= 4

    def line(self, name: str, step: int) -> int | None:
        if name in SKIP_NAMES or not name.isascii():
            return None  # never a pair's name: pairs and summary names are ASCII words
        if self._gated(name):
            if self._extracted is None:
                self._extracted = self._extract()
            found = self._extracted.point(name, step)
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
        raw = name.encode()
        for k in range(len(self.step_lines) - 1, -1, -1):
            steps = self.step_lines[k][2]
            if step not in steps:
                continue
            backwards, j = steps[::-1], 0
            while True:
                try:
                    j = backwards.index(step, j)
                except ValueError:
                    break
                start, end = self._bounds(self._nth_line(k, len(steps) - 1 - j))
                m = self._plain.search(self.data, start, end)
                if m is not None and any(key == raw and _number(value) for key, value in _KV.findall(m.group("body"))):
                    return start
                j += 1
        return -1

    def _step_before(self, pos: int) -> int:
        """The step of the last step line that starts before `pos`, a line start (none: 0)."""
        k = bisect.bisect_right(self._starts, pos) - 1
        if k < 0:
            return 0
        offset, size, steps, _ = self.step_lines[k]
        if pos >= offset + size:
            return steps[-1]
        for m in filter(None, _lines_back(self.data, offset, pos)):
            return int(m.group(1))
        return self.step_lines[k - 1][2][-1] if k else 0

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
                if self._step_before(start) == step:
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
