"""The step lines' walk in C (`workbench.verify._shapewalk`, issue 19) reads a piece as the shape's
regex does: the same rows, shape lines, steps, value text and other lines on generated shapes and
pieces (digit runs of any length, truncated and almost-matching lines, NUL and binary bytes, very
long lines, with and without a final newline), and the scan's facts are the regex path's on every
log the tests have; it refuses malformed ops and spans rather than reading out of bounds."""

from __future__ import annotations

import os
import random
import re
import sys
from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from linearity import grows_linearly
from test_fuzz import FAST
from test_logscan_shapes import OTHER, SAMPLES, SHAPED, _log, _values, step_lines
from test_verify_skip import every_log

from workbench.verify import extract, loglines, shapes
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import DEFAULT_PATTERNS, compile_patterns

ROOT = Path(__file__).resolve().parent.parent
PLAIN = re.compile(DEFAULT_PATTERNS[0].regex.encode())
walker = shapes._shapewalk
needs_walk = pytest.mark.skipif(walker is None, reason="workbench.verify._shapewalk is not built (no C compiler "
                                                       "at install): the regex path is the only one")


def test_the_extension_is_built_where_a_compiler_is() -> None:
    """CI builds the package with a C compiler, so the walk must be there; elsewhere it may not be."""
    if walker is None:
        if os.environ.get("CI"):
            pytest.fail("workbench.verify._shapewalk is not importable in CI: build it with "
                        "`pip install -e .` or `python setup.py build_ext --inplace`")
        pytest.skip("workbench.verify._shapewalk is not built here (no C compiler, or not built in place)")
    assert walker.walk(b"step 1 loss 0.5\n", shapes._shape_of(b"step 1 loss 0.5", PLAIN).ops) is not None


def test_every_plain_match_holds_the_walks_word() -> None:
    """The walk gives only the other lines that hold `step` in any case: the plain pattern's every match does."""
    assert DEFAULT_PATTERNS[0].regex.startswith(r"(?i)\bstep\b") and shapes._STEP_WORD == b"step"


# ----------------------------------------------------------------------------- the walk against the regex

def _compare(shape: shapes._Shape, piece: bytes, rng: random.Random) -> None:
    long_step = any(len(row[0]) > 18 for row in shape.regex.findall(piece))
    found = walker.walk(piece, shape.ops, shapes._STEP_WORD)
    assert (found is None) == long_step, (shape.ops, piece[:200])
    every = walker.walk(piece, shape.ops)
    assert (every is None) == long_step
    if long_step:  # the regex reads the piece (`int` refuses a step of over 4300 digits there)
        return
    rows, starts, at, steps, highest, others, text = shapes._walk_regex(shape, piece)
    assert starts is None
    got = shapes._walk(shape, piece)
    assert got is not None
    g_rows, g_starts, g_at, g_steps, g_highest, g_others, g_text = got
    where = (shape.ops, piece[:300])
    assert list(g_starts) == loglines._line_starts(piece)[:rows], where  # (its last may be one past the end)
    assert (g_rows, list(g_at), list(g_steps), g_highest) == (rows, at, steps, highest), where
    assert type(g_highest) is type(highest)
    assert every[6] == others, where  # without the word: every other non-empty line
    assert g_others == [o for o in others if shapes._STEP_WORD in o[1].lower()], where
    assert all(PLAIN.search(o[1]) is None for o in others if o not in g_others)
    assert all(type(o[1]) is bytes for o in g_others)
    ranges = [(0, len(at))] + [tuple(sorted(rng.sample(range(len(at) + 1), 2))) for _ in range(3) if at]
    for column in range(len(shape.values)):
        for first, end in ranges:
            assert g_text(column, first, end) == text(column, first, end), (where, column, first, end)


