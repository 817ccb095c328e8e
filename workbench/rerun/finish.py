"""A finished run becomes an attempt: record, log, metric series, probe reports, then verdicts."""

from __future__ import annotations

import json
from typing import Any

from domain.jobs import Job
from domain.models import AttemptSource, AttemptStatus
from storage.sqlite import Database


def _status(exit_code: int | None, timed_out: bool) -> AttemptStatus:
    if timed_out:
        return AttemptStatus.INTERRUPTED
    return AttemptStatus.OK if exit_code == 0 else AttemptStatus.NONZERO_EXIT


def _observed(main: dict[str, Any] | None) -> tuple[str | None, int | None]:
    """The devices the probe saw the program use: both kind and count, or neither."""
    if main is None or not main.get("device_kind"):
        return None, None
    count = main.get("devices_used") or main.get("global_device_count")
    return (str(main["device_kind"]).lower(), count) if count else (None, None)


def store_result(db: Database, job: Job, *, exit_code: int | None, timed_out: bool, started_at: str,
                 ended_at: str, reviewer: str) -> tuple[int, int | None]:
    """Store the job's run as a new attempt (source `rerun`) and verify it; (attempt id, log id)."""
    from storage import queries
    from storage.jobs import store_rerun_attempt
    from workbench import probe
    from workbench.verify.logscan import file_chunks
    from workbench.verify.runseries import run_series

    spec = job.spec
    reports = probe.read_reports(job.probe_dir)
    main = probe.main_report(reports)
    series = run_series(file_chunks(job.log_path) if job.log_path.is_file() else (),
                        queries.verify_settings(db, spec.migration_id), reports)
    observed_kind, observed_count = _observed(main)
    row = {
        "source": AttemptSource.RERUN.value,
        "argv": json.dumps(list(spec.argv)),
        "cwd": spec.cwd,
        "env": json.dumps(spec.env, sort_keys=True),
        "started_at": started_at,
        "ended_at": ended_at,
        "status": _status(exit_code, timed_out).value,
        "exit_code": exit_code,
        "exit_code_source": "process",
        "expected_level": None,
        "claim": "",
        "intended_kind": spec.accelerator,
        "intended_count": spec.chips,
        "observed_kind": observed_kind,
        "observed_count": observed_count,
        "result_note": f"re-run by job {job.id} on {spec.backend}" + (f" ({spec.host})" if spec.host else ""),
    }
    attempt_id, seq, log_id = store_rerun_attempt(db, job, row, series, reports, reviewer)
    verify_attempt(db, spec.migration_id, seq, reviewer)
    return attempt_id, log_id


def verify_attempt(db: Database, migration_id: int, seq: int, reviewer: str) -> None:
    from storage import queries
    from workbench.verify import verify_migration

    study = queries.get_study(db)
    migration = queries.migration_by_id(db, migration_id)
    if study is not None and migration is not None:
        verify_migration(db, migration, study, reviewer, seq=seq)
