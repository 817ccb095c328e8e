"""The log scanner's facts: the same for every chunking, fatal lines in line order and each once,
and the planned step count found without metric extraction."""

from __future__ import annotations

from workbench.verify.logscan import LogScanner, compile_patterns

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
