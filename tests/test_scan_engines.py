"""The scan's markers in one pass (issue 19): both engines find what the searches one by one found.

tests/reference_logscan.py is the scanner as it was before (a `bytes.find` pass per marker), kept
only as the reference: the facts of the new scanner, with either engine, are its facts on every
log the tests have and on generated ones, for any chunking."""

from __future__ import annotations

import contextlib
import importlib.util
import re

import pytest
import reference_logscan
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FAST, LOG_PIECES
from test_verify_skip import every_log

from workbench import logsearch
from workbench.verify import loglines, logscan, markerlines, topology
from workbench.verify.markers import ENGINE_VARIABLE, Expressions, Markers, engine_name

ENGINES = ["re2", pytest.param("hyperscan", marks=pytest.mark.skipif(
    importlib.util.find_spec("hyperscan") is None, reason="hyperscan ships x86_64 wheels only"))]


def _facts(module, chunks, **kwargs) -> str:
    scanner = module.LogScanner(module.compile_patterns(), **kwargs)
    for chunk in chunks:
        scanner.feed(chunk)
    facts = scanner.finish()
    out = dict(vars(facts))
    out["points"] = sorted((name, sorted(steps.items())) for name, steps in facts.points.items())
    return repr(out)


def _same(log: bytes, engine: str, sizes=(1 << 18, 4096, 61)) -> None:
    markers = Markers(markerlines.MARKERS, engine=engine)
    for size in sizes:
        chunks = [log[i : i + size] for i in range(0, len(log), size)]
        for extract in (True, False):
            want = _facts(reference_logscan, chunks, extract_metrics=extract)
            got = _facts(logscan, chunks, extract_metrics=extract, markers=markers)
            if got != want:  # the facts of a long log: where they part, not pytest's diff of it all
                at = next(i for i, (a, b) in enumerate(zip(got + "\0", want + "\0")) if a != b)
                pytest.fail(f"{engine}, pieces of {size}, extract {extract}, {log[:60]!r}: "
                            f"{got[max(0, at - 200) : at + 200]!r} != {want[max(0, at - 200) : at + 200]!r}")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_scanner_finds_what_the_old_one_found_on_every_log(engine, tmp_path) -> None:
    tail = b"".join(m + b" at the end\n" for m in markerlines.MARKERS)
    for log in every_log(tmp_path):
        _same(log, engine, sizes=(1 << 18, 4096) if len(log) > 100_000 else (1 << 18, 4096, 61))
        _same(log + tail, engine, sizes=(1 << 18,))


MARKER_PIECES = st.sampled_from(
    [m + b"\n" for m in markerlines.MARKERS] + [m + b" x " + m + b"\n" for m in markerlines.MARKERS]
    + [b"Timeout of memory\n", b"core dumped timed out Check failed\n", b'workbench-probe {"a": 1}\n'])


@FAST
@given(log=st.lists(LOG_PIECES | MARKER_PIECES | st.binary(max_size=40), max_size=40).map(b"".join),
       window=st.sampled_from([4 << 20, 300, 40]))
def test_the_scanner_finds_what_the_old_one_found_on_any_bytes(log, window) -> None:
    """Also with a small head and tail, so that markers before the tail are passed over."""
    for module in (logscan, reference_logscan):
        module.FATAL_TAIL = module.HEAD = window
    try:
        for engine in ("re2", "hyperscan") if importlib.util.find_spec("hyperscan") else ("re2",):
            _same(log, engine, sizes=(1 << 18, 7))
    finally:
        for module in (logscan, reference_logscan):
            module.FATAL_TAIL = module.HEAD = 4 << 20


@pytest.mark.parametrize("engine", ENGINES)
def test_every_occurrence_by_where_it_starts_overlapping_ones_too(engine) -> None:
    markers = Markers([b"Timeout", b"out of memory", b"aa"], engine=engine)
    assert markers.scan(b"Timeout of memory aaa\nout of memory") == [[0], [4, 22], [18, 19]]
    assert markers.scan(b"") == [[], [], []]
    assert markers.scan(bytearray(b"xaa")) == [[], [], [1]]
    assert markers.found(b"x Timeout") and markers.found(bytearray(b"aa")) and markers.found(b"aa" * 1000)
    assert not markers.found(b"") and not markers.found(b"Timeou a out of memor")


def test_the_variable_picks_the_fallback(monkeypatch) -> None:
    monkeypatch.setenv(ENGINE_VARIABLE, "re2")
    assert engine_name() == "re2" and Markers([b"x"]).engine == "re2"
    monkeypatch.delenv(ENGINE_VARIABLE)
    assert engine_name() == ("hyperscan" if importlib.util.find_spec("hyperscan") else "re2")


