"""`workbench explain`'s libraries factor on real torch_xla CPU runs (issue 36): a small local
package, `gradclip`, in two versions built here with `pip wheel`; version 1 averages the replicas'
gradients and then clips, version 2 clips each replica's gradient before averaging (the seed
paper's pinned library). The reference ran with version 1 (two replicates: the noise is measured),
the attempt with version 2, both on 4 XLA:CPU devices. A second package, `lossfmt` (it formats the
printed loss the same way in both its versions), differs too. Explain builds an environment with
the reference's versions over the attempt's, re-runs the attempt in it, then each package alone,
and names gradclip, in σ. A second explain finds the environment in the cache.

Needs the torch_xla CPU environment (`$WORKBENCH_XLA_PYTHON`, `.venv-xla/` or the CI cache);
without one the tests skip, saying so. About a minute and a half on 2 cores (six small runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from cli.main import main
from storage.explanations import attempt_seq
from storage.jobs import list_jobs
from tests.conftest import BundleBuilder, make_repo
from tests.test_rerun_xla import xla_venv
from workbench import explain_envs

CLIP = '''\
import torch


def _clip(grads, max_norm):
    norm = float(torch.stack([g.norm() for g in grads]).norm())
    return [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads]


def average(per_replica, max_norm):
    """The replicas' gradients averaged into one, clipped to max_norm."""
{body}
'''
AFTER = "    return _clip([torch.stack(gs).mean(0) for gs in zip(*per_replica)], max_norm)\n"
BEFORE = ("    clipped = [_clip(gs, max_norm) for gs in per_replica]\n"
          "    return [torch.stack(gs).mean(0) for gs in zip(*clipped)]\n")

TRAIN = '''\
"""A small MLP trained data-parallel over every XLA device; gradclip averages and clips."""
import copy
import os

import gradclip
import lossfmt
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.runtime as xr

STEPS = 12
seed = int(os.environ.get("WORKBENCH_SEED", "1"))
n_dev = xr.global_runtime_device_count()
devices = [torch.device(f"xla:{i}") for i in range(n_dev)]
w = torch.randn(16, 4, generator=torch.Generator().manual_seed(1234))
x = torch.randn(512, 16, generator=torch.Generator().manual_seed(1))
y = (x @ w).argmax(dim=1)
x = x + 1e-5 * torch.randn(x.shape, generator=torch.Generator().manual_seed(100 + seed))  # the seed's noise
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
replicas = [copy.deepcopy(model).to(d) for d in devices]
for step in range(1, STEPS + 1):
    i = ((step - 1) * 32) % len(x)
    losses = []
    for r, d, xs, ys in zip(replicas, devices, x[i:i + 32].chunk(n_dev), y[i:i + 32].chunk(n_dev)):
        with torch.no_grad():
            for pr, pm in zip(r.parameters(), model.parameters()):
                pr.copy_(pm.to(d))
        r.zero_grad()
        loss = F.cross_entropy(r(xs.to(d)), ys.to(d))
        loss.backward()
        losses.append(loss)
    torch_xla.sync()
    grads = gradclip.average([[p.grad.cpu() for p in r.parameters()] for r in replicas], max_norm=0.5)
    for pm, g in zip(model.parameters(), grads):
        pm.grad = g
    opt.step()
    print(f"step {step}/{STEPS} loss {lossfmt.fmt(torch.stack([v.cpu() for v in losses]).mean().item())}", flush=True)
with torch.no_grad():
    print(f"eval_accuracy {(model(x).argmax(dim=1) == y).float().mean().item():.4f}", flush=True)
