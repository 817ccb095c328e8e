"""Replicas' gradients in the probe's trace: clipped before the cross-replica reduction, or never
reduced, on real runs: 4 replicas on 4 XLA:CPU devices in one process (the demo's faulty and
fixed ports, and one that applies replica 0's gradient alone) and 2 processes under torchrun."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from domain.models import FailureCause
from tests.test_probe import torch_python  # noqa: F401  (fixture)
from tests.test_trace import _causes, _torchrun
from workbench import probe
from workbench.verify import trace

DEMO = Path(__file__).resolve().parents[1] / "assets" / "demo" / "project" / "mlp"
AVERAGED = "pm.grad = torch.stack([list(r.parameters())[k].grad.cpu() for r in replicas]).mean(0)"


def _replicas(python: str, source: str, out: Path) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    env.update(PYTHONPATH=str(probe.INJECT_DIR), WORKBENCH_PROBE_DIR=str(out), PJRT_DEVICE="CPU",
               CPU_NUM_DEVICES="4")
    done = subprocess.run([python, "-c", source, "--steps", "12"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [r for r in probe.read_reports(out) if not r.get("idle")]


@pytest.fixture(scope="module")
def runs(torch_python, tmp_path_factory):  # noqa: F811
    tmp = tmp_path_factory.mktemp("replicas")
    fixed = (DEMO / "v4" / "train.py").read_text()
    assert AVERAGED in fixed
    sources = {"clip_per_replica": (DEMO / "v3" / "train.py").read_text(), "correct": fixed,
               "replica_0_only": fixed.replace(AVERAGED, "pm.grad = list(replicas[0].parameters())[k].grad.cpu()")}
    found = {name: _replicas(torch_python, source, tmp / name) for name, source in sources.items()}
    for mode in ("clip_first", "clip_after"):
        found[mode] = _torchrun(torch_python, mode, tmp)
    return found


def test_the_trace_keeps_each_replicas_norm_before_and_after_clipping(runs):
    (r,) = runs["clip_per_replica"]
    assert set(r["clips"]) == {"1", "2", "3"} and not r["errors"]   # sampled: steps 1-3, then every 25th
    clips = r["clips"]["2"]
    assert [c[0] for c in clips] == ["xla:0", "xla:1", "xla:2", "xla:3"] and {c[2] for c in clips} == {0.5}
    assert all(c[1] > 0.5 for c in clips) and len({round(c[1], 4) for c in clips}) == 4
    assert all(abs(v - 0.5) < 1e-4 for v in r["replica_grad_norm"]["2"].values())   # after their own clip
    assert r["grad_norm"]["2"] < 0.45   # the mean of clipped gradients is shorter than the bound
    (ok,) = runs["correct"]
    assert [c[0] for c in ok["clips"]["2"]] == ["cpu"] and abs(ok["grad_norm"]["2"] - 0.5) < 1e-4
    assert all(v > 0.5 for v in ok["replica_grad_norm"]["2"].values())   # not clipped before the average
    assert set(ok["replica_checksum"]) == {"1", "2", "3"} and len(set(ok["replica_checksum"]["3"].values())) == 1


def test_clipping_each_replica_before_the_reduction_fails_level_2_and_the_fixed_port_is_clean(runs):
    (found,) = trace.findings([], runs["clip_per_replica"], None)
    assert found.level == 2 and found.cause is FailureCause.CLIP_BEFORE_REDUCE
    assert "each of 4 replicas' gradients was clipped to 0.5" in found.reason
    assert _causes(runs["correct"]) == []


def test_an_optimizer_fed_one_replicas_gradient_is_no_reduction(runs):
    (found,) = trace.findings([], runs["replica_0_only"], None)
    assert found.level == 3 and found.cause is FailureCause.NO_GRADIENT_REDUCTION
    assert "replica xla:0's own gradient" in found.reason and "all 3 steps sampled" in found.reason


def test_processes_that_clip_before_their_all_reduce(runs):
    first, after = ([r for r in runs[mode] if r.get("steps")] for mode in ("clip_first", "clip_after"))
    assert len(first) == len(after) == 2   # torchrun's own process reports no step
    assert all(r["collectives"] == {"all_reduce": 4 * 24} for r in first + after)   # 4 grads, 24 steps
    assert all(r["clips"]["1"][0][3] for r in first) and not any(r["clips"]["1"][0][3] for r in after)
    assert all(abs(r["pre_reduce_grad_norm"]["5"] - 0.1) < 1e-4 for r in first)   # at the bound before the reduce
    assert all(r["pre_reduce_grad_norm"]["5"] > 0.2 for r in after)
    (found,) = trace.findings([], first, None)
    assert found.cause is FailureCause.CLIP_BEFORE_REDUCE and "each of 2 processes" in found.reason
    assert _causes(after) == []
