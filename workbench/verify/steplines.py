"""Step lines (the plain pattern's `step N` / `step N/M` lines) read for their steps alone: the
step-line regexes, the C loop's twin (`_step_numbers`), the scanner's look back for the step a
hit belongs to (`StepLines`), and the line a point cites found without extraction (`PointLines`).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from workbench.verify.loglines import _line_end
from workbench.verify.patterns import _KV, DEFAULT_PATTERNS, SKIP_NAMES, metric_name

if TYPE_CHECKING:
    from workbench.verify.logfacts import LogFacts
    from workbench.verify.patterns import _Compiled


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


_TOTAL_HINTS = (re.compile(rb"tep[ :=#]*+\d++/\d"), re.compile(rb"TEP[ :=#]*+\d++/\d"))
"""Where a `step N/M` line may be: patterns that start with a literal, so they scan at C speed."""


class StepLines:
    """`LogScanner`'s reading of step lines (its state is set in `LogScanner.__init__`)."""

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
                if m is not None and any(metric_name(key) == name and _number(value)
                                         for key, value in _KV.findall(m.group("body"))):
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
        data, lead = self.data, name.encode()
        end = len(data)
        while True:   # the name at a line's start, or behind a logging prefix (`INFO:train:`)
            at = data.rfind(lead, 0, end)
            if at == -1:
                return -1
            start, stop = self._bounds(at)
            m = self._summary.match(data, start, stop - 1 if data[stop - 1 : stop] == b"\n" else stop)
            if m is not None and m.start("name") == at and m.group("name") == lead and _number(m.group("value")):
                if self._step_before(start) == step:
                    return start
            if start == 0:
                return -1
            end = start   # one try a line: the match is anchored at its start


def _number(raw: bytes) -> bool:
    try:
        float(raw)
    except ValueError:
        return False
    return True
