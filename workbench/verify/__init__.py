"""Verification: every attempt on the five-level ladder, from evidence the workbench reads itself.

`verify_study` loads each attempt's record, scans its stored log in one streaming pass, takes its
metric series (stored, else extracted from the log), compares it with the migration's reference
run and stores five verdicts, a failure cause and the derived flags. Verifying again with the
same evidence, settings and verifier changes nothing; anything else supersedes the current
verdicts and keeps the old ones in history. docs/verification.md is the specification.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from domain.errors import WorkbenchError
from domain.models import Attempt, Migration, Study
from domain.text import plural
from storage import verify_inputs
from storage.sqlite import Database
from workbench.verify.evidence import VERIFIER, VERSION


class NotAllVerified(WorkbenchError):
    """Raised once a verify run has written every verdict it could: names the attempts it could
    not judge or write."""


@dataclass
class AttemptResult:
    """What verifying one attempt did (its verdicts are in the study: a report of 150,000
    attempts holds no judgements)."""

    attempt: Attempt
    verification_id: int
    changed: bool


@dataclass
class Report:
    outcomes: list[AttemptResult] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(1 for o in self.outcomes if o.changed)


@dataclass
class _Plan:
    """A migration in flight: its attempts in order, what its verdicts are written with (the
    settings also as the JSON text each verification stores), each attempt's result as its task
    comes back, and how many of its tasks are still out."""

    migration: Migration
    attempts: list[Attempt]
    settings: dict[str, Any]
    reference: Attempt | None
    settings_json: str
    siblings: tuple[Any, ...] = ()
    """The correct attempts level 5 compares with, as read before its tasks were judged."""
    results: dict[int, AttemptResult] = field(default_factory=dict)
    out: int = 0
    swept: bool = False
    """Its correct attempts were read again once its verdicts were written."""

    @property
    def attempt_ids(self) -> list[int]:
        return [a.id for a in self.attempts]


def verify_migration(db: Database, migration: Migration, study: Study, reviewer: str, *,
                     seq: int | None = None, force: bool = False, **options: Any) -> Report:
    """Verify a migration's agent attempts (or the one with `seq`); `options` as `verify_groups`."""
    return verify_migrations(db, [migration], study, reviewer, seq=seq, force=force, **options)


def verify_migrations(db: Database, migrations: list[Migration], study: Study, reviewer: str,
                      **options: Any) -> Report:
    """`verify_groups` gathered in one report, for callers that verify a few migrations."""
    return Report([o for group in verify_groups(db, migrations, study, reviewer, **options) for o in group])


def verify_groups(db: Database, migrations: list[Migration], study: Study, reviewer: str, *,
                  seq: int | None = None, force: bool = False, workers: int = 1,
                  progress: Callable[[int, int], None] | None = None,
                  pool_min: int | None = None) -> Iterator[list[AttemptResult]]:
    """Verify the migrations' attempts as one batch job (workbench/verify/batch.py) and give each
    migration's results, in order, once its verdicts are written. Each attempt is hashed and,
    unless its inputs are unchanged, judged, both over `workers` processes; the parent reads the
    attempts and writes verdicts a task per transaction, without an fsync each (`relaxed_sync`: a
    power cut may lose the last verdicts, which a new run writes again). A migration is read only
    when the pool has room for its tasks, so memory holds the migrations in flight, not the study.
    `progress(done, total)` counts the attempts settled (skipped as unchanged or judged) of all the
    migrations'. Attempts that could not be judged (evidence that breaks the judging, `batch.Judged.error`)
    or whose verdicts could not be written are left out and named in the WorkbenchError raised at
    the end (the others are written)."""
    from collections import deque

    from storage import records
    from workbench.verify import batch

    total = verify_inputs.count_agent_attempts(db, [m.id for m in migrations], seq)
    done = 0
    errors: list[str] = []
    open_plans: deque[_Plan] = deque()
    by_migration: dict[int, _Plan] = {}
    again: deque[batch.Task] = deque()
    if progress:
        progress(0, total)

    def settle(finished: Iterator[tuple[batch.Task, list[batch.Judged]]]) -> Iterator[list[AttemptResult]]:
        nonlocal done
        for task, judged in finished:
            plan = by_migration[task.migration.id]
            new = [j for j in judged if j.rows is not None]
            written = dict(zip((j.attempt.id for j in new), _write(db, reviewer, plan, new)))
            errors.extend(e for e in _results(plan, task.migration.slug, judged, written) if e not in errors)
            plan.out -= 1
            if not plan.swept:   # an attempt judged again in the sweep is settled once, as counted
                done += len(judged)
                if progress:
                    progress(done, total)
        while open_plans and open_plans[0].out == 0:
            plan = open_plans[0]
            tasks = _sweep_again(db, study, plan)
            if tasks:
                plan.out = len(tasks)
                again.extend(tasks)
                break
            open_plans.popleft()
            del by_migration[plan.migration.id]
            yield [plan.results[aid] for aid in plan.attempt_ids if aid in plan.results]

    def resubmit() -> Iterator[list[AttemptResult]]:
        while again:
            yield from settle(judges.submit(again.popleft()))

    path = verify_inputs.database_file(db)
    pool_min = batch.POOL_MIN if pool_min is None else pool_min
    with records.relaxed_sync(db), batch.Judges(db, workers, path, pool_min) as judges:
        for migration in migrations:
            plan = _plan_of(db, migration, seq)
            tasks = batch.tasks_of(migration, study, plan.settings, plan.reference, plan.attempts, force, plan.siblings)
            plan.out = len(tasks)
            open_plans.append(plan)
            by_migration[migration.id] = plan
            for task in tasks:
                yield from settle(judges.submit(task))
            yield from settle(iter(()))
            yield from resubmit()
        while True:
            yield from settle(judges.drain())
            if not again:
                break
            yield from resubmit()
    if errors:
        more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise NotAllVerified(f"{plural(len(errors), 'attempt')} not verified: " + "; ".join(errors[:5]) + more)


