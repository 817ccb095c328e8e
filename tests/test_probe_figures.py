"""Level 5's figures from real probe traces (torch_xla on XLA:CPU, issue 34): host syncs per step
have one reading, the trace's per-step count, and compilations are compared with the best
correct sibling per phase (training steps and evaluations apart).

Four runs of one probed script (tests/test_probe.py's TRACED: 20 steps, an evaluation every 5
in eval mode), shared by the tests: a stable program, one that compiles at every evaluation, one
that reads 40 values on the host at each evaluation only, one that reads 6 every step.
"""

from __future__ import annotations

import pytest

from domain.models import Attempt, AttemptSource, AttemptStatus, Command, FailureCause
from domain.performance import far_above
from tests.test_probe import TRACED, _run, torch_python  # noqa: F401  (fixture)
from workbench import probe
from workbench.verify.ladder import Run
from workbench.verify.settings import merge
from workbench.verify.timing import breakdown, host_sync_rate, host_syncs, sibling_findings, sibling_of

STABLE = TRACED.replace("READ_EVERY_STEP", "False").replace("model(x[:step])", "model(x[:5])")
SCRIPTS = {
    "stable": STABLE,
    "shapes": TRACED.replace("READ_EVERY_STEP", "False"),   # a new evaluation graph each time
    "eval_reads": STABLE.replace("        torch_xla.sync()\n        model.train()",
                                 "        torch_xla.sync()\n        [held.item() for _ in range(40)]\n        model.train()"),
    "step_reads": STABLE.replace("    if False:\n        print(loss.item())", "    for _ in range(6):\n        loss.item()"),
}


@pytest.fixture(scope="module")
def runs(torch_python, tmp_path_factory):  # noqa: F811
    assert all(script != STABLE for name, script in SCRIPTS.items() if name != "stable")
    out = {}
    for seq, (name, script) in enumerate(SCRIPTS.items(), 1):
        done, reports = _run(torch_python, script, tmp_path_factory.mktemp(name), True)
        assert done.returncode == 0, done.stderr[-2000:]
        attempt = Attempt(seq, 1, seq, AttemptSource.RERUN, "c", Command(("python", "t.py"), ".", {}),
                          AttemptStatus.OK, exit_code=0)
        out[name] = Run(attempt, None, probe.series(probe.main_report(reports)), "stored", reports)
    return out


def test_host_syncs_per_step_are_the_traces_per_step_count_not_the_exit_counter(runs):
    """40 reads at each of 4 evaluations are 8 per step at exit, none in the steps: the trace's
    median decides and the breakdown shows the same figure; 6 `.item()` a step are abnormal."""
    settings = merge({})
    report = probe.main_report(runs["eval_reads"].probe_reports)
    assert report["xla_metrics"]["counters"]["aten::_local_scalar_dense"] / report["steps"] >= 8
    rate, ev = host_sync_rate(runs["eval_reads"])
    assert rate == 0.0 and "counted at each step" in ev.text
    assert host_syncs(runs["eval_reads"], None, settings)[0] is False
    assert "0.0 host syncs per step" in breakdown(runs["eval_reads"], settings).text(10)
    rate, _ = host_sync_rate(runs["step_reads"])
    assert rate == 6.0 and host_syncs(runs["step_reads"], None, settings)[0] is True
    assert "6.0 host syncs per step" in breakdown(runs["step_reads"], settings).text(10)


def test_compilations_are_compared_per_phase_with_the_best_correct_sibling(runs):
    """A compile at every evaluation: 4 evaluation graphs against the stable sibling's 1. In all
    they are too few to tell (training's graphs dilute them); per phase they are a finding."""
    settings = merge({})
    stable = sibling_of(runs["stable"], settings)
    shapes = breakdown(runs["shapes"], settings)
    assert dict(shapes.phase_compiles)["eval"] == 4 and dict(stable.phase_compiles)["eval"] == 1
    assert not far_above(shapes.compiles, stable.compiles, 1.5, 2)   # the totals alone pass it
    (found,) = sibling_findings(runs["shapes"], shapes, [stable], settings)
    assert found.cause is FailureCause.RECOMPILATION
    assert found.text.startswith("4 compilations in evaluation against 1 in #1"), found.text
    assert "evaluation 4" in shapes.text(10)
    # the same program reading on the host at evaluations compiles as the stable one: no finding
    assert sibling_findings(runs["eval_reads"], breakdown(runs["eval_reads"], settings), [stable], settings) == []
