"""Import a repository in which each commit is one attempt (docs/claude-code-import.md, "git").

Every commit on the first-parent history of REF after the migration's base commit is an
attempt, keyed `git:<sha>`, as it is: an ordinary commit runs the migration's command and is
timed by the commit. Attempt-* trailers of the message, where present, win (command, status,
expectations, times); its log and metrics come from `.workbench/attempt.log` and
`.workbench/metrics.jsonl` in the commit's tree, or from `--logs DIR` (`<sha>.log`,
`<sha>.metrics.jsonl`). Each attempt is written in its own transaction; a re-import changes
nothing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError
from domain.imports import ImportReport
from domain.models import Attempt, AttemptSource, AttemptStatus, Command
from domain.redact import redact
from storage import imports, queries, records
from storage.converters import attempt_to_row
from storage.database import StudyDatabase
from storage.logs import store_log_bytes
from storage.queries import get_migration
from workbench.importers.rules import command_parts, expected_level

TRAILER = re.compile(r"^(Attempt-[A-Za-z-]+):\s*(.*)$")
LOG_PATH = ".workbench/attempt.log"
METRICS_PATH = ".workbench/metrics.jsonl"


class BadCommit(ValueError):
    pass


def _git(repo: Path, *args: str, check: bool = True) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=check)
    except subprocess.CalledProcessError as exc:
        raise WorkbenchError(
            f"{repo}: git {args[0]} failed ({exc.stderr.decode(errors='replace').strip().splitlines()[-1:] or exc.returncode})"
        ) from None
    except OSError as exc:
        raise WorkbenchError(f"cannot run git ({exc.strerror})") from None
    return done.stdout if done.returncode == 0 else None


def parse_message(message: str) -> tuple[str, dict[str, str]]:
    """The message without its Attempt-* trailers, and the trailers (last one of a key wins)."""
    body, trailers = [], {}
    for line in message.splitlines():
        match = TRAILER.match(line)
        if match:
            trailers[match.group(1).lower()] = match.group(2).strip()
        else:
            body.append(line)
    return "\n".join(body).strip(), trailers


def _int(trailers: dict[str, str], key: str) -> int | None:
    raw = trailers.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadCommit(f"{key.title()} must be an integer, not {raw!r:.40}") from None


def parse_metrics(data: bytes, where: str) -> list[tuple[str, int, float]]:
    points: dict[tuple[str, int], float] = {}
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            point = json.loads(raw)
        except ValueError:
            raise BadCommit(f"{where}:{number}: not valid JSON") from None
        if not isinstance(point, dict) or not isinstance(point.get("name"), str) \
                or not isinstance(point.get("step"), int) or isinstance(point.get("value"), bool) \
                or not isinstance(point.get("value"), (int, float)):
            raise BadCommit(f"{where}:{number}: expected {{\"name\", \"step\", \"value\"}}")
        points[(point["name"], point["step"])] = float(point["value"])
    return [(n, s, v) for (n, s), v in sorted(points.items())]


class GitHistoryImporter:
    def __init__(self, study_db: StudyDatabase, repo: Path, migration: str, reviewer: str, *,
                 ref: str = "HEAD", logs: Path | None = None, commits: str | None = None) -> None:
        from storage.setup import migration_command

        self.db = study_db.db
        self.repo = repo
        self.reviewer = reviewer
        self.logs = logs
        found = get_migration(self.db, migration)
        if found is None:
            raise WorkbenchError(f"{study_db.path}: no migration {migration!r}; import its bundle first")
        self.migration = found
        self.command = migration_command(self.db, found.id)
        """What a commit without an Attempt-Command trailer ran: the migration's command (or none)."""
        if _git(repo, "rev-parse", "--git-dir", check=False) is None:
            raise WorkbenchError(f"{repo}: not a git repository")
        if _git(repo, "cat-file", "-e", f"{found.base_commit}^{{commit}}", check=False) is None:
            raise WorkbenchError(f"{repo}: the migration's base commit {found.base_commit[:12]} is not in it")
        if commits is None:
            self.range = (found.base_commit, self._commit(ref))
        else:
            start, dots, end = commits.partition("..")
            if not dots or not start or not end or end.startswith("."):
                raise WorkbenchError(f"--range expects A..B (two commits), not {commits!r}")
            self.range = (self._commit(start), self._commit(end))

    def _commit(self, ref: str) -> str:
        found = _git(self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if found is None:
            raise WorkbenchError(f"{self.repo}: no commit {ref!r}")
        return found.decode().strip()

    def run(self) -> ImportReport:
        report = ImportReport()
        out = _git(self.repo, "rev-list", "--first-parent", "--reverse", f"{self.range[0]}..{self.range[1]}")
        shas = out.decode().split()
        next_seq = queries.next_seq(self.db, self.migration.id)
        for sha in shas:
            try:
                with records.immediate(self.db):
                    what, used_seq = self._import(sha, next_seq)
            except BadCommit as exc:
                report.problems.append(f"commit {sha[:12]}: {exc}; skipped")
                continue
            if used_seq:
                next_seq += 1
            report.count(what)
        if not shas:
            report.problems.append(f"no commits after {self.range[0][:12]} up to {self.range[1][:12]}: nothing to import")
        return report

    def _file(self, sha: str, path: str, beside: str) -> bytes | None:
        if self.logs is not None:
            candidate = self.logs / f"{sha}{beside}"
            if candidate.is_file():
                return candidate.read_bytes()
        return _git(self.repo, "cat-file", "blob", f"{sha}:{path}", check=False)

    def _import(self, sha: str, next_seq: int) -> tuple[str, bool]:
        raw = _git(self.repo, "show", "-s", "--format=%aI%x00%cI%x00%B", sha).decode("utf-8", errors="replace")
        author_date, commit_date, message = raw.split("\0", 2)
        claim, trailers = parse_message(message)
        command = trailers.get("attempt-command")
        exit_code = _int(trailers, "attempt-exit-code")
        level = _int(trailers, "attempt-expected-level")
        if level is not None and not 1 <= level <= 5:
            raise BadCommit("Attempt-Expected-Level must be between 1 and 5")
        status_text = trailers.get("attempt-status")
        try:
            status = AttemptStatus(status_text) if status_text else (
                AttemptStatus.NO_RESULT if exit_code is None
                else AttemptStatus.OK if exit_code == 0 else AttemptStatus.NONZERO_EXIT)
        except ValueError:
            raise BadCommit(f"Attempt-Status {status_text!r:.40} is not one of "
                            f"{', '.join(s.value for s in AttemptStatus)}") from None
        claim = redact(claim)
        # a trailer is a shell line as the agent typed it; the migration's command is an argv line
        argv, env = command_parts(command) if command else (tuple(shlex.split(self.command or "")), {})
        key = {"migration_id": self.migration.id, "external_id": f"git:{sha}"}
        existing = imports.seq_of(self.db, self.migration.id, key["external_id"])
        seq = existing if existing is not None else next_seq
        attempt = Attempt(
            id=0, migration_id=self.migration.id, seq=seq, source=AttemptSource.AGENT, commit=sha,
            command=Command(argv, trailers.get("attempt-cwd", "."), env), status=status,
            started_at=trailers.get("attempt-started") or author_date.strip(),
            ended_at=trailers.get("attempt-ended") or None,
            exit_code=exit_code, exit_code_source="git" if exit_code is not None else None,
            expected_level=level if level is not None else expected_level(claim), claim=claim,
        )
        log = self._file(sha, LOG_PATH, ".log")
        metrics = self._file(sha, METRICS_PATH, ".metrics.jsonl")
        points = parse_metrics(metrics, f"{sha[:12]} metrics") if metrics is not None else []
        row = attempt_to_row(attempt)
        del row["migration_id"]
        row.update(
            log_id=store_log_bytes(self.db, redact(log.decode("utf-8", errors="surrogateescape"))
                                   .encode("utf-8", errors="surrogateescape")) if log is not None else None,
            commit_basis="git",
        )
        attempt_id, what = records.upsert_by_key(self.db, "attempt", key, row, self.reviewer, keep=("seq",))
        if imports.replace_metric_points(self.db, attempt_id, points, self.reviewer) and what == "same":
            what = "update"
        return what, existing is None


def import_git(study_db: StudyDatabase, repo: Path, migration: str, reviewer: str, **kwargs: Any) -> ImportReport:
    return GitHistoryImporter(study_db, repo, migration, reviewer, **kwargs).run()
