"""A fresh, detached git worktree per job: the user's working tree, index and branches stay as they are."""

from __future__ import annotations

import subprocess
from pathlib import Path

from domain.errors import WorkbenchError


def git(repo: Path, *args: str) -> str:
    """git's output in `repo`; WorkbenchError with git's message when it fails."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise WorkbenchError(f"git {' '.join(args[:2])} in {repo}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def add(repo: Path, commit: str, where: Path) -> Path:
    """Check `commit` out at `where` (a new folder) with a detached HEAD: no branch is made."""
    git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    where.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", "--force", str(where), commit)
    return where


def remove(repo: Path, where: Path) -> None:
    """Remove the worktree and its administrative entry; quiet when it is already gone."""
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(where)],
                   capture_output=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)
    if where.exists():
        import shutil

        shutil.rmtree(where, ignore_errors=True)


def bundle(worktree: Path, out: Path) -> Path:
    """A git bundle holding the worktree's HEAD commit and its history, to ship to a remote host."""
    git(worktree, "bundle", "create", "--quiet", str(out), "HEAD")
    return out