def _digits(rng: random.Random, run: bytes) -> bytes:
    """Another digit run: as long (so that fixed runs match), or 1-25 digits, leading zeros or not."""
    pick = rng.random()
    if pick < 0.4:
        return bytes(rng.choice(b"0123456789") for _ in run)
    n = rng.randint(1, 25)
    digits = bytes(rng.choice(b"0123456789") for _ in range(n))
    return digits if pick < 0.9 else b"0" * rng.randint(1, 20) + digits


def _variant(rng: random.Random, sample: bytes, huge: int = 1 << 20) -> bytes:
    """A line like the sample: its digit runs changed, and maybe truncated, a byte changed, added or
    dropped, something after its end, NUL or binary bytes, a run of `huge` digits."""
    line = re.sub(rb"\d+", lambda m: _digits(rng, m.group()), sample)
    kind = rng.random()
    if kind < 0.45 or not line:
        return line
    at = rng.randrange(len(line) + 1)
    junk = rng.choice([b"0", b"7", b" ", b"\0", b"\xff", b"\r", b".", b"e", b"-", b"/", b"x", b"\x00\x01\x80"])
    if kind < 0.55:
        return line[:at]
    if kind < 0.65:
        return line[:at] + junk + line[at:]
    if kind < 0.72:
        return line[:at] + line[at + 1 :]
    if kind < 0.8:
        return line + junk
    if kind < 0.86:
        return line[:at] + junk + line[at + 1 :]
    if kind < 0.9:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 80)))
    if kind < 0.93:
        return re.sub(rb"\d+", lambda m: b"9" * huge if rng.random() < 0.3 else m.group(), line, count=3)
    if kind < 0.96:
        return b"x" * rng.choice([huge, 70_000])
    return b""


def _piece(rng: random.Random, samples: list[bytes], lines: int, huge: int = 1 << 20) -> bytes:
    out = [_variant(rng, rng.choice(samples), huge) if rng.random() < 0.8 else rng.choice(OTHER) % _values(rng)
           for _ in range(lines)]
    piece = rng.choice([b"\n", b"\r\n", b"\n\n"]).join(out)
    return piece + rng.choice([b"", b"\n", b"\n\n", b"\r\n"])


def _samples(rng: random.Random) -> list[bytes]:
    return [template % _values(rng) for template in SHAPED] + SAMPLES


@needs_walk
@pytest.mark.parametrize("seed", range(8))
def test_the_walk_reads_pieces_as_the_regex(seed) -> None:
    rng = random.Random(seed)
    samples = _samples(rng)
    for sample in samples:
        shape = shapes._shape_of(sample.rstrip(b"\r"), PLAIN)
        if shape is None:
            continue
        for _ in range(6):
            _compare(shape, _piece(rng, [sample], rng.choice([1, 2, 5, 40, 300])), rng)
        # other shapes' lines among its own
        _compare(shape, _piece(rng, samples, 200), rng)


