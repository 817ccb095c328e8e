"""Positions and line numbers in a piece of whole lines: newlines counted (with numpy over long
stretches), hits given their lines when the piece is done, a hit's line text, regex matches
tried at a marker's positions.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.verify.logfacts import Hit


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