def _candidates_one_search_per_cue(head: bytes) -> list[int]:
    """topology._candidates as it was: a `re` search per cue, again from each found line's end."""
    import re

    from workbench.verify.topology import MAX_LINES

    starts: set[int] = set()
    for pattern in topology._CUES.patterns:
        cue = re.compile(pattern)
        m, n = cue.search(head), 0
        while m is not None and n < MAX_LINES:
            starts.add(head.rfind(b"\n", 0, m.start()) + 1)
            n += 1
            end = head.find(b"\n", m.end())
            m = None if end == -1 else cue.search(head, end)
    return sorted(starts)


CUE_PIECES = st.sampled_from([b"world_size=4", b"rank: 2", b"device count = 8 ", b"devices:", b"local_rank ='",
                              b"shape:=", b"ordinal\t\t=", b"num_processes:", b"index  ", b"\n", b"ank", b"size"])


def _same_candidates(head: bytes, engine: str, monkeypatch) -> None:
    monkeypatch.setattr(topology, "_CUES", Expressions(topology._CUES.patterns, engine=engine))
    assert topology._candidates(head) == _candidates_one_search_per_cue(head), (engine, head[:80])


@pytest.mark.parametrize("engine", ENGINES)
def test_the_topology_cues_find_the_lines_one_search_per_cue_found(engine, tmp_path, monkeypatch) -> None:
    """On every log the tests have, and past the per-cue cap of lines."""
    for log in every_log(tmp_path):
        _same_candidates(topology.head_of([log])[0], engine, monkeypatch)
    _same_candidates(b"rank=1 world_size: 2\n" * (topology.MAX_LINES + 5) + b"devices=4", engine, monkeypatch)


@FAST
@given(head=st.lists(CUE_PIECES | st.binary(max_size=12), max_size=60).map(b"".join))
def test_the_topology_cues_find_the_lines_one_search_per_cue_found_in_any_bytes(head) -> None:
    for engine in ("re2", "hyperscan") if importlib.util.find_spec("hyperscan") else ("re2",):
        with pytest.MonkeyPatch.context() as monkeypatch:
            _same_candidates(head, engine, monkeypatch)


@pytest.mark.parametrize("engine", ENGINES)
def test_expressions_give_where_each_match_ends(engine) -> None:
    found = Expressions([rb"ab+", rb"b=", rb"[0-9]{2}"], engine=engine)
    every_length = [2] if engine == "hyperscan" else []  # "ab" and "abb" start alike: RE2 reports the longer
    assert found.ends(b"abb= 123") == [[*every_length, 3], [4], [7, 8]]
    assert found.ends(b"") == [[], [], []]


# the log pane's error and warning lines: RE2 against the `re` patterns they replace
OLD_ERROR = re.compile(
    rb"(?m)^Traceback \(most recent call last\)|^[A-Za-z_][\w.]*(?:Error|Exception)\b"
    rb"|^(?:\S+ \S+: [EF] |[EF]\d{4} )|\bFATAL\b|Check failed|RESOURCE_EXHAUSTED|\bKilled\b")
OLD_WARNING = re.compile(
    rb"(?m)^(?:\S+ \S+: W |W\d{4} )|Warning:"
    rb"|(?i:(?<!\S)(?>\S*?torch_xla)(?:\S*?warn|\S*+\s++(?:\S++\s++){0,3}warn))")


LINE_LOCAL_WARNING = re.compile(OLD_WARNING.pattern.replace(rb"\s++", rb"[ \t\r\f\v]++"))
"""The old warning pattern within a line, as the new one is."""


def _same_lines(log: bytes, warning: re.Pattern = OLD_WARNING) -> None:
    for new, old in ((logsearch.ERROR, OLD_ERROR), (logsearch.WARNING, warning)):
        assert list(logsearch.matching_lines([log], new)) == list(logsearch.matching_lines([log], old)), log[:80]
    for needle in ("error", "Error", "xla", "ü", "[rank0]"):
        old = re.compile(re.escape(needle.encode()), 0 if any(c.isupper() for c in needle) else re.IGNORECASE)
        assert list(logsearch.matching_lines([log], logsearch.search_pattern(needle))) == list(
            logsearch.matching_lines([log], old)), (needle, log[:80])


def test_the_log_panes_lines_are_the_re_patterns_lines_on_every_log(tmp_path) -> None:
    for log in every_log(tmp_path):
        _same_lines(log)


