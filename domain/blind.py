"""What a reviewer judging blind may see (docs/judgements.md, "Blind mode"): an attempt's row and
a migration's row blanked of the fields that would anchor a judgement, and the reveal that
follows one. Kept apart from domain/judgements.py so that the CLI's lists load only this."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from domain.models import LADDER, AttemptSummary, MigrationSummary, Outcome

if TYPE_CHECKING:
    from domain.judgements import HumanJudgement
    from domain.verdicts import Verdict, Verification


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
