"""Jobs: stored before they start, run by a detached runner, recovered when their runner is gone."""

from __future__ import annotations

import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.costs import parse_time
from domain.errors import WorkbenchError
from domain.jobs import QUEUED_GRACE_S, Job, JobSpec, JobState
from domain.models import Attempt
from storage.jobs import get_job, insert_job, list_jobs, migration_target, stored_result, update_job
from storage.setup import migration_setup as store_setup
from storage.sqlite import Database

if TYPE_CHECKING:
    from storage.database import StudyDatabase

__all__ = ["Job", "JobSpec", "JobState", "get_job", "list_jobs"]


def jobs_root(db_path: Path) -> Path:
    return db_path.resolve().parent / f"{db_path.stem}.jobs"


# --------------------------------------------------------------------------- making jobs


@dataclass(frozen=True, slots=True)
class EnvDifference:
    """A variable whose backend default differs from the attempt's recorded value."""

    name: str
    recorded: str
    default: str
    why: str
    """Why the backend proposes its value (`backends.default_env`)."""


def environment(recorded: dict[str, str], backend: str, chips: int,
                options: dict[str, Any] | None = None) -> tuple[dict[str, str], list[EnvDifference]]:
    """A re-run's environment: the recorded one wins over every backend default (a re-run
    reproduces the attempt); the backend fills in only what was not recorded. Also each recorded
    variable the backend would set otherwise, with why, for the reviewer to see and choose."""
    from workbench.rerun.backends import default_env

    defaults = default_env(backend, chips, options or {})
    env = {**{k: v for k, (v, _) in defaults.items()}, **recorded}
    differ = [EnvDifference(k, recorded[k], v, why) for k, (v, why) in sorted(defaults.items())
              if k in recorded and recorded[k] != v]
    return env, differ


def env_changes(recorded: dict[str, str], env: dict[str, str], differ: list[EnvDifference]) -> list[dict[str, str]]:
    """What a reviewer changed from the recorded environment, with why, to record on the job
    (`options["env_changes"]`): a backend default chosen over the recorded value, or an edit."""
    whys = {d.name: d for d in differ}
    out = []
    for name in sorted(set(recorded) | set(env)):
        old, new = recorded.get(name), env.get(name)
        if old is None or old == new:
            continue  # recorded and kept; unrecorded variables are the backend's to fill in
        d = whys.get(name)
        why = f"backend default chosen by the reviewer: {d.why}" if d and d.default == new else "edited by the reviewer"
        out.append({"name": name, "recorded": old, "used": "" if new is None else new, "why": why})
    return out


def spec_for(db: Database, attempt: Attempt, backend: str, *, chips: int | None = None, **kwargs: Any) -> JobSpec:
    """The launcher's starting point: the attempt's command and environment, the migration's target,
    and the backend's defaults for variables the attempt did not record."""
    import shlex

    from storage.setup import migration_command, migration_setup

    target_chips, target_kind = migration_target(db, attempt.migration_id)
    hw = attempt.intended_hardware
    chips = chips or (hw.count if hw else target_chips) or 1
    env, _ = environment(attempt.command.env, backend, chips, kwargs.get("options"))
    setup = migration_setup(db, attempt.migration_id)
    if setup:  # the migration's setup line, run in the job's worktree before the command
        kwargs["options"] = {"setup": setup, **(kwargs.get("options") or {})}
    # an attempt recorded without a command (a bundle's, a transcript's lost call) runs the migration's
    argv = attempt.command.argv or tuple(shlex.split(migration_command(db, attempt.migration_id) or ""))
    return JobSpec(
        migration_id=attempt.migration_id, attempt_id=attempt.id, backend=backend,
        argv=argv, cwd=attempt.command.cwd, env=env, chips=chips,
        accelerator=kwargs.pop("accelerator", None) or (hw.kind if hw else target_kind), **kwargs,
    )


def create_job(db: Database, db_path: Path, spec: JobSpec, reviewer: str) -> Job:
    """Store the job (queued) and make its folder; nothing runs yet."""
    from workbench.rerun.backends import BACKENDS

    if spec.backend not in BACKENDS:
        raise WorkbenchError(f"unknown backend {spec.backend!r} (known: {', '.join(BACKENDS)})")
    if not spec.argv:
        raise WorkbenchError("the command is empty")
    if spec.chips < 1:
        raise WorkbenchError("chips must be at least 1")
    if spec.backend != "local" and not spec.host:
        raise WorkbenchError(f"the {spec.backend} backend needs a host or TPU name")
    root = jobs_root(Path(db_path))
    job = insert_job(db, spec, reviewer, lambda job_id: root / f"job-{job_id}")
    job.dir.mkdir(parents=True, exist_ok=True)
    return job


