"""The `job` table and the attempt a re-run stores: reads and writes that return domain objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError
from domain.jobs import Job, JobResult, JobSpec, JobState
from storage import queries, records
from storage.logs import store_log
from storage.runs import root_of
from storage.sqlite import Database


def job_from_row(row: dict[str, Any]) -> Job:
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


def _spec_row(spec: JobSpec) -> dict[str, Any]:
    return {
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
    }


def get_job(db: Database, job_id: int) -> Job:
    rows = list(db.query("SELECT * FROM job WHERE id = ?", [job_id]))
    if not rows:
        raise WorkbenchError(f"no job {job_id}")
    return job_from_row(rows[0])


def list_jobs(db: Database, migration_id: int | None = None, *, limit: int = 200) -> list[Job]:
    """The newest jobs first, of one migration or of the whole study."""
    sql, params = "SELECT * FROM job", []
    if migration_id is not None:
        sql += " WHERE migration_id = ?"
        params.append(migration_id)
    return [job_from_row(r) for r in db.query(sql + " ORDER BY id DESC LIMIT ?", [*params, limit])]


def insert_job(db: Database, spec: JobSpec, reviewer: str, job_dir: Callable[[int], Path]) -> Job:
    """Store a queued job; its folder is named after its id, so `job_dir` maps one to the other."""
    row = {**_spec_row(spec), "state": JobState.QUEUED.value, "created_at": records.now(), "reviewer": reviewer}
    with records.immediate(db):
        job_id = records.insert_row(db, "job", row)
        folder = str(job_dir(job_id))
        db.execute("UPDATE job SET job_dir = ? WHERE id = ?", [folder, job_id])
        records.audit(db, reviewer, "insert", "job", job_id, {**row, "job_dir": folder})
    return get_job(db, job_id)


def update_job(db: Database, job_id: int, reviewer: str, **changes: Any) -> None:
    """Write job fields and audit the change (state changes and results, never output)."""
    if isinstance(changes.get("state"), JobState):
        changes["state"] = changes["state"].value
    unknown = set(changes) - set(db.table("job").columns_dict)
    if unknown:
        raise ValueError(f"not job fields: {', '.join(sorted(unknown))}")
    sets = ", ".join(f"{k} = ?" for k in changes)
    with records.immediate(db):
        db.execute(f"UPDATE job SET {sets} WHERE id = ?", [*changes.values(), job_id])
        records.audit(db, reviewer, "update", "job", job_id, changes)


def migration_target(db: Database, migration_id: int) -> tuple[int | None, str | None]:
    """The migration's target (chips, accelerator kind): a re-run's defaults."""
    row = db.execute("SELECT chips, accelerator FROM migration WHERE id = ?", [migration_id]).fetchone()
    if row is None:
        raise WorkbenchError(f"no migration {migration_id}")
    return row[0], row[1]


def run_source(db: Database, spec: JobSpec) -> tuple[str, Path]:
    """What the runner checks out: the re-run attempt's commit and the migration's repository.

    `options["commit"]` runs the attempt's command at another commit of the repository instead
    (`workbench explain`'s code factor: a bisection step); the result attempt records that commit."""
    commit = db.execute("SELECT commit_sha FROM attempt WHERE id = ?", [spec.attempt_id]).fetchone()
    repo = db.execute("SELECT repo FROM migration WHERE id = ?", [spec.migration_id]).fetchone()
    if commit is None or repo is None:
        raise WorkbenchError(f"attempt {spec.attempt_id} of migration {spec.migration_id} is gone")
    return spec.options.get("commit") or commit[0], Path(repo[0])


def _external_id(job_id: int) -> str:
    return f"rerun:job-{job_id}"


def stored_result(db: Database, job_id: int) -> tuple[int, int, str] | None:
    """(id, seq, status) of the attempt the job already stored, when its runner got that far."""
    row = db.execute("SELECT id, seq, status FROM attempt WHERE external_id = ?", [_external_id(job_id)]).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def store_job_log(db: Database, job: Job, *, keep_empty: bool = False) -> int | None:
    """Keep the job's output (a cancelled or interrupted run) as a stored log; None when it has none."""
    if not job.log_path.is_file() or not (keep_empty or job.log_path.stat().st_size):
        return None
    with records.immediate(db):
        return store_log(db, job.log_path)


def store_rerun_attempt(db: Database, job: Job, row: dict[str, Any], series: dict[str, dict[int, float]],
                        reports: list[dict[str, Any]], reviewer: str) -> tuple[int, int, int | None]:
    """Store the run as the migration's next attempt, with its log, series and probe reports, at once:
    a run of the agent attempt the job re-ran (`rerun_of`; of the original one when the job
    re-ran a re-run), counted with it, never beside it (storage.counted).

    `row` holds the attempt's own fields; the sequence number, commit, log and links are added
    here. Returns (attempt id, seq, log id).
    """
    spec = job.spec
    with records.immediate(db):
        log_id = store_log(db, job.log_path) if job.log_path.is_file() else None
        original = root_of(db, spec.attempt_id)  # a re-run of a re-run is another run of the original
        seq = queries.next_seq(db, spec.migration_id)
        commit = spec.options.get("commit") or db.execute(
            "SELECT commit_sha FROM attempt WHERE id = ?", [spec.attempt_id]).fetchone()[0]
        row = {**row, "migration_id": spec.migration_id, "seq": seq, "commit_sha": commit, "log_id": log_id,
               "rerun_of": original, "external_id": _external_id(job.id)}
        attempt_id = records.insert_row(db, "attempt", row)
        records.audit(db, reviewer, "insert", "attempt", attempt_id, {k: v for k, v in row.items() if k != "env"})
        db.conn.executemany(
            "INSERT INTO metric_point (attempt_id, name, step, value) VALUES (?, ?, ?, ?)",
            [(attempt_id, name, step, value) for name, points in series.items() for step, value in points.items()],
        )
        for report in reports:
            db.execute(
                "INSERT INTO probe_report (job_id, attempt_id, file, rank, data) VALUES (?, ?, ?, ?, ?)",
                [job.id, attempt_id, report.get("_file"), report.get("rank"), json.dumps(report, default=str)],
            )
    return attempt_id, seq, log_id


def job_result(db: Database, job: Job) -> JobResult | None:
    """The attempt a finished job made, with its current verification; None before it has one."""
    if not job.result_attempt_id:
        return None
    row = db.execute("SELECT seq FROM attempt WHERE id = ?", [job.result_attempt_id]).fetchone()
    if row is None:
        return None
    v = queries.current_verification(db, job.result_attempt_id)
    outcomes = tuple(d.effective.value for d in queries.verdicts(db, job.result_attempt_id))
    if v is None:
        return JobResult(seq=row[0], level=None, outcomes=outcomes)
    return JobResult(seq=row[0], level=v.highest_level, outcomes=outcomes,
                     cause=v.cause.value if v.cause else None, silent=v.silent)


def reference_steps(db: Database, migration_id: int) -> int | None:
    """The last step of the migration's latest reference run (its metric series): how many steps
    a re-run of the same project is expected to take, for the job's time estimate."""
    row = db.execute(
        "SELECT MAX(l.step) FROM metric_last l WHERE l.attempt_id = (SELECT id FROM attempt"
        " WHERE migration_id = ? AND source = 'reference' ORDER BY seq DESC LIMIT 1)", [migration_id]).fetchone()
    return row[0] if row and row[0] else None
