"""One streaming pass over a run's log: the evidence the verifier reads itself.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NUMBER = rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_KV = re.compile(rb"([A-Za-z_][\w./-]*)['\"]?\s*[=:]?\s*['\"]?(" + NUMBER + rb"|nan|inf)(?![\w.])")

FATAL_MARKERS: tuple[tuple[bytes, str], ...] = (
    (b"Fatal Python error", "fatal"),
    (b"Segmentation fault", "fatal"),
    (b"core dumped", "fatal"),
    (b"Check failed", "fatal"),
    (b"RESOURCE_EXHAUSTED", "oom"),
    (b"out of memory", "oom"),
    (b"OutOfMemoryError", "oom"),
    (b"MemoryError", "oom"),
    (b"Killed", "killed"),
    (b"timed out", "timeout"),
    (b"Timeout", "timeout"),
)
"""Byte strings that mark a fatal error anywhere in a line, and what kind of error each is."""


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


DEFAULT_PATTERNS: tuple[Pattern, ...] = (
    # plain prints: "step 3/40 loss 0.41 grad_norm 1.2", "Step: 3, loss=0.41"
    Pattern("plain", r"(?im)^[^\n]*?\bstep\b[ :=#]*(?P<step>\d+)(?:/(?P<total>\d+))?(?P<body>[^\n]*)$"),
    # Hugging Face Trainer: {'loss': 0.69, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}
    Pattern("hf_trainer", r"\{'(?P<body>[^\n{}]*)\}", sequential=True),
    # JSON lines: {"step": 3, "loss": 0.41}
    Pattern("json_lines", r'(?m)^\{"[^\n]*\}[ \t\r]*$', json=True),
    # tqdm postfix and PyTorch Lightning bars: "Epoch 0:  50%|###  | 16/32 [00:01<00:00, 12.3it/s, loss=0.693, v_num=0]"
    Pattern(
        "tqdm",
        r"(?:Epoch (?P<epoch>\d+)[^\r\n|]*)?\|[^\r\n|]*\| *(?P<step>\d+)/(?P<total>\d+) \[[^\r\n\]]*?"
        r"(?:it/s|s/it)\]?,? ?(?P<body>[^\r\n\]]*)\]",
    ),
    # bare summary lines: "eval_accuracy 0.9014", "test/acc: 0.91"
    Pattern(
        "summary",
        r"(?m)^(?P<name>(?:eval|val|valid|test|final)[_/][\w/.-]+)[ \t]*[=:]?[ \t]*(?P<value>" + NUMBER.decode() + r")[ \t\r]*$",
    ),
)

SKIP_NAMES = frozenset({"step", "epoch", "total", "it", "v_num", "global_step", "learning_rate", "lr"})
"""Numbers on a metric line that are not metrics of the run (kept out of comparisons)."""

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
    """`workbench-probe {json}` lines written by the probe (workbench/verify/probe)."""
    sharding: list[Hit] = field(default_factory=list)
    """Sharding specs `{devices=[4,1]0,1,2,3}`; `text` is the number of devices named."""
    reports: int = 0
    """How many metrics reports (blocks with `Counter:` lines) the log holds."""

    def point_series(self) -> dict[str, dict[int, float]]:
        return {name: {s: v for s, (v, _) in steps.items()} for name, steps in self.points.items()}


class _Compiled:
    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.regex = re.compile(pattern.regex.encode())
        self.groups = self.regex.groupindex


def compile_patterns(extra: Iterable[dict[str, Any] | Pattern] = (), *, defaults: bool = True) -> list[_Compiled]:
    out = [_Compiled(p) for p in (DEFAULT_PATTERNS if defaults else ())]
    for spec in extra:
        pattern = spec if isinstance(spec, Pattern) else Pattern(
            name=str(spec.get("name", "custom")),
            regex=str(spec["regex"]),
            sequential=bool(spec.get("sequential", False)),
            json=bool(spec.get("json", False)),
        )
        out.append(_Compiled(pattern))
    return out


class LogScanner:
    """Feed byte chunks in order with `feed`, then `finish` for the facts."""

    def __init__(self, patterns: list[_Compiled] | None = None, *, extract_metrics: bool = True) -> None:
        self.facts = LogFacts()
        self.patterns = patterns if patterns is not None else compile_patterns()
        self.extract = extract_metrics
        self._carry = b""
        self._line = 1  # line number of the first line of the next piece
        self._in_traceback: Hit | None = None
        self._sequence: dict[str, int] = {}
        self._pending: list[tuple[str, float, int, int]] = []

    # ------------------------------------------------------------------ feeding
    def feed(self, chunk: bytes) -> None:
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
        self._piece(data[: cut + 1])
        self._carry = data[cut + 1 :]

    def finish(self) -> LogFacts:
        if self._carry:
            self._piece(self._carry + b"\n")
            self._carry = b""
            self.facts.lines = self._line - 1
        else:
            self.facts.lines = self._line - 1
        return self.facts

    # ------------------------------------------------------------------ one piece of whole lines
    def _piece(self, piece: bytes) -> None:
        base = self._line
        marks: list[tuple[int, int]] = []  # (position, step) of step-bearing lines in this piece
        if self.extract:
            self._metrics(piece, base, marks)
        else:
            self._steps_only(piece, marks)
        marks.sort()
        positions = [p for p, _ in marks]
        before = self.facts.last_step

        def step_at(pos: int) -> int | None:
            i = bisect.bisect_left(positions, pos)
            return marks[i - 1][1] if i else before

        for name, value, line, pos in self._pending:
            step = step_at(pos)
            self.facts.points.setdefault(name, {})[0 if step is None else step] = (value, line)
        self._pending.clear()
        self._tracebacks(piece, base)
        self._fatal(piece, base)
        self._xla(piece, base, step_at)
        self._probes(piece, base)
        if marks:
            top = max(s for _, s in marks)
            self.facts.last_step = top if before is None else max(before, top)
        self._line = base + piece.count(b"\n")

    def _steps_only(self, piece: bytes, marks: list[tuple[int, int]]) -> None:
        plain = self.patterns[0] if self.patterns and self.patterns[0].pattern.name == "plain" else None
        if plain is None:
            return
        for m in plain.regex.finditer(piece):
            marks.append((m.start(), int(m.group("step"))))

    def _metrics(self, piece: bytes, base: int, marks: list[tuple[int, int]]) -> None:
        facts = self.facts
        for compiled in self.patterns:
            groups = compiled.groups
            pattern = compiled.pattern
            counter = _LineCounter(piece, base)
            for m in compiled.regex.finditer(piece):
                start = m.start()
                step = None
                if pattern.json:
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
                else:
                    if "step" in groups and m.group("step") is not None:
                        step = int(m.group("step"))
                        if "epoch" in groups and m.group("epoch") is not None and m.group("total"):
                            step = int(m.group("epoch")) * int(m.group("total")) + step
                    if pattern.name == "plain" and m.group("total") is not None:
                        facts.total_steps = int(m.group("total"))
                    if "name" in groups:
                        pairs = [(m.group("name").decode("utf-8", "replace"), _num(m.group("value")))]
                    else:
                        body = m.group("body") if "body" in groups else m.group(0)
                        pairs = [
                            (k.decode("utf-8", "replace"), _num(v))
                            for k, v in _KV.findall(body)
                            if k not in _SKIP_BYTES
                        ]
                if step is not None and not pattern.sequential:
                    marks.append((start, step))
                line = counter.at(start)
                for name, value in pairs:
                    if value is None:
                        continue
                    if step is not None:
                        facts.points.setdefault(name, {})[step] = (value, line)
                    elif pattern.sequential:
                        n = self._sequence.get(name, 0) + 1
                        self._sequence[name] = n
                        facts.points.setdefault(name, {})[n] = (value, line)
                    else:
                        self._pending.append((name, value, line, start))

    def _tracebacks(self, piece: bytes, base: int) -> None:
        facts = self.facts
        if self._in_traceback is not None:
            self._end_traceback(piece, 0, _LineCounter(piece, base))
        pos = piece.find(b"Traceback (most recent call last)")
        counter = _LineCounter(piece, base)
        while pos != -1:
            line = counter.at(pos)
            facts.tracebacks.append(Hit(line, _line_text(piece, pos)))
            self._in_traceback = facts.tracebacks[-1]
            nl = piece.find(b"\n", pos)
            self._end_traceback(piece, nl + 1, counter)
            pos = piece.find(b"Traceback (most recent call last)", nl + 1 if nl != -1 else len(piece))

    def _end_traceback(self, piece: bytes, pos: int, counter: _LineCounter) -> None:
        """Find the exception line closing the open traceback: its first unindented line."""
        n = 0
        while pos < len(piece) and n < 2000:
            end = piece.find(b"\n", pos)
            end = len(piece) if end == -1 else end
            text = piece[pos:end]
            if text and text[:1] not in (b" ", b"\t") and not text.startswith(b"Traceback"):
                m = _EXCEPTION.match(text)
                if m and (b"Error" in m.group(1) or b"Exception" in m.group(1) or b"Interrupt" in m.group(1)
                          or b"Exit" in m.group(1) or b"Abort" in m.group(1)):
                    self.facts.exceptions.append(Hit(counter.at(pos), _clip(text)))
                    self._in_traceback = None
                    return
                if not text.startswith((b"During handling", b"The above exception")):
                    self.facts.exceptions.append(Hit(counter.at(pos), _clip(text)))
                    self._in_traceback = None
                    return
            pos = end + 1
            n += 1

    def _fatal(self, piece: bytes, base: int) -> None:
        for marker, kind in FATAL_MARKERS:
            pos = piece.find(marker)
            if pos == -1:
                continue
            counter = _LineCounter(piece, base)
            while pos != -1:
                self.facts.fatal.append((kind, Hit(counter.at(pos), _line_text(piece, pos))))
                nl = piece.find(b"\n", pos)
                if nl == -1:
                    break
                pos = piece.find(marker, nl)

    def _xla(self, piece: bytes, base: int, step_at) -> None:
        facts = self.facts
        if b"Counter: " in piece or b"Metric: " in piece:
            counter = _LineCounter(piece, base)
            for m in _COUNTER.finditer(piece):
                name = m.group(1).decode("utf-8", "replace")
                hit = Hit(counter.at(m.start()), m.group(2).decode(), step_at(m.start()))
                facts.counters[name] = hit
                if name == "UncachedCompile":
                    facts.counter_series.setdefault(name, []).append(hit)
            counter = _LineCounter(piece, base)
            for m in _METRIC.finditer(piece):
                name = m.group(1).decode("utf-8", "replace")
                if name in ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime"):
                    hit = Hit(counter.at(m.start()), m.group(2).decode(), step_at(m.start()))
                    facts.counter_series.setdefault(name, []).append(hit)
            facts.reports = max(len(facts.counter_series.get("CompileTime", [])), facts.reports)
        for marker, target in ((b"Compilation Cause", facts.compile_causes), (b"pt-xla-profiler:", facts.profiler)):
            pos = piece.find(marker)
            if pos == -1:
                continue
            counter = _LineCounter(piece, base)
            while pos != -1:
                target.append(Hit(counter.at(pos), _line_text(piece, pos), step_at(pos)))
                nl = piece.find(b"\n", pos)
                pos = -1 if nl == -1 else piece.find(marker, nl)
        if b"devices=[" in piece:
            counter = _LineCounter(piece, base)
            for m in _SHARDING.finditer(piece):
                ids = [x for x in m.group(2).split(b",") if x]
                facts.sharding.append(Hit(counter.at(m.start()), str(len(ids))))

    def _probes(self, piece: bytes, base: int) -> None:
        pos = piece.find(b"workbench-probe ")
        if pos == -1:
            return
        counter = _LineCounter(piece, base)
        while pos != -1:
            text = _line_text(piece, pos)
            try:
                record = json.loads(text.split("workbench-probe ", 1)[1])
            except (ValueError, IndexError):
                record = None
            if isinstance(record, dict):
                self.facts.probes.append((Hit(counter.at(pos), _clip(text.encode())), record))
            nl = piece.find(b"\n", pos)
            pos = -1 if nl == -1 else piece.find(b"workbench-probe ", nl)


_SKIP_BYTES = frozenset(n.encode() for n in SKIP_NAMES)


class _LineCounter:
    """Line number of a position, counting newlines incrementally (positions must not go back)."""

    __slots__ = ("data", "base", "pos", "line")

    def __init__(self, data: bytes, base: int) -> None:
        self.data, self.base, self.pos, self.line = data, base, 0, base

    def fresh(self) -> _LineCounter:
        return _LineCounter(self.data, self.base)

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, self.base
        self.line += self.data.count(b"\n", self.pos, pos)
        self.pos = pos
        return self.line


def _num(raw: bytes) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def _line_text(piece: bytes, pos: int) -> str:
    start = piece.rfind(b"\n", 0, pos) + 1
    end = piece.find(b"\n", pos)
    return _clip(piece[start : len(piece) if end == -1 else end])


def _clip(raw: bytes, limit: int = 300) -> str:
    text = raw.rstrip(b"\r").decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "…"


def scan_chunks(chunks: Iterable[bytes], **kwargs: Any) -> LogFacts:
    scanner = LogScanner(**kwargs)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(size):
            yield block


def stored_chunks(db: Any, log_id: int) -> Iterator[bytes]:
    """A stored log's chunks in order, one row at a time (storage/logs.py's `log_chunk`)."""
    seq = 0
    while True:
        row = db.execute(
            "SELECT data FROM log_chunk WHERE log_id = ? AND seq = ?", [log_id, seq]
        ).fetchone()
        if row is None:
            return
        yield row[0]
        seq += 1