def start(db_path: Path, job: Job, *then: Job) -> int:
    """Start the job's runner detached from this process (its own session); returns its pid. Jobs
    in `then` run after it, in turn, in the same runner (a re-run's repeats)."""
    job.dir.mkdir(parents=True, exist_ok=True)
    with open(job.dir / "runner.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.rerun.runner", str(Path(db_path).resolve()), str(job.id),
             *(str(j.id) for j in then)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
    return proc.pid


def seeded(spec: JobSpec, seed: int) -> JobSpec:
    """One repeat of a re-run: its seed in `WORKBENCH_SEED` and in place of `{seed}` in the command,
    as the reference's replicates get theirs (docs/rerun.md)."""
    from domain.noise import SEED

    return with_changes(spec, env={**spec.env, SEED: str(seed)},
                        argv=tuple(a.replace("{seed}", str(seed)) for a in spec.argv))


def launch(study: StudyDatabase, spec: JobSpec, reviewer: str, *, checked: bool = False, repeat: int = 1) -> Job:
    """Check that the program can start (JobEnvironmentError naming the fix; skipped when the caller
    just did), store the job, start its runner. A relative target venv is read from this process's
    folder, never the job's worktree. With `repeat` N above 1, N jobs with seeds 1 to N (`seeded`)
    run one after another in one runner; the first is returned, the others follow its id."""
    from workbench.rerun import preflight

    spec = preflight.resolved(spec)
    setup = None if "setup" in spec.options else store_setup(study.db, spec.migration_id)
    if setup:  # the app's launcher builds its spec itself: the migration's setup runs all the same
        spec = with_changes(spec, options={**spec.options, "setup": setup})
    if not checked:
        preflight.check(study.db, spec)
    made = [create_job(study.db, study.path, seeded(spec, n) if repeat > 1 else spec, reviewer)
            for n in range(1, repeat + 1)]
    pid = start(study.path, made[0], *made[1:])
    for job in made:
        update_job(study.db, job.id, reviewer, runner_pid=pid, runner_host=socket.gethostname())
    return get_job(study.db, made[0].id)


def cancel(job: Job) -> None:
    """Ask the runner to stop the job (it kills the process group, then records `cancelled`)."""
    if job.active:
        job.dir.mkdir(parents=True, exist_ok=True)
        (job.dir / "cancel").write_text("cancel\n")


def wait(db: Database, job_id: int, timeout: float | None = None, poll: float = 0.2) -> Job:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        job = get_job(db, job_id)
        if not job.active:
            return job
        if deadline is not None and time.monotonic() > deadline:
            return job
        time.sleep(poll)


# --------------------------------------------------------------------------- recovery


def _environ_has(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _cmdline_has(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def runner_alive(job: Job) -> bool:
    """True when the job's runner process still exists on this host (checked against pid reuse)."""
    if job.runner_pid is None:
        return False
    try:
        os.kill(job.runner_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if Path("/proc").is_dir():
        return _cmdline_has(job.runner_pid, b"workbench.rerun.runner") and _cmdline_has(
            job.runner_pid, f"\0{job.id}".encode()
        )
    return True


def _abandoned(job: Job, host: str) -> bool:
    """An active job of this host whose runner is gone (a queued one gets a grace period)."""
    if not job.active or job.runner_host not in (None, host) or runner_alive(job):
        return False  # a job started from another machine: only that machine can tell
    if job.runner_pid is None:
        created = parse_time(job.created_at)
        age = (datetime.datetime.now(datetime.UTC) - created).total_seconds() if created else QUEUED_GRACE_S
        return age >= QUEUED_GRACE_S
    return True


def recover(db: Database, reviewer: str = "workbench") -> list[int]:
    """Mark active jobs of this host whose runner is gone as interrupted; keep their partial logs.

    A job's process left behind by a dead runner is stopped first. Returns the jobs marked.
    """
    from storage.jobs import store_job_log
    from storage.records import now

    host = socket.gethostname()
    marked = []
    for job in [j for j in list_jobs(db, limit=10_000) if _abandoned(j, host)]:
        if job.child_pid and _environ_has(job.child_pid, f"WORKBENCH_JOB_ID={job.id}\0".encode()):
            try:
                os.killpg(job.child_pid, signal.SIGKILL)
            except OSError:
                pass
        log_id = store_job_log(db, job)
        stored = stored_result(db, job.id)
        if stored is not None:  # the runner died after its result was committed: keep and link it
            from workbench.rerun.finish import verify_attempt

            timed_out = stored[2] == "interrupted"
            verify_attempt(db, job.spec.migration_id, stored[1], reviewer)
            update_job(db, job.id, reviewer, ended_at=now(), log_id=log_id, result_attempt_id=stored[0],
                   state=JobState.FAILED if timed_out else JobState.FINISHED,
                   error="the runner died after storing the result" + (" (timed out)" if timed_out else ""))
        else:
            update_job(db, job.id, reviewer, state=JobState.INTERRUPTED, ended_at=now(), log_id=log_id,
                   error="the runner is gone (the app's machine stopped or the runner was killed)")
        marked.append(job.id)
    return marked


# --------------------------------------------------------------------------- reading output

_STEP = re.compile(rb"\bstep\b[ :=#]*(\d+)\s*/\s*(\d+)", re.I)


def read_output(job: Job, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
    """New output from `offset` (up to `limit` bytes, ending at a line end when it can)."""
    try:
        with open(job.log_path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(limit)
    except OSError:
        return b"", offset
    if len(data) == limit:
        cut = data.rfind(b"\n")
        if cut != -1:
            data = data[: cut + 1]
    elif data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut != -1 else b""
    return data, offset + len(data)


def progress(data: bytes) -> tuple[int, int] | None:
    """The last `step N/M` in some output, for a progress bar."""
    found = None
    for m in _STEP.finditer(data):
        found = (int(m.group(1)), int(m.group(2)))
    return found


_STEP_SEEN = re.compile(rb"\bstep\b[ :=#]*(\d+)", re.I)
"""`step 200: train loss ...`, `Step 3`, `step=40`: a step number without a total (linear: no nesting)."""


def steps_seen(data: bytes) -> int | None:
    """The largest step number some output names, whatever its format, for the job's progress."""
    return max((int(m.group(1)) for m in _STEP_SEEN.finditer(data)), default=None)


def with_changes(spec: JobSpec, **changes: Any) -> JobSpec:
    return replace(spec, **changes)
