"""Stored series are not extracted again (issue 19): a scan of the step lines alone and `PointLines`
give what a full extraction gives, on every log the tests have, and so the same verdicts."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FAST

from storage import queries
from storage.database import open_study
from storage.logs import CHUNK
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE
from workbench.verify import evidence, steplines, verify_study
from workbench.verify.logscan import LogScanner, scan_chunks, steps_only_suits
from workbench.verify.patterns import compile_patterns
from workbench.verify.steplines import PointLines

CACHE = Path.home() / ".cache" / "workbench"

TRICKY = [
    # a summary line after its step, another before any step, a restart that goes back in steps
    b"eval_loss 0.9\nstep 1/4 loss 0.5\nstep 2/4 loss 0.4 eval_acc 0.1\neval_acc 0.2\n"
    b"step 1/4 loss 0.45\nstep 3/4 loss=0.3\nStep: 3, loss: 0.31\nfinal/accuracy: 0.9\n",
    # a step line in capitals, a summary name written inside a step line, a value that is not one
    b"STEP 7 loss 1e-3 test_acc 0.5\ntest_acc 0.6\ntest_acc nan\nval_loss 0.2\nstep 8/9 val_loss 0.1 lr 0.1\n",
    # `valid_` names: the summary pattern reads them only in a piece that holds one of its gates
    b"step 5 loss 0.2\neval_acc 0.8\nvalid_acc 0.7\n" + b"x\n" * (CHUNK // 2) + b"valid_acc 0.75\n",
    # the planned total on an earlier step line only, and on a step line further than 64 lines from the end
    b"step 1/50 loss 0.5\nstep 2/60 loss 0.4\n" + b"note\n" * 70 + b"step 3 loss 0.3\nStep 4/x\n",
    b"step 4/70 loss 0.2\n" + b"note\n" * 70,
    # Trainer dicts, JSON lines and progress bars: extracted in full
    b"{'loss': 0.69, 'epoch': 0.1}\n",
    b'{"step": 3, "loss": 0.41}\n',
    b"Epoch 0:  50%|###  | 16/32 [00:01<00:00, 12.3it/s, loss=0.693]\n",
]


def _generated(folder: Path) -> list[bytes]:
    """Logs the bench generator writes, one of each outcome."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from generate import OUTCOMES, write_log  # type: ignore[import-not-found]

    rng = random.Random(7)
    out = []
    for outcome, _ in OUTCOMES:
        path = folder / f"{outcome}.log"
        write_log(path, rng, size=200_000, outcome=outcome, project="mlp", chips=4, ref_loss=0.5, acc=0.9)
        out.append(path.read_bytes())
    return out


def every_log(folder: Path) -> list[bytes]:
    """The demo's logs, the torch_xla runs' (when a test session cached them), the tricky ones
    above and the bench generator's."""
    logs = [p.read_bytes() for p in sorted(DEMO_BUNDLE.glob("migrations/*/logs/*.log"))]
    logs += [p.read_bytes() for p in sorted(CACHE.glob("verify-*/*/migrations/*/logs/*.log"))]
    return logs + TRICKY + _generated(folder)


def _chunks(log: bytes, size: int = CHUNK) -> list[bytes]:
    return [log[i : i + size] for i in range(0, len(log), size)] or [b""]


def _without_points(facts) -> str:
    return repr({k: v for k, v in vars(facts).items() if k != "points"})


def _same_as_extraction(log: bytes, chunks: list[bytes]) -> bool:
    """Whether the log suits a steps-only scan; if so, asserts it gives extraction's facts and
    lines."""
    patterns = compile_patterns()
    full = scan_chunks(chunks, patterns=patterns)
    if not steps_only_suits(patterns, log):
        return False
    scanner = LogScanner(patterns, steps_only=True)
    for chunk in chunks:
        scanner.feed(chunk)
    facts = scanner.finish()
    assert _without_points(facts) == _without_points(full), log[:80]
    assert not facts.points
    searched = [(offset, size, steps, None) for offset, size, steps, _ in scanner.step_lines]  # no C module
    for step_lines in (scanner.step_lines, searched):
        lines = PointLines(log, step_lines, patterns, lambda offset: log.count(b"\n", 0, offset) + 1, lambda: full)
        for name, steps in full.points.items():
            for step, (_, line) in steps.items():
                assert lines.line(name, step) == line, (name, step, log[:80])
            assert lines.line(name, 10**9) is None
        assert lines.line("no_such_metric", 1) is None and lines.line("step", 1) is None
    return True


