"""The probe: injected through PYTHONPATH, it changes nothing in the run and reports per step and at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_rerun_xla import xla_venv
from workbench import probe

SCRIPT = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1, 13):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    applied = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
    opt.step()
    print(f"step {step} loss {loss.item():.9f} applied {applied.item():.9f}")
"""


def _run(python: str, script: str, tmp_path: Path, probed: bool, extra_path: str | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    out = tmp_path / ("probe" if probed else "none")
    if probed:
        env["PYTHONPATH"] = str(probe.INJECT_DIR) + (os.pathsep + extra_path if extra_path else "")
        env["WORKBENCH_PROBE_DIR"] = str(out)
    elif extra_path:
        env["PYTHONPATH"] = extra_path
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    return done, probe.read_reports(out) if probed else []


@pytest.fixture(scope="module")
def torch_python():
    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    return str(venv / "bin" / "python")


def test_same_losses_with_and_without_the_probe_and_per_step_values(torch_python, tmp_path):
    plain, _ = _run(torch_python, SCRIPT, tmp_path, False)
    probed, reports = _run(torch_python, SCRIPT, tmp_path, True)
    assert plain.returncode == probed.returncode == 0, probed.stderr
    assert plain.stdout == probed.stdout
    assert len(reports) == 1
    r = reports[0]
    assert r["steps"] == 12 and r["device_kind"] == "cpu" and r["world_size"] == 1 and not r["errors"]
    printed = [line.split() for line in probed.stdout.splitlines()]
    for _, step, _, loss, _, applied in printed:
        assert abs(r["loss"][step] - float(loss)) < 1e-6
        assert abs(r["grad_norm"][step] - float(applied)) < 1e-6  # the norm the optimizer applied
    assert "workbench-probe {" in probed.stderr
    summary = json.loads(probed.stderr.split("workbench-probe ", 1)[1].splitlines()[0])
    assert summary["steps"] == 12 and summary["devices_used"] == 1


def test_a_program_without_torch_is_untouched_and_a_shadowed_sitecustomize_still_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 'yes'\n")
    code = "import builtins, sys; print(getattr(builtins, 'OTHER_SITE', 'no')); sys.exit(7)"
    done, reports = _run(sys.executable, code, tmp_path, True, extra_path=str(other))
    assert done.returncode == 7 and done.stdout == "yes\n"
    assert "workbench-probe" not in done.stderr  # nothing to say: no summary line
    assert len(reports) == 1 and reports[0]["idle"] and "device_kind" not in reports[0]


def test_dump_lines_carry_probe_files_back(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "probe-h-1.json").write_text(json.dumps({"x": "y" * 10000}))
    done = subprocess.run([sys.executable, str(probe.INJECT_DIR / "handback.py"), str(folder)],
                          capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert len(lines) > 1 and all(line.startswith("@@workbench-probe-file probe-h-1.json ") for line in lines)


def _report(rank: int, **changes) -> dict:
    return {"probe_version": 1, "idle": False, "device_kind": "CPU", "global_device_count": 4, "devices_used": 4,
            "world_size": 1, "rank": rank, "launcher_world_size": 4, "spmd": False, "steps": 40,
            "xla_metrics": {"compiles": 60, "fallbacks": {"aten::nonzero": 3}}, "_file": f"probe-h-{rank}.json",
            **changes}


def test_level_3_reads_the_same_facts_from_the_probe_lines_and_from_stored_reports():
    """One reading of probe JSON: the `workbench-probe` line a process printed and the report it
    stored (a re-run's probe_report row) give level 3 the same facts and the same verdict."""
    import dataclasses

    from domain.models import Attempt, AttemptSource, AttemptStatus, Command, FailureCause, Hardware, Outcome
    from workbench.probe.inject import workbench_probe
    from workbench.verify.ladder import Run, level3
    from workbench.verify.logscan import scan_chunks
    from workbench.verify.settings import merge

    reports = [_report(0), _report(1, devices_used=2), {"probe_version": 1, "idle": True, "_file": "probe-h-9.json"}]
    lines = [f"workbench-probe {json.dumps(s)}\n" for s in map(workbench_probe.summary, reports) if s is not None]
    assert len(lines) == 2  # an idle process prints none
    log = "".join(["step 40/40 loss 0.1\n", *lines]).encode()
    from_lines = probe.facts(json.loads(lines[1].split(" ", 1)[1]), "line 3", lines[1].rstrip("\n"))
    from_row = probe.facts(reports[1], "probe-h-1.json")
    assert dataclasses.replace(from_row, where="line 3") == from_lines
    assert from_row.device_count == 2 and from_row.compiles == 60 and from_row.fallbacks == ("aten::nonzero",)
    assert probe.facts(reports[2], "probe-h-9.json") is None

    attempt = Attempt(1, 1, 1, AttemptSource.RERUN, "c", Command(("python", "train.py"), ".", {}),
                      AttemptStatus.OK, exit_code=0)
    facts = scan_chunks([log])
    settings = merge({})
    by_line = level3(Run(attempt, facts, {}, "log"), Hardware("cpu", 4), settings)
    by_row = level3(Run(attempt, scan_chunks([b"step 40/40 loss 0.1\n"]), {}, "log", reports),
                    Hardware("cpu", 4), settings)
    both = level3(Run(attempt, facts, {}, "log", reports), Hardware("cpu", 4), settings)  # rows first, not twice
    for result in (by_line, by_row, both):
        assert result.outcome is Outcome.FAIL
        assert "2 device(s) where 4" in result.reason and "2 process(es)" in result.reason
        assert "aten::nonzero" in result.reason and "compile count 60 after 40 steps" in result.reason
        assert {c for c, _ in result.causes} == {FailureCause.WRONG_CONFIGURATION, FailureCause.CPU_FALLBACK,
                                                  FailureCause.RECOMPILATION}
    assert by_row.evidence[0].ref == "probe-h-1.json" and by_line.evidence[0].ref == "line 3"


TRACED = """\
import os
os.environ["PJRT_DEVICE"] = "CPU"
import torch, torch_xla
torch.manual_seed(0)
d = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(d)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 5, 0.5)
x, y = torch.randn(64, 8).to(d), torch.randn(64, 1).to(d)
for step in range(1, 21):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    torch_xla.sync()
    if READ_EVERY_STEP:
        print(loss.item())
    if step % 5 == 0:
        model.eval()
        with torch.no_grad():
            held = model(x[:step]).sum()   # a new shape at each evaluation (kept: a compile each)
        torch_xla.sync()
        model.train()
"""


@pytest.mark.parametrize("reads", [False, True])
def test_the_trace_counts_host_reads_compiles_per_phase_and_the_learning_rate(torch_python, tmp_path, reads):
    """On XLA:CPU a host read costs no time: only the trace's count shows `.item()` every step;
    evaluation's compiles are counted apart from training's; the schedule is kept where it changes."""
    done, reports = _run(torch_python, TRACED.replace("READ_EVERY_STEP", str(reads)), tmp_path, True)
    assert done.returncode == 0, done.stderr
    (r,) = reports
    assert r["runtime"]["name"] == "torch_xla" and r["step_source"] == "optimizer" and not r["errors"]
    assert r["lr"] == {"1": [0.1], "6": [0.05], "11": [0.025], "16": [0.0125]}
    assert r["eval_phases"] == 4 and r["phases"]["eval"]["compiles"] == 4
    assert r["phases"]["eval"]["forwards"] == 4 * 4    # the Sequential and its three modules, four times
    assert set(r["param_checksum"]) == {"1", "2", "3"} and r["param_dtypes"] == ["float32"]
    assert set(r["batch_size"].values()) == {64} and r["param_devices"] == ["xla"] and r["input_devices"] == ["xla"]
    line = json.loads(done.stderr.split("workbench-probe ", 1)[1].splitlines()[0])
    facts = probe.facts(line, "line 1")
    assert facts.host_reads_per_step == (1.0 if reads else 0.0)
    assert dict(facts.compiles_by_phase)["eval"] == 4 and facts.runtime == "torch_xla" and facts.batch_size == 64


BY_HAND = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1, 16):
    model.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y) * (float("nan") if step >= 12 else 1.0)
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
    print(f"{step} {loss.item():.9f}")
