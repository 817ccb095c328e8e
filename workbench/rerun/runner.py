"""The detached process that runs one job: `python -m workbench.rerun.runner DB JOB_ID`.

It owns the job from `running` to its end, so the job outlives the app that started it: the
app only reads the job row and tails `output.log`. Steps: check the commit out into a fresh
worktree, let the backend ship it, run the command in its own process group with output into
`output.log` (probe-file lines taken out), stop it on cancel or timeout, then store the run as a
new attempt and verify it, and remove the worktree unless asked to keep it.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.errors import WorkbenchError
from domain.jobs import ENV_FIX, Job, JobEnvironmentError, JobState, with_setup
from storage.jobs import get_job, run_source, update_job
from storage.sqlite import Database
from workbench.rerun import preflight

if TYPE_CHECKING:
    from workbench.rerun.backends import Backend, Context, Runner

POLL_S = 0.1
KILL_GRACE_S = 5.0
TIMEOUT_EXIT = 124
PROBE_LINE = b"@@workbench-probe-file "


class _Output:
    """Copies the child's output to the log file line by line; collects probe-file lines."""

    def __init__(self, stream: Any, log: Path, probe_dir: Path) -> None:
        self.stream = stream
        self.log = log
        self.probe_dir = probe_dir
        self.parts: dict[str, dict[int, str]] = {}
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        with open(self.log, "ab", buffering=0) as out:
            pending: list[bytes] = []
            for line in iter(self.stream.readline, b""):
                if line.startswith(PROBE_LINE):
                    self._probe_part(line)
                    continue
                pending.append(line)
                if len(pending) >= 256 or self._idle():
                    out.write(b"".join(pending))
                    pending.clear()
            if pending:
                out.write(b"".join(pending))

    def _idle(self) -> bool:
        """Flush a lone line at once when no more output is waiting (a slow program)."""
        import select

        try:
            ready, _, _ = select.select([self.stream], [], [], 0)
        except (OSError, ValueError):
            return True
        return not ready

    def _probe_part(self, line: bytes) -> None:
        try:
            _, name, index, count, data = line.decode().rstrip("\n").split(" ", 4)
        except ValueError:
            return
        name = os.path.basename(name)
        parts = self.parts.setdefault(name, {})
        parts[int(index)] = data
        if len(parts) == int(count):
            self.probe_dir.mkdir(parents=True, exist_ok=True)
            (self.probe_dir / name).write_bytes(base64.b64decode("".join(parts[i] for i in range(int(count)))))

    def join(self, timeout: float = 10.0) -> None:
        self.thread.join(timeout)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


@dataclass
class _Run:
    """How the run went, filled in as it goes."""

    state: JobState = JobState.FINISHED
    exit_code: int | None = None
    error: str | None = None
    timed_out: bool = False
    ran: bool = False
    """The command started: its output and exit code are the run's result."""


def run_job(db_path: Path, job_id: int) -> Job:
    from storage.database import open_study

    study = open_study(db_path)
    try:
        return _run(study.db, job_id)
    finally:
        study.close()


def _run(db: Database, job_id: int) -> Job:
    from storage.records import now
    from workbench.rerun import backends, worktree

    job = get_job(db, job_id)
    reviewer = job.reviewer or "workbench"
    if job.state is not JobState.QUEUED:
        raise WorkbenchError(f"job {job_id} is {job.state.value}, not queued")
    started = now()
    t0 = time.monotonic()
    update_job(db, job.id, reviewer, state=JobState.RUNNING, started_at=started, runner_pid=os.getpid(),
               runner_host=socket.gethostname())
    job = get_job(db, job_id)
    commit, repo = run_source(db, job.spec)
    spec = job.spec
    tree = job.dir / "src"
    backend = backends.get(spec.backend)
    ctx = backends.Context(  # the migration's setup runs first, in the worktree (domain.jobs.with_setup)
        job_id=job.id, commit=commit, worktree=tree, job_dir=job.dir,
        argv=with_setup(spec.argv, spec.options.get("setup")),
        cwd=spec.cwd, env=dict(spec.env), chips=spec.chips, host=spec.host, zone=spec.zone,
        options=dict(spec.options),
    )
    quiet = backends.quiet_runner(job.dir / "runner.log")
    run = _Run()
    try:
        if (job.dir / "cancel").exists():
            raise _Cancelled()
        worktree.add(repo, ctx.commit, tree)
        backend.prepare(ctx, quiet)
        _execute(db, job, backend, ctx, quiet, run, t0, reviewer)
    except _Cancelled:
        run.state = JobState.CANCELLED
    except JobEnvironmentError as exc:
        run.state, run.error = JobState.ENVIRONMENT, str(exc)
    except (WorkbenchError, OSError, subprocess.SubprocessError) as exc:
        run.state, run.error = JobState.FAILED, str(exc)
    ended = now()
    wall = time.monotonic() - t0
    result, log_id = _store(db, job, run, started, ended, reviewer)
    update_job(db, job.id, reviewer, state=run.state, ended_at=ended, wall_seconds=wall,
               exit_code=run.exit_code, error=run.error, result_attempt_id=result, log_id=log_id)
    if run.ran:
        try:
            backend.cleanup(ctx, quiet)
        except (WorkbenchError, OSError, subprocess.SubprocessError):
            pass
    if not spec.keep_worktree:
        worktree.remove(repo, tree)
    return get_job(db, job_id)