def _plan_of(db: Database, migration: Migration, seq: int | None) -> _Plan:
    """A migration as a verify run reads it: its attempts (or `seq`), settings, reference run and
    the correct attempts level 5 compares with."""
    from storage import queries
    from workbench.verify.settings import merge
    from workbench.verify.timing import siblings_of

    settings = merge(queries.verify_settings(db, migration.id))
    return _Plan(migration, verify_inputs.agent_attempts(db, migration.id, seq), settings,
                 verify_inputs.reference_attempt(db, migration.id), json.dumps(settings, sort_keys=True),
                 siblings_of(db, migration.id, settings))


def _results(plan: _Plan, slug: str, judged: list[Any], written: dict[int, Any]) -> list[str]:
    """Each judged attempt's result kept in the plan (changed when either sweep changed it); what
    could not be judged or written, in words."""
    errors = []
    for j in judged:
        vid = written.get(j.attempt.id, j.verification_id)
        if j.error:
            errors.append(f"{slug}#{j.attempt.seq} could not be judged ({j.error})")
        elif isinstance(vid, Exception):
            errors.append(f"{slug}#{j.attempt.seq}: verdicts not written ({type(vid).__name__}: {vid})")
        else:
            before = plan.results.get(j.attempt.id)
            plan.results[j.attempt.id] = AttemptResult(j.attempt, vid, j.rows is not None
                                                       or (before is not None and before.changed))
    return errors


def _sweep_again(db: Database, study: Study, plan: _Plan) -> list[Any]:
    """The migration's tasks once more when its verdicts changed which attempts are correct: level
    5 compares with those (`timing.siblings_of`). Once per verify run; empty when nothing changed."""
    from workbench.verify import batch
    from workbench.verify.timing import siblings_of

    if plan.swept:
        return []
    plan.swept = True
    siblings = siblings_of(db, plan.migration.id, plan.settings)
    if siblings == plan.siblings:
        return []
    plan.siblings = siblings
    return batch.tasks_of(plan.migration, study, plan.settings, plan.reference, plan.attempts, False, siblings)


def _write(db: Database, reviewer: str, plan: _Plan, judged: list[Any]) -> list[int | Exception]:
    """One transaction for a task's new judgements (`batch.Judged`; storage.records.record_verifications)."""
    from storage import records

    return records.record_verifications(db, [
        {"attempt_id": j.attempt.id, "reference_attempt_id": plan.reference.id if plan.reference else None,
         "verifier": VERIFIER, "verifier_version": VERSION, "inputs_hash": j.digest, "inputs": j.inputs,
         "settings": plan.settings_json, "rows": j.rows, "reviewer": reviewer}
        for j in judged
    ]) if judged else []


def overrides_left_behind(db: Database, reviewer: str, since: str) -> list[str]:
    """A line for each override that stopped counting in a verify run begun at `since` (the
    verifier's outcome at its level changed; one where it did not is carried and counts on:
    storage.records.carry_overrides), for its reviewer to look again: what `workbench verify` and
    the app's `V` say. None for an attempt `reviewer` judges blind: it would tell its verdicts."""
    from domain.text import clean
    from storage import queries

    left = queries.overrides_left_behind(db, since)
    hidden = queries.hidden_attempts(db, reviewer, [o["attempt_id"] for o in left]) if left else set()
    return [f"override of {clean(o['slug'])} #{o['seq']} L{o['level']} ({o['outcome']}, by {clean(o['reviewer'])})"
            f" no longer counts: the verifier now says {o['now']} where it said {o['was']}; override again if it"
            " stands" for o in left if o["attempt_id"] not in hidden]


def study_targets(db: Database, slug: str | None = None) -> tuple[Study, list[Migration]]:
    """The study and the migrations a verify run covers: all, or the one named `slug`."""
    from domain.errors import WorkbenchError
    from storage import queries

    study = queries.get_study(db)
    if study is None:
        raise WorkbenchError("the database holds no study yet: import a bundle first")
    if slug is None:
        return study, [s.migration for s in queries.iter_migration_summaries(db)]
    migration = queries.get_migration(db, slug)
    if migration is None:
        raise WorkbenchError(f"no migration {slug!r}")
    return study, [migration]


def verify_study(db: Database, reviewer: str, *, slug: str | None = None, **options: Any) -> Report:
    """Verify the study (or one migration); `options` as `verify_groups` (seq, force, workers, progress)."""
    study, migrations = study_targets(db, slug)
    return verify_migrations(db, migrations, study, reviewer, **options)
