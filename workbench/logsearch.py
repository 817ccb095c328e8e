"""Finding lines in a stored log by streaming its chunks: search, errors, XLA warnings.

Works on bytes, one chunk at a time, so a 1 GB log is never held whole; line numbers are
0-based, as `storage.logs.LogReader` counts them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

MAX_CARRY = 1 << 20
"""A line longer than this is searched in pieces: a match across the cut may be missed."""

ERROR = re.compile(
    rb"(?m)^Traceback \(most recent call last\)|^[A-Za-z_][\w.]*(?:Error|Exception)\b"
    rb"|^(?:\S+ \S+: [EF] |[EF]\d{4} )|\bFATAL\b|Check failed|RESOURCE_EXHAUSTED|\bKilled\b"
)
"""A traceback's start, an exception line, glog/absl E and F lines, XLA's fatal checks."""

WARNING = re.compile(
    rb"(?m)^(?:\S+ \S+: W |W\d{4} )|Warning:"
    rb"|(?i:(?<!\S)(?>\S*?torch_xla)(?:\S*?warn|\S*+\s++(?:\S++\s++){0,3}warn))"
)
"""absl/glog W lines (XLA's own), Python warnings (`UserWarning:` from torch_xla and others), and
`warn` within three words after `torch_xla`. Linear on any line: each word is read from its start
once, the first `torch_xla` in it stands for the others, and no word is given back."""


def search_pattern(needle: str) -> re.Pattern[bytes]:
    """A literal search; case-insensitive unless the needle has a capital letter (smartcase)."""
    flags = 0 if any(c.isupper() for c in needle) else re.IGNORECASE
    return re.compile(re.escape(needle.encode("utf-8")), flags)


def matching_lines(chunks: Iterable[bytes], pattern: re.Pattern[bytes]) -> Iterator[int]:
    """The numbers of the lines where `pattern` matches, in order, each once."""
    for (found,) in lines_per_piece(chunks, pattern):
        yield from found


def lines_per_piece(chunks: Iterable[bytes], *patterns: re.Pattern[bytes]) -> Iterator[tuple[list[int], ...]]:
    """Several patterns in one pass: for each piece of whole lines, each pattern's matching lines."""
    line = 0
    carry = b""
    for chunk in chunks:
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n")
        if cut == -1:
            carry = buf if len(buf) <= MAX_CARRY else buf[-MAX_CARRY:]
            continue
        body, carry = buf[: cut + 1], buf[cut + 1 :]
        if len(carry) > MAX_CARRY:
            carry = carry[-MAX_CARRY:]
        yield tuple(list(_lines_in(body, p, line)) for p in patterns)
        line += body.count(b"\n")
    if carry:
        yield tuple(list(_lines_in(carry, p, line)) for p in patterns)


def _lines_in(body: bytes, pattern: re.Pattern[bytes], line: int) -> Iterator[int]:
    pos = 0
    for match in pattern.finditer(body):
        start = match.start()
        if start < pos:
            continue  # this line is already reported
        line += body.count(b"\n", pos, start)
        yield line
        end = body.find(b"\n", start)
        if end == -1:
            return
        line += 1
        pos = end + 1
