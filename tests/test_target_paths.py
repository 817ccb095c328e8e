"""Paths given on the command line are the caller's (issue 38): a relative `--venv` is read from
the folder the command was typed in, a folder without bin/python is refused by name, and the
pre-flight checks the command as the job will start it, in a checkout of the commit. Real git
repositories, real SQLite files, real runner processes."""

from __future__ import annotations

import os
import shlex
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from tests.conftest import make_repo
from tests.rerun_helpers import study_with_script


def fake_venv(folder: Path) -> Path:
    """A target environment whose python says which one it is, then runs this interpreter."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho venv-marker {folder.name}\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


@pytest.fixture
def study(tmp_path):
    s = study_with_script(tmp_path)
    yield s
    s.close()


def _jobs(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, state FROM job").fetchall()
    finally:
        con.close()


def test_a_relative_venv_is_the_callers_and_the_rerun_uses_its_python(study, tmp_path, monkeypatch):
    fake_venv(tmp_path / "tvenv")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rerun", str(study.path), "toy", "1", "--venv", "tvenv", "--yes", "--wait",
                                       "--command", "python train.py 2"])
    assert result.exit_code == 0, result.output
    assert f"venv      {tmp_path / 'tvenv'}" in result.output
    assert "venv-marker tvenv" in result.output  # the job's python was the venv's, not whatever PATH held
    from workbench.rerun import jobs

    (job,) = jobs.list_jobs(study.db)
    assert job.spec.options["venv"] == str(tmp_path / "tvenv")


def test_a_venv_without_bin_python_is_refused_by_name(study, tmp_path, monkeypatch):
    (tmp_path / "not-a-venv" / "lib").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rerun", str(study.path), "toy", "1", "--venv", "not-a-venv", "--yes"])
    assert result.exit_code == 2, result.output
    assert "--venv not-a-venv" in result.output and "no bin/python" in result.output
    assert "Traceback" not in result.output
    assert _jobs(study.path) == []


def test_the_preflight_looks_for_the_program_in_the_commits_checkout(study, tmp_path, monkeypatch):
    """`./run.sh` exists in the caller's folder but not in the commit: refused before any job."""
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["rerun", str(study.path), "toy", "1", "--yes", "--command", "./run.sh"])
    assert result.exit_code == 2, result.output
    assert "./run.sh is not in the commit's checkout" in result.output
    assert _jobs(study.path) == []
    (repo,) = study.db.execute("SELECT repo FROM migration").fetchone()
    listed = subprocess.run(["git", "-C", repo, "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.splitlines()) == 1  # the pre-flight's checkout is gone


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                               "WORKBENCH_REVIEWER": "ana"})


def test_reference_run_with_a_relative_venv_runs_that_venvs_python(tmp_path):
    repo, db, here = tmp_path / "project", tmp_path / "s.db", tmp_path / "here"
    make_repo(repo, [{"train.py": "print('step 1 eval_accuracy 0.93')\n"}])
    fake_venv(here / "venv")
    assert _cli("init", str(db), "--title", "T", cwd=here).returncode == 0
    added = _cli("migration", "add", str(db), "m", "--repo", str(repo), "--base", "HEAD", "--target", "cpu",
                 "--goal", "eval_accuracy", "--direction", "max", "--reference-value", "0.9",
                 "--command", "python train.py", cwd=here)
    assert added.returncode == 0, added.stderr
    refused = _cli("reference", str(db), "m", "--run", "--venv", "nothing", cwd=here)
    assert refused.returncode == 2 and "--venv nothing" in refused.stderr and "no bin/python" in refused.stderr
    made = _cli("reference", str(db), "m", "--run", "--venv", "venv", cwd=here)
    assert made.returncode == 0, made.stderr
    (log,) = (tmp_path / "s.reference").glob("m-*/output.log")
    assert "venv-marker venv" in log.read_text()
