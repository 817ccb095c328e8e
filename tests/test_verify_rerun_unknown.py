"""`workbench verify --rerun-unknown`: an attempt whose level 3 is unknown is re-run with the
probe on the local backend (a tiny real script, a real runner process), and the CLI says which
job it started."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from domain.models import Outcome
from storage import queries
from tests.rerun_helpers import study_with_script
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_REVIEWER": "ana", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_rerun_unknown_starts_a_probe_rerun_of_each_unknown_level3(tmp_path: Path):
    study = study_with_script(tmp_path)
    path = str(study.path)
    refused = _cli("verify", path, "--rerun-unknown")
    assert refused.returncode != 0 and "--rerun-unknown needs --backend" in refused.stderr
    done = _cli("verify", path, "--rerun-unknown", "--backend", "local", "--chips", "1", "--yes")
    assert done.returncode == 0, done.stderr
    toy = queries.get_migration(study.db, "toy")
    attempt_id = queries.attempt_id_by_seq(study.db, toy.id, 1)
    assert queries.verdicts(study.db, attempt_id)[2].effective is Outcome.UNKNOWN
    started = re.findall(r"job (\d+) started for toy #1", done.stderr)
    assert len(started) == 1, done.stderr
    assert "verified 1 of 1 attempts" in done.stderr
    job = jobs.wait(study.db, int(started[0]), timeout=60)
    assert job.state is JobState.FINISHED and job.spec.attempt_id == attempt_id and job.spec.chips == 1
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.source.value == "rerun" and queries.verdicts(study.db, new.id)
    # nothing unknown is left to re-run among the agent's attempts but the same one; re-runs are never re-run
    again = _cli("verify", path, "--rerun-unknown", "--backend", "local", "--chips", "1", "--yes")
    assert again.returncode == 0, again.stderr
    assert f"for toy #{new.seq}" not in again.stderr
    for job_id in re.findall(r"job (\d+) started", again.stderr):
        jobs.wait(study.db, int(job_id), timeout=60)
    study.close()


def test_changed_lists_only_attempts_verified_again(tmp_path: Path):
    import json

    study = study_with_script(tmp_path)
    path = str(study.path)
    first = _cli("verify", path, "--changed", "--json")
    assert first.returncode == 0 and [r["seq"] for r in json.loads(first.stdout)] == [1]
    again = _cli("verify", path, "--changed", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == []
    assert "verified 0 of 1 attempts (1 unchanged)" in again.stderr
    assert [r["changed"] for r in json.loads(_cli("verify", path, "--json").stdout)] == [False]
    study.close()
