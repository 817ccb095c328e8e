"""A step line's shape (`_Shape`): one regex, or the compiled walk (`_shapewalk`), that reads every
line of a piece written like a sample step line as columns, and the step lines a piece gave that
way (`_Shaped`, `_Marks`).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.verify.loglines import _line_end, _line_starts, _LineCounter
from workbench.verify.patterns import _KV, metric_name, skipped
from workbench.verify.steplines import _STEP_LINES

_shapewalk: Any
try:  # the walk of step lines in C (issue 19), built with the package where a C compiler was found
    from workbench.verify import _shapewalk
except ImportError:  # not built: the shape's regex reads the lines (`_walk_regex`), about 10x slower
    _shapewalk = None


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
_ANY_DIGITS, _OPEN, _CLOSE = 0, -1, -2
SHAPE_LINE = 2048
"""Longest sample line that is given a shape (the regex grows with it)."""


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
        keep = not skipped(key)
        if keep:
            ops.append(_OPEN)
        value = _digits(kv.group(2), ops)
        if keep:
            ops.append(_CLOSE)
            values.append(1 + len(values))
            names.append(metric_name(key))
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
