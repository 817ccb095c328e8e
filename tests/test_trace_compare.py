"""The reference is traced too, and the verifier compares the traces: real runs of one small
training (tests/data/trace/ported.py), the reference on plain torch, each port on torch_xla
(XLA:CPU, 4 virtual devices) with the probe inside. Correct ports (one device, gradient
accumulation done right, SPMD) get no finding; each fault fails its level with its cause."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from domain.models import FailureCause, Outcome
from tests.test_probe import torch_python  # noqa: F401  (fixture)
from workbench import probe
from workbench.verify import trace

PORTED = Path(__file__).parent / "data" / "trace" / "ported.py"
CORRECT = ("correct", "accumulate", "spmd")
FAULTS = {  # mode: (level, cause, words of the reason)
    "lr": (2, FailureCause.LR_SCHEDULE_DIFFERS, "lr 0.1 at step 6 against the reference's 0.05"),
    "skip": (2, FailureCause.OPTIMIZER_STEPS_DIFFER, "10 optimizer steps against the reference's 20"),
    "batch": (3, FailureCause.BATCH_SIZE_DIFFERS, "32 samples per optimizer step against the reference's 16"),
    "eval_mode": (2, FailureCause.MODE_DIFFERS, "entered eval mode 1 time(s) against the reference's 4"),
    "eval_in_train": (2, FailureCause.MODE_DIFFERS, "entered eval mode 0 time(s) against the reference's 4"),
    "placement": (3, FailureCause.HOST_PLACEMENT, "lived on cpu, xla"),
    "nan": (1, FailureCause.NON_FINITE, "loss is NaN from step 12 where the reference's is"),
    "float64": (5, FailureCause.FLOAT64_EMULATED, "float64 parameters (float64) on tpu-v5e"),
}


def _run(python: str, mode: str, out: Path) -> tuple[int, str, list[dict]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    env.update(PYTHONPATH=str(probe.INJECT_DIR), WORKBENCH_PROBE_DIR=str(out / mode), OMP_NUM_THREADS="1",
               PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([python, str(PORTED), mode], capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout + done.stderr[-3000:], probe.read_reports(out / mode)


@pytest.fixture(scope="module")
def runs(torch_python, tmp_path_factory):  # noqa: F811
    """Every mode's probe reports, two runs at a time."""
    out = tmp_path_factory.mktemp("ported")
    modes = ["reference", *CORRECT, *FAULTS, "compile"]
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(modes, pool.map(lambda m: _run(torch_python, m, out), modes)))
    for mode, (code, said, reports) in done.items():
        assert code == 0 and reports, f"{mode}: {said}"
    return {mode: reports for mode, (_, _, reports) in done.items()}


def _found(runs, mode: str, against: str = "reference", runtime: str = "torch_xla") -> list[trace.Finding]:
    reports = runs[mode]
    return trace.findings(probe.facts_of_reports(reports), reports, runtime, runs[against], "tpu-v5e")


@pytest.mark.parametrize("mode", CORRECT)
def test_correct_ports_get_no_finding(runs, mode):
    assert _found(runs, mode) == []


@pytest.mark.parametrize("mode", list(FAULTS))
def test_each_fault_fails_its_level_with_its_cause(runs, mode):
    level, cause, words = FAULTS[mode]
    found = _found(runs, mode)
    assert (found[0].level, found[0].cause) == (level, cause) if level != 5 else (found[-1].level, found[-1].cause) == (5, cause)
    reason = next(f.reason for f in found if f.cause is cause)
    assert words in reason, reason
    assert all(e.kind == "probe" for f in found for e in f.evidence)


def test_a_phase_compiling_far_more_than_the_reference_s(runs):
    """Both on XLA: a new training graph at each step against the correct port's few."""
    (found,) = _found(runs, "compile", against="correct")
    assert found.cause is FailureCause.RECOMPILATION and found.level == 3
    assert "recompiles in training" in found.reason
    assert _found(runs, "correct", against="correct") == []


def test_float64_is_a_finding_only_where_a_tpu_is_intended(runs):
    reports = runs["float64"]
    assert trace.float64_on_tpu(probe.facts_of_reports(reports), "cpu") is None
    assert trace.float64_on_tpu(probe.facts_of_reports(runs["correct"]), "tpu-v5e") is None


