"""The final run of a migration, defined once (docs/report.md, "Final run").

Every time and cost ratio in a report, their median and range, and the faster / cheaper counts
come from final runs only; a migration without one says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.report.model import AttemptFacts, DecisionRow

ACCEPTED = "accepted"
"""Default rule: the attempt that the migration's latest accept decision names."""
LAST_PASSING = "last-passing"
"""The earlier rule, on request: the last verified attempt whose effective level 1 passes."""
RULES = (ACCEPTED, LAST_PASSING)

RULE_TEXT = {
    ACCEPTED: "the attempt named by the migration's latest accept decision, if it covered the reference"
              " run's steps",
    LAST_PASSING: "the last verified attempt that passed level 1 (--final last-passing)",
}

WHY_NONE = {
    "stopped": "stopped",
    "in_progress": "in progress",
    "smoke": "accepted a smoke run",
    "unnamed": "accepted without naming an attempt",
    "not_passing": "no verified attempt passed level 1",
}
"""Why a migration has no final run: reason code -> words shown in every format."""


@dataclass(frozen=True, slots=True)
class FinalRun:
    attempt: AttemptFacts | None
    why_none: str | None
    """A `WHY_NONE` code when there is no final run."""


def is_smoke(last_step: int | None, reference_last_step: int | None) -> bool:
    """A run whose last recorded step is short of the reference run's: it did not cover the
    reference's steps. With no step recorded while the reference has some, its coverage is not
    shown and it counts as a smoke run too; without a reference step nothing is a smoke run."""
    if reference_last_step is None:
        return False
    return last_step is None or last_step < reference_last_step


def final_run(rule: str, status: str, decisions: Sequence[DecisionRow],
              facts: Sequence[AttemptFacts]) -> FinalRun:
    """The migration's final run under `rule` (one of `RULES`)."""
    if rule == LAST_PASSING:
        last = next((a for a in reversed(facts) if a.verified and a.passes_level1), None)
        return FinalRun(last, None if last else "not_passing")
    if rule != ACCEPTED:
        raise ValueError(f"unknown final-run rule {rule!r} (known: {', '.join(RULES)})")
    if status != "accepted":
        return FinalRun(None, "stopped" if status == "stopped" else "in_progress")
    accept = next((d for d in reversed(decisions) if d.kind == "accept"), None)
    named = None if accept is None else next((a for a in facts if a.id == accept.attempt_id), None)
    if named is None:
        return FinalRun(None, "unnamed")
    if named.smoke:
        return FinalRun(None, "smoke")
    return FinalRun(named, None)