'''


FMT = 'def fmt(value):\n    """{version}: six decimals."""\n    return f"{{value:.6f}}"\n'


def _wheels(tmp_path):
    """gradclip 1.0 (clips after averaging) and 2.0 (before), lossfmt 1.0 and 2.0 (the same),
    built with `pip wheel`."""
    out = tmp_path / "wheels"
    for name, version, code in (("gradclip", "1.0", CLIP.format(body=AFTER)), ("gradclip", "2.0", CLIP.format(body=BEFORE)),
                                ("lossfmt", "1.0", FMT.format(version="1.0")), ("lossfmt", "2.0", FMT.format(version="2.0"))):
        src = tmp_path / f"{name}-{version}"
        (src / name).mkdir(parents=True)
        (src / name / "__init__.py").write_text(code)
        (src / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
            f'[project]\nname = "{name}"\nversion = "{version}"\n')
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-q", "-w", str(out), str(src)], check=True, capture_output=True)
    return out


def _invoke(*args: str) -> str:
    done = CliRunner().invoke(main, list(args))
    assert done.exit_code == 0, done.output
    return done.output


@pytest.fixture(scope="module")
def pinned_study(tmp_path_factory):
    """The study: references (2 replicates) with gradclip 1.0, attempt 1 re-run with 2.0 as
    attempt 4; returns (path, wheels, the attempt's environment, the cache)."""
    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    from storage.database import open_study
    from workbench.bundle import import_bundle

    tmp = tmp_path_factory.mktemp("libraries")
    wheels = _wheels(tmp)
    envs = {v: explain_envs.layered(venv, {"gradclip": v, "lossfmt": v}, [str(wheels)], root=tmp / "envs").path
            for v in ("1.0", "2.0")}
    builder = BundleBuilder(tmp / "bundle")
    builder.write_study()
    folder = builder.root / "migrations" / "pinned"
    folder.mkdir(parents=True)
    (sha,) = make_repo(folder / "repo", [{"train.py": TRAIN}])
    (folder / "migration.toml").write_text(
        f'title = "pinned"\nrepo = "repo"\nbase_commit = "{sha}"\n'
        '[target]\naccelerator = "cpu"\nchips = 4\nruntime = "torch_xla"\n'
        '[goal]\nmetric = "eval_accuracy"\nreference = 0.9\ndirection = "max"\ntolerance = 0.05\n'
        "[budgets]\nattempts = 10\n")
    (folder / "logs").mkdir()
    (folder / "logs" / "1.log").write_text("step 1/12 loss 1.4\n")
    env = {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4", "TF_CPP_MIN_LOG_LEVEL": "2"}
    builder.write_attempts(folder, [builder.attempt(1, sha, metrics=None, intended_hardware={"kind": "cpu", "count": 4},
                                                    command={"argv": ["python", "train.py"], "cwd": ".", "env": env})])
    path = tmp / "study.db"
    study = open_study(path, create=True)
    assert not import_bundle(study, builder.root, "tester").problems
    study.close()
    _invoke("reference", str(path), "pinned", "--run", "--replicates", "2", "--venv", str(envs["1.0"]),
            "--command", "python train.py", *(a for k, v in env.items() for a in ("--env", f"{k}={v}")))
    _invoke("rerun", str(path), "pinned", "1", "--venv", str(envs["2.0"]), "--wait", "--yes")
    _invoke("verify", str(path))
    return path, wheels, envs["2.0"], tmp / "cache"


def test_a_pinned_library_clipping_before_averaging_follows_the_libraries(pinned_study, monkeypatch):
    from storage.database import open_study
    from workbench.explain import level2

    path, wheels, env2, cache = pinned_study
    monkeypatch.setenv("WORKBENCH_EXPLAIN_ENVS", str(cache))
    study = open_study(path)
    try:
        rerun = max(j.result_attempt_id for j in list_jobs(study.db))
        seq = attempt_seq(study.db, rerun)
        outcome, reason = level2(study.db, rerun)
        assert outcome == "fail" and "σ" in reason, reason
    finally:
        study.close()
    started = time.monotonic()
    result = json.loads(_invoke("explain", str(path), "pinned", str(seq), "--venv", str(env2),
                                "--find-links", str(wheels), "--max-runs", "3", "--json"))
    first_s = time.monotonic() - started
    assert result["explained_by"] == "libraries", result
    (libraries,) = result["factors"]
    assert libraries["changes"] == ["gradclip 1.0 → 2.0 (imported)", "lossfmt 1.0 → 2.0 (imported)"]
    made = libraries["environment"]
    assert made["pins"] == {"gradclip": "1.0", "lossfmt": "1.0"} and made["cached"] is False
    assert made["path"].startswith(str(cache))
    both, alone = libraries["runs"]   # the set agrees, then gradclip alone (first by name) agrees: named
    assert both["level2"] == alone["level2"] == "pass" and both["chips"] == alone["chips"] == 4
    assert libraries["package"] == "gradclip" and libraries["narrowing"] == "gradclip alone agrees"
    assert result["sentence"].startswith("follows the libraries: agrees with the reference's gradclip 1.0 (")
    assert "σ off with gradclip 2.0" in result["sentence"]
    run = alone
    study = open_study(path)
    try:
        job = next(j for j in list_jobs(study.db) if j.id == run["job"])
        assert job.spec.options["venv"] == job.spec.options["explain"]["env"]
        assert job.spec.options["explain"]["pins"] == {"gradclip": "1.0"}
        assert job.spec.options["explain"]["env"] != made["path"]   # its own environment: gradclip alone
        first = next(j for j in list_jobs(study.db) if j.id == both["job"])
        assert first.spec.options["explain"] == {"factor": "libraries", "pins": made["pins"], "env": made["path"],
                                                 "env_cached": False}
        assert first.spec.options["venv"] == made["path"]
        from storage.queries import probe_reports
        from workbench import probe

        ran = probe.ran_with(probe_reports(study.db, run["attempt_id"]))
        assert (ran.packages["gradclip"], ran.packages["lossfmt"]) == ("1.0", "2.0")
    finally:
        study.close()
    # a second explain finds the environment in the cache; without --venv too: the attempt's own
    # environment (its job's) is the one the reference's versions go over
    monkeypatch.delenv("WORKBENCH_TARGET_VENV", raising=False)
    again = json.loads(_invoke("explain", str(path), "pinned", str(seq),
                               "--find-links", str(wheels), "--max-runs", "1", "--json"))
    assert again["explained_by"] == "libraries"
    assert again["factors"][0]["narrowing"] == "stopped before gradclip alone: the budget of 1 runs is spent"
    assert again["sentence"].startswith("follows the libraries: agrees with the reference's gradclip 1.0, lossfmt 1.0")
    cached = again["factors"][0]["environment"]
    assert cached["cached"] is True and cached["path"] == made["path"] and cached["over"] == made["over"] == str(env2)
    print(f"\nenvironment built in {made['seconds']} s, found in the cache in {cached['seconds']} s; "
          f"first explain {first_s:.1f} s")


def test_without_the_reference_s_wheel_the_libraries_factor_says_so(pinned_study, tmp_path, monkeypatch):
    from storage.database import open_study
    from workbench.explain import explain

    path, _, env2, _ = pinned_study
    monkeypatch.setenv("WORKBENCH_EXPLAIN_ENVS", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    study = open_study(path)
    try:
        rerun = min(j.result_attempt_id for j in list_jobs(study.db))
        seq = attempt_seq(study.db, rerun)
        result = explain(study, "pinned", seq, "tester", venv=str(env2), find_links=[str(tmp_path / "empty")],
                         max_runs=0, store=False)
    finally:
        study.close()
    libraries = result["factors"][0]
    assert not libraries["tried"] and libraries["runs"] == [] and libraries["environment"]["path"] is None
    assert "gradclip==1.0" in libraries["reason"] and "could not be installed" in libraries["reason"], libraries
    assert result["budget"]["runs"] == 0


def test_an_environment_is_built_once_then_found_and_the_pinned_version_wins(tmp_path):
    """Over this interpreter's own venv (no torch needed): the cache's second answer builds nothing."""
    target = sys.prefix
    wheels = _wheels(tmp_path)
    assert "give --find-links DIR" in explain_envs.layered(target, {"gradclip": "1.0"}, [], root=tmp_path / "c").reason
    built = explain_envs.layered(target, {"gradclip": "1.0"}, [str(wheels)], root=tmp_path / "c")
    found = explain_envs.layered(target, {"gradclip": "1.0"}, [str(wheels)], root=tmp_path / "c")
    assert built.path is not None and not built.cached and found.cached and found.path == built.path
    over = explain_envs.layered(built.path, {"gradclip": "2.0"}, [str(wheels)], root=tmp_path / "c")
    done = subprocess.run([str(over.path / "bin" / "python"), "-c",
                           "import gradclip, click, importlib.metadata as m; print(m.version('gradclip'))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "2.0"   # the layer's own version; click comes from the target below
    pytest_script = over.path / "bin" / "pytest"   # the target's console scripts run the layered interpreter
    assert pytest_script.read_text().splitlines()[0] == f"#!{over.path / 'bin' / 'python'}"
    print(f"\nbuilt in {built.seconds} s, found in {found.seconds} s")
