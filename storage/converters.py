"""Study, migration and attempt rows to domain objects and back.

The rows of other tables are mapped beside the queries that read them (storage/queries.py,
storage/jobs.py).
"""

from __future__ import annotations

import functools
import json
import math
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from domain.models import (
    AttemptSource,
    AttemptStatus,
    Budgets,
    Direction,
    Goal,
    Migration,
    MigrationStatus,
    Target,
)


def point_value(value: float | None) -> float:
    """A `metric_point` value as stored: NULL is NaN (SQLite stores a bound NaN as NULL)."""
    return float("nan") if value is None else value


def point_rows(rows: list[Any]) -> list[tuple[str, int, float]]:
    """(name, step, value) rows of `metric_point`, NULL values as NaN."""
    return [(name, step, point_value(value)) for name, step, value in rows]


if TYPE_CHECKING:  # created on first use (domain.models): the migration list reads none of them
    from domain.attempts import Attempt, Hardware
    from domain.study import Study


def study_from_row(row: dict[str, Any]) -> Study:
    from domain.study import Study

    return Study(
        slug=row["slug"],
        title=row["title"],
        prices=json.loads(row["prices"] or "{}"),
        staff_hourly_rate=row["staff_hourly_rate"] or 0.0,
        reviewers=tuple(json.loads(row["reviewers"] or "[]")),
        intervention_kinds=json.loads(row.get("intervention_kinds") or "{}"),
    )


def study_to_row(study: Study) -> dict[str, Any]:
    return {
        "id": 1,
        "slug": study.slug,
        "title": study.title,
        "staff_hourly_rate": study.staff_hourly_rate,
        "reviewers": json.dumps(list(study.reviewers)),
        "prices": json.dumps(study.prices, sort_keys=True),
        "intervention_kinds": json.dumps(study.intervention_kinds),
    }


def migration_from_row(row: dict[str, Any]) -> Migration:
    return Migration(
        id=row["id"],
        slug=row["slug"],
        title=row["title"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        target=Target(row["accelerator"], row["chips"], row["runtime"] or ""),
        goal=Goal(
            metric=row["goal_metric"],
            reference=math.nan if row["goal_reference"] is None else row["goal_reference"],
            direction=Direction(row["goal_direction"]),
            tolerance=row["goal_tolerance"] or 0.0,
        ),
        budgets=Budgets(
            compute_dollars=row["budget_compute_dollars"],
            staff_hours=row["budget_staff_hours"],
            attempts=row["budget_attempts"],
            calendar_days=row["budget_calendar_days"],
        ),
        status=MigrationStatus(row["status"]),
        acceptance_level=row["acceptance_level"] or 4,
    )


def migration_to_row(m: Migration) -> dict[str, Any]:
    """Without the id: the slug is the key on import."""
    return {
        "slug": m.slug,
        "title": m.title,
        "repo": m.repo,
        "base_commit": m.base_commit,
        "accelerator": m.target.accelerator,
        "chips": m.target.chips,
        "runtime": m.target.runtime,
        "goal_metric": m.goal.metric,
        "goal_reference": None if math.isnan(m.goal.reference) else m.goal.reference,
        "goal_direction": m.goal.direction.value,
        "goal_tolerance": m.goal.tolerance,
        "budget_compute_dollars": m.budgets.compute_dollars,
        "budget_staff_hours": m.budgets.staff_hours,
        "budget_attempts": m.budgets.attempts,
        "budget_calendar_days": m.budgets.calendar_days,
        "acceptance_level": m.acceptance_level,
        "status": m.status.value,
    }


@functools.cache
def _attempts() -> ModuleType:
    """domain.attempts, imported on the first attempt read (an import statement per row would cost
    more than the row's other work)."""
    return import_module("domain.attempts")


def _hardware(kind: str | None, count: int | None) -> Hardware | None:
    return _attempts().Hardware(kind, count) if kind is not None and count is not None else None


def attempt_from_row(row: dict[str, Any]) -> Attempt:
    records = _attempts()
    return records.Attempt(
        id=row["id"],
        migration_id=row["migration_id"],
        seq=row["seq"],
        source=AttemptSource(row["source"]),
        commit=row["commit_sha"],
        command=records.Command(
            argv=tuple(json.loads(row["argv"])),
            cwd=row["cwd"] or ".",
            env=json.loads(row["env"] or "{}"),
        ),
        status=AttemptStatus(row["status"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        exit_code=row["exit_code"],
        exit_code_source=row["exit_code_source"],
        expected_level=row["expected_level"],
        claim=row["claim"] or "",
        intended_hardware=_hardware(row["intended_kind"], row["intended_count"]),
        observed_hardware=_hardware(row["observed_kind"], row["observed_count"]),
        log_id=row["log_id"],
        rerun_of=row["rerun_of"],
    )


def attempt_to_row(a: Attempt) -> dict[str, Any]:
    """Without the id; `rerun_of` is the caller's to resolve."""
    return {
        "migration_id": a.migration_id,
        "seq": a.seq,
        "source": a.source.value,
        "commit_sha": a.commit,
        "argv": json.dumps(list(a.command.argv)),
        "cwd": a.command.cwd,
        "env": json.dumps(a.command.env, sort_keys=True),
        "started_at": a.started_at,
        "ended_at": a.ended_at,
        "status": a.status.value,
        "exit_code": a.exit_code,
        "exit_code_source": a.exit_code_source,
        "expected_level": a.expected_level,
        "claim": a.claim,
        "intended_kind": a.intended_hardware.kind if a.intended_hardware else None,
        "intended_count": a.intended_hardware.count if a.intended_hardware else None,
        "observed_kind": a.observed_hardware.kind if a.observed_hardware else None,
        "observed_count": a.observed_hardware.count if a.observed_hardware else None,
        "log_id": a.log_id,
        "rerun_of": a.rerun_of,
    }
