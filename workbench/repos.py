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