@needs_walk
def test_edge_pieces() -> None:
    rng = random.Random(7)
    shape = shapes._shape_of(b"step 12/1000 loss 0.41 grad_norm 1.2 step_time 0.031", PLAIN)
    assert shape is not None
    for piece in [b"", b"\n", b"\n\n", b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.031",
                  b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.031\n", b"\nstep 1/2 loss 1.5 grad_norm 1.2 step_time 0.1",
                  b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.031\r\n", b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.",
                  b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.1 ", b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.1\0",
                  b"step 1/2 loss 1.5 grad_norm 1.2 step_time 0.031\nSTEP 3 x\n\0step\0\n",
                  *(b"step %s/2 loss 1.5 grad_norm 1.2 step_time 0.1\n" % (b"1" * n) for n in range(1, 26)),
                  b"step 000000000000000000000001/2 loss 1.5 grad_norm 1.2 step_time 0.1\n",
                  b"step 999999999999999999/2 loss 1.5 grad_norm 1.2 step_time 0.1\n"]:
        _compare(shape, piece, rng)
        _compare(shape, bytearray(piece), rng)  # a piece of `file_chunks`' blocks
    for sample, line in [(b"step 1", b"step %s%s%s"), (b"step 1 loss 0.5", b"step 3 loss %s%s%s")]:
        shape = shapes._shape_of(sample, PLAIN)  # every byte after digit runs of every length (a word's lanes)
        assert shape is not None
        for k in range(1, 18):
            piece = b"\n".join(line % (b"7" * k, bytes([b]), b"5" * (k % 3)) for b in range(256))
            _compare(shape, piece, rng)
            _compare(shape, piece + b"\n" + line % (b"7" * k, b"", b""), rng)
    fixed = shapes._shape_of(b"[12:30:05] step 4 loss 1.5", PLAIN)  # a prefix of fixed runs: \d{2}
    assert fixed is not None and 2 in fixed.ops
    for piece in [b"[12:30:05] step 4 loss 1.5", b"[123:30:05] step 4 loss 1.5", b"[1:30:05] step 4 loss 1.5",
                  b"[1a:30:05] step 4 loss 1.5", b"[12:30:0", b"[12:30:05] step 44444 loss 1.5e-3"]:
        _compare(fixed, piece, rng)


@needs_walk
@FAST
@given(lines=st.lists(step_lines(), min_size=1, max_size=6), seed=st.integers(0, 10_000))
def test_any_shape(lines, seed) -> None:
    rng = random.Random(seed)
    for line in lines:
        shape = shapes._shape_of(line.rstrip(b"\r"), PLAIN)
        if shape is not None:
            _compare(shape, _piece(rng, lines, rng.randint(1, 60)), rng)


@needs_walk
def test_the_walk_is_linear_on_hostile_lines() -> None:
    shape = shapes._shape_of(SAMPLES[0], PLAIN)
    assert shape is not None
    for line in [b"step " + b"1" * 1000, b"step 1/" + b"2" * 1000, b"step 12/1000 loss 0." + b"4" * 1000,
                 b"\0" * 1000, b"step 12/1000 loss 0.41 grad_norm 1.2 step_time 0.031" * 20]:
        assert grows_linearly(lambda n, li=line: walker.walk((li * n + b"\n") * 4, shape.ops), 200), line[:40]


# ----------------------------------------------------------------------------- refusals

@needs_walk
def test_malformed_ops_and_spans_are_refused() -> None:
    piece = b"step 1 loss 0.5\n"
    one = (0).to_bytes(8, sys.byteorder), (1).to_bytes(8, sys.byteorder)
    starts = (0).to_bytes(8, sys.byteorder) + (16).to_bytes(8, sys.byteorder)
    assert walker.walk(piece, (b"step ", -1, 0, -2)) == (2, starts, b"", b"", None, b"", [(0, b"step 1 loss 0.5")])
    assert walker.walk(b"step 1\n", (b"step ", -1, 0, -2)) == (2, one[0] + (7).to_bytes(8, sys.byteorder), one[0],
                                                               one[1], 1, b"", [])
    for ops in [(b"step ", -1, -1, 0, -2, -2), (b"step\n", -1, 0, -2), (b"step ", -1, 3, -2),
                (b"step ", -1, 0, 0, -2), (b"", -1, 0, -2), (b"step ",), (bytearray(b"step "), -1, 0, -2),
                (b"step ", -1, 0), (b"step ", -2), (b"step ", -3, -1, 0, -2), ("step ", -1, 0, -2), [b"step ", -1, 0, -2],
                (b"step ", -1, 0, -2, 1.5), (b"step ", -1, 0, -2, 2**80), (b"step ", -1, 0, -2, 2**62, 2**62)]:
        with pytest.raises((ValueError, TypeError, OverflowError)):
            walker.walk(piece, ops)
    for needle in [b"Step", b"st p", b"\xff"]:
        with pytest.raises(ValueError):
            walker.walk(piece, (b"step ", -1, 0, -2), needle)
    with pytest.raises(TypeError):
        walker.walk(piece, (b"step ", -1, 0, -2), "step")
    ops = (b"step ", -1, 0, -2, b" loss ", -1, 0, b".", 0, -2)
    rows, _, at, steps, highest, spans, others = walker.walk(piece * 3, ops)
    assert (rows, list(array("q", at)), list(array("q", steps)), highest, others) == (4, [0, 1, 2], [1, 1, 1], 1, [])
    assert walker.join(piece * 3, spans, 1, 0, 0, 3) == b"0.5 0.5 0.5"
    assert walker.join(piece * 3, spans, 1, 0, 1, 1) == b""
    for args in [(piece * 3, spans, 1, 1, 0, 3), (piece * 3, spans, 1, 0, 0, 4), (piece * 3, spans, 1, 0, 2, 1),
                 (piece * 3, spans, 1, -1, 0, 1), (piece * 3, spans, 0, 0, 0, 1), (piece * 3, spans, 2, 0, 0, 1),
                 (piece * 3, spans[:-1], 1, 0, 0, 1), (piece, spans, 1, 0, 0, 3),
                 (piece, (2**62).to_bytes(8, "little") * 2, 1, 0, 0, 1), (piece, b"\xff" * 16, 1, 0, 0, 1)]:
        with pytest.raises(ValueError):
            walker.join(*args)


