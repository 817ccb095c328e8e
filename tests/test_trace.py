"""The probe's trace decides what no log has to say: replicas out of sync or reading the same data,
the runtime actually used, an optimizer that never stepped, a compile at every evaluation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from domain.models import FailureCause
from tests.test_probe import NEVER_STEPS, TRACED, _run, torch_python  # noqa: F401  (fixture)
from workbench import probe
from workbench.verify import trace

DDP = Path(__file__).parent / "data" / "trace" / "ddp.py"


def _torchrun(python: str, mode: str, tmp_path: Path, processes: int = 2) -> list[dict]:
    out = tmp_path / f"{mode}-{processes}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    env.update(PYTHONPATH=str(probe.INJECT_DIR), WORKBENCH_PROBE_DIR=str(out), OMP_NUM_THREADS="1")
    done = subprocess.run([python, "-m", "torch.distributed.run", "--nproc_per_node", str(processes), str(DDP), mode],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return probe.read_reports(out)


@pytest.fixture(scope="module")
def ddp_runs(torch_python, tmp_path_factory):  # noqa: F811
    """Each mode on 2 replicas, and the reference: the same training in one process."""
    tmp = tmp_path_factory.mktemp("ddp")
    runs = {mode: _torchrun(torch_python, mode, tmp) for mode in ("correct", "no_allreduce", "same_data", "undivided")}
    return {**runs, "reference": _torchrun(torch_python, "correct", tmp, processes=1)}


def _causes(reports: list[dict], runtime: str | None = None) -> list[FailureCause]:
    return [f.cause for f in trace.findings(probe.facts_of_reports(reports), reports, runtime)]


def test_replicas_that_never_average_gradients_drift_apart(ddp_runs):
    assert _causes(ddp_runs["correct"]) == []
    (found,) = trace.findings([], ddp_runs["no_allreduce"], None)
    assert found.cause is FailureCause.NO_GRADIENT_REDUCTION and found.level == 3   # the drift's cause
    assert "no collective call and had no reducer" in found.reason
    assert "differ across 2 processes" in found.reason and len(found.evidence) == 2


def test_replicas_reading_the_same_batch_are_found_though_they_stay_in_sync(ddp_runs):
    (found,) = trace.findings([], ddp_runs["same_data"], None)
    assert found.cause is FailureCause.REPLICAS_SAME_DATA
    assert "identical at all 3 steps" in found.reason   # sampled: steps 1-3, then every 25th


def test_replicas_against_the_reference_s_trace(ddp_runs):
    """2 replicas of 8 samples each take the one process's 16 a step: no finding; replicas that
    each read 16 of their own take 32 a step; replicas that read the same 16 are that fault alone."""
    reference = ddp_runs["reference"]

    def found(mode: str) -> list[tuple[FailureCause, str]]:
        reports = ddp_runs[mode]
        return [(f.cause, f.reason) for f in trace.findings(probe.facts_of_reports(reports), reports, None, reference)]

    assert found("correct") == []
    ((cause, reason),) = found("undivided")
    assert cause is FailureCause.BATCH_SIZE_DIFFERS
    assert "32 samples per optimizer step against the reference's 16" in reason and "x 2 replicas" in reason
    assert [c for c, _ in found("same_data")] == [FailureCause.REPLICAS_SAME_DATA]
    assert [c for c, _ in found("no_allreduce")] == [FailureCause.NO_GRADIENT_REDUCTION]   # the drift's cause


def test_plain_torch_where_the_target_names_an_accelerator_runtime(ddp_runs):
    """These runs imported no torch_xla: fine for a plain torch target, a fault for a torch_xla one."""
    assert _causes(ddp_runs["correct"], "torch") == []
    assert _causes(ddp_runs["correct"], "torch_xla") == [FailureCause.NO_ACCELERATOR_RUNTIME]


def test_an_optimizer_that_never_stepped_fails_level_1(torch_python, tmp_path):  # noqa: F811
    _, reports = _run(torch_python, NEVER_STEPS, tmp_path, True)
    (found,) = trace.findings(probe.facts_of_reports(reports), reports, None)
    assert found.level == 1 and found.cause is FailureCause.OPTIMIZER_NOT_STEPPED
    assert "10 backward calls, 0 optimizer steps" in found.reason


def test_a_compile_at_every_evaluation_and_none_for_a_stable_one(torch_python, tmp_path):  # noqa: F811
    shapes = TRACED.replace("READ_EVERY_STEP", "False")
    _, reports = _run(torch_python, shapes, tmp_path / "shapes", True)
    assert _causes(reports, "torch_xla") == [FailureCause.RECOMPILATION]
    stable = shapes.replace("model(x[:step])", "model(x[:5])")   # one evaluation graph, compiled once
    _, reports = _run(torch_python, stable, tmp_path / "stable", True)
    assert _causes(reports, "torch_xla") == []


def _judged(reports: list[dict], log: bytes, chips: int, argv: tuple[str, ...], series: dict | None = None):
    """Through the ladder, as `verify` judges a re-run that exited 0 with no reference: `series`
    stored (the probe's, as a re-run stores them, unless given)."""
    from domain.models import (
        Attempt,
        AttemptSource,
        AttemptStatus,
        Budgets,
        Command,
        Direction,
        Goal,
        Migration,
        MigrationStatus,
        Study,
        Target,
    )
    from workbench.verify.judge import judge
    from workbench.verify.ladder import Run
    from workbench.verify.logscan import scan_chunks
    from workbench.verify.settings import merge

    migration = Migration(1, "m", "m", "/r", "c0", Target("cpu", chips, "torch"),
                          Goal("loss", 0.1, Direction.MIN, 1.0), Budgets(), MigrationStatus.IN_PROGRESS)
    attempt = Attempt(1, 1, 1, AttemptSource.RERUN, "c", Command(argv, ".", {}),
                      AttemptStatus.OK, exit_code=0)
    stored = probe.series(probe.main_report(reports)) if series is None else series
    return judge(Run(attempt, scan_chunks([log]), stored, "stored", reports), None, migration, Study("s", "s"),
                 merge({}))


def test_judge_names_the_trace_cause_and_the_attempt_is_silent(ddp_runs):
    """Through the ladder: the same run fails level 3 with the trace's cause, exit 0, so silent."""
    from domain.models import Outcome

    log = b"step 8 done\nstep 16 done\nstep 24 done\n"
    verdicts = {mode: _judged(ddp_runs[mode], log, 2, ("torchrun", "ddp.py")) for mode in ("correct", "no_allreduce")}
    assert verdicts["correct"].levels[2].outcome is not Outcome.FAIL and verdicts["correct"].cause is None
    bad = verdicts["no_allreduce"]
    assert bad.levels[2].outcome is Outcome.FAIL and bad.cause is FailureCause.NO_GRADIENT_REDUCTION and bad.silent


FORWARD_ONLY = """\
import torch
model = torch.nn.Linear(8, 1)
with torch.no_grad():
    for step in range(1, 6):
        print(f"step {step} loss {model(torch.randn(4, 8)).pow(2).mean().item():.4f}")
"""


def test_a_trace_that_saw_no_step_says_so_in_the_verdicts(torch_python, tmp_path):  # noqa: F811
    """A program that never trains leaves a probe report with no step: level 1 says the trace
    checked nothing, where a training run's trace (TRACED) gets no such words."""
    reasons = {}
    for name, script in (("forward", FORWARD_ONLY), ("training", TRACED.replace("READ_EVERY_STEP", "0"))):
        done, reports = _run(torch_python, script, tmp_path / name, True)
        assert done.returncode == 0 and reports, done.stderr[-2000:]
        reasons[name] = _judged(reports, done.stdout.encode(), 1, ("python", "x.py"), series={}).levels[0].reason
    assert "the probe's trace saw no training step in 1 process(es)" in reasons["forward"], reasons
    assert "saw no training step" not in reasons["training"], reasons
