"""A finished run becomes an attempt: record, log, metric series, probe reports, then verdicts."""

from __future__ import annotations

import json
import math
from typing import Any

from domain.models import AttemptSource, AttemptStatus
from storage.queries import probe_reports  # noqa: F401  (the stored reports, read back)


def _series_from_log(path) -> dict[str, dict[int, float]]:
    from workbench.verify.logscan import compile_patterns, file_chunks, scan_chunks

    return scan_chunks(file_chunks(path), patterns=compile_patterns((), defaults=True)).point_series()


def store_result(db: Any, job: Any, *, exit_code: int | None, timed_out: bool, started_at: str,
                 ended_at: str, reviewer: str) -> tuple[int, int | None]:
    """Store the job's run as a new attempt (source `rerun`) and verify it; (attempt id, log id)."""
    from storage import records
    from storage.logs import store_log
    from workbench import probe

    spec = job.spec
    reports = probe.read_reports(job.probe_dir)
    main = probe.main_report(reports)
    series = _series_from_log(job.log_path) if job.log_path.is_file() else {}
    if main is not None:
        for name, points in probe.series(main).items():
            series.setdefault(name, points)   # the program's own prints first, the probe fills gaps
    if any(not math.isfinite(v) for points in series.values() for v in points.values()):
        # a diverged run (`loss nan`): metric_point cannot hold NaN (SQLite stores it as NULL), so
        # store no series and let the verifier read them, NaN included, from the stored log
        series = {}
    observed_kind = observed_count = None
    if main is not None and main.get("device_kind"):
        observed_kind = str(main["device_kind"]).lower()
        observed_count = main.get("devices_used") or main.get("global_device_count")
    if timed_out:
        status = AttemptStatus.INTERRUPTED
    elif exit_code == 0:
        status = AttemptStatus.OK
    else:
        status = AttemptStatus.NONZERO_EXIT
    with db.atomic():
        log_id = store_log(db, job.log_path) if job.log_path.is_file() else None
        seq = db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM attempt WHERE migration_id = ?",
                         [spec.migration_id]).fetchone()[0]
        commit = db.execute("SELECT commit_sha FROM attempt WHERE id = ?", [spec.attempt_id]).fetchone()[0]
        row = {
            "migration_id": spec.migration_id,
            "seq": seq,
            "source": AttemptSource.RERUN.value,
            "commit_sha": commit,
            "argv": json.dumps(list(spec.argv)),
            "cwd": spec.cwd,
            "env": json.dumps(spec.env, sort_keys=True),
            "started_at": started_at,
            "ended_at": ended_at,
            "status": status.value,
            "exit_code": exit_code,
            "exit_code_source": "process",
            "expected_level": None,
            "claim": "",
            "intended_kind": spec.accelerator,
            "intended_count": spec.chips,
            "observed_kind": observed_kind if observed_count else None,
            "observed_count": observed_count if observed_kind else None,
            "log_id": log_id,
            "rerun_of": spec.attempt_id,
            "external_id": f"rerun:job-{job.id}",
            "result_note": f"re-run by job {job.id} on {spec.backend}" + (f" ({spec.host})" if spec.host else ""),
        }
        attempt_id = db["attempt"].insert(row).last_pk
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
    verify_attempt(db, spec.migration_id, seq, reviewer)
    return attempt_id, log_id


def verify_attempt(db: Any, migration_id: int, seq: int, reviewer: str) -> None:
    from storage import queries
    from storage.converters import migration_from_row
    from workbench.verify import verify_migration

    study = queries.get_study(db)
    row = list(db.query("SELECT * FROM migration WHERE id = ?", [migration_id]))[0]
    if study is not None:
        verify_migration(db, migration_from_row(row), study, reviewer, seq=seq)