@pytest.mark.parametrize("near", [0, 64, 10**9])  # every cited line found among all of its piece's, near an end, either
@pytest.mark.parametrize("size", [CHUNK, 64])
def test_point_lines_are_the_lines_extraction_cites_on_every_log(size, near, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(steplines, "NEAR_END", near)
    suited = sum(_same_as_extraction(log, _chunks(log, size)) for log in every_log(tmp_path))
    assert suited >= len(TRICKY) - 3


STEP_PIECES = st.sampled_from([
    b"step 3/40 loss 0.41 grad_norm 1.2\n", b"Step: 7, loss=nan\n", b"STEP 2 loss 1e-3 eval_acc 0.5\n",
    b"step 1 loss 0.9\n", b"step 3 loss 0.40 step 9 loss 0.1\n", b"eval_accuracy 0.93\n", b"test/acc: 0.91\n",
    b"valid_acc 0.7\n", b"val_loss 0.2\n", b"final_acc x\n", b"eval_loss 1\r\n", b"Training for step 0/100\n",
    b"Counter: UncachedCompile\n", b"  Value: 7\n", b"Compilation Analysis: Compilation Cause\n", b"\n", b"x" * 300,
    b"step 4 Compilation Cause x\n", b"Compilation Cause step 6\n", b"pt-xla-profiler: step 8/9\n",
    b"Metric: CompileTime\n", b"  TotalSamples: 12\n",
])


@FAST
@given(log=st.lists(STEP_PIECES | st.binary(max_size=20), max_size=60).map(b"".join),
       cuts=st.lists(st.integers(0, 3000), max_size=6))
def test_point_lines_are_the_lines_extraction_cites_on_any_log(log, cuts) -> None:
    bounds = sorted({min(c, len(log)) for c in cuts} | {0, len(log)})
    _same_as_extraction(log, [log[a:b] for a, b in zip(bounds, bounds[1:])])


def _verdicts(db) -> dict:
    out = {}
    for (aid,) in db.execute("SELECT id FROM attempt ORDER BY id").fetchall():
        v = queries.current_verification(db, aid)
        f = queries.current_failure(db, aid)
        out[aid] = (
            [(d.level, d.outcome, d.reason, d.evidence) for d in queries.verdicts(db, aid)],
            None if v is None else (v.highest_level, v.cause, v.silent, v.over_claim),
            None if f is None else (f.cause, f.note, f.evidence),
        )
    return out


def _bundles() -> list[Path]:
    return [DEMO_BUNDLE, *sorted(p for p in CACHE.glob("verify-*/*") if (p / "study.toml").is_file())]


@pytest.mark.parametrize("bundle", _bundles(), ids=lambda p: p.parent.name + "/" + p.name)
def test_verdicts_and_cited_lines_are_the_same_without_extraction(bundle, tmp_path, monkeypatch) -> None:
    got = {}
    # without extraction, cited lines numbered by counting newlines near the start or a line cited before, always
    # by the line index, or by both (lines within 300 bytes counted)
    for skip, count_below in ((False, 0), (True, evidence.COUNT_LINES_BELOW), (True, 0), (True, 300)):
        monkeypatch.setattr(evidence, "CITE_WITHOUT_EXTRACTION", skip)
        monkeypatch.setattr(evidence, "COUNT_LINES_BELOW", count_below)
        study = open_study(tmp_path / f"{skip}-{count_below}.db", create=True)
        try:
            assert not import_bundle(study, bundle, "ana").problems
            verify_study(study.db, "ana")
            got[skip, count_below] = _verdicts(study.db)
        finally:
            study.close()
    first, *others = got.values()
    assert all(other == first for other in others)
    cited = [e for levels, _, _ in first.values() for _, _, _, ev in levels for e in ev if "(log line " in e.text]
    assert cited or bundle != DEMO_BUNDLE


def test_a_bundle_with_tricky_logs_gets_the_same_verdicts(tmp_path, monkeypatch) -> None:
    """The demo's runs with the tricky logs above in place of theirs."""
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO_BUNDLE, bundle)
    logs = sorted(bundle.glob("migrations/*/logs/*.log"))
    for path, extra in zip(logs[1:], TRICKY):
        path.write_bytes(path.read_bytes() + extra)
    test_verdicts_and_cited_lines_are_the_same_without_extraction(bundle, tmp_path, monkeypatch)
