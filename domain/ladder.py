"""The ladder's rules, written once: the level an attempt reached and whether its claim over-reaches.

The verifier, the report and the screens use these; storage/queries.py states the same rules in
SQL for counts over a whole study, and tests/test_ladder_rules.py checks that both agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

LEVELS = (1, 2, 3, 4, 5)


def highest_level(outcomes: Mapping[int, str]) -> int:
    """The highest L whose levels 1 to L all pass; 0 when level 1 does not pass (or is missing)."""
    level = 0
    for n in LEVELS:
        if outcomes.get(n) != "pass":
            break
        level = n
    return level


def over_claim(expected: int | None, outcomes: Mapping[int, str], *, verified: bool = True) -> bool | None:
    """True when the agent expected more than the attempt reached and a level it expected fails;
    False when it reached its expected level; None when unknown: no expected level, no verdicts,
    or the levels it fell short at are unknown, not failed (unknown is not below expectation: an
    attempt with no evidence at all is not an over-claim)."""
    if expected is None or not verified:
        return None
    if highest_level(outcomes) >= expected:
        return False
    return True if any(outcomes.get(n) == "fail" for n in LEVELS if n <= expected) else None


def effective_outcome(automated: str, overrides: Sequence[str] = ()) -> str:
    """A verdict's outcome as every count uses it: the latest override (`overrides` oldest
    first) wins over the verifier's; storage's EFFECTIVE_VERDICTS says the same in SQL."""
    return overrides[-1] if overrides else automated


def counted_outcome(runs: Sequence[tuple[int, str | None, int | None]]) -> str | None:
    """One level's outcome for an agent attempt over its runs (the attempt and its re-runs), as
    every count takes it; storage.counted says the same in SQL. `runs` holds, per run, (its seq,
    its outcome at the level: the latest override's where `override_id` names one, else the
    verifier's, None without a verdict; override_id). A reviewer's override on any run wins (the
    latest by id); else the latest run (by seq) that passed or failed; else the latest run's
    unknown; None when no run has a verdict."""
    best: tuple[int, int] | None = None
    outcome: str | None = None
    for seq, value, override_id in runs:
        if value is None:
            continue
        key = (2, override_id) if override_id is not None else ((1, seq) if value in ("pass", "fail") else (0, seq))
        if best is None or key > best:
            best, outcome = key, value
    return outcome
