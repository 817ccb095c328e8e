"""The steps-only scan's step lines (issue 19): the possessive forms of the plain pattern find what
its greedy form finds, and a cited step line found by its step (`PointLines._only_line_of`) is
the one found among all of its piece's step lines; the topology's cue for rank prefixes is the
substring test it replaced."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from linearity import grows_linearly
from test_fuzz import FAST
from test_verify_skip import STEP_PIECES, _chunks, every_log

from storage.logs import CHUNK
from workbench.verify import steplines, topology
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import compile_patterns
from workbench.verify.steplines import PointLines

GREEDY_LINES = re.compile(steplines._STEP_LINES_PLAIN)
GREEDY_STEPS = re.compile(steplines._STEP_LINES_PLAIN.replace(rb"(?:/(?P<total>\d+))?", rb"(?:/\d+)?"))


def _same_matches(log: bytes) -> None:
    assert steplines._STEP_LINES.findall(log) == GREEDY_LINES.findall(log)
    assert steplines._STEPS.findall(log) == GREEDY_STEPS.findall(log)
    assert [m.span() for m in steplines._STEP_LINES.finditer(log)] == [m.span() for m in GREEDY_LINES.finditer(log)]
    for start in range(0, len(log), max(1, len(log) // 50)):  # searches from anywhere, as the look back does
        a, b = steplines._STEP_LINES.search(log, start), GREEDY_LINES.search(log, start)
        assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups()))


def test_possessive_step_patterns_match_as_the_greedy_ones_on_every_log(tmp_path) -> None:
    for log in every_log(tmp_path):
        _same_matches(log)


EDGES = st.sampled_from([b"step", b"STEP", b"Step", b" ", b":", b"=", b"#", b"/", b"//", b"0", b"7", b"42",
                         b"\n", b"\r", b"x", b"_", b"-", b"a step", b"steps", b"step_time 1"])


@FAST
@given(log=st.lists(STEP_PIECES | EDGES | st.binary(max_size=8), max_size=40).map(b"".join))
def test_possessive_step_patterns_match_as_the_greedy_ones_on_any_log(log) -> None:
    _same_matches(log)


def test_step_patterns_run_in_linear_time() -> None:
    worst = {
        "separators": lambda n: b"step" + b" :=#" * n,
        "digits": lambda n: b"step " + b"1" * n + b"/" + b"2" * n,
        "words": lambda n: b"stepstep " * n,
        "lines": lambda n: b"step 1/2 loss 3\n" * n,
    }
    slow = [k for k, make in worst.items()
            for pattern in (steplines._STEP_LINES, steplines._STEPS)
            if not grows_linearly(lambda n, p=pattern, m=make: p.findall(m(n)), 20_000)]
    assert not slow, slow


def without_starts(step_lines: list[tuple]) -> list[tuple]:
    """A steps-only scan's step lines as a build without the C module has them: no line starts."""
    return [(offset, size, steps, None) for offset, size, steps, _ in step_lines]


def _every_step_line(log: bytes, chunks: list[bytes], monkeypatch) -> int:
    """Asserts that each step line of each piece is found at the same place by its step (when no
    other step line of the piece has it) as among all of the piece's; gives how many were."""
    scanner = LogScanner(compile_patterns(), steps_only=True)
    for chunk in chunks:
        scanner.feed(chunk)
    scanner.finish()
    monkeypatch.setattr(steplines, "NEAR_END", 0)
    searched = without_starts(scanner.step_lines)  # found by the regex engine, not read from the C loop's
    by_step = PointLines(log, searched, compile_patterns(), lambda offset: 0, lambda: None)
    monkeypatch.setattr(steplines, "FIND_BY_STEP", False)
    among_all = PointLines(log, searched, compile_patterns(), lambda offset: 0, lambda: None)
    kept = PointLines(log, scanner.step_lines, compile_patterns(), lambda offset: 0, lambda: None)
    found = 0
    for k, (offset, size, steps, _) in enumerate(scanner.step_lines):
        for i in range(len(steps)):
            monkeypatch.setattr(steplines, "FIND_BY_STEP", True)
            by_step._all.clear()  # else a piece's lines, once all found, are looked up there
            at = by_step._nth_line(k, i)
            monkeypatch.setattr(steplines, "FIND_BY_STEP", False)
            assert at == among_all._nth_line(k, i) == kept._nth_line(k, i), (k, i, steps[i], log[:80])
            assert offset <= at < offset + size and steplines._STEP_LINES.match(log, at)
            found += steps.count(steps[i]) == 1
    return found


@pytest.mark.parametrize("size", [CHUNK, 64, 4096])
def test_a_step_line_found_by_its_step_is_the_one_found_among_all(size, tmp_path, monkeypatch) -> None:
    found = sum(_every_step_line(log, _chunks(log, size), monkeypatch) for log in every_log(tmp_path))
    assert found > 1000  # the generated logs' steps are unique


def test_uneven_lines_and_repeated_steps(monkeypatch) -> None:
    """Long lines between the step lines (the first guess misses), a step printed twice (found
    among all) and steps that go back after a restart."""
    log = b"".join(b"step %d/90 loss 0.5\n" % s + b"noise " * (3000 if s % 17 == 0 else 1) + b"\n"
                   for s in [*range(1, 60), *range(30, 90), 7])
    assert _every_step_line(log, [log], monkeypatch) > 0


@FAST
@given(log=st.lists(STEP_PIECES | st.binary(max_size=20), max_size=80).map(b"".join),
       size=st.sampled_from([64, 512, CHUNK]))
def test_a_step_line_found_by_its_step_on_any_log(log, size) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _every_step_line(log, _chunks(log, size), monkeypatch)


RANK_PIECES = st.sampled_from([b"[rank", b"[rank0]: ", b"[default", b"[default1]:", b"[", b"[[rank", b"rank",
                               b"default", b"[Rank", b"\n", b"x", b"[ rank"])


def _rank_cue_as_before(head: bytes) -> None:
    assert (topology._RANK_CUE.search(head) is not None) == (b"[rank" in head or b"[default" in head)


def test_the_rank_cue_is_the_substring_test_it_replaces(tmp_path) -> None:
    for log in every_log(tmp_path):
        _rank_cue_as_before(log)
        _rank_cue_as_before(log + b"[rank")
        _rank_cue_as_before(b"[default" + log)


@FAST
@given(head=st.lists(RANK_PIECES | st.binary(max_size=6), max_size=30).map(b"".join))
def test_the_rank_cue_on_any_head(head) -> None:
    _rank_cue_as_before(head)


def test_the_rank_cue_runs_in_linear_time() -> None:
    assert grows_linearly(lambda n: topology._RANK_CUE.search(b"[ran" * n + b"[defaul" * n), 50_000)
