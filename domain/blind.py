"""What a reviewer judging blind may see (docs/judgements.md, "Blind mode"): the one rule, `Sight`,
and what it blanks. Nothing derived from the verifier's verdicts or the agent's claim of an attempt
a reviewer is blind to shows to them: not its row's outcomes, cause, silent flag, over-claim or
expected level, not a migration's counts, best level or the stopping rules' suggestion, not the
curves against the tolerance, not a re-run's result, and nothing study-wide (totals, exports,
reports, agreement) while any attempt in its scope is hidden. Which attempts a reviewer is blind
to is SQL (`storage.queries.hidden_of`); what that hides is decided here, in one place, and every
screen, dialog, command and export asks it. Kept apart from domain/judgements.py so that the
CLI's lists load only this."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from domain.models import LADDER, MigrationSummary, Outcome

if TYPE_CHECKING:  # the study screen asks the rule before any attempt record exists: loaded when used
    from domain.attempts import AttemptSummary
    from domain.effort import Standing
    from domain.jobs import JobResult
    from domain.judgements import HumanJudgement
    from domain.verdicts import Verdict, Verification

HIDDEN_FIELDS = ("claim", "expected_level", "ladder", "highest_level", "failure")
"""What `workbench attempts --json` blanks of an attempt the reviewer is blind to."""
MIGRATION_HIDDEN = ("failed", "silent_failures", "highest_level", "over_claims")
"""What `workbench migrations --json` blanks of a migration holding an attempt the reviewer is blind to."""
STANDING_HIDDEN = ("highest_level",)
"""What a decision's figures leave out for a reviewer blind to one of the migration's attempts: the
budget figures are time, money and counts; the best level is the verdicts' sum."""


@dataclass(frozen=True, slots=True)
class Sight:
    """What one reviewer may see now: the one rule (module docstring). Built from what
    `storage.queries.hidden_of` says (workbench.blind.sight), asked by every way in."""

    reviewer: str
    hidden: frozenset[int] = frozenset()
    """The attempts in view (those asked about) the reviewer is blind to."""
    hidden_migrations: frozenset[int] = frozenset()
    """The migrations in view holding an attempt the reviewer is blind to."""
    pending: int = 0
    """How many attempts in the scope asked about (the study, or a migration) they are blind to:
    anything summed over the scope (totals, agreement, an export) shows only at 0."""

    def sees_attempt(self, attempt_id: int | None) -> bool:
        """Its claim, expected level, verdicts, cause, curves against the tolerance, re-run result."""
        return attempt_id not in self.hidden

    def sees_attempts(self, attempt_ids: Iterable[int | None]) -> bool:
        return all(self.sees_attempt(a) for a in attempt_ids)

    def sees_migration(self, migration_id: int | None) -> bool:
        """Its counts, best level, suggestion, decision reasons, notes and ledger."""
        return migration_id not in self.hidden_migrations

    @property
    def sees_scope(self) -> bool:
        """Figures summed over the scope: study totals, an export or report, agreement. Taking
        one's own judgements away from a sum over a few attempts gives the verdicts of the rest,
        so they open only once the reviewer is blind to nothing in it."""
        return self.pending == 0

    def closed(self, what: str) -> str:
        """Why `what`, summed over the scope, is not shown (only while `sees_scope` is false)."""
        n = self.pending
        return (f"{what} is closed to {self.reviewer} while they judge blind: {n} attempt"
                f"{'s are' if n != 1 else ' is'} still hidden from them. Judge them first (Q, workbench queue),"
                " or have blind mode turned off (workbench blind DB off)")

    # --- what it blanks ---------------------------------------------------------------------------
    def attempt_row(self, summary: AttemptSummary) -> AttemptSummary:
        return summary if self.sees_attempt(summary.attempt.id) else blinded(summary)

    def migration_row(self, summary: MigrationSummary) -> MigrationSummary:
        return summary if self.sees_migration(summary.migration.id) else blinded_migration(summary)

    def standing(self, migration_id: int, standing: Standing) -> Standing:
        """Where a migration stands: budgets always; its best level, the suggestion and the
        reasons (which name the level) only where the reviewer sees the whole migration."""
        if self.sees_migration(migration_id):
            return standing
        return replace(standing, highest_level=None, reasons=(), hidden=True)

    def figures(self, migration_id: int, figures: Mapping[str, Any]) -> dict[str, Any]:
        """A decision's stored figures as this reviewer may read them."""
        if self.sees_migration(migration_id):
            return dict(figures)
        return {k: v for k, v in figures.items() if k not in STANDING_HIDDEN}

    def job_result(self, attempt_id: int | None, result: JobResult | None) -> JobResult | None:
        """What a finished re-run made: the new attempt is judged like any other."""
        if result is None or self.sees_attempt(attempt_id):
            return result
        from domain.jobs import JobResult

        return JobResult(seq=result.seq, level=None, hidden=True)

    def suggested(self, migration_id: int, suggested: Any) -> Any:
        """What the stopping rules suggested (a decision's `suggested`), or None while hidden."""
        return suggested if self.sees_migration(migration_id) else None