LINE_PIECES = st.sampled_from([
    b"\n", b" ", b"\t", b"\x0b", b"\xff", b"W0101 ", b"E0101 ", b"I1 2: W ", b"a b: E ", b"torch_xla", b"TORCH_XLA",
    b"warn", b"WARNING", b"Warning:", b"ValueError", b"a.b.Exception", b"Traceback (most recent call last)",
    b"FATAL", b"Killed", b"Check failed", b"error", b"\xc3\xbc", b"\xc3\x9c", b"[rank0]", b"x", b"1"])


@FAST
@given(log=st.lists(LINE_PIECES, max_size=40).map(b"".join))
def test_the_log_panes_lines_are_the_re_patterns_lines_in_any_bytes(log) -> None:
    _same_lines(log, LINE_LOCAL_WARNING)


def _long_log(seed: int, size: int, *, crlf: bool = False, last_newline: bool = True) -> bytes:
    """Step lines with rare lines between them, some close together and some more than the numpy
    newline count's threshold apart, a metrics report split across lines, and lines longer than a
    small chunk: so that hits fall at every kind of piece boundary, whatever the chunking."""
    import random

    rng = random.Random(seed)
    rare = [m + b" here\n" for m in markerlines.MARKERS] + [
        b"Traceback (most recent call last):\n", b'  File "x.py", line 1\n', b"RuntimeError: boom\n",
        b"Metric: CompileTime\n  TotalSamples: 12\n", b"Counter: UncachedCompile\n  Value: 7\n",
        b'workbench-probe {"device_kind": "TPU v5e", "devices_used": 4}\n', b"{devices=[4,1]0,1,2,3}\n",
        b"Step: 7, loss=0.5\n", b"step 9/12 loss 0.25\n", b"x" * 5000 + b"\n", b"mark_step Step\n",
        # lines that mention a step but are no step lines, around the 64 a look back reads
        b"mark_step\n" * 62, b"MarkStep\n" * 70, b"Counter: MarkStep\n  Value: 3\n" * 40]
    out, step = [], 0
    while sum(map(len, out)) < size:
        for _ in range(rng.choice([0, 1, 3, 40, 400])):  # 400 step lines: about 20 KiB
            step += 1
            out.append(b"step %d/99999 loss 0.%d grad_norm 1.5\n" % (step, step % 97))
        out.append(rng.choice(rare))
    log = b"".join(out)
    if crlf:
        log = log.replace(b"\n", b"\r\n")
    return log if last_newline else log.rstrip(b"\r\n")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_scanner_finds_what_the_old_one_found_in_long_logs_in_any_pieces(engine) -> None:
    """Pieces of 1 MiB, 4 KiB and 333 bytes over logs of some MiB, with and without line ends
    (one without any), and a head and tail smaller than the log, so that line numbers are counted
    over long stretches and hits are passed over at the window's edge."""
    logs = [_long_log(1, 3 << 19), _long_log(2, 1 << 20, crlf=True), _long_log(3, 600_000, last_newline=False),
            b"Killed " + b"step 3/9 x " * 100_000]
    for module in (logscan, reference_logscan):
        module.FATAL_TAIL = module.HEAD = 700_000
    try:
        for log in logs:
            with _numpy_counts(False):
                _same(log, engine, sizes=(1 << 20,))
            with _numpy_counts(True):
                _same(log, engine, sizes=(1 << 20, 4096, 333))
    finally:
        for module in (logscan, reference_logscan):
            module.FATAL_TAIL = module.HEAD = 4 << 20


@contextlib.contextmanager
def _numpy_counts(on: bool):
    """Newlines counted with numpy from the start, or with `bytes.count` alone (numpy is imported
    only after some hundred MiB, and used at once where someone else imported it)."""
    import numpy

    saved = loglines._numpy[:], loglines._NUMPY_FROM
    loglines._numpy[:] = [numpy] if on else []
    if not on:
        loglines._NUMPY_FROM = 1 << 62
    try:
        yield
    finally:
        loglines._numpy[:], loglines._NUMPY_FROM = saved


def test_newline_counts_are_bytes_counts() -> None:
    """On stretches short and long, that start and end on newlines and beside them."""
    import random

    rng = random.Random(5)
    data = bytes(rng.choice(b"\n\nab\r\xff") for _ in range(300_000))
    lines = [i for i, byte in enumerate(data) if byte == 10]
    ranges = [(0, len(data)), (0, 0), (len(data), len(data))]
    for _ in range(300):
        start, length = rng.choice(lines), rng.choice([0, 1, 100, 8191, 8192, 8193, 20_000, 250_000])
        ranges += [(start + a, min(start + length + b, len(data))) for a in (-1, 0, 1) for b in (0, 1) if start + a >= 0]
    with _numpy_counts(True):
        for start, end in ranges:
            for buffer in (data, bytearray(data)):
                assert loglines._newlines(buffer, start, end) == data.count(b"\n", start, end), (start, end)
