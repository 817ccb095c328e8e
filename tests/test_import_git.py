"""`workbench import git`: a repository in which each commit is one attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import git, make_repo

from storage.database import open_study
from storage.logs import LogReader
from workbench.bundle import import_bundle
from workbench.importers.git_history import import_git


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_each_commit_is_an_attempt(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla", commits=1)
    db_path = tmp_path / "s.db"
    study = open_study(db_path, create=True)
    assert not import_bundle(study, bundle.root, "ana").problems
    repo = folder / "repo"
    crash = commit(repo, {"train.py": "import torch_xla\n", ".workbench/attempt.log": "Traceback\nRuntimeError\n"},
                   "Move to XLA\n\nFirst try.\n\nAttempt-Command: PJRT_DEVICE=TPU python train.py\nAttempt-Exit-Code: 1\n")
    metrics = "".join(json.dumps({"name": "loss", "step": s, "value": 1.0 / (s + 1)}) + "\n" for s in range(3))
    good = commit(repo, {"train.py": "import torch_xla  # fixed\n", ".workbench/attempt.log": "loss 0.3\n",
                         ".workbench/metrics.jsonl": metrics},
                  "Fix the step\n\nRuns on 4 TPU chips now.\n\nAttempt-Command: python train.py\nAttempt-Exit-Code: 0\n")
    notes = commit(repo, {"README": "notes\n"}, "Just notes")  # no trailers: an attempt all the same
    report = import_git(study, repo, "mlp-xla", "ana")
    assert (report.inserted, report.problems) == (3, [])
    rows = list(study.db.query("SELECT * FROM attempt WHERE external_id LIKE 'git:%' ORDER BY seq"))
    assert [(r["seq"], r["commit_sha"], r["status"], r["exit_code"]) for r in rows] == [
        (1, crash, "nonzero_exit", 1), (2, good, "ok", 0), (3, notes, "no_result", None)]
    assert json.loads(rows[0]["env"]) == {"PJRT_DEVICE": "TPU"} and rows[1]["expected_level"] == 3
    assert LogReader(study.db, rows[0]["log_id"]).lines(0, 2) == ["Traceback", "RuntimeError"]
    assert study.db.execute("SELECT count(*) FROM metric_point WHERE attempt_id = ?", [rows[1]["id"]]).fetchone()[0] == 3
    again = import_git(study, repo, "mlp-xla", "ana")
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 3)
    study.close()

    env = {**os.environ, "WORKBENCH_REVIEWER": "ana"}
    cli = [sys.executable, "-m", "cli", "import", "git", str(repo), "--db", str(db_path), "--migration"]
    done = subprocess.run(cli + ["mlp-xla"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "0 new, 0 updated, 3 unchanged" in done.stdout
    other = tmp_path / "other"
    make_repo(other, [{"a": "1"}])
    done = subprocess.run(cli[:5] + [str(other)] + cli[6:] + ["mlp-xla"], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "base commit" in done.stderr and "Traceback" not in done.stderr