def blinded(summary: AttemptSummary) -> AttemptSummary:
    """An attempt's row as a reviewer judging it blind sees it: command, status, hardware and
    evidence stay; the agent's claim and expected level, the outcomes, over-claim and cause go."""
    return replace(summary, attempt=replace(summary.attempt, expected_level=None, claim=""),
                   ladder=(None,) * len(summary.ladder), failure=None, over_claim=None, hidden=True)


def blinded_migration(summary: MigrationSummary) -> MigrationSummary:
    """A migration's row for a reviewer judging one of its attempts blind: its failures, silent
    failures, highest level and over-claims would tell that attempt's verdicts, so they go."""
    return replace(summary, failed=0, silent_failures=0, highest_level=None, over_claims=0, hidden=True)


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt as a reviewer may see it now (workbench.blind.attempt_seen_by)."""

    summary: AttemptSummary
    """Blinded (`hidden`) while the reviewer judges it blind."""
    verification: Verification | None
    verdicts: list[Verdict]
    """Empty while hidden."""
    judgement: HumanJudgement | None
    """The reviewer's current judgement of it, for the reveal."""
    counted_for: int | None = None
    """The seq of the agent attempt this re-run is counted with (None: an agent attempt, a
    reference run, or a re-run no count reads)."""
    decided: tuple[tuple[int, Outcome, int], ...] = ()
    """(level, counted outcome, seq of the run that gave it) where another run decided a level of
    the attempt it is counted with (itself, or `counted_for`) and its own verdicts say otherwise
    or nothing (storage.runs.decided_by_other_runs); empty while hidden."""


@dataclass(frozen=True, slots=True)
class RevealRow:
    """One level of the reveal after a blind judgement: the reviewer's outcome beside the
    verifier's (effective, overrides applied) and whether the agent's expected level reached it."""

    level: int
    judged: Outcome
    verifier: Outcome | None
    """None where the attempt has no verdict at this level."""
    claimed: bool

    @property
    def differs_from_verifier(self) -> bool:
        return self.verifier is not None and self.verifier is not self.judged

    @property
    def differs_from_claim(self) -> bool:
        """The agent expected this level to pass; the reviewer did not find it passing."""
        return self.claimed and self.judged is not Outcome.PASS


def reveal(judgement: HumanJudgement, summary: AttemptSummary) -> list[RevealRow]:
    """The judgement level by level against the verifier and the claim, for marking differences."""
    expected = summary.attempt.expected_level or 0
    return [RevealRow(level, judgement.outcome(level),
                      summary.ladder[level - 1] if level <= len(summary.ladder) else None, level <= expected)
            for level in LADDER]
