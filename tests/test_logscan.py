"""The log scanner's facts: the same for every chunking, fatal lines in line order and each once,
and the planned step count found without metric extraction."""

from __future__ import annotations

import shutil

from domain.models import Outcome
from workbench.config import DEMO_BUNDLE
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import compile_patterns

MLP = DEMO_BUNDLE / "migrations" / "mlp-classifier"

FATAL_LOG = (b"step 1/9 loss 0.5\nKilled after it ran out of memory\nSegmentation fault (core dumped)\n"
             b"RESOURCE_EXHAUSTED: out of memory\nstep 2/9 loss 0.4\n")


def _scan(chunks, **kwargs):
    scanner = LogScanner(compile_patterns(), **kwargs)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def test_fatal_lines_in_line_order_each_once_for_every_cut() -> None:
    want = [("oom", 2, "Killed after it ran out of memory"), ("fatal", 3, "Segmentation fault (core dumped)"),
            ("oom", 4, "RESOURCE_EXHAUSTED: out of memory")]
    for cut in range(len(FATAL_LOG) + 1):
        facts = _scan([FATAL_LOG[:cut], FATAL_LOG[cut:]])
        assert [(kind, hit.line, hit.text) for kind, hit in facts.fatal] == want, cut


HEADER_ONLY = (b"Training for step 0/100\n" + b"".join(b"Step: %d, loss=0.%d\n" % (i, i) for i in range(1, 91))
               + b"done\n")


def test_planned_step_count_without_metric_extraction_is_the_extracted_one() -> None:
    logs = [p.read_bytes() for p in sorted(MLP.glob("logs/*.log"))] + [HEADER_ONLY, b"Step: 3, loss=1\n", b""]
    for log in logs:
        want = _scan([log]).total_steps
        for size in (64, 4096, 1 << 20):
            chunks = [log[i : i + size] for i in range(0, len(log), size)]
            assert _scan(chunks, extract_metrics=False).total_steps == want, (log[:40], size)
    assert _scan([HEADER_ONLY], extract_metrics=False).total_steps == 100


def test_level_1_of_a_log_over_the_extraction_limit_uses_its_planned_step_count(tmp_path, monkeypatch) -> None:
    """A run that planned 80 steps and stopped at 40 fails level 1, though the reference run's last
    step is 40, also when its log is over the extraction limit and its series are stored."""
    from storage import queries
    from storage.database import open_study
    from workbench.bundle import import_bundle
    from workbench.verify import evidence, verify_study

    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO_BUNDLE, bundle)
    log = bundle / "migrations/mlp-classifier/logs/004.log"
    log.write_bytes(log.read_bytes().replace(b"/40 ", b"/80 "))
    monkeypatch.setattr(evidence, "EXTRACT_LIMIT", 0)  # every log is "over the limit"
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert not import_bundle(study, bundle, "ana").problems
        verify_study(study.db, "ana", slug="mlp-classifier")
        m = queries.get_migration(study.db, "mlp-classifier")
        levels = {}
        for seq in (2, 4):
            a = study.db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [m.id, seq]).fetchone()[0]
            levels[seq] = queries.verdicts(study.db, a)[0]
    finally:
        study.close()
    assert levels[4].outcome is Outcome.FAIL and "step 40 of 80 (the `step N/M` total in the log)" in levels[4].reason
    assert levels[2].outcome is Outcome.PASS


def test_a_long_line_fed_in_small_chunks_is_read_in_linear_time() -> None:
    """A line that spans many chunks (a 1-4 MiB line read 333 bytes at a time, as a followed
    log grows) is kept growing in place, not copied at each chunk: linear in its length, and read
    as when it comes whole."""
    from linearity import grows_linearly

    def log(n: int) -> bytes:
        return b"step 1 loss 2 Traceback (most recent call last) " + b"x" * n + b"\nstep 2/4 loss 3\nKilled\n"

    def chunked(n: int, **kwargs):
        data = log(n)
        return _scan((data[i : i + 333] for i in range(0, len(data), 333)), **kwargs)

    for extract in (True, False):
        whole, small = _scan([log(1 << 18)], extract_metrics=extract), chunked(1 << 18, extract_metrics=extract)
        facts = [(f.last_step, f.total_steps, f.lines, f.size, f.fatal, f.point_series()) for f in (whole, small)]
        assert facts[0] == facts[1] and facts[0][:4] == (2, 4, 3, len(log(1 << 18))) and facts[0][4]
    assert grows_linearly(chunked, 1 << 20)