"""


def test_steps_of_a_program_without_an_optimizer_and_its_first_non_finite_loss(torch_python, tmp_path):
    """word_language_model updates its weights by hand: each backward is a step, not `steps: 0`."""
    done, reports = _run(torch_python, BY_HAND, tmp_path, True)
    assert done.returncode == 0, done.stderr
    (r,) = reports
    assert r["steps"] == 15 and r["step_source"] == "backward" and r["runtime"]["name"] == "torch"
    printed = dict(line.split() for line in done.stdout.splitlines())
    for step in ("1", "11"):
        assert abs(r["loss"][step] - float(printed[step])) < 1e-6
    facts = probe.facts(r, "probe.json")
    assert facts.first_non_finite == 12 and facts.step_source == "backward" and facts.steps == 15


NEVER_STEPS = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1, 11):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    if False:   # the port lost its optimizer step
        opt.step()
"""


def test_an_optimizer_built_and_never_stepped_is_not_a_program_that_updates_by_hand(torch_python, tmp_path):
    done, reports = _run(torch_python, NEVER_STEPS, tmp_path, True)
    assert done.returncode == 0, done.stderr
    facts = probe.facts(reports[0], "probe.json")
    assert facts.steps == 0 and facts.step_source is None
    assert facts.optimizers_made == 1 and facts.trailing_backward_calls == 10
