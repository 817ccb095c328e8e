"""The variant matrix: a small training script run for real, the reference on the CPU and each
attempt variant on torch_xla with 4 virtual CPU devices and the workbench's probe inside
(workbench/probe), then verified from its log alone (the probe's `workbench-probe` lines in it).

Needs the torch_xla environment (assets/demo/requirements-xla-cpu.txt): its python is
`$WORKBENCH_XLA_PYTHON`, else `.venv-xla/bin/python` at the repository root, else the CI cache
(`${XDG_CACHE_HOME:-~/.cache}/workbench/xla-venv`). Without one the tests skip, saying so. The
runs (about a minute and a half on 2 cores) are cached by the hash of the script, the probe and
python.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BundleBuilder, make_repo

from domain.models import FailureCause, Outcome
from storage import queries, records
from storage.database import open_study
from workbench import probe
from workbench.bundle import import_bundle
from workbench.verify import verify_study

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "verify_project" / "train.py"
PROBE = probe.INJECT_DIR
P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN

# seq, variant, devices, the agent's expected level
VARIANTS = [
    (1, "identical", 4, 5),
    (2, "wrong_lr", 4, 4),
    (3, "clip_per_replica", 4, 4),
    (4, "dynamic_shapes", 4, 4),
    (5, "fallback", 4, 4),
    (6, "fewer_devices", 2, 4),
    (7, "crash", 4, 2),
    (8, "slow", 4, 5),
]


def xla_python() -> Path | None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench" / "xla-venv"
    candidates = [os.environ.get("WORKBENCH_XLA_PYTHON"), ROOT / ".venv-xla" / "bin" / "python",
                  cache / "bin" / "python"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _run(python: Path, argv: list[str], env: dict[str, str], log: Path) -> dict:
    started = datetime.datetime.now(datetime.UTC)
    with log.open("wb") as out:
        proc = subprocess.run([str(python), *argv], cwd=SCRIPT.parent, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, **env}, timeout=600)
    ended = datetime.datetime.now(datetime.UTC)
    return {
        "started_at": started.isoformat(timespec="milliseconds"),
        "ended_at": ended.isoformat(timespec="milliseconds"),
        "status": "ok" if proc.returncode == 0 else "nonzero_exit",
        "exit_code": proc.returncode,
        "exit_code_source": "process",
    }


@pytest.fixture(scope="session")
def variant_bundle(tmp_path_factory) -> Path:
    python = xla_python()
    if python is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON"
                    " (`make test` does both)")
    probe_source = b"".join(p.read_bytes() for p in sorted(PROBE.glob("*.py")))
    key = hashlib.sha256(SCRIPT.read_bytes() + probe_source + str(python.resolve()).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench" / "verify-variants" / key
    if (cache / "study.toml").is_file():
        return cache
    work = tmp_path_factory.mktemp("variants")
    builder = BundleBuilder(work / "bundle", prices={"cpu": 0.05})
    builder.write_study()
    folder = builder.root / "migrations" / "mlp-variants"
    folder.mkdir(parents=True)
    (folder / "logs").mkdir()
    sha = make_repo(folder / "repo", [{"train.py": SCRIPT.read_text()}])[0]
    base_env = {"PJRT_DEVICE": "CPU", "PYTHONPATH": str(PROBE), "TF_CPP_MIN_LOG_LEVEL": "1"}
    harness = ("PYTHONPATH", "WORKBENCH_PROBE_DIR")  # the probe's variables: not the attempt's command
    lines = []
    ref = _run(python, ["train.py", "--reference"], {}, folder / "logs" / "000.log")
    assert ref["exit_code"] == 0, (folder / "logs" / "000.log").read_text()[-2000:]
    goal = float((folder / "logs" / "000.log").read_text().split("eval_accuracy ")[-1].split()[0])
    lines.append({"seq": 0, "source": "reference", "commit": sha,
                  "command": {"argv": ["python", "train.py", "--reference"], "env": {}},
                  **ref, "intended_hardware": None, "observed_hardware": {"kind": "cpu", "count": 1},
                  "log": "logs/000.log"})
    for seq, variant, devices, expected in VARIANTS:
        argv = ["train.py", "--variant", "identical" if variant == "fewer_devices" else variant]
        env = {**base_env, "CPU_NUM_DEVICES": str(devices), "WORKBENCH_PROBE_DIR": str(work / "probe" / str(seq))}
        result = _run(python, argv, env, folder / "logs" / f"{seq:03d}.log")
        lines.append({"seq": seq, "source": "agent", "commit": sha,
                      "command": {"argv": ["python", *argv], "env": {k: v for k, v in env.items() if k not in harness}},
                      **result, "expected_level": expected, "claim": f"variant {variant}",
                      "intended_hardware": {"kind": "cpu", "count": 4}, "observed_hardware": None,
                      "log": f"logs/{seq:03d}.log"})
    (folder / "migration.toml").write_text(
        f'title = "MLP variants"\nrepo = "repo"\nbase_commit = "{sha}"\n'
        '[target]\naccelerator = "cpu"\nchips = 4\nruntime = "torch_xla"\n'
        f'[goal]\nmetric = "eval_accuracy"\nreference = {goal}\ndirection = "max"\ntolerance = 0.01\n'
    )
    (folder / "attempts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if cache.exists():
        shutil.rmtree(cache)
    shutil.copytree(builder.root, cache)
    return cache


@pytest.fixture
def verified(variant_bundle: Path, tmp_path: Path):
    study = open_study(tmp_path / "v.db", create=True)
    report = import_bundle(study, variant_bundle, "ana")
    assert not report.problems, report.problems
    db = study.db
    m = queries.get_migration(db, "mlp-variants")
    # level 5 on XLA:CPU: torch_xla's start-up alone makes every run slower than the plain-CPU
    # reference, so the study sets its limits from the correct port's own ratios (x1.5 slack)
    verify_study(db, "ana")
    ident = queries.current_verification(db, _attempt_id(db, m.id, 1))
    records.add_verify_settings(db, migration_id=m.id, source="reviewer", reviewer="ana", settings={
        "max_time_ratio": ident.time_ratio * 1.5, "max_cost_ratio": ident.cost_ratio * 1.5})
    verify_study(db, "ana")
    yield db, m
    study.close()


def _attempt_id(db, migration_id: int, seq: int) -> int:
    return db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [migration_id, seq]).fetchone()[0]


def result(db, m, seq):
    a = _attempt_id(db, m.id, seq)
    verdicts = queries.verdicts(db, a)
    return tuple(v.outcome for v in verdicts), queries.current_verification(db, a), verdicts


# seq: (levels 1-4, level 5 or None when it depends on the machine's timing, cause, silent, over-claim)
EXPECTED = {
    1: ((P, P, P, P), P, None, False, False),
    2: ((P, F, P, F), None, FailureCause.NUMERICAL_MISMATCH, True, True),
    3: ((P, F, P, F), None, FailureCause.NUMERICAL_MISMATCH, True, True),
    4: ((P, P, F, P), None, FailureCause.RECOMPILATION, True, True),
    5: ((P, P, F, P), None, FailureCause.CPU_FALLBACK, True, True),
    6: ((P, P, F, P), None, FailureCause.WRONG_CONFIGURATION, True, True),
    7: ((F, U, P, U), U, FailureCause.CRASH, False, True),
    8: ((P, P, P, P), F, FailureCause.SLOWER_OR_COSTLIER, True, True),
}


@pytest.mark.parametrize("seq", sorted(EXPECTED))
def test_variant_verdicts(verified, seq):
    db, m = verified
    levels, v, verdicts = result(db, m, seq)
    first4, fifth, cause, silent, over = EXPECTED[seq]
    for level, (want, got) in enumerate(zip(first4, levels), 1):
        if want is not None:
            assert got is want, f"L{level}: {verdicts[level - 1].reason}"
    if fifth is not None:
        assert levels[4] is fifth, verdicts[4].reason
    else:
        assert levels[4] in (P, F) and v.time_ratio is not None
    assert v.cause is cause, (v.cause, [d.reason for d in verdicts])
    assert v.silent is silent and v.over_claim is over


def test_variant_evidence_names_what_went_wrong(verified):
    db, m = verified
    _, _, clip = result(db, m, 3)
    assert "grad_norm" in clip[1].reason or "loss" in clip[1].reason
    _, _, fallback = result(db, m, 5)
    assert "aten::nonzero" in fallback[2].reason
    _, _, fewer = result(db, m, 6)
    assert "2 device(s) where 4" in fewer[2].reason and fewer[2].evidence[0].kind == "probe"
    _, v, crash = result(db, m, 7)
    assert any("RuntimeError" in e.text or "Error" in e.text for e in crash[0].evidence)
    _, _, shapes = result(db, m, 4)
    assert "compil" in shapes[2].reason


# --------------------------------------------------------------------------- issue 18: logs and commands only

MESH = Path(__file__).resolve().parent / "verify_project" / "train_mesh.py"
TORCHRUN = ["-m", "torch.distributed.run", "--nproc_per_node=4"]

# seq, argv after python, CPU_NUM_DEVICES, intended devices, expected level
MESH_VARIANTS = [
    (1, ["train_mesh.py", "--mode", "spmd"], 4, 4, 5),  # correct SPMD port: world size 1 by design
    (2, ["train_mesh.py", "--mode", "single"], 1, 1, 5),  # correct single-device port
    (3, ["train_mesh.py", "--mode", "spmd"], 1, 4, 4),  # one device where four were intended
    (4, [*TORCHRUN, "train_mesh.py", "--mode", "single"], 1, 4, 4),  # four processes, each alone
    (5, ["train_mesh.py", "--mode", "spmd", "--variant", "host_sync"], 4, 4, 5),  # a dozen .item() per step
    (6, ["train_mesh.py", "--mode", "spmd", "--variant", "crash"], 4, 4, 2),  # crash after the eval at 20
    (7, ["train_mesh.py", "--mode", "spawn"], 4, 4, 2),  # all-reduce aborts quoting global_devices=[0,1,2,3]
    (9, ["train_mesh.py", "--mode", "spmd", "--variant", "skip_steps"], 4, 4, 4),  # optimizer steps every other step
    (10, ["train_mesh.py", "--mode", "spmd", "--variant", "bf16"], 4, 4, 4),  # bfloat16 weights: the loss drifts
]


@pytest.fixture(scope="session")
def mesh_bundle(tmp_path_factory) -> Path:
    """Issue 18's runs as a study records them: command, environment, exit code, times and the log
    as produced (several processes' output interleaved, unbuffered), nothing else. No probe."""
    python = xla_python()
    if python is None:
        pytest.skip("no torch_xla environment: set WORKBENCH_XLA_PYTHON or run assets/demo/regenerate.sh")
    key = hashlib.sha256(MESH.read_bytes() + str(python.resolve()).encode()
                         + repr(MESH_VARIANTS).encode() + b"glued 8").hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench" / "verify-mesh" / key
    if (cache / "study.toml").is_file():
        return cache
    builder = BundleBuilder(tmp_path_factory.mktemp("mesh") / "bundle", prices={"cpu": 0.05})
    builder.write_study()
    folder = builder.root / "migrations" / "mlp-mesh"
    (folder / "logs").mkdir(parents=True)
    sha = make_repo(folder / "repo", [{"train_mesh.py": MESH.read_text()}])[0]
    ref = _run(python, ["train_mesh.py", "--reference"], {}, folder / "logs" / "000.log")
    assert ref["exit_code"] == 0, (folder / "logs" / "000.log").read_text()[-2000:]
    lines = [{"seq": 0, "source": "reference", "commit": sha, **ref, "log": "logs/000.log",
              "command": {"argv": ["python", "train_mesh.py", "--reference"], "env": {}},
              "intended_hardware": None, "observed_hardware": {"kind": "cpu", "count": 1}}]
    for seq, argv, devices, intended, expected in MESH_VARIANTS:
        env = {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": str(devices), "TF_CPP_MIN_LOG_LEVEL": "1",
               "PYTHONUNBUFFERED": "1"}
        result = _run(python, argv, env, folder / "logs" / f"{seq:03d}.log")
        lines.append({"seq": seq, "source": "agent", "commit": sha, **result, "log": f"logs/{seq:03d}.log",
                      "command": {"argv": ["python", *argv], "env": env}, "expected_level": expected,
                      "intended_hardware": {"kind": "cpu", "count": intended}, "observed_hardware": None})
    lines.append({**lines[4], "seq": 8, "log": "logs/008.log"})
    _glue(folder / "logs" / "004.log", folder / "logs" / "008.log")
    (folder / "migration.toml").write_text(
        f'title = "MLP mesh"\nrepo = "repo"\nbase_commit = "{sha}"\n'
        '[target]\naccelerator = "cpu"\nchips = 4\nruntime = "torch_xla"\n'
        '[goal]\nmetric = "eval_accuracy"\nreference = 0.86\ndirection = "max"\ntolerance = 0.01\n')
    (folder / "attempts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if cache.exists():
        shutil.rmtree(cache)
    shutil.copytree(builder.root, cache)
    return cache


def _glue(source: Path, target: Path) -> None:
    """The torchrun log with one process's last step line glued to another's step 22, as two
    processes' unbuffered writes interleave (`...step_time_ms=27.8step=30 loss=...`): the real
    runs' output, made to hold the case every time rather than by chance."""
    text = source.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(text) if line.startswith("step=22 "))
    j = max(k for k, line in enumerate(text) if line.startswith("step=30 "))
    text[i] = text[i].rstrip("\n") + text[j]
    del text[j]
    target.write_text("".join(text))


@pytest.fixture
def mesh_verified(mesh_bundle: Path, tmp_path: Path):
    study = open_study(tmp_path / "m.db", create=True)
    assert not import_bundle(study, mesh_bundle, "ana").problems
    db = study.db
    m = queries.get_migration(db, "mlp-mesh")
    verify_study(db, "ana")
    # level 5 limits from the correct SPMD port's own ratios (x1.5), as for the matrix above
    ident = queries.current_verification(db, _attempt_id(db, m.id, 1))
    records.add_verify_settings(db, migration_id=m.id, source="reviewer", reviewer="ana", settings={
        "max_time_ratio": ident.time_ratio * 1.5, "max_cost_ratio": ident.cost_ratio * 1.5})
    verify_study(db, "ana")
    yield study, m
    study.close()


C = FailureCause
# seq: (levels 1-4, level 5 or None when it depends on the machine's timing, causes allowed, silent)
MESH_EXPECTED = {
    1: ((P, P, P, P), P, (None,), False),
    2: ((P, P, P, P), None, (None, C.SLOWER_OR_COSTLIER), None),
    3: ((P, P, F, P), None, (C.WRONG_CONFIGURATION,), True),
    4: ((P, P, F, P), None, (C.WRONG_CONFIGURATION,), True),
    5: ((P, P, P, P), F, (C.HOST_SYNC,), True),
    6: ((F, U, P, U), U, (C.CRASH,), False),
    7: ((F, U, P, U), U, (C.CRASH,), False),
    8: ((P, P, F, P), None, (C.WRONG_CONFIGURATION,), True),
    9: ((P, F, P, F), None, (C.NUMERICAL_MISMATCH,), True),  # half the updates lost: the goal is missed too
    10: ((P, F, P, P), None, (C.NUMERICAL_MISMATCH,), True),  # drift beyond 1% while the accuracy holds
}


@pytest.mark.parametrize("seq", sorted(MESH_EXPECTED))
def test_mesh_verdicts_from_logs_and_commands_only(mesh_verified, seq):
    study, m = mesh_verified
    levels, v, verdicts = result(study.db, m, seq)
    first4, fifth, causes, silent = MESH_EXPECTED[seq]
    for level, (want, got) in enumerate(zip(first4, levels), 1):
        assert got is want, f"L{level}: {verdicts[level - 1].reason}"
    if fifth is not None:
        assert levels[4] is fifth, verdicts[4].reason
    assert v.cause in causes, (v.cause, [d.reason for d in verdicts])
    if silent is not None:
        assert v.silent is silent


def test_mesh_evidence_cites_the_log_and_the_command(mesh_verified):
    study, m = mesh_verified
    db = study.db
    _, _, spmd = result(db, m, 1)
    assert "ran on 4 device(s), kind not stated in the evidence, as intended" in spmd[2].reason and "the run states 4 device(s)" in spmd[2].evidence[0].text
    assert "median step time after step 10" in spmd[4].reason
    _, _, one = result(db, m, 3)
    assert "1 device(s) where 4" in one[2].reason and one[2].evidence[0].kind == "log_line"
    _, _, alone = result(db, m, 4)
    assert "launcher starts 4 processes" in alone[2].reason and "world size 1" in alone[2].reason
    assert {e.kind for e in alone[2].evidence} == {"record", "log_line"}
    _, _, crash = result(db, m, 6)
    assert "eval_accuracy agrees at step 20" in crash[1].reason
    _, _, spawn = result(db, m, 7)
    assert "0 devices" not in spawn[2].reason
    _, _, glued = result(db, m, 8)
    assert "loss over 30 steps" in glued[1].reason
    failure = queries.current_failure(db, _attempt_id(db, m.id, 5))
    assert "per step): above 4 per step" in failure.evidence[0].text
    _, _, skipped = result(db, m, 9)
    assert "loss disagrees with the reference over steps 1-5" in skipped[1].reason
    assert "bfloat16" not in skipped[1].reason
    _, _, bf16 = result(db, m, 10)
    assert "every loss value the attempt logged is a bfloat16 number (30 telling)" in bf16[1].reason


def test_a_rerun_reproduces_a_recorded_single_device(mesh_verified, tmp_path):
    """Re-running the one-device fault keeps its recorded CPU_NUM_DEVICES=1 (the local backend
    proposes 4), so the re-run fails level 3 too, now with the probe's evidence."""
    from workbench.rerun import jobs
    from workbench.rerun.jobs import JobState
    from workbench.rerun.runner import run_job

    study, m = mesh_verified
    _, attempt = queries.find_attempt(study.db, "mlp-mesh", 3)
    venv = xla_python().parent.parent
    spec = jobs.spec_for(study.db, attempt, "local", chips=4, options={"venv": str(venv)})
    assert spec.env["CPU_NUM_DEVICES"] == "1"
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "ana").id)
    assert job.state is JobState.FINISHED, (job.error, job.log_path.read_text()[-3000:])
    levels, v, verdicts = result(study.db, m, queries.attempt_summary(study.db, job.result_attempt_id).attempt.seq)
    assert levels[2] is F and v.cause is FailureCause.WRONG_CONFIGURATION, verdicts[2].reason
    assert "1 device(s) where 4" in verdicts[2].reason
