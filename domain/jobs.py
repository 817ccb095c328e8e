"""A re-run job as the app and the runner see it: what was confirmed, where it stands, how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    """The command ran to its exit (any exit code) and became an attempt."""
    FAILED = "failed"
    """It could not complete: a timeout (which still becomes an attempt) or a harness error."""
    INTERRUPTED = "interrupted"
    """Its runner disappeared (the machine or the runner died); the partial log is kept."""
    CANCELLED = "cancelled"
    ENVIRONMENT = "environment"
    """The program never started for a reason of the environment (no interpreter, no torch or
    torch_xla, no device): not an attempt; `error` names what to fix."""


ACTIVE = (JobState.QUEUED, JobState.RUNNING)

QUEUED_GRACE_S = 60.0
"""A queued job whose runner never reported after this long is interrupted by `recover`."""


class JobEnvironmentError(WorkbenchError):
    """The target environment cannot start the command; the message names the fix."""


ENV_FIX = ("run `make xla-env` and point the re-run at the environment it prints "
           "(--venv DIR, or set WORKBENCH_TARGET_VENV)")
"""What the reviewer does about a target environment that lacks the interpreter, torch or torch_xla."""


def missing_module_line(module: str, python: str) -> str:
    """One line naming a module the target's interpreter cannot import, and the fix."""
    return f"{module} cannot be imported by {python} in the target environment: {ENV_FIX}"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the reviewer confirmed in the launcher: nothing runs that is not shown here."""

    migration_id: int
    attempt_id: int
    """The attempt re-run (an agent attempt or the migration's reference)."""
    backend: str
    argv: tuple[str, ...]
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    """The run's environment overrides, recorded with the new attempt's command."""
    chips: int = 1
    host: str | None = None
    """ssh host (an ssh config alias works), TPU VM name (gcloud) or cluster name (skypilot)."""
    zone: str | None = None
    accelerator: str | None = None
    """Accelerator kind for the cost model (a key of the study's prices); default the target's."""
    timeout_s: float | None = None
    keep_worktree: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    """Backend settings: `venv` (target environment), `ssh_options`, `project`, `mode`, ..."""


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    spec: JobSpec
    state: JobState
    created_at: str
    job_dir: str
    started_at: str | None = None
    ended_at: str | None = None
    wall_seconds: float | None = None
    exit_code: int | None = None
    error: str | None = None
    runner_pid: int | None = None
    runner_host: str | None = None
    child_pid: int | None = None
    log_id: int | None = None
    result_attempt_id: int | None = None
    reviewer: str | None = None

    @property
    def dir(self) -> Path:
        return Path(self.job_dir)

    @property
    def log_path(self) -> Path:
        return self.dir / "output.log"

    @property
    def probe_dir(self) -> Path:
        return self.dir / "probe"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE



VERDICT_MARKS = {"pass": "✓", "fail": "✗", "unknown": "?"}


@dataclass(frozen=True, slots=True)
class JobResult:
    """The attempt a finished job stored, as its verification left it."""

    seq: int
    level: int | None
    """Its highest level; None when it is not verified yet."""
    outcomes: tuple[str, ...] = ()
    """The effective verdict of each level, in level order."""
    cause: str | None = None
    silent: bool = False
    hidden: bool = False
    """Blinded for the reviewer reading it (domain.blind.Sight.job_result): no outcomes or cause."""


def result_line(result: JobResult) -> str:
    """What a finished job made, in the same words on the CLI and in the job screen: a new run
    (#seq) of the attempt it re-ran, counted with it (storage.counted), not a new attempt."""
    if result.hidden:
        return f"new run #{result.seq}: its verdicts are hidden until you judge the attempt it re-ran (blind review)"
    marks = "".join(VERDICT_MARKS[o] for o in result.outcomes)
    text = f"new run #{result.seq}:" + (f" {marks}" if marks else "")
    text += f" level {'?' if result.level is None else result.level}"
    if result.cause:
        text += f", cause {result.cause}{' (silent)' if result.silent else ''}"
    return text


def with_setup(argv: tuple[str, ...] | list[str], setup: str | None) -> list[str]:
    """The command as a run starts it: the migration's setup line first (prepare data git
    ignores, install the project) in the same folder and shell, stopping the run when it fails,
    then the command itself in its place (`exec`), so its exit code is the run's."""
    import shlex

    if not setup or not setup.strip():
        return list(argv)
    return ["sh", "-c", f"set -e\n{setup.strip()}\nexec {shlex.join(argv)}"]


def progress_text(step: int | None, total: int | None, elapsed_s: float, *, total_from_reference: bool) -> str:
    """How far a running job is, for its screen: the steps its output showed, the total (printed
    as `step N/M`, else the reference run's last step, marked ~), and a time left estimated from
    the pace so far. Empty before any step."""
    if not step:
        return ""
    if not total:
        return f"step {step}"
    out = f"step {step} of {'~' if total_from_reference else ''}{total}"
    if total_from_reference:
        out += " (the reference's steps)"
    if step < total and elapsed_s > 0:
        left = elapsed_s / step * (total - step)
        out += f" · about {_duration(left)} left"
    return out


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
