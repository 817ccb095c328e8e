"""The scan's markers in one pass (issue 19): both engines find what the searches one by one found.

tests/reference_logscan.py is the scanner as it was before (a `bytes.find` pass per marker), kept
only as the reference: the facts of the new scanner, with either engine, are its facts on every
log the tests have and on generated ones, for any chunking."""

from __future__ import annotations

import importlib.util

import pytest
import reference_logscan
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FAST, LOG_PIECES
from test_verify_skip import every_log

from workbench.verify import logscan
from workbench.verify.markers import ENGINE_VARIABLE, Markers, engine_name

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
    markers = Markers(logscan.MARKERS, engine=engine)
    for size in sizes:
        chunks = [log[i : i + size] for i in range(0, len(log), size)]
        for extract in (True, False):
            want = _facts(reference_logscan, chunks, extract_metrics=extract)
            assert _facts(logscan, chunks, extract_metrics=extract, markers=markers) == want, (engine, size, log[:60])


@pytest.mark.parametrize("engine", ENGINES)
def test_the_scanner_finds_what_the_old_one_found_on_every_log(engine, tmp_path) -> None:
    tail = b"".join(m + b" at the end\n" for m in logscan.MARKERS)
    for log in every_log(tmp_path):
        _same(log, engine, sizes=(1 << 18, 4096) if len(log) > 100_000 else (1 << 18, 4096, 61))
        _same(log + tail, engine, sizes=(1 << 18,))


MARKER_PIECES = st.sampled_from(
    [m + b"\n" for m in logscan.MARKERS] + [m + b" x " + m + b"\n" for m in logscan.MARKERS]
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
