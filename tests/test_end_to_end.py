"""Issue 38's walk, from nothing, as a new user would: a small training project of our own,
written the way real ones are (argparse, its own log format, data made by a prepare script and
ignored by git, a clone of an upstream whose agent commits carry no trailers), built into a study
through the CLI alone: no hand-set verify settings, no bundle. Real git, SQLite and processes."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import GIT_ENV, git
from tests.test_cli import workbench

PYTHON = shlex.quote(sys.executable)

PREPARE = '''\
"""Make the toy data set (the real project downloads one): data/ is not in git."""
import pathlib
import random

random.seed(0)
out = pathlib.Path("data")
out.mkdir(exist_ok=True)
rows = [(x, 1 if x > 0.5 else 0) for x in (random.random() for _ in range(400))]
(out / "train.csv").write_text("".join(f"{x:.4f},{y}\\n" for x, y in rows))
print(f"prepared {len(rows)} rows in {out}")
'''

TRAIN = '''\
"""Fit a threshold classifier by gradient steps; logs like many small projects do."""
import argparse
import math
import pathlib
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--lr", type=float, default=2.0)
args = parser.parse_args()
rows = [tuple(map(float, line.split(","))) for line in pathlib.Path("data/train.csv").read_text().splitlines()]
w, b = 0.0, 0.0
print(f"config: steps={args.steps} lr={args.lr}", flush=True)
for step in range(1, args.steps + 1):
    gw = gb = loss = 0.0
    for x, y in rows:
        p = 1 / (1 + math.exp(-(w * x + b) * 8))
        loss -= y * math.log(p + 1e-9) + (1 - y) * math.log(1 - p + 1e-9)
        gw += (p - y) * x
        gb += p - y
    w -= args.lr * gw / len(rows)
    b -= args.lr * gb / len(rows)
    print(f"step {step} | loss {loss / len(rows):.4f}", flush=True)
    time.sleep(0.01)
accuracy = sum((w * x + b > 0) == (y == 1) for x, y in rows) / len(rows)
print(f"step {args.steps} | eval_accuracy {accuracy:.4f}", flush=True)
'''


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True,
                   env={**os.environ, **GIT_ENV})
    return git(repo, "rev-parse", "HEAD")


def _run(*args: str) -> str:
    done = workbench(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_a_study_from_nothing_for_a_real_shaped_project(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    original = _commit(upstream, {".gitignore": "data/\n__pycache__/\n", "prepare.py": PREPARE, "train.py": TRAIN},
                       "A small classifier")
    project = tmp_path / "project"
    git(tmp_path, "clone", "-q", str(upstream), str(project))
    subprocess.run([sys.executable, "prepare.py"], cwd=project, check=True, capture_output=True)  # the user's data
    # the agent's work: three commits, no trailers; the second crashes, the third is the port
    _commit(project, {"train.py": TRAIN.replace("import time", "import time\nimport xla_backend")}, "Use XLA")
    _commit(project, {"train.py": TRAIN.replace("w, b = 0.0, 0.0", "w, b = 0.0, 0.0\nw = rows[0][5]")},
            "Move tensors to the device")
    port = _commit(project, {"train.py": TRAIN.replace("Fit a threshold", "Fit (XLA port) a threshold")},
                   "Port to XLA: trains as on the GPU")

    db = tmp_path / "study.db"
    _run("init", str(db), "--title", "Real project", "--price", "cpu=0.05", "--price", "a100=2.5")
    added = _run("migration", "add", str(db), "clf", "--repo", str(project), "--target", "cpu:1",
                 "--goal", "eval_accuracy", "--direction", "max", "--tolerance", "0.01",
                 "--command", f"{PYTHON} train.py --steps 40", "--setup", f"{PYTHON} prepare.py")
    assert f"base      {original[:12]}: where HEAD left upstream, 3 commits before HEAD" in added
    reference = _run("reference", str(db), "clf", "--run")
    assert "the reference value, taken from this run" in reference
    assert "3 new" in _run("import", "git", str(project), "--db", str(db), "--migration", "clf")
    _run("verify", str(db))
    for seq in (1, 2, 3):
        ran = workbench("rerun", str(db), "clf", str(seq), "--yes", "--wait")
        assert ran.returncode in (0, 1), ran.stderr
        assert "prepared 400 rows" in ran.stdout  # the setup made the data git ignores
    _run("verify", str(db))
    con = sqlite3.connect(db)
    try:
        runs = dict(con.execute("SELECT r.seq, a.seq FROM attempt a JOIN attempt r ON r.rerun_of = a.id").fetchall())
        statuses = dict(con.execute("SELECT seq, status FROM attempt WHERE source = 'rerun'").fetchall())
    finally:
        con.close()
    assert sorted(runs.values()) == [1, 2, 3]
    by_original = {original_seq: rerun for rerun, original_seq in runs.items()}
    assert statuses[by_original[1]] == statuses[by_original[2]] == "nonzero_exit"
    assert statuses[by_original[3]] == "ok"
    # the reviewer accepts on the port's re-run: a re-run is a run of the attempt it re-ran
    accepted = _run("decide", str(db), "clf", "accept", "--attempt", str(by_original[3]), "--reason",
                    "the port's re-run meets the goal; no TPU evidence on this machine")
    assert f"attempt #3, which re-run #{by_original[3]} ran again" in accepted
    report = json.loads(_run("report", str(db), "--format", "json"))
    (migration,) = report["migrations"]
    final = migration["final_run"]
    assert (final["seq"], final["why_none"]) == (3, None)  # the attempt, measured by its re-run
    goal = migration["goal"]
    assert final["time_ratio"] is not None and goal["final_attempt_id"] == final["attempt_id"]
    assert goal["final_value"] >= goal["reference_value"] - goal["tolerance"]  # level 4 passes; level 3 has
    # no device evidence from a program without torch, so the ladder stops at 2 (goal_met needs 4)
    totals = report["totals"]
    assert totals["attempts"]["n"] == 3 and totals["over_claims"]["n"] == 0
    assert git(project, "rev-parse", "HEAD") == port
