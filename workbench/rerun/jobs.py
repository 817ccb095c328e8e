"""Jobs: stored before they start, run by a detached runner, recovered when their runner is gone."""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.costs import parse_time
from domain.errors import WorkbenchError
from domain.models import Attempt


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


ACTIVE = (JobState.QUEUED, JobState.RUNNING)
QUEUED_GRACE_S = 60.0
"""A queued job whose runner never reported after this long is interrupted by `recover`."""


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


def jobs_root(db_path: Path) -> Path:
    return db_path.resolve().parent / f"{db_path.stem}.jobs"


def _row_to_job(row: dict[str, Any]) -> Job:
    spec = JobSpec(
        migration_id=row["migration_id"],
        attempt_id=row["attempt_id"],
        backend=row["backend"],
        argv=tuple(json.loads(row["argv"])),
        cwd=row["cwd"] or ".",
        env=json.loads(row["env"] or "{}"),
        chips=row["chips"],
        host=row["host"],
        zone=row["zone"],
        accelerator=row["accelerator"],
        timeout_s=row["timeout_s"],
        keep_worktree=bool(row["keep_worktree"]),
        options=json.loads(row["options"] or "{}"),
    )
    return Job(
        id=row["id"], spec=spec, state=JobState(row["state"]), created_at=row["created_at"],
        job_dir=row["job_dir"], started_at=row["started_at"], ended_at=row["ended_at"],
        wall_seconds=row["wall_seconds"], exit_code=row["exit_code"], error=row["error"],
        runner_pid=row["runner_pid"], runner_host=row["runner_host"], child_pid=row["child_pid"],
        log_id=row["log_id"], result_attempt_id=row["result_attempt_id"], reviewer=row["reviewer"],
    )


def get_job(db: Any, job_id: int) -> Job:
    rows = list(db.query("SELECT * FROM job WHERE id = ?", [job_id]))
    if not rows:
        raise WorkbenchError(f"no job {job_id}")
    return _row_to_job(rows[0])


def list_jobs(db: Any, migration_id: int | None = None, *, limit: int = 200) -> list[Job]:
    sql, params = "SELECT * FROM job", []
    if migration_id is not None:
        sql += " WHERE migration_id = ?"
        params.append(migration_id)
    return [_row_to_job(r) for r in db.query(sql + " ORDER BY id DESC LIMIT ?", [*params, limit])]


def update(db: Any, job_id: int, reviewer: str, **changes: Any) -> None:
    """Write job fields and audit the change (state changes and results, never output)."""
    from storage import records

    if "state" in changes and isinstance(changes["state"], JobState):
        changes["state"] = changes["state"].value
    sets = ", ".join(f"{k} = ?" for k in changes)
    with db.atomic():
        db.execute(f"UPDATE job SET {sets} WHERE id = ?", [*changes.values(), job_id])
        records.audit(db, reviewer, "update", "job", job_id, changes)


# --------------------------------------------------------------------------- making jobs


def spec_for(db: Any, attempt: Attempt, backend: str, *, chips: int | None = None, **kwargs: Any) -> JobSpec:
    """The launcher's starting point: the attempt's command and environment, the migration's target,
    and the backend's defaults for variables the attempt did not record."""
    from workbench.rerun.backends import default_env

    row = db.execute("SELECT chips, accelerator FROM migration WHERE id = ?", [attempt.migration_id]).fetchone()
    hw = attempt.intended_hardware
    chips = chips or (hw.count if hw else row[0]) or 1
    # the recorded environment wins: a re-run reproduces the attempt, not the backend's defaults
    env = {**default_env(backend, chips, kwargs.get("options") or {}), **attempt.command.env}
    return JobSpec(
        migration_id=attempt.migration_id, attempt_id=attempt.id, backend=backend,
        argv=attempt.command.argv, cwd=attempt.command.cwd, env=env, chips=chips,
        accelerator=kwargs.pop("accelerator", None) or (hw.kind if hw else row[1]), **kwargs,
    )