def _judge(runs, mode: str, accelerator: str = "tpu-v5e"):
    """Through the ladder, as `verify` judges a re-run: its probe series stored, a short log."""
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

    chips = 4 if mode == "spmd" else 1
    migration = Migration(1, "m", "m", "/r", "c0", Target(accelerator, chips, "torch_xla"),
                          Goal("loss", 10.0, Direction.MIN, 10.0), Budgets(), MigrationStatus.IN_PROGRESS)

    def run_of(reports: list[dict], seq: int, source: AttemptSource) -> Run:
        attempt = Attempt(seq, 1, seq, source, "c", Command(("python", "ported.py"), ".", {}),
                          AttemptStatus.OK, exit_code=0, started_at="2026-01-01T00:00:00Z",
                          ended_at="2026-01-01T00:00:10Z")
        log = b"".join(b"step %d done\n" % s for s in range(1, 21))
        return Run(attempt, scan_chunks([log]), probe.series(probe.main_report(reports)), "stored", reports)

    return judge(run_of(runs[mode], 2, AttemptSource.RERUN), run_of(runs["reference"], 1, AttemptSource.REFERENCE),
                 migration, Study("s", "s"), merge({"rtol": 10.0, "atol": 10.0}))


@pytest.mark.parametrize("mode", list(FAULTS))
def test_judge_names_each_cause_and_the_fault_is_silent(runs, mode):
    level, cause, _ = FAULTS[mode]
    verdict = _judge(runs, mode)
    assert verdict.levels[level - 1].outcome is Outcome.FAIL, verdict.levels[level - 1].reason
    assert verdict.cause is cause and verdict.silent
    if mode == "float64":  # on the stand-in, whose CPU computes float64 natively
        assert "standing in for tpu-v5e, its clock does not show this" in verdict.levels[4].reason


@pytest.mark.parametrize("mode", CORRECT)
def test_judge_gives_correct_ports_no_cause_from_the_traces(runs, mode):
    verdict = _judge(runs, mode)
    assert [r.outcome for r in verdict.levels[:4]] == [Outcome.PASS] * 4, [r.reason for r in verdict.levels]
    assert verdict.cause in (None, FailureCause.SLOWER_OR_COSTLIER)


def test_a_traced_reference_and_a_rerun_compared_by_verify(torch_python, tmp_path):  # noqa: F811
    """End to end: `reference --run` stores the reference's trace, a re-run stores the attempt's,
    and `verify` compares them: the port that lost its schedule fails level 2 with that cause."""
    from storage import queries
    from storage.database import open_study
    from tests.conftest import BundleBuilder, make_repo
    from workbench.bundle import import_bundle
    from workbench.reference_run import run_reference
    from workbench.rerun import jobs
    from workbench.verify import verify_study

    builder = BundleBuilder(tmp_path / "bundle")
    builder.write_study()
    folder = builder.root / "migrations" / "toy"
    folder.mkdir(parents=True)
    sha = make_repo(folder / "repo", [{"ported.py": PORTED.read_text()}])[0]
    (folder / "migration.toml").write_text(
        f'title = "toy"\nrepo = "repo"\nbase_commit = "{sha}"\n[target]\naccelerator = "cpu"\nchips = 1\n'
        'runtime = "torch_xla"\n[goal]\nmetric = "held"\nreference = 100.0\ndirection = "min"\ntolerance = 100.0\n')
    (folder / "logs").mkdir()
    (folder / "metrics").mkdir()
    env = {"PJRT_DEVICE": "CPU", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    record = builder.attempt(1, sha, command={"argv": [torch_python, "ported.py", "lr"], "cwd": ".", "env": env},
                             metrics=None, intended_hardware={"kind": "cpu", "count": 1})
    (folder / record["log"]).write_text("step 5 held 1.0\n")
    builder.write_attempts(folder, [record])
    study = open_study(tmp_path / "study.db", create=True)
    try:
        assert not import_bundle(study, builder.root, "tester").problems
        reference = run_reference(study, "toy", command=f"{torch_python} ported.py reference", env=env, venv=None,
                                  timeout=300, hardware=None, reviewer="tester")
        assert queries.probe_reports(study.db, reference.id)[0]["lr"] == {"1": [0.1], "6": [0.05], "11": [0.025],
                                                                          "16": [0.0125]}
        toy = queries.get_migration(study.db, "toy")
        attempt = queries.attempt_summary(study.db, queries.attempt_id_by_seq(study.db, toy.id, 1)).attempt
        job = jobs.wait(study.db, jobs.launch(study, jobs.spec_for(study.db, attempt, "local", chips=1), "tester").id,
                        timeout=300)
        assert job.state is jobs.JobState.FINISHED
        verify_study(study.db, "tester")
        rerun = job.result_attempt_id
        level2 = queries.verdicts(study.db, rerun)[1]
        assert level2.outcome is Outcome.FAIL and "lr 0.1 at step 6 against the reference's 0.05" in level2.reason
        (verification,) = [v for v in [queries.current_verifications(study.db, [rerun]).get(rerun)] if v]
        assert verification.cause is FailureCause.LR_SCHEDULE_DIFFERS and verification.silent
    finally:
        study.close()
