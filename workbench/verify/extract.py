"""Metric extraction: each pattern's points read from a piece (`MetricExtraction`, part of
`LogScanner`): the plain pattern by line shape where it runs first, the others line by line,
step-less points credited to the step they belong to.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable
from typing import Protocol

from workbench.verify.logfacts import _Run
from workbench.verify.loglines import _line_end, _LineCounter, _matches_at
from workbench.verify.markers import Markers
from workbench.verify.patterns import (
    _KV,
    _NAMES,
    _SKIP_BYTES,
    DEFAULT_PATTERNS,
    LOGGING_PREFIX,
    SKIP_NAMES,
    _Compiled,
    is_setting,
    metric_name,
    skipped,
)
from workbench.verify.shapes import _Shape, _shape_of, _Shaped, _total_on, _walk, _walk_regex


class Standing(Protocol):
    """Where several processes stand in their steps (topology.Standing)."""

    def advance(self, step: int) -> None: ...
    def only(self) -> int | None: ...


SHAPES = True
"""The plain pattern's lines read by shape (`LogScanner._shaped`); False reads every line by the
general path (`_fields`), which tests compare it with."""


_RECENT_SHAPE: list[_Shape | None] = [None]
"""The shape a scan used last, in any scanner of the process: the next log's scanner tries it first
(a study's logs mostly share one), as a scanner tries its last piece's. Any shape that covers a
piece's typical line reads it as the general path would (`_Shape`), so which one is tried only
changes how soon one is found."""

SHAPE_FROM = 8 << 10
"""Shortest piece a new shape is made for: making one (about 0.2-0.3 ms, mostly compiling its
regex) costs what the general path takes on some 100 step lines; a known shape is used on any."""


SUMMARY_AT_LEADS = True
"""The default summary pattern tried only at the line starts that `_summary_starts` finds, where
`finditer` ran it over the piece (a regex pass, some 5 ms/MiB, in every piece whose gate opens:
a study's logs end with `eval_accuracy`); False runs `finditer`, which tests compare it with."""
_SUMMARY = next(p for p in DEFAULT_PATTERNS if p.name == "summary")
assert _SUMMARY.regex.startswith("(?m)^" + LOGGING_PREFIX + "(?P<name>(?:eval|val|valid|test|final)[_/]")
_SUMMARY_LEADS: list[Markers] = []
_LEADS = (b"eval", b"val", b"test", b"final", b"DEBUG:", b"INFO:", b"WARNING:", b"ERROR:", b"CRITICAL:")
"""What a summary line begins with: its name's first word, or a logging prefix's level."""


def _summary_starts(piece: bytes) -> list[int]:
    """The starts of the lines that begin with `eval`, `val` (`valid` too), `test` or `final`, or a
    logging prefix's level (`INFO:`), in order: where the summary pattern (`(?m)^` then one of
    these) can match. One pass of the markers' engine over the piece for these words after a
    newline, plus the piece's start."""
    if not _SUMMARY_LEADS:
        _SUMMARY_LEADS.append(Markers([b"\n" + lead for lead in _LEADS]))
    starts = [p + 1 for found in _SUMMARY_LEADS[0].scan(piece) for p in found]
    starts.sort()
    if piece.startswith(_LEADS):
        starts.insert(0, 0)
    return starts


_EPOCH = re.compile(rb"\b(?:[Ee]poch|EPOCH)\b[ \t:=#\[]{0,8}+(\d{1,9})(?!\d)")
"""An epoch stated on a line: `Epoch 3`, `Train Epoch: 3 [0/60000]`, `epoch=3`; tried only at the
word's letters that `_last_epoch` finds."""


def _last_epoch(piece: bytes, start: int, end: int) -> int | None:
    """The epoch stated last between `start` and `end` (None: none): the word's letters found from
    `end` backwards, each tried once, so where each value's search stops where the previous one's
    began, a piece is read once in all; a log that states its epochs stops at the first."""
    find = piece.rfind
    at = max(find(b"poch", start + 1, end), find(b"POCH", start + 1, end))
    while at != -1:
        m = _EPOCH.match(piece, at - 1)
        if m is not None:
            return int(m.group(1))
        at = max(find(b"poch", start + 1, at + 3), find(b"POCH", start + 1, at + 3))
    return None


class MetricExtraction:
    """`LogScanner`'s metric extraction (its state is set in `LogScanner.__init__`)."""

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

    def _credit_pending(self, piece: bytes, step_at: Callable[[int], int | None], *, ahead: bool) -> None:
        """The piece's step-less points, each credited to the step of the last step line before
        it; before any step line, to the epoch its line or a line before it states (`Epoch 3`),
        else counted per name, 1, 2, ... (values printed once an epoch, with no step: issue 38),
        never all to step 0. `ahead`: no step line yet after this piece either, so the epoch it
        states last may be asked for by a later piece (read then: `_epoch_before`)."""
        metrics = self.facts.metrics
        early = []
        for point in self._pending:
            step = step_at(point[3])
            if step is None:
                early.append(point)
            else:
                metrics.keep_later(point[0], step, point[1], point[2])
        self._pending.clear()
        floor = 0
        if early:
            epoch = self._epoch_before()
            for name, value, line, pos in sorted(early, key=lambda p: p[3]):
                end = _line_end(piece, pos)
                if end > floor:
                    stated = _last_epoch(piece, floor, end)
                    epoch, floor = epoch if stated is None else stated, end
                step = epoch
                if step is None:
                    step = self._per_epoch[name] = self._per_epoch.get(name, 0) + 1
                metrics.keep_later(name, step, value, line)
            self._epoch = epoch
        if ahead and (b"poch" in piece or b"POCH" in piece):
            self._stated = (piece, floor)

    def _epoch_before(self) -> int | None:
        """The epoch the pieces read so far stated last."""
        if self._stated is not None:
            piece, floor = self._stated
            self._stated = None
            stated = _last_epoch(piece, floor, len(piece))
            if stated is not None:
                self._epoch = stated
        return self._epoch

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
        own, value_of = compiled.own, compiled.value_of
        summary = pattern == _SUMMARY
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
                if summary and is_setting(found[0][0].decode("utf-8", "replace")):
                    continue  # `eval_interval = 50`: a configuration echo, not a metric
            elif own is not None:
                found = [(own, value_of(m))]  # type: ignore[misc]
            else:
                found = kv(m.group("body") if has_body else m.group(0))
            if step is not None and not sequential:
                marks.append((start, step))
            line += count(b"\n", last, start)
            last = start
            for key, raw_value in found:
                if not has_name and own is None and (key in skip or b" " in key and skipped(key)):
                    continue
                name = names.get(key)
                if name is None:
                    name = metric_name(key)
                    if len(names) < 4096:
                        names[key] = name
                try:
                    value = float(raw_value)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    continue
                if step is not None:
                    dest = ops.get(name)
                    if dest is None:
                        dest = ops[name] = []
                    dest.append((step, value, line))  # kept if from a later line (`MetricColumns`)
                else:
                    self._point(name, value, step, line, start, sequential)
