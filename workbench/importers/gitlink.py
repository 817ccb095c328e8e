"""Ties transcript attempts to commits of the project's repository.

Where the agent committed, an attempt gets the newest agent commit made before it started.
Where it did not, a commit is built from the recorded edits on top of the previous state, with
git plumbing only (a temporary index file, hash-object, write-tree, commit-tree, update-ref)
under `refs/workbench/<migration>/attempt-<seq>`: the user's branches, index and working tree
are never touched. Built commits have fixed authors and dates, so a re-import builds the same
SHAs.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from domain.costs import parse_time
from domain.errors import WorkbenchError
from domain.transcript import Edit

REF_PREFIX = "refs/workbench"
IDENTITY = {
    "GIT_AUTHOR_NAME": "workbench",
    "GIT_AUTHOR_EMAIL": "workbench@localhost",
    "GIT_COMMITTER_NAME": "workbench",
    "GIT_COMMITTER_EMAIL": "workbench@localhost",
}


def epoch(stamp: str | None) -> float | None:
    value = parse_time(stamp)
    return None if value is None else value.timestamp()


@dataclass(frozen=True)
class AgentCommit:
    sha: str
    time: float
    files: frozenset[str]


@dataclass(frozen=True)
class Link:
    sha: str
    basis: str
    """agent_commit, built, built_partial or base."""
    note: str = ""


class GitLinker:
    def __init__(self, repo: Path, base_commit: str, migration: str) -> None:
        self.repo = repo
        self.migration = migration
        if not (repo / ".git").exists() and not (repo / "HEAD").is_file():
            raise WorkbenchError(f"{repo}: not a git repository")
        try:  # else `git log HEAD` below failed with git's usage line
            self._git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        except WorkbenchError:
            raise WorkbenchError(f"{repo}: the repository has no commit (its HEAD names none):"
                                 " point --repo at the one the agent worked in") from None
        try:
            self.base = self._git("rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}").strip()
        except WorkbenchError:
            raise WorkbenchError(
                f"{repo}: the migration's base commit {base_commit[:12]} is not in this repository"
            ) from None
        self.commits = self._agent_commits()
        self.sha = self.base
        self.basis = "base"
        self.anchor_time = float("-inf")
        """Time of the agent commit the current state rests on."""

    def _git(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(self.repo), *args],
                input=input,
                capture_output=True,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
                check=True,
            )
        except subprocess.CalledProcessError as exc:
            message = exc.stderr.decode(errors="replace").strip().splitlines()
            raise WorkbenchError(f"{self.repo}: git {args[0]} failed ({message[-1] if message else exc.returncode})") from None
        except OSError as exc:
            raise WorkbenchError(f"cannot run git ({exc.strerror})") from None
        return done.stdout.decode("utf-8", errors="surrogateescape")

    def _agent_commits(self) -> list[AgentCommit]:
        """Commits on the user's branches and tags made after the base, oldest first."""
        out = self._git(
            "log", "--branches", "--tags", "--remotes", "HEAD", f"^{self.base}",
            "--format=%x00%H %ct", "--name-only", "--no-renames",
        )
        commits = []
        for block in out.split("\0")[1:]:
            head, _, rest = block.partition("\n")
            sha, _, stamp = head.partition(" ")
            files = frozenset(line for line in rest.splitlines() if line)
            commits.append(AgentCommit(sha, float(stamp), files))
        commits.sort(key=lambda c: c.time)
        return commits

    def link(self, seq: int, started_at: str | None, edits: list[Edit]) -> Link:
        """The commit attempt `seq` ran on, given the edits made since the previous attempt."""
        start = epoch(started_at)
        if start is not None:
            newer = [c for c in self.commits if self.anchor_time < c.time <= start]
            if newer:
                commit = newer[-1]
                self.sha, self.basis, self.anchor_time = commit.sha, "agent_commit", commit.time
                committed = {e.file_path for e in edits if (epoch(e.at) or start) <= commit.time and e.file_path}
                touched = frozenset().union(*(c.files for c in newer))
                note = ""
                if committed and not committed & touched:
                    note = f"the agent's commit {commit.sha[:10]} changes none of the files edited before it"
                edits = [e for e in edits if (epoch(e.at) or start) > commit.time]
                if not edits:
                    return Link(self.sha, "agent_commit", note)
        if not edits:
            return Link(self.sha, self.basis)
        sha, skipped = self._build(seq, started_at, edits)
        self.sha = sha
        self.basis = "built_partial" if skipped else "built"
        return Link(sha, self.basis, "; ".join(skipped))

    def _build(self, seq: int, started_at: str | None, edits: list[Edit]) -> tuple[str, list[str]]:
        contents: dict[str, bytes | None] = {}
        modes: dict[str, str] = {}
        skipped: list[str] = []
        for edit in edits:
            path = edit.file_path
            if edit.tool == "Bash":
                skipped.append(f"files written by a Bash command are not in the built commit ({path or 'unknown file'})")
                continue
            if not path or os.path.isabs(path) or path.startswith("../"):
                skipped.append(f"{path}: outside the repository")
                continue
            if path not in contents:
                contents[path], modes[path] = self._read(path)
            current = contents[path]
            if edit.tool == "Write":
                contents[path] = (edit.new_text or "").encode("utf-8", errors="surrogateescape")
                continue
            text = (current or b"").decode("utf-8", errors="surrogateescape")
            old, new = edit.old_text or "", edit.new_text or ""
            if old and old in text:
                text = text.replace(old, new) if edit.replace_all else text.replace(old, new, 1)
                contents[path] = text.encode("utf-8", errors="surrogateescape")
            elif not old and current is None:
                contents[path] = new.encode("utf-8", errors="surrogateescape")
            else:
                skipped.append(f"{path}: an edit's old text is not in the file")
        changed = {p: c for p, c in contents.items() if c is not None}
        if not changed:
            return self.sha, skipped
        with tempfile.TemporaryDirectory(prefix="workbench-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._git("read-tree", self.sha, env=env)
            for path, data in sorted(changed.items()):
                blob = self._git("hash-object", "-w", "--stdin", input=data).strip()
                self._git("update-index", "--add", "--cacheinfo", f"{modes[path]},{blob},{path}", env=env)
            tree = self._git("write-tree", env=env).strip()
        stamp = epoch(started_at)
        date = f"{int(stamp)} +0000" if stamp is not None else "0 +0000"
        message = f"workbench: the code attempt {seq} ran\n\nBuilt from the transcript's recorded edits.\n"
        sha = self._git(
            "commit-tree", tree, "-p", self.sha,
            input=message.encode(),
            env={**IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        ).strip()
        self._git("update-ref", f"{REF_PREFIX}/{self.migration}/attempt-{seq}", sha)
        return sha, skipped

    def _read(self, path: str) -> tuple[bytes | None, str]:
        listing = self._git("ls-tree", self.sha, "--", path).strip()
        if not listing:
            return None, "100644"
        mode, _, rest = listing.partition(" ")
        blob = rest.split()[1]
        try:
            data = subprocess.run(
                ["git", "-C", str(self.repo), "cat-file", "blob", blob], capture_output=True, check=True
            ).stdout
        except subprocess.CalledProcessError:
            return None, mode
        return data, mode if mode in ("100644", "100755") else "100644"
