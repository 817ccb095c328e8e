"""Unknown is actionable: a level 3 left unknown (no evidence of the devices the run used), or an
attempt with no trace (no probe report of the training's trace, its own or a re-run's), is
answered by re-running the attempt with the probe inside, whose reports the verifier then cites."""

from __future__ import annotations

from typing import Any

from domain.models import Attempt, AttemptSource, Outcome
from storage.sqlite import Database

TRACE_VERSION = 2
"""The probe version whose reports hold the training trace (workbench/probe/inject/workbench_probe.py)."""


def unknown_at_level3(db: Database, attempts: list[Attempt]) -> list[Attempt]:
    """The attempts to re-run with the probe: those whose current level 3 is (effectively) unknown,
    and those with no trace (no probe report of version 2 or later, their own or a re-run's). A
    re-run is one only when an older probe made its reports (the current probe saw what there was
    to see: running it again would tell nothing new)."""
    from storage import queries

    versions = queries.traced(db, [a.id for a in attempts])
    out = []
    for attempt in attempts:
        version = versions.get(attempt.id)
        if attempt.source is AttemptSource.REFERENCE:
            continue
        if attempt.source is AttemptSource.RERUN:
            if version is not None and version < TRACE_VERSION:
                out.append(attempt)
            continue
        levels = queries.verdicts(db, attempt.id)
        if (version or 0) < TRACE_VERSION or len(levels) >= 3 and levels[2].effective is Outcome.UNKNOWN:
            out.append(attempt)
    return out


def rerun_specs(db: Database, attempts: list[Attempt], backend: str, chips: int | None = None,
                **options: Any) -> list[Any]:
    """A re-run `JobSpec` per attempt (the attempt's own command and recorded environment), each
    through the pre-flight check (a JobEnvironmentError naming the fix when it cannot start)."""
    from workbench.rerun import jobs, preflight

    specs = []
    for attempt in attempts:
        spec = jobs.spec_for(db, attempt, backend, chips=chips, **options)
        preflight.check(db, spec)
        specs.append(spec)
    return specs


def launch_all(study: Any, specs: list[Any], reviewer: str) -> list[Any]:
    """Start a job per spec (already checked); returns the jobs."""
    from workbench.rerun import jobs

    jobs.recover(study.db, reviewer)
    return [jobs.launch(study, spec, reviewer, checked=True) for spec in specs]


def unknown_in(db: Database, slug: str | None = None) -> list[tuple[str, Attempt]]:
    """(migration slug, attempt) of each attempt of the study, or of one migration, whose level 3
    is unknown or that has no trace (`unknown_at_level3`): what the app's `U` offers to re-run."""
    from storage import queries, review

    found = [(s, queries.find_attempt(db, s, seq)[1]) for s, seq in review.verify_targets(db, slug)]
    keep = {a.id for a in unknown_at_level3(db, [a for _, a in found])}
    return [(s, a) for s, a in found if a.id in keep]
