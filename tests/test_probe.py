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
    done = subprocess.run([sys.executable, str(probe.INJECT_DIR / "workbench_probe.py"), "dump", str(folder)],
                          capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert len(lines) > 1 and all(line.startswith("@@workbench-probe-file probe-h-1.json ") for line in lines)
