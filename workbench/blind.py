"""Blind review's one gate (docs/judgements.md, "Blind mode"): `sight` asks
`storage.queries.hidden_of` which attempts a reviewer is blind to and hands back the one rule
(domain.blind.Sight) that says what they may see; every screen, dialog, command and export reads
through it, or through the helpers here built on it. Light on purpose: `workbench attempts` and
`migrations` load it at every start."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from domain.blind import HIDDEN_FIELDS, MIGRATION_HIDDEN, Sight
from domain.errors import WorkbenchError

if TYPE_CHECKING:  # `workbench attempts` reads through the standard sqlite3 module, without sqlite-utils
    from sqlite_utils import Database

    from domain.attempts import Run
    from domain.blind import AttemptView
    from domain.models import AttemptSummary, MigrationSummary
    from storage.queries import Reader

__all__ = ["HIDDEN_FIELDS", "MIGRATION_HIDDEN", "Sight", "as_seen_by", "attempt_seen_by", "closed_while_blind",
           "migrations_seen_by", "runs_seen_by", "sight"]


def sight(db: Reader, reviewer: str, *, attempts: Iterable[int | None] = (), migrations: bool = False,
          scope: bool | list[int] = False) -> Sight:
    """The one rule (domain.blind.Sight) for `reviewer` now: which of `attempts` they are blind
    to, which migrations hold one (when `migrations`), and how many attempts of the scope they are
    blind to (`scope`: True for the study, a list of migration ids, False to not count)."""
    from storage.queries import hidden_attempts, hidden_migrations

    ids = [a for a in attempts if a is not None]
    pending = 0
    if scope is not False:
        from storage.judgements import hidden_count

        pending = hidden_count(db, reviewer, None if scope is True else scope)
    return Sight(reviewer, frozenset(hidden_attempts(db, reviewer, ids)) if ids else frozenset(),
                 frozenset(hidden_migrations(db, reviewer)) if migrations else frozenset(), pending)


def as_seen_by(db: Reader, reviewer: str, summaries: list[AttemptSummary]) -> list[AttemptSummary]:
    """The rows as `reviewer` may see them (domain.blind.Sight.attempt_row). Reference runs are
    never blinded (the rule says so). Every screen and command that lists or shows attempts reads
    its rows through this."""
    seen = sight(db, reviewer, attempts=[s.attempt.id for s in summaries])
    return [seen.attempt_row(s) for s in summaries]


def migrations_seen_by(db: Reader, reviewer: str, summaries: list[MigrationSummary]) -> list[MigrationSummary]:
    """The study screen's rows as `reviewer` may see them: a migration holding an attempt they
    judge blind shows no verdict counts (domain.blind.Sight.migration_row)."""
    if not summaries:
        return []
    seen = sight(db, reviewer, migrations=True)
    return [seen.migration_row(s) for s in summaries]


def attempt_seen_by(db: Database, reviewer: str, attempt_id: int) -> AttemptView | None:
    """One attempt as `reviewer` may see it now: blinded with no verification or verdicts while
    they judge it blind, else all of it (the levels its other runs decided too) beside their current
    judgement (for the reveal)."""
    from domain.blind import AttemptView
    from storage.judgements import judgement_history
    from storage.queries import attempt_summary, current_verification, verdicts
    from storage.runs import decided_by_other_runs

    summary = attempt_summary(db, attempt_id)
    if summary is None:
        return None
    [seen] = as_seen_by(db, reviewer, [summary])
    if seen.hidden:
        return AttemptView(seen, None, [], None)
    mine = [j for j in judgement_history(db, attempt_id) if j.reviewer == reviewer]
    counted_for, decided = decided_by_other_runs(db, attempt_id)
    return AttemptView(seen, current_verification(db, attempt_id), verdicts(db, attempt_id),
                       mine[-1] if mine else None, counted_for, decided)


def runs_seen_by(db: Reader, reviewer: str, attempt_id: int) -> list[Run]:
    """The runs of the attempt `attempt_id` is a run of (storage.runs.attempt_runs), each run's
    outcomes blanked while `reviewer` is blind to it (a re-run is, while its attempt is)."""
    from dataclasses import replace

    from storage.runs import attempt_runs

    runs = attempt_runs(db, attempt_id)
    seen = sight(db, reviewer, attempts=[r.id for r in runs])
    return [r if seen.sees_attempt(r.id) else replace(r, ladder=(None,) * 5, hidden=True) for r in runs]


def closed_while_blind(db: Database, reviewer: str, what: str) -> None:
    """Refuse `what` (an export, a study-wide list of verdicts) while `reviewer` judges any attempt
    blind (domain.blind.Sight.sees_scope): it would show them the verdicts and claims they have
    not judged yet."""
    seen = sight(db, reviewer, scope=True)
    if not seen.sees_scope:
        raise WorkbenchError(seen.closed(what))
