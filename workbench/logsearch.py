"""Finding lines in a stored log by streaming its chunks: search, errors, XLA warnings.

Works on bytes, one chunk at a time, so a 1 GB log is never held whole; line numbers are
0-based, as `storage.logs.LogReader` counts them. The patterns are RE2 (`compile_re2`): the log
pane scans in a thread, and a `re` search holds the GIL for a whole piece (30-100 ms per MiB
here), which stalled the app.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from workbench.verify.markers import compile_re2

MAX_CARRY = 1 << 20
"""A line longer than this is searched in pieces: a match across the cut may be missed."""

_S = rb"[^ \t\n\r\f\v]"
_BLANK = rb"[ \t\r\f\v]"
"""Python's `\\S` on bytes (RE2's `\\s` leaves out the vertical tab), and white space within a line."""


ERROR = compile_re2(
    rb"(?m)^Traceback \(most recent call last\)|^[A-Za-z_][\w.]*(?:Error|Exception)\b"
    rb"|^(?:" + _S + rb"+ " + _S + rb"+: [EF] |[EF]\d{4} )|\bFATAL\b|Check failed|RESOURCE_EXHAUSTED|\bKilled\b"
)
"""A traceback's start, an exception line, glog/absl E and F lines, XLA's fatal checks."""

WARNING = compile_re2(
    rb"(?m)^(?:" + _S + rb"+ " + _S + rb"+: W |W\d{4} )|Warning:"
    rb"|(?i:(?:^|" + _BLANK + rb")" + _S + rb"*?torch_xla(?:" + _S + rb"*?warn|" + _S + rb"*" + _BLANK + rb"+(?:"
    + _S + rb"+" + _BLANK + rb"+){0,3}warn))"
)
"""absl/glog W lines (XLA's own), Python warnings (`UserWarning:` from torch_xla and others), and
`warn` within three words after a word holding `torch_xla`, on the same line. No match runs
past its line, so a line is found exactly when it matches: the blank a word follows is part of
the match (RE2 has no lookbehind), and a match running on could otherwise swallow the next."""


def search_pattern(needle: str) -> Any:
    """A literal search; case-insensitive unless the needle has a capital letter (smartcase), in
    ASCII letters only, as `re` folds bytes."""
    fold = not any(c.isupper() for c in needle)
    return compile_re2(b"".join(b"[%c%c]" % (c, c ^ 0x20) if fold and 65 <= (c & ~0x20) <= 90 else re.escape(bytes([c]))
                                for c in needle.encode("utf-8")))


def matching_lines(chunks: Iterable[bytes], pattern: Any) -> Iterator[int]:
    """The numbers of the lines where `pattern` matches, in order, each once."""
    for (found,) in lines_per_piece(chunks, pattern):
        yield from found


def lines_per_piece(chunks: Iterable[bytes], *patterns: Any) -> Iterator[tuple[list[int], ...]]:
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


def _lines_in(body: bytes, pattern: Any, line: int) -> Iterator[int]:
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
