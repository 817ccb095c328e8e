"""The code of a migration: a git repository, reached through GitPython (loaded lazily)."""

from __future__ import annotations

from pathlib import Path

from domain.errors import WorkbenchError


def is_bundle_file(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(16).startswith(b"# v2 git bundle") or path.suffix == ".bundle"


def materialise(spec: Path, clone_to: Path) -> Path:
    """A usable repository for `spec`: the repository itself, or a clone of a bundle file.

    A bundle is cloned (or, when cloned before, fetched) at `clone_to`.
    """
    import git

    if spec.is_dir():
        try:
            git.Repo(spec).close()
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise WorkbenchError(f"{spec}: not a git repository") from None
        return spec
    if not spec.is_file() or not is_bundle_file(spec):
        raise WorkbenchError(f"{spec}: no git repository or git bundle file there")
    try:
        if (clone_to / ".git").is_dir():
            repo = git.Repo(clone_to)
            repo.git.fetch(str(spec), "+refs/heads/*:refs/remotes/bundle/*")
            repo.close()
        else:
            clone_to.parent.mkdir(parents=True, exist_ok=True)
            git.Repo.clone_from(str(spec), str(clone_to)).close()
    except git.GitCommandError as exc:
        raise WorkbenchError(f"{spec}: git could not read the bundle ({exc.stderr.strip()})") from None
    return clone_to


class CommitResolver:
    """Resolves commit names to full SHAs in one repository, keeping one git process open."""

    def __init__(self, path: Path) -> None:
        import git

        self._repo = git.Repo(path)

    def resolve(self, name: str) -> str | None:
        import git
        import gitdb.exc

        try:
            return self._repo.commit(name).hexsha
        except (ValueError, gitdb.exc.BadName, gitdb.exc.BadObject, git.GitCommandError):
            return None

    def close(self) -> None:
        self._repo.close()


AGENT_MARKS = ("attempt-command:", "co-authored-by: claude", "generated with [claude code]")
"""Lower-cased text an agent's commit message carries (its trailers): the agent's work starts there."""


def infer_base(repo: Path, sessions_started: str | None = None) -> tuple[str, str]:
    """(SHA, why) of the commit before the agent's work when `migration add` was given no --base.

    In order: the parent of the oldest commit on HEAD's first-parent line whose message carries
    an agent trailer; the last commit made before the project's first Claude Code session
    (`sessions_started`, ISO time); where HEAD left its upstream branch (origin's default
    branch when none is set). WorkbenchError when none applies: the user gives --base.
    """
    import datetime

    import git

    from domain.costs import parse_time
    from domain.text import plural

    handle = git.Repo(repo)
    try:
        line = list(handle.iter_commits("HEAD", first_parent=True, max_count=10_000))
        marked = [c for c in line if any(m in str(c.message).lower() for m in AGENT_MARKS)]
        if marked and marked[-1].parents:
            first = marked[-1]
            return first.parents[0].hexsha, f"the parent of {first.hexsha[:12]}, the first commit with an agent trailer"
        started = parse_time(sessions_started) if sessions_started else None
        if started is not None:
            before = [c for c in line if c.committed_datetime.astimezone(datetime.UTC) <= started]
            if before:
                return before[0].hexsha, f"the last commit before the first Claude Code session ({sessions_started})"
        for upstream in ("@{upstream}", "origin/HEAD"):
            try:
                other = handle.commit(upstream)
            except (ValueError, git.BadName, git.GitCommandError):
                continue
            (found,) = handle.merge_base(handle.head.commit, other)[:1] or (None,)
            if found is not None:
                ahead = int(handle.git.rev_list("--count", f"{found.hexsha}..HEAD"))
                return found.hexsha, f"where HEAD left {upstream.strip('@{}')}, {plural(ahead, 'commit')} before HEAD"
    finally:
        handle.close()
    raise WorkbenchError(f"--base: cannot tell where the agent's work starts in {repo} (no agent trailer, no Claude"
                         " Code session, no upstream branch); give --base REV, the original (GPU) code")
