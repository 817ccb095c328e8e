"""Step lines read by shape (issue 19): the scan's facts are the general path's, to the order of
every dict, on every log the tests have, on generated logs of many shapes cut into pieces of any
size, and on lines built by hypothesis; and the shapes' regexes are linear on hostile lines."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from linearity import grows_linearly
from test_fuzz import FAST, LOG_PIECES
from test_patterns import shapes
from test_verify_skip import every_log

from workbench.verify import extract, topology
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import DEFAULT_PATTERNS, compile_patterns
from workbench.verify.shapes import _shape_of

ROOT = Path(__file__).resolve().parent.parent
PLAIN = re.compile(DEFAULT_PATTERNS[0].regex.encode())


def _facts(chunks: list[bytes], shapes_on: bool, standing: bool = False, shape_from: int = 0) -> str:
    """With shapes made for pieces of any size (`SHAPE_FROM`), so that tiny pieces take them too;
    `shapes_on` also tries the summary pattern at its lines' starts alone (`SUMMARY_AT_LEADS`)."""
    saved = extract.SHAPES, extract.SHAPE_FROM, extract.SUMMARY_AT_LEADS
    extract.SHAPES, extract.SHAPE_FROM, extract.SUMMARY_AT_LEADS = shapes_on, shape_from, shapes_on
    try:
        scanner = LogScanner(compile_patterns(), standing=topology.Standing() if standing else None)
        for chunk in chunks:
            scanner.feed(chunk)
        facts = scanner.finish()
    finally:
        extract.SHAPES, extract.SHAPE_FROM, extract.SUMMARY_AT_LEADS = saved
    # The points as their columns give them, before `points` is built: each series alone, every
    # series, a few points alone, then every point. repr keeps the order of every dict (names, then steps) and
    # tells NaNs and -0.0 apart.
    view = facts.series_view()  # its metrics built one at a time, the last first
    one_by_one = {name: view[name] for name in reversed(list(view))}
    series = facts.point_series()
    assert list(view) == list(series) and repr({n: one_by_one[n] for n in series}) == repr(series)
    ends = {name: [facts.point(name, step) for step in [*sorted(steps)[:: max(1, len(steps) // 40)], max(steps), -1]]
            for name, steps in series.items()}
    points = facts.points
    assert repr(facts.point_series()) == repr(series)  # now from the dict built
    assert all(facts.has_metric(name) for name in points)
    return repr(({**vars(facts), "points": points}, series, ends, scanner._recent_step, scanner._sequence))


def _same(log: bytes, sizes=(1 << 20, 4096, 333, 61, 7), standing: bool = False) -> None:
    for size in sizes:
        chunks = [log[i : i + size] for i in range(0, len(log), size)]
        if size == 4096:  # blocks as `file_chunks` reads them
            chunks = [bytearray(chunk) for chunk in chunks]
        want = _facts(chunks, False, standing)
        got = _facts(chunks, True, standing, shape_from=0 if size < (1 << 20) else extract.SHAPE_FROM)
        if got != want:
            at = next(i for i, (a, b) in enumerate(zip(got + "\0", want + "\0")) if a != b)
            pytest.fail(f"pieces of {size}, {log[:80]!r}: {got[max(0, at - 300) : at + 200]!r} "
                        f"!= {want[max(0, at - 300) : at + 200]!r}")


def test_every_log_of_the_tests_and_the_assets(tmp_path) -> None:
    files = sorted({*ROOT.glob("tests/**/*.log"), *ROOT.glob("assets/**/*.log")})
    logs = [p.read_bytes() for p in files] + every_log(tmp_path)
    assert len(logs) > 10
    for log in logs:
        _same(log, sizes=(1 << 20, 4096, 333) if len(log) > 100_000 else (1 << 20, 4096, 333, 61, 7))


SHAPED = [
    b"step %(s)d/%(t)d loss %(f)s grad_norm %(g)s step_time 0.0%(i)d",
    b"Step: %(s)d, loss=%(f)s, lr=%(e)s, acc=%(g)s",
    b"[rank0] 2026-12-04 10:%(i)02d:%(i)02d INFO step %(s)d/%(t)d | loss: %(f)s | eval/acc: %(g)s | 12.5 it/s",
    b"step %(s)d loss %(f)s layer3.norm %(g)s 3.x_1 %(f)s loss %(g)s v_num 7 epoch %(i)d",
    b"STEP#%(s)d 'loss': %(f)s \"ppl\"=%(e)s tail 99 %(i)d",
    b"step %(s)d/%(t)d",
    b"train step %(s)d loss %(f)s\r",
    b"step %(s)d/%(t)d loss %(f)s {'loss': %(g)s} eval_acc %(g)s",
    b"step %(s)d step %(i)d loss %(f)s",
    b"step %(s)d lo\xc3\xa9ss %(f)s b\xffd %(g)s",
    # a marker's hit on a step line, after its step and before it: its step is that line's, or the one before
    b"step %(s)d/%(t)d loss %(f)s pt-xla-profiler: TransferFromDeviceTime too frequent",
    b"[rank%(i)d] pt-xla-profiler: step %(s)d loss %(f)s",
]
OTHER = [
    b"{'loss': %(f)s, 'grad_norm': %(g)s, 'epoch': 0.%(i)d}", b'{"step": %(s)d, "loss": %(f)s}', b'{"loss": %(f)s}',
    b"Epoch %(i)d:  50%%|###  | %(s)d/%(t)d [00:01<00:00, 12.3it/s, loss=%(f)s, v_num=0]",
    b"eval_accuracy %(f)s", b"val_loss: %(g)s", b"valid_acc %(f)s", b"test/acc = %(e)s", b"final_loss %(f)s",
    b"evaluation %(f)s", b"  eval_loss %(f)s", b"xval_loss %(f)s", b"val/x: %(g)s\r", b"finalist_x 1", b"test_%(i)d",
    b"UserWarning: something about step sizes", b"Training for step 0/100", b"", b"x" * 300,
    b"Traceback (most recent call last):", b"ValueError: step 3 failed", b"Compilation Analysis: Compilation Cause",
    b"Counter: UncachedCompile", b"  Value: %(i)d", b"Metric: CompileTime", b"  TotalSamples: %(i)d",
    b"loss %(f)s", b"mark_step", b"step %(s)d/%(t)d loss nan grad_norm inf step_time 0.0%(i)d",
]


def _values(rng: random.Random) -> dict[bytes, bytes | int]:
    f = rng.choice([f"{rng.random():.4f}", f"{rng.random() * 10 ** rng.randint(-8, 8):g}", "nan", "inf",
                    str(rng.randint(-9, 9999)), f"{-rng.random():.3e}", "1e999", "+0.5", ".5", "0."])
    return {b"s": rng.randint(0, 3000), b"t": rng.choice([3000, 100000]), b"i": rng.randint(0, 59),
            b"f": f.encode(), b"g": f"{rng.random() * 3:.6f}".encode(), b"e": f"{rng.random():.2e}".encode()}


def _log(seed: int, lines: int = 3000) -> bytes:
    """Runs of one or two shapes (steps going on, repeating, going back), other lines between."""
    rng = random.Random(seed)
    ending = rng.choice([b"\n", b"\r\n"])
    main, second = rng.sample(SHAPED, 2)
    out, step = [], 0
    while len(out) < lines:
        for _ in range(rng.choice([1, 5, 50, 400])):
            values = _values(rng)
            step = rng.choice([step + 1, step + 1, step + 1, step, max(step - 5, 0)])
            values[b"s"] = step
            out.append((main if rng.random() < 0.9 else second) % values)
        for _ in range(rng.choice([0, 0, 1, 3])):
            out.append(rng.choice(OTHER) % _values(rng))
    log = ending.join(out)
    return log if rng.random() < 0.5 else log + ending


@pytest.mark.parametrize("seed", range(12))
def test_generated_logs_in_pieces_of_any_size(seed) -> None:
    _same(_log(seed))


def test_several_processes_standing() -> None:
    """Each step line written by four processes, an evaluation line now and then."""
    rng = random.Random(3)
    out = []
    for step in range(1, 2000):
        out += [b"step %d/2000 loss 0.%d grad_norm 1.5" % (step, rng.randint(0, 99))] * rng.choice([3, 4, 4])
        if step % 50 == 0:
            out.append(b"eval_loss 0.%d" % step)
    _same(b"\n".join(out) + b"\n", sizes=(1 << 20, 4096, 333), standing=True)


NAMES = st.sampled_from(["loss", "lr", "step", "epoch", "grad_norm", "a1", "3.x", "eval/acc", "v-num", "_", "é",
                         "loss2", "it", "x.y/z", "A", "nan", "e5"])
VALUES = st.sampled_from(["0.5", "-1.25e-05", "12", "nan", "inf", "1.", ".5", "+3", "1e", "1e999", "0x1", "1.2.3",
                          "-0.0", "00012", "1_000", "0.1a", "9" * 30]) | st.floats().map(repr)
SEPARATORS = st.sampled_from([" ", "=", ": ", "'", "\"", ",", " | ", "\t", "", "/", "-", "  "])


@st.composite
def step_lines(draw) -> bytes:
    prefix = draw(st.sampled_from(["", "[rank0] ", "2026-12-04 10:00:01 ", "x", "Train ", "eval_", "1 "]))
    word = draw(st.sampled_from(["step", "Step", "STEP", "steps", "mark_step"]))
    head = draw(st.sampled_from([" ", ": ", "=", "#", " #", ""]))
    total = draw(st.sampled_from(["", "/100", "/", "/x"]))
    pairs = draw(st.lists(st.tuples(SEPARATORS, NAMES, SEPARATORS, VALUES), max_size=5))
    tail = draw(st.sampled_from(["", "\r", " ", ",", "]", "x"]))
    step = draw(st.integers(0, 10**6))
    body = "".join(a + n + b + v for a, n, b, v in pairs)
    return f"{prefix}{word}{head}{step}{total}{body}{tail}".encode()


@FAST
@given(lines=st.lists(step_lines() | LOG_PIECES.map(lambda b: b.rstrip(b"\n")), min_size=1, max_size=30),
       repeat=st.integers(1, 30), seed=st.integers(0, 1000), ending=st.sampled_from([b"\n", b"\r\n", b""]))
def test_any_lines(lines, repeat, seed, ending) -> None:
    """Lines repeated in runs with their digits changed, so that they share shapes."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        for _ in range(rng.randint(1, repeat)):
            out.append(re.sub(rb"\d+", lambda m: str(rng.randint(0, 10 ** rng.randint(1, 4))).encode(), line))
    log = b"\n".join(out) + ending
    _same(log, sizes=(1 << 20, rng.randint(1, 400)))


def test_a_shape_covers_its_lines_and_no_others() -> None:
    shape = _shape_of(b"step 12/1000 loss 0.41 lr 1e-4 grad_norm 1.2 step_time 0.031", PLAIN)
    assert shape is not None and shape.names == ("loss", "grad_norm", "step_time") and shape.total
    rows = shape.regex.findall(b"step 3/9 loss 10.5 lr 3e-10 grad_norm 0.2 step_time 7.0\n"
                               b"step 3/9 loss 10.5 lr 3e-10 grad_norm 0.2 step_time 7.0 x\n"
                               b"step 3/9 loss 1e-5 lr 3e-10 grad_norm 0.2 step_time 7.0\n")
    assert rows[0][:4] == (b"3", b"10.5", b"0.2", b"7.0") and not rows[1][0] and not rows[2][0]  # no total column
    assert _shape_of(b"no step here", PLAIN) is None
    assert _shape_of(b"step 1 " + b"a 1 " * 1000, PLAIN) is None  # too long to be worth a regex


def test_the_shape_path_is_taken() -> None:
    """The bench's log goes by shape: its step lines are none of them read alone."""
    log = b"".join(b"step %d/999 loss 0.%d grad_norm 0.5 step_time 0.01\n" % (i, i) for i in range(1, 5000))
    log += b"UserWarning: x\nstep 5000/999 eval_loss 0.5\n"
    scanner = LogScanner(compile_patterns())
    shaped = scanner._shaped(scanner.patterns[0], log, 1, [])
    assert shaped is not None and len(shaped.at) == 4999 and [a[0] for a in shaped.alone] == [5000]
    assert scanner.facts.points["loss"][4999] == (0.4999, 4999) and scanner.facts.total_steps == 999


def test_a_log_is_read_by_the_shape_another_log_left_as_by_the_general_path(monkeypatch) -> None:
    """A new scanner first tries the shape the last scan used (`_RECENT_SHAPE`): a small log, too
    small to be given a shape of its own, then goes by shape, and its facts are the general path's."""
    big = b"".join(b"step %d/999 loss 0.%d grad_norm 0.5 step_time 0.01\n" % (i, i) for i in range(1, 3000))
    small = b"".join(b"step %d/20 loss 1.%d grad_norm 70.25 step_time 0.125\n" % (i, i) for i in range(1, 20))
    small += b"eval_acc 0.5\n"
    assert len(small) < extract.SHAPE_FROM
    monkeypatch.setattr(extract, "_RECENT_SHAPE", [None])
    alone = LogScanner(compile_patterns())
    assert alone._shaped(alone.patterns[0], small, 1, []) is None  # no shape of its own: the general path
    first = LogScanner(compile_patterns())
    first.feed(big)
    first.finish()
    assert extract._RECENT_SHAPE[0] is not None
    scanner = LogScanner(compile_patterns())
    shaped = scanner._shaped(scanner.patterns[0], small, 1, [])
    assert shaped is not None and len(shaped.at) == 19  # by the big log's shape
    assert _facts([small], True, shape_from=extract.SHAPE_FROM) == _facts([small], False)


SAMPLES = [b"step 12/1000 loss 0.41 grad_norm 1.2 step_time 0.031", b"[rank0] 2026-12-04 10:00:01 Step: 5, loss=1e-4",
           b"step 1 a 1 a1 1. 1 aa 1 a- 1 'x': 1", b"step 1 eval_1 11 A 1"]


@pytest.mark.parametrize("sample", SAMPLES)
def test_shape_regexes_are_linear_on_hostile_lines(sample) -> None:
    shape = _shape_of(sample, PLAIN)
    assert shape is not None
    near = {"near": sample.decode() + "1" * 10, "digits_in_value": sample.decode().rsplit(" ", 1)[0] + " " + "1" * 10}

    def line(n: int, kind: str) -> bytes:
        if kind in near:
            return ((near[kind].replace("1" * 10, "1" * n) + "\n") * 2).encode()
        return shapes(n)[kind].encode()

    slow = [kind for kind in [*shapes(10), *near]
            if not grows_linearly(lambda n, k=kind: shape.regex.findall(line(n, k)), 10_000)]
    assert not slow, slow


def test_points_are_built_once_and_keep_changes_until_the_next_write() -> None:
    """`points` is built from the columns when asked; changes to it (topology's remap of lines)
    are what `point` and `point_series` read after; a later write builds it again."""
    log = b"".join(b"step %d/99 loss 0.%d grad_norm 0.5\n" % (i, i) for i in range(1, 3000))
    scanner = LogScanner(compile_patterns())
    scanner.feed(log)
    facts = scanner.facts
    assert facts.points is facts.points and facts.point("loss", 7) == (0.7, 7)
    facts.points["loss"][7] = (0.7, 70)
    assert facts.point("loss", 7) == (0.7, 70) and facts.point_series()["loss"][7] == 0.7
    scanner.feed(b"step 7/99 loss 0.25\n")
    assert facts.point("loss", 7) == (0.25, 3000) and facts.point("grad_norm", 7) == (0.5, 7)
    assert facts.point("nothing", 7) is None and not facts.has_metric("nothing")
    facts.points = {"a": {1: (2.0, 3)}}
    assert facts.point_series() == {"a": {1: 2.0}} and facts.point("a", 1) == (2.0, 3)


def test_a_sequential_point_replaces_a_later_line_of_its_step() -> None:
    """Trainer dicts are numbered in order and written after the piece's step lines: the second
    dict's point at 2 replaces the step line's though that line comes later; `point` agrees."""
    for shapes_on in (False, True):
        saved = extract.SHAPES, extract.SHAPE_FROM
        extract.SHAPES, extract.SHAPE_FROM = shapes_on, 0
        try:
            scanner = LogScanner(compile_patterns())
            scanner.feed(b"{'loss': 0.1}\n{'loss': 0.2}\n" + b"".join(b"step %d loss 0.5\n" % i for i in range(2, 40)))
            facts = scanner.finish()
        finally:
            extract.SHAPES, extract.SHAPE_FROM = saved
        assert facts.point("loss", 2) == (0.2, 2) and facts.point("loss", 3) == (0.5, 4)
        assert facts.points["loss"][2] == (0.2, 2) and facts.point("loss", 2) == (0.2, 2)
