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
