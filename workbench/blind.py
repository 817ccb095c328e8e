"""Blind review's one gate (docs/judgements.md, "Blind mode"): every screen and command reads
attempts and migrations through these, which ask `storage.queries.hidden_of` whether the reviewer
judges them blind and blank what it hides (domain/blind.py). Light on purpose: `workbench
attempts` and `migrations` load it at every start."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.errors import WorkbenchError

# domain.blind (two dataclasses to create) loads only when a row is blinded or an attempt viewed.
if TYPE_CHECKING:  # `workbench attempts` reads through the standard sqlite3 module, without sqlite-utils
    from sqlite_utils import Database

    from domain.blind import AttemptView
    from domain.models import AttemptSummary, MigrationSummary
    from storage.queries import Reader

HIDDEN_FIELDS = ("claim", "expected_level", "ladder", "highest_level", "failure")
"""What `workbench attempts --json` blanks for a reviewer who is blind to an attempt."""
MIGRATION_HIDDEN = ("failed", "silent_failures", "highest_level", "over_claims")
"""What `workbench migrations --json` blanks of a migration holding an attempt the reviewer judges blind."""


def hidden_attempts(db: Reader, reviewer: str, attempt_ids: list[int]) -> set[int]:
    """The attempts among these that `reviewer` is blind to (storage.queries.hidden_attempts)."""
    from storage.queries import hidden_attempts as hidden

    return hidden(db, reviewer, attempt_ids)


def as_seen_by(db: Reader, reviewer: str, summaries: list[AttemptSummary]) -> list[AttemptSummary]:
    """The rows as `reviewer` may see them: those they are blind to blinded (domain.blind).
    Reference runs are never blinded (the rule says so). Every screen and command that lists or
    shows attempts reads its rows through this."""
    hidden = hidden_attempts(db, reviewer, [s.attempt.id for s in summaries]) if summaries else set()
    if not hidden:
        return list(summaries)
    from domain.blind import blinded

    return [blinded(s) if s.attempt.id in hidden else s for s in summaries]


def migrations_seen_by(db: Reader, reviewer: str, summaries: list[MigrationSummary]) -> list[MigrationSummary]:
    """The study screen's rows as `reviewer` may see them: a migration holding an attempt they
    judge blind shows no verdict counts (domain.blind.blinded_migration)."""
    from storage.queries import hidden_migrations

    hidden = hidden_migrations(db, reviewer) if summaries else set()
    if not hidden:
        return list(summaries)
    from domain.blind import blinded_migration

    return [blinded_migration(s) if s.migration.id in hidden else s for s in summaries]


def attempt_seen_by(db: Database, reviewer: str, attempt_id: int) -> AttemptView | None:
    """One attempt as `reviewer` may see it now: blinded with no verification or verdicts while
    they judge it blind, else all of it beside their current judgement (for the reveal)."""
    from domain.blind import AttemptView
    from storage.judgements import judgement_history
    from storage.queries import attempt_summary, current_verification, verdicts

    summary = attempt_summary(db, attempt_id)
    if summary is None:
        return None
    [seen] = as_seen_by(db, reviewer, [summary])
    if seen.hidden:
        return AttemptView(seen, None, [], None)
    mine = [j for j in judgement_history(db, attempt_id) if j.reviewer == reviewer]
    return AttemptView(seen, current_verification(db, attempt_id), verdicts(db, attempt_id),
                       mine[-1] if mine else None)


def closed_while_blind(db: Database, reviewer: str, what: str) -> None:
    """Refuse `what` (an export, a study-wide list of verdicts) while `reviewer` judges any attempt
    blind: it would show them the verdicts and claims they have not judged yet."""
    from storage.judgements import hidden_count

    n = hidden_count(db, reviewer)
    if n:
        raise WorkbenchError(
            f"{what} is closed to {reviewer} while they judge blind: {n} attempt"
            f"{'s are' if n != 1 else ' is'} still hidden from them. Judge them first (workbench queue), "
            "or have blind mode turned off (workbench blind DB off)")
