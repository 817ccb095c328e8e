"""A study made with the real commands, a Claude Code projects folder laid out like the real one,
and `workbench watch` as a real subprocess: what the live-watch tests share."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import make_repo
from tests.test_cli import workbench
from tests.test_setup import reference_files

SAMPLES = Path(__file__).parent / "data" / "claude-code"


@dataclass
class Live:
    repo: Path
    db: Path
    config: Path
    folder: Path
    """The project's folder under <config>/projects."""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CLAUDE_CONFIG_DIR": str(self.config), "WORKBENCH_REVIEWER": "ana"}

    def watch(self, slug: str = "mlp", *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "cli", "watch", str(self.db), slug, "--project", str(self.repo), "--interval", "0.2",
             "--for", "300", *extra],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def live_study(tmp_path: Path, *, slug: str = "mlp") -> Live:
    """init, migration add, reference from files; the projects folder of the repo made (empty)."""
    repo, db, config = tmp_path / "project", tmp_path / "s.db", tmp_path / "claude"
    make_repo(repo, [{"train.py": "print('train')\n"}])
    log, metrics = reference_files(tmp_path)
    for args in (("init", str(db), "--title", "Live"),
                 ("migration", "add", str(db), slug, "--repo", str(repo), "--target", "cpu:4", "--goal",
                  "eval_accuracy", "--direction", "max", "--reference-value", "0.9", "--command", "python train.py"),
                 ("reference", str(db), slug, "--log", str(log), "--metrics", str(metrics))):
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    folder = config / "projects" / "".join(c if c.isalnum() else "-" for c in str(repo.resolve()))
    folder.mkdir(parents=True)
    return Live(repo, db, config, folder)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, as a person stops it; its output."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out, err


def sample_lines(repo: Path) -> list[bytes]:
    """The real sample session's own lines (not its sub-agent's), moved to the project's folder:
    `cwd` and paths under it name the repo, so the session belongs to it."""
    lines = (SAMPLES / "session-main.jsonl").read_bytes().splitlines(keepends=True)
    old = b"/home/USER/projects/spotter-worktrees/spotter-dov"
    return [line.replace(old, str(repo.resolve()).encode()) for line in lines if b'"isSidechain":true' not in line]


def line(record: dict) -> bytes:
    return (json.dumps(record) + "\n").encode()
