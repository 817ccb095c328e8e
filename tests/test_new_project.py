"""A project set up from nothing as its user would (issue 38): `migration add` without a base or a
reference value, commits taken as they are, decisions on a named attempt. Real git repositories,
real SQLite files, the CLI as a subprocess."""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import GIT_ENV, git
from tests.test_cli import fails_cleanly, workbench

PYTHON = shlex.quote(sys.executable)
TRAIN = "print('step 1 loss 0.9')\nprint('step 2 loss 0.5 eval_accuracy 0.93')\n"


def commit(repo: Path, files: dict[str, str], message: str, when: str | None = None) -> str:
    """One commit with this message (and author/committer time, when given); returns its SHA."""
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    done = subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", message],
                          capture_output=True, text=True, env={**os.environ, **GIT_ENV, **env})
    assert done.returncode == 0, done.stderr
    return git(repo, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def add(db: Path, repo: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if not db.exists():
        assert workbench("init", str(db), "--title", "T").returncode == 0
    return workbench("migration", "add", str(db), "m", "--repo", str(repo), "--target", "cpu:2", "--goal",
                     "eval_accuracy", "--direction", "max", "--command", f"{PYTHON} train.py", *extra)


# --------------------------------------------------------------------------- migration add


def test_the_base_is_inferred_from_the_agents_trailers_and_the_value_from_the_reference_run(tmp_path):
    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    base = commit(repo, {"train.py": TRAIN}, "the original GPU code")
    first = commit(repo, {"train.py": "raise SystemExit(1)\n"},
                   "Port to XLA\n\nCo-Authored-By: Claude <noreply@anthropic.com>")
    commit(repo, {"train.py": TRAIN + "# xla\n"}, "fix the port")
    made = add(db, repo)
    assert made.returncode == 0, made.stderr
    assert f"base      {base[:12]}: the parent of {first[:12]}, the first commit with an agent trailer" in made.stdout
    assert rows(db, "SELECT base_commit, goal_reference FROM migration") == [(base, None)]
    ran = workbench("reference", str(db), "m", "--run")
    assert ran.returncode == 0, ran.stderr
    assert "goal      eval_accuracy max 0.93: the reference value, taken from this run" in ran.stdout
    assert rows(db, "SELECT goal_reference FROM migration") == [(0.93,)]
    assert rows(db, "SELECT json_extract(detail, '$.why') FROM audit WHERE entity = 'migration' AND action = 'update'"
                ) == [("from the reference run",)]
    assert workbench("verify", str(db)).returncode == 0


def test_the_base_is_where_head_left_its_upstream(tmp_path):
    upstream, db = new_repo(tmp_path / "upstream"), tmp_path / "s.db"
    commit(upstream, {"train.py": "print('old')\n"}, "v0")
    original = commit(upstream, {"train.py": TRAIN}, "v1")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    for n in range(3):  # the agent's commits, no trailers
        commit(clone, {"train.py": TRAIN + f"# {n}\n"}, f"agent step {n}")
    made = add(db, clone, "--reference-value", "0.9")
    assert made.returncode == 0, made.stderr
    assert f"base      {original[:12]}: where HEAD left upstream, 3 commits before HEAD" in made.stdout
    assert rows(db, "SELECT base_commit, goal_reference FROM migration") == [(original, 0.9)]


def test_without_anything_that_tells_the_base_is_asked_for(tmp_path):
    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    commit(repo, {"train.py": TRAIN}, "one")
    commit(repo, {"train.py": TRAIN + "#\n"}, "two")
    fails_cleanly(add(db, repo, "--reference-value", "0.9"), "--base", "cannot tell where the agent's work starts")
    assert rows(db, "SELECT COUNT(*) FROM migration") == [(0,)]
    made = add(db, repo, "--base", "HEAD~1")
    assert made.returncode == 0 and "base      " not in made.stdout  # given, not inferred: nothing to explain
