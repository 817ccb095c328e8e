"""What verification produces and reads: the five verdicts of an attempt, the reviewers' overrides
of them, the verifier run that made them, and the metric points it reads.

Kept apart from domain/models.py, which the CLI's lists load at every start (issue 19): they
read none of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.models import Evidence, FailureCause, Outcome


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    step: int
    value: float


@dataclass(frozen=True, slots=True)
class VerdictOverride:
    id: int
    verdict_id: int
    outcome: Outcome
    justification: str
    reviewer: str
    at: str


@dataclass(frozen=True, slots=True)
class Verdict:
    id: int
    attempt_id: int
    level: int
    outcome: Outcome
    reason: str
    evidence: tuple[Evidence, ...]
    verifier: str
    verifier_version: str
    overrides: tuple[VerdictOverride, ...] = ()
    verification_id: int | None = None
    """The verification run that made it; older runs' verdicts stay in history."""

    @property
    def effective(self) -> Outcome:
        """The latest human override wins (domain.ladder.effective_outcome); the automated outcome
        stays visible beside it."""
        from domain.ladder import effective_outcome

        return Outcome(effective_outcome(self.outcome, [o.outcome for o in self.overrides]))


@dataclass(frozen=True, slots=True)
class Verification:
    """One verifier run over one attempt: the facts derived beside its five verdicts."""

    id: int
    attempt_id: int
    verifier: str
    verifier_version: str
    inputs_hash: str
    """SHA-256 over the evidence, the settings and the verifier version: same hash, same result."""
    at: str
    highest_level: int
    cause: FailureCause | None
    silent: bool
    over_claim: bool | None
    """The agent's expected level is above the highest verified one; None when it named none."""
    reference_attempt_id: int | None = None
    wall_seconds: float | None = None
    cost_dollars: float | None = None
    time_ratio: float | None = None
    """Wall time over the reference run's."""
    cost_ratio: float | None = None
    """Cost (chip-hours times price) over the reference run's."""
    current: bool = True
