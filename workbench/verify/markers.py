"""Literal markers found in one pass over the bytes, by a multi-pattern engine (issue 19).

The log scan looks for some twenty rare literals (tracebacks, fatal errors, torch_xla's report and
debug lines, probe lines, sharding specs). Searching for each in turn reads every byte once per
literal; an automaton reads it once for all. Hyperscan is the engine (measured on the same bytes:
0.3-0.6 ms/MiB against 6.5 for the searches one by one); it ships x86_64 wheels only, so where it
cannot be imported google-re2, also linear in the bytes, runs one alternation (about 2-3 ms/MiB).
`WORKBENCH_SCAN_ENGINE=re2` picks the fallback anywhere (tests run both).

Every occurrence is reported, overlapping ones too, by where it starts; callers pick the ones
they need (the first on a line, those past an offset). `Expressions` does the same for a few
regular expressions (the subset both engines share) and reports where their matches end.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence

ENGINE_VARIABLE = "WORKBENCH_SCAN_ENGINE"


def engine_name() -> str:
    """`hyperscan` where it imports, else `re2`; the variable above can ask for `re2`."""
    if os.environ.get(ENGINE_VARIABLE, "").lower() != "re2":
        try:
            import hyperscan  # noqa: F401
        except ImportError:
            pass
        else:
            return "hyperscan"
    return "re2"


def compile_re2(pattern: bytes):
    """An RE2 regex over bytes, as the workbench runs them on logs: a byte is a character (Latin-1:
    logs are not always UTF-8, and RE2's UTF-8 mode matches no invalid byte), and room for big
    alternations. RE2 is linear by construction and lets go of the GIL while it searches."""
    import re2

    options = re2.Options()
    options.max_mem = 64 << 20
    options.encoding = re2.Options.Encoding.LATIN1
    return re2.compile(pattern, options)


class Markers:
    """Finds every occurrence of each literal in one pass: `scan(data)` gives, for each literal in
    the order given, the ascending start positions of its occurrences. Engines hold scratch
    space, so each thread compiles its own."""

    def __init__(self, literals: Sequence[bytes], *, engine: str | None = None) -> None:
        if not literals or not all(literals):
            raise ValueError("no literals to look for")
        self.literals = tuple(literals)
        self.engine = engine or engine_name()
        self._local = threading.local()

    def scan(self, data: bytes | bytearray) -> list[list[int]]:
        return self._compiled()[0](data)

    def found(self, data: bytes | bytearray) -> bool:
        """Whether any of the literals occurs in `data`: the pass stops at the first."""
        return self._compiled()[1](data)

    def _compiled(self):
        compiled = getattr(self._local, "compiled", None)
        if compiled is None:
            compiled = self._local.compiled = (_hyperscan if self.engine == "hyperscan" else _re2)(self)
        return compiled


def _hyperscan(markers: Markers):
    import hyperscan

    literals = markers.literals
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[re.escape(lit) for lit in literals], ids=list(range(len(literals))),
               elements=len(literals), flags=[0] * len(literals))
    lengths = [len(lit) for lit in literals]
    buffers = _scans_buffers(db)

    def scan(data: bytes | bytearray) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in literals]

        def on_match(pattern: int, start: int, end: int, flags: int, context: object) -> None:
            found[pattern].append(end - lengths[pattern])

        if data:  # matches come by where they end: for one literal, by where they start too
            db.scan(data if buffers else bytes(data), match_event_handler=on_match)
        return found

    def stop(pattern: int, start: int, end: int, flags: int, context: object) -> bool:
        return True

    def found_any(data: bytes | bytearray) -> bool:
        try:
            db.scan(bytes(data) if isinstance(data, bytearray) else data, match_event_handler=stop)
        except hyperscan.ScanTerminated:
            return True
        return False

    return scan, found_any


def _scans_buffers(db) -> bool:
    """Whether this build of the bindings scans a bytearray in place (0.9 does), so a block read
    into one is not copied first."""
    try:
        db.scan(bytearray(b"x"), match_event_handler=lambda *_: None)
    except TypeError:
        return False
    return True


def _re2(markers: Markers):
    """One alternation, searched again one byte past each hit, so an occurrence that overlaps an
    earlier one's is found too (no literal here is a prefix of another at the same start)."""
    literals = markers.literals
    regex = compile_re2(b"|".join(b"(" + re.escape(lit) + b")" for lit in literals))
    search = regex.search

    def scan(data: bytes | bytearray) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in literals]
        m = search(data, 0)
        while m is not None:
            found[m.lastindex - 1].append(m.start())
            m = search(data, m.start() + 1)
        return found

    def found_any(data: bytes | bytearray) -> bool:
        return search(data) is not None

    return scan, found_any


class Expressions:
    """Finds the matches of several regular expressions in one pass: `ends(data)` gives, for each
    expression in the order given, the ascending positions where its matches end (a match that
    starts inside another expression's is found too; for one that matches several lengths from
    one start, Hyperscan gives every end and RE2 the greedy one: callers want the lines). Patterns
    are bytes in the subset Hyperscan and RE2 share: no backreferences, no lookaround."""

    def __init__(self, patterns: Sequence[bytes], *, engine: str | None = None) -> None:
        if not patterns:
            raise ValueError("no patterns to look for")
        self.patterns = tuple(patterns)
        self.engine = engine or engine_name()
        self._local = threading.local()

    def ends(self, data: bytes) -> list[list[int]]:
        compiled = getattr(self._local, "compiled", None)
        if compiled is None:
            compiled = self._local.compiled = (_hyperscan_ends if self.engine == "hyperscan" else _re2_ends)(self)
        return compiled(data)


def _hyperscan_ends(expressions: Expressions):
    import hyperscan

    patterns = expressions.patterns
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=list(patterns), ids=list(range(len(patterns))), elements=len(patterns),
               flags=[0] * len(patterns))

    def ends(data: bytes) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in patterns]

        def on_match(pattern: int, start: int, end: int, flags: int, context: object) -> None:
            found[pattern].append(end)

        if data:
            db.scan(data, match_event_handler=on_match)
        return found

    return ends


def _re2_ends(expressions: Expressions):
    """One alternation, searched again one byte past each match's start."""
    patterns = expressions.patterns
    search = compile_re2(b"|".join(b"(" + p + b")" for p in patterns)).search

    def ends(data: bytes) -> list[list[int]]:
        found: list[list[int]] = [[] for _ in patterns]
        m = search(data, 0)
        while m is not None:
            found[m.lastindex - 1].append(m.end())
            m = search(data, m.start() + 1)
        return found

    return ends
