"""Issue 34 on real torch_xla runs: a TPU target re-run on XLA:CPU (the local backend's stand-in)
against a plain-CPU reference, three ports of one script (tests/verify_project/train_evals.py)
re-run with the probe inside: the correct one, one that compiles once more at each evaluation, and
one that reads a dozen values on the host in every step. The reference runs under load.

Needs the torch_xla CPU environment (`$WORKBENCH_XLA_PYTHON`, `.venv-xla/` or the CI cache);
without one the tests skip, saying so. About half a minute on 2 cores.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BundleBuilder, make_repo
from test_rerun_xla import xla_venv

from domain.models import FailureCause, Outcome
from storage import queries
from storage.database import open_study
from tests.rerun_helpers import attempt
from workbench.bundle import import_bundle
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState
from workbench.rerun.runner import run_job
from workbench.verify import verify_study

PROJECT = Path(__file__).resolve().parent / "verify_project"
P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN
PORTS = {1: [], 2: ["--variant", "eval_recompile"], 3: ["--variant", "host_sync"]}


@pytest.fixture(scope="module")
def reruns(tmp_path_factory):
    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    tmp = tmp_path_factory.mktemp("siblings")
    builder = BundleBuilder(tmp / "bundle", prices={"cpu": 0.05, "tpu-v5e": 1.2})
    builder.write_study()
    folder = builder.root / "migrations" / "evals"
    (folder / "logs").mkdir(parents=True)
    files = {name: (PROJECT / name).read_text() for name in ("train_evals.py", "train_mesh.py")}
    sha = make_repo(folder / "repo", [files])[0]
    started = datetime.datetime.now(datetime.UTC)
    # the reference runs on a busy machine (two processes spinning beside it): its clock says nothing
    # of the ports', and the verdicts below hold whatever load it ran under
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        with (folder / "logs" / "0.log").open("wb") as out:
            done = subprocess.run([str(venv / "bin" / "python"), "train_evals.py", "--reference"], cwd=PROJECT,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=300)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert done.returncode == 0
    ended = datetime.datetime.now(datetime.UTC)
    goal = float((folder / "logs" / "0.log").read_text().split("eval_accuracy ")[-1].split()[0])
    records = [builder.attempt(0, sha, command={"argv": ["python", "train_evals.py", "--reference"], "env": {}},
                               metrics=None, started_at=started.isoformat(), ended_at=ended.isoformat(),
                               intended_hardware=None, observed_hardware={"kind": "cpu", "count": 1})]
    for seq, extra in PORTS.items():
        records.append(builder.attempt(seq, sha, command={"argv": ["python", "train_evals.py", *extra], "env": {}},
                                       metrics=None, log=None, intended_hardware={"kind": "tpu-v5e", "count": 1}))
    builder.write_attempts(folder, records)
    (folder / "migration.toml").write_text(
        f'title = "evals"\nrepo = "repo"\nbase_commit = "{sha}"\n'
        '[target]\naccelerator = "tpu-v5e"\nchips = 1\nruntime = "torch_xla"\n'
        f'[goal]\nmetric = "eval_accuracy"\nreference = {goal}\ndirection = "max"\ntolerance = 0.01\n')
    study = open_study(tmp / "s.db", create=True)
    assert not import_bundle(study, builder.root, "ana").problems
    made = {}
    for seq in PORTS:  # the correct port first: a re-run is verified as it ends, against the correct ones
        spec = jobs.spec_for(study.db, attempt(study, "evals", seq), "local", chips=1, options={"venv": str(venv)})
        spec = jobs.with_changes(spec, env={**spec.env, "TF_CPP_MIN_LOG_LEVEL": "1"})
        job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "ana").id)
        assert job.state is JobState.FINISHED, (job.error, job.log_path.read_text()[-3000:])
        made[seq] = job.result_attempt_id
    yield study, made
    study.close()


def _verdicts(study, attempt_id):
    verdicts = queries.verdicts(study.db, attempt_id)
    return tuple(v.outcome for v in verdicts), verdicts, queries.current_verification(study.db, attempt_id)


def test_the_stand_in_is_named_and_siblings_and_host_syncs_decide_level_5(reruns):
    """Each re-run was verified as it ended, against the correct ones before it; verifying the
    study compares each with all the others, and a second time changes nothing."""
    study, made = reruns
    verify_study(study.db, "ana")
    levels, verdicts, v = _verdicts(study, made[1])
    assert levels == (P, P, P, P, U) and v.cause is None, [d.reason for d in verdicts]
    assert verdicts[2].reason.startswith("XLA:CPU x1 standing in for tpu-v5e x1")
    assert "ran on XLA:CPU standing in for tpu-v5e" in verdicts[4].reason
    assert "device busy" in verdicts[4].reason and "host syncs per step" in verdicts[4].reason
    levels, verdicts, v = _verdicts(study, made[2])
    assert levels == (P, P, P, P, F) and v.cause is FailureCause.RECOMPILATION, [d.reason for d in verdicts]
    # 7 against 2 with the first probe; the probe's trace (version 2) adds its own graphs: 13 against 5,
    # counted per phase (the script never calls model.eval(): its evaluations compile in training)
    found = re.search(r"(\d+) compilations in training against (\d+) in #", verdicts[4].reason)
    assert found and int(found[1]) > 1.5 * int(found[2]) + 2, verdicts[4].reason
    levels, verdicts, v = _verdicts(study, made[3])
    assert levels == (P, P, P, P, F) and v.cause is FailureCause.HOST_SYNC, [d.reason for d in verdicts]
    assert "abnormal host syncs: probe: " in verdicts[4].reason and "counted at each step" in verdicts[4].reason
    assert verify_study(study.db, "ana").changed == 0