# ----------------------------------------------------------------------------- the scan's facts

def _facts(chunks: list[bytes], walk: bool) -> str:
    """The scan with shapes for pieces of any size, its facts as test_logscan_shapes compares them."""
    saved = shapes.WALK, extract.SHAPE_FROM
    shapes.WALK, extract.SHAPE_FROM = walk, 0
    try:
        scanner = LogScanner(compile_patterns())
        for chunk in chunks:
            scanner.feed(chunk)
        facts = scanner.finish()
    finally:
        shapes.WALK, extract.SHAPE_FROM = saved
    return repr(({**vars(facts), "points": facts.points}, facts.point_series(), scanner._recent_step))


def _same(log: bytes, sizes=(1 << 20, 4096, 333)) -> None:
    for size in sizes:
        chunks = [log[i : i + size] for i in range(0, len(log), size)]
        if size == 4096:
            chunks = [bytearray(chunk) for chunk in chunks]
        got, want = _facts(chunks, True), _facts(chunks, False)
        if got != want:
            at = next(i for i, (a, b) in enumerate(zip(got + "\0", want + "\0")) if a != b)
            pytest.fail(f"pieces of {size}, {log[:80]!r}: {got[max(0, at - 300) : at + 200]!r} "
                        f"!= {want[max(0, at - 300) : at + 200]!r}")


@needs_walk
def test_the_scan_with_the_walk_finds_the_regex_paths_facts(tmp_path) -> None:
    files = sorted({*ROOT.glob("tests/**/*.log"), *ROOT.glob("assets/**/*.log")})
    logs = [p.read_bytes() for p in files] + every_log(tmp_path) + [_log(seed) for seed in range(6)]
    rng = random.Random(5)
    # hostile lines among step lines (digit runs under `int`'s 4300 digits: a step of more stops
    # the scan on either path, as the general path's `int` does)
    hostile = [_piece(rng, _samples(rng), 2000, huge=4000) for _ in range(4)]
    assert len(logs) > 10
    for log in logs:
        _same(log)
    for log in hostile:  # not in pieces of 333 bytes: the scan's carry copies a long line at each
        _same(log, sizes=(1 << 20, 4096))


@needs_walk
def test_a_step_over_18_digits_is_read_by_the_regex() -> None:
    log = b"".join(b"step %d/9 loss 0.%d\n" % (i, i) for i in range(1, 500))
    log += b"step 1234567890123456789/9 loss 0.5\nstep 12345678901234567890123/9 loss 0.25\n"
    _same(log + log, sizes=(1 << 20, 400))