def _execute(db: Database, job: Job, backend: Backend, ctx: Context, quiet: Runner, run: _Run, t0: float,
             reviewer: str) -> None:
    """Start the command in its own process group and wait for it, stopping it on cancel or timeout."""
    argv, env, cwd = backend.main(ctx)
    env["WORKBENCH_JOB_ID"] = str(job.id)
    ctx.probe_dir.mkdir(parents=True, exist_ok=True)
    try:
        child = subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        if preflight.is_interpreter(argv[0]):
            raise JobEnvironmentError(f"cannot start {argv[0]}: {exc.strerror}: {ENV_FIX}") from None
        raise WorkbenchError(f"cannot start {argv[0]}: {exc.strerror}") from None
    run.ran = True
    update_job(db, job.id, reviewer, child_pid=child.pid)
    pump = _Output(child.stdout, job.log_path, ctx.probe_dir)
    timeout_s = job.spec.timeout_s
    deadline = None if timeout_s is None else t0 + timeout_s
    stopping_since = None
    while child.poll() is None:
        time.sleep(POLL_S)
        reason = None
        if (job.dir / "cancel").exists():
            reason = "cancel"
        elif deadline is not None and time.monotonic() > deadline:
            reason = "timeout"
        if reason and stopping_since is None:
            stopping_since = time.monotonic()
            if reason == "cancel":
                run.state = JobState.CANCELLED
            else:
                run.state, run.timed_out = JobState.FAILED, True
                run.error = f"timed out after {timeout_s:g} s"
            _stop(backend, ctx, quiet, child.pid)
        elif stopping_since is not None and time.monotonic() - stopping_since > KILL_GRACE_S:
            _kill_group(child.pid, signal.SIGKILL)
    pump.join()
    run.exit_code = child.returncode
    why = None if stopping_since is not None else preflight.diagnose(job.log_path, run.exit_code, job.spec.argv)
    if why:
        run.state, run.error = JobState.ENVIRONMENT, why


def _stop(backend: Backend, ctx: Context, quiet: Runner, pid: int) -> None:
    """Ask the backend to stop the remote program, then stop the local process group."""
    remote_stop = backend.stop(ctx)
    if remote_stop:
        try:
            quiet(remote_stop, timeout=30)
        except (WorkbenchError, subprocess.TimeoutExpired, OSError):
            pass
    _kill_group(pid, signal.SIGTERM)


def _store(db: Database, job: Job, run: _Run, started: str, ended: str, reviewer: str) -> tuple[int | None, int | None]:
    """Store what ran: a new attempt (then verified), or only the log of a cancelled run."""
    from storage.jobs import store_job_log
    from workbench.rerun.finish import store_result

    if not run.ran:
        return None, None
    try:
        if run.state in (JobState.CANCELLED, JobState.ENVIRONMENT):  # no attempt: only the output is kept
            return None, store_job_log(db, job, keep_empty=True)
        return store_result(db, job, exit_code=TIMEOUT_EXIT if run.timed_out else run.exit_code,
                            timed_out=run.timed_out, started_at=started, ended_at=ended, reviewer=reviewer)
    except Exception as exc:  # the run happened: record why its result could not be stored
        run.state, run.error = JobState.FAILED, f"storing the result failed: {type(exc).__name__}: {exc}"
        return None, None


class _Cancelled(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    """Run the jobs named, one after another (a re-run's repeats: on one machine, in turn, so each
    one's clock is its own); once several have run, each result is verified again with all of
    its repeats (the earlier ones were verified before the later existed)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or not all(a.isdigit() for a in args[1:]):
        print("usage: python -m workbench.rerun.runner DB JOB_ID [JOB_ID ...]", file=sys.stderr)
        return 2
    finished = []
    for job_id in args[1:]:
        try:
            finished.append(run_job(Path(args[0]), int(job_id)))
        except WorkbenchError as exc:
            print(f"workbench runner: {exc}", file=sys.stderr)
            return 2
    if len(finished) > 1:
        _verify_again(Path(args[0]), finished)
    return 0 if all(job.state is JobState.FINISHED for job in finished) else 1


def _verify_again(db_path: Path, done: list[Job]) -> None:
    from storage.database import open_study
    from storage.jobs import stored_result
    from workbench.rerun.finish import verify_attempt

    study = open_study(db_path)
    try:
        for job in done:
            stored = stored_result(study.db, job.id)
            if stored is not None:
                verify_attempt(study.db, job.spec.migration_id, stored[1], job.reviewer)
    finally:
        study.close()


if __name__ == "__main__":
    sys.exit(main())
