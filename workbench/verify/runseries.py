"""A run's metric series as the workbench stores them, read from its log with the migration's
patterns and names (`patterns.migration_patterns`), the probe's series filling the gaps: at a
re-run's end, at the reference run's, and again when `workbench verify --force` (or a change of
the extraction settings) asks for it (issue 38).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from storage.sqlite import Database


def run_series(chunks: Iterable[bytes], settings: dict[str, Any],
               reports: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """name -> step -> value: the log's metrics (the verifier's extraction with the migration's
    settings), then the probe's series where the log has none of that name."""
    from workbench import probe
    from workbench.verify.logscan import scan_chunks
    from workbench.verify.patterns import migration_patterns

    series = scan_chunks(chunks, patterns=migration_patterns(settings)).point_series()
    main = probe.main_report(reports)
    if main is not None:
        for name, points in probe.series(main).items():
            series.setdefault(name, points)  # the program's own prints first, the probe fills gaps
    return series


def as_points(series: dict[str, dict[int, float]]) -> list[tuple[str, int, float]]:
    """The series as stored rows, (name, step, value) in that order."""
    return sorted((name, step, value) for name, points in series.items() for step, value in points.items())


RUN_CLAIM = "Reference run by `workbench reference --run`"
"""How a reference run `workbench reference --run` made begins its claim: its series were read from
its log by the workbench, so `extract_again` reads them again."""

EXTRACTION_SETTINGS = ("patterns", "default_patterns", "metric_names")
"""The verify settings that change what a log's series are."""


def extract_again(db: Database, migration_id: int, reviewer: str, seq: int | None = None) -> list[int]:
    """The series of the migration's runs that the workbench ran and extracted itself (its
    re-runs and `reference --run`s: `queries.extracted_runs`; or the attempt `seq` and the
    reference) read again from their stored logs with the current settings, each replaced where
    it changed, audited. Returns the ids of the attempts whose series changed."""
    from storage import queries, records
    from storage.imports import replace_metric_points
    from storage.logs import log_chunks

    settings = queries.verify_settings(db, migration_id)
    changed = []
    for attempt_id, log_id, attempt_seq, source in queries.extracted_runs(db, migration_id, RUN_CLAIM):
        if seq is not None and attempt_seq != seq and source != "reference":
            continue
        points = as_points(run_series(log_chunks(db, log_id), settings, queries.probe_reports(db, attempt_id)))
        with records.immediate(db):
            if replace_metric_points(db, attempt_id, points, reviewer):
                changed.append(attempt_id)
    return changed
