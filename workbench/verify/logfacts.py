"""What one pass over a log found (`LogFacts`), and the metric points as the scan wrote them
(`MetricColumns`), built into dicts only when read.

Line numbers are 1-based, as `grep -n` prints them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


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
    batch_splits: list[Hit] = field(default_factory=list)
    """Sharding specs that replicate over their last tile dim (`devices=[2,1,1,2]0,1,2,3
    last_tile_dim_replicate`); `text` is `SPLIT of N`: the tensor's first dim (the batch of an
    input) split SPLIT ways over the N devices named, each part held by N / SPLIT of them."""
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