def create_job(db: Any, db_path: Path, spec: JobSpec, reviewer: str) -> Job:
    """Store the job (queued) and make its folder; nothing runs yet."""
    from storage import records
    from workbench.rerun.backends import BACKENDS

    if spec.backend not in BACKENDS:
        raise WorkbenchError(f"unknown backend {spec.backend!r} (known: {', '.join(BACKENDS)})")
    if not spec.argv:
        raise WorkbenchError("the command is empty")
    if spec.chips < 1:
        raise WorkbenchError("chips must be at least 1")
    if spec.backend != "local" and not spec.host:
        raise WorkbenchError(f"the {spec.backend} backend needs a host or TPU name")
    row = {
        "migration_id": spec.migration_id,
        "attempt_id": spec.attempt_id,
        "backend": spec.backend,
        "host": spec.host,
        "zone": spec.zone,
        "accelerator": spec.accelerator,
        "chips": spec.chips,
        "argv": json.dumps(list(spec.argv)),
        "cwd": spec.cwd,
        "env": json.dumps(spec.env, sort_keys=True),
        "options": json.dumps(spec.options, sort_keys=True),
        "timeout_s": spec.timeout_s,
        "keep_worktree": int(spec.keep_worktree),
        "state": JobState.QUEUED.value,
        "created_at": records.now(),
        "reviewer": reviewer,
    }
    with db.atomic():
        job_id = db["job"].insert(row).last_pk
        job_dir = jobs_root(Path(db_path)) / f"job-{job_id}"
        db.execute("UPDATE job SET job_dir = ? WHERE id = ?", [str(job_dir), job_id])
        records.audit(db, reviewer, "insert", "job", job_id, {**row, "job_dir": str(job_dir)})
    job_dir.mkdir(parents=True, exist_ok=True)
    return get_job(db, job_id)


def start(db_path: Path, job: Job) -> int:
    """Start the job's runner detached from this process (its own session); returns its pid."""
    job.dir.mkdir(parents=True, exist_ok=True)
    with open(job.dir / "runner.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.rerun.runner", str(Path(db_path).resolve()), str(job.id)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
    return proc.pid


def launch(study: Any, spec: JobSpec, reviewer: str) -> Job:
    """Store the job, then start its runner."""
    job = create_job(study.db, study.path, spec, reviewer)
    pid = start(study.path, job)
    update(study.db, job.id, reviewer, runner_pid=pid, runner_host=socket.gethostname())
    return get_job(study.db, job.id)


def cancel(job: Job) -> None:
    """Ask the runner to stop the job (it kills the process group, then records `cancelled`)."""
    if job.active:
        job.dir.mkdir(parents=True, exist_ok=True)
        (job.dir / "cancel").write_text("cancel\n")


def wait(db: Any, job_id: int, timeout: float | None = None, poll: float = 0.2) -> Job:
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


def recover(db: Any, reviewer: str = "workbench") -> list[int]:
    """Mark active jobs of this host whose runner is gone as interrupted; keep their partial logs.

    A job's process left behind by a dead runner is stopped first. Returns the jobs marked.
    """
    from storage.logs import store_log

    host = socket.gethostname()
    marked = []
    for job in [j for j in list_jobs(db, limit=10_000) if j.active]:
        if job.runner_host not in (None, host):
            continue  # started from another machine: only that machine can tell
        if runner_alive(job):
            continue
        if job.runner_pid is None:
            created = parse_time(job.created_at)
            age = (datetime.datetime.now(datetime.UTC) - created).total_seconds() if created else QUEUED_GRACE_S
            if age < QUEUED_GRACE_S:
                continue
        if job.child_pid and _environ_has(job.child_pid, f"WORKBENCH_JOB_ID={job.id}\0".encode()):
            try:
                os.killpg(job.child_pid, signal.SIGKILL)
            except OSError:
                pass
        log_id = None
        if job.log_path.is_file() and job.log_path.stat().st_size:
            with db.atomic():
                log_id = store_log(db, job.log_path)
        from storage.records import now

        stored = db.execute("SELECT id, seq, status FROM attempt WHERE external_id = ?",
                            [f"rerun:job-{job.id}"]).fetchone()
        if stored is not None:  # the runner died after its result was committed: keep and link it
            from workbench.rerun.finish import verify_attempt

            verify_attempt(db, job.spec.migration_id, stored[1], reviewer)
            update(db, job.id, reviewer, ended_at=now(), log_id=log_id, result_attempt_id=stored[0],
                   state=JobState.FAILED if stored[2] == "interrupted" else JobState.FINISHED,
                   error="the runner died after storing the result" + (" (timed out)" if stored[2] == "interrupted" else ""))
            marked.append(job.id)
            continue
        update(db, job.id, reviewer, state=JobState.INTERRUPTED, ended_at=now(), log_id=log_id,
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


def with_changes(spec: JobSpec, **changes: Any) -> JobSpec:
    return replace(spec, **changes)
