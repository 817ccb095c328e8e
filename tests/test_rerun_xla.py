"""Re-runs of the demo migration on torch_xla with 4 virtual XLA:CPU devices, probe inside.

Needs the torch_xla CPU environment (`make xla-env`, or `$WORKBENCH_XLA_PYTHON`, or `.venv-xla/`
at the repository root, or the CI cache); without one these tests skip, saying so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from storage import queries
from storage.queries import probe_reports
from tests.rerun_helpers import attempt
from workbench import config
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState
from workbench.rerun.runner import run_job

ROOT = Path(__file__).resolve().parents[1]


def xla_venv() -> Path | None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench" / "xla-venv"
    for python in (os.environ.get("WORKBENCH_XLA_PYTHON"), ROOT / ".venv-xla" / "bin" / "python",
                   cache / "bin" / "python"):
        if python and Path(python).is_file():
            return Path(python).parent.parent
    return None


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    from storage.database import open_study
    from workbench.bundle import import_bundle

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    study = open_study(path, create=True)
    assert not import_bundle(study, config.DEMO_BUNDLE, "tester").problems
    yield study, venv
    study.close()


def _rerun(study, venv, seq, **changes):
    spec = jobs.spec_for(study.db, attempt(study, "mlp-classifier", seq), "local", chips=4,
                         options={"venv": str(venv)})
    assert spec.env["CPU_NUM_DEVICES"] == "4" and spec.env["PJRT_DEVICE"] == "CPU"
    if changes:
        spec = jobs.with_changes(spec, **changes)
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "tester").id)
    assert job.state is JobState.FINISHED, (job.error, job.log_path.read_text()[-3000:])
    return job


def _levels(study, attempt_id):
    return {v.level: v for v in queries.verdicts(study.db, attempt_id)}


STEP = re.compile(r"^step (\d+)/\d+ loss (\S+) grad_norm (\S+)", re.M)


def test_rerun_of_the_fixed_attempt_on_4_xla_devices_has_probe_evidence_and_verdicts(demo):
    study, venv = demo
    job = _rerun(study, venv, 4)
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.rerun_of == attempt(study, "mlp-classifier", 4).id and new.exit_code == 0
    reports = [r for r in probe_reports(study.db, new.id) if not r.get("idle")]
    assert len(reports) == 1
    r = reports[0]
    assert r["device_kind"] == "CPU" and r["global_device_count"] == 4 and r["devices_used"] == 4
    assert r["world_size"] == 1 and r["steps"] == 40 and not r["errors"]
    xm = r["xla_metrics"]
    assert xm["compiles"] >= 1 and xm["uncached_compiles"] == xm["compiles"] and xm["cached_compiles"] > 0
    assert len(r["loss"]) == 40 and len(r["grad_norm"]) == 40 and len(r["step_time"]) == 40
    assert set(r["backward_calls"].values()) == {4}  # one loss per replica, averaged
    # the probe's values agree with what the program printed itself
    printed = {int(s): (float(lo), float(g)) for s, lo, g in STEP.findall(job.log_path.read_text())}
    for step in (1, 20, 40):
        assert abs(r["loss"][str(step)] - printed[step][0]) < 1e-6
        assert abs(r["grad_norm"][str(step)] - printed[step][1]) < 1e-6
    # same losses with and without the probe: the bundle's log of this attempt was made without it
    original = (config.DEMO_BUNDLE / "migrations" / "mlp-classifier" / "logs" / "004.log").read_text()
    assert STEP.findall(job.log_path.read_text()) == STEP.findall(original)
    assert new.observed_hardware.kind == "cpu" and new.observed_hardware.count == 4
    levels = _levels(study, new.id)
    assert [levels[n].outcome.value for n in (1, 2, 3, 4)] == ["pass"] * 4, [levels[n].reason for n in levels]
    assert "x 4" in levels[3].reason
    assert job.wall_seconds > 0 and queries.current_verification(study.db, new.id).cost_dollars is not None


def test_clipping_per_replica_is_caught_at_level_2_while_exiting_0(demo):
    study, venv = demo
    job = _rerun(study, venv, 3)
    assert job.exit_code == 0
    levels = _levels(study, job.result_attempt_id)
    assert levels[1].outcome.value == "pass" and levels[2].outcome.value == "fail"
    v = queries.current_verification(study.db, job.result_attempt_id)
    assert v.cause.value == "clip_before_reduce" and v.silent   # the probe's trace names what the mismatch shows
    assert "numerical" in levels[2].reason or "loss" in levels[2].reason
    grad = [r for r in probe_reports(study.db, job.result_attempt_id) if not r.get("idle")][0]["grad_norm"]
    assert max(grad.values()) < 0.45  # each replica clipped to 0.5 before the average: the applied norm is smaller


def test_torchrun_with_4_processes_each_alone_is_caught_at_level_3(demo):
    study, venv = demo
    job = _rerun(study, venv, 4, argv=("python", "-m", "torch.distributed.run", "--nproc_per_node=4",
                                       "train.py", "--steps", "40"))
    assert job.exit_code == 0
    reports = [r for r in probe_reports(study.db, job.result_attempt_id) if not r.get("idle")]
    assert len(reports) == 4 and {r["world_size"] for r in reports} == {1}
    assert {r["launcher_world_size"] for r in reports} == {4}
    levels = _levels(study, job.result_attempt_id)
    assert levels[3].outcome.value == "fail" and "world size 1" in levels[3].reason
    cause = queries.current_verification(study.db, job.result_attempt_id).cause.value
    assert cause == "wrong_configuration", {n: (v.outcome.value, v.reason) for n, v in levels.items()}
