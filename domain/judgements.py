"""Reviewers' judgements of attempts (docs/judgements.md): the record types and the deal of a
review queue. The agreement statistics are domain/agreement.py's: `workbench queue DB` loads this
module at every start and needs none of them (issue 19); `random` loads inside the deal for the
same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.models import FailureCause, Outcome

LEVELS = (1, 2, 3, 4, 5)


@dataclass(frozen=True, slots=True)
class HumanJudgement:
    """One reviewer's word on one attempt, level by level. A changed mind is a new record whose
    `supersedes` names the old one; the old one stays, as history."""

    id: int
    attempt_id: int
    reviewer: str
    levels: tuple[Outcome, ...]
    """Outcome per level, level 1 first; `unknown` is "can't tell"."""
    cause: FailureCause | None
    note: str
    blind: bool
    """The claim, the verifier's verdicts and earlier judgements were hidden when it was given."""
    active_seconds: float
    at: str
    supersedes: int | None = None

    def outcome(self, level: int) -> Outcome:
        return self.levels[level - 1]


@dataclass(frozen=True, slots=True)
class QueueItem:
    """An attempt dealt to a reviewer, and whether the reviewer has judged it yet."""

    assignment_id: int
    attempt_id: int
    migration: str
    seq: int
    blind: bool
    done: bool
    source: str = "agent"
    """The attempt's source (agent or rerun; reference runs are never dealt)."""

    @property
    def key(self) -> tuple[str, int]:
        """Where it stands in the queue's order (migration slug, seq): the keyset of its pages."""
        return self.migration, self.seq


def parse_levels(text: str) -> tuple[Outcome, ...]:
    """`pass,pass,fail,unknown,unknown` (one outcome per level; `?` means unknown)."""
    parts = [p.strip().lower() for p in text.split(",")]
    if len(parts) != len(LEVELS):
        raise ValueError(f"levels: give {len(LEVELS)} outcomes, one per level, e.g. pass,pass,fail,unknown,unknown")
    out = []
    for part in parts:
        part = "unknown" if part == "?" else part
        if part not in {o.value for o in Outcome}:
            raise ValueError(f"levels: {part[:40]!r} is not pass, fail or unknown")
        out.append(Outcome(part))
    return tuple(out)


def check_cause(levels: Sequence[Outcome], cause: str | None) -> FailureCause | None:
    """A cause is a name from the failure taxonomy, and only goes with a failing level."""
    if cause is None:
        return None
    try:
        found = FailureCause(cause.strip().lower())
    except ValueError:
        known = ", ".join(c.value for c in FailureCause)
        raise ValueError(f"cause: {cause[:40]!r} is not in the failure taxonomy ({known})") from None
    if Outcome.FAIL not in levels:
        raise ValueError("cause: no level fails; a cause goes with a failing level")
    return found


def missing_cause(levels: Sequence[Outcome], cause: str | None) -> str | None:
    """What to ask when a level fails and no cause is given ("" never: None when nothing is
    missing). A judgement may be saved so (the reviewer may not know), but not without a word:
    agreement on causes is measured only where both sides name one."""
    failing = [f"L{n}" for n, o in enumerate(levels, 1) if o is Outcome.FAIL]
    if cause or not failing:
        return None
    return (f"cause: {', '.join(failing)} {'fails' if len(failing) == 1 else 'fail'} with no cause"
            " (docs/failure-taxonomy.md; 'other' if none fits)")


def check_deal(reviewers: Sequence[str], overlap: float) -> None:
    if not reviewers or any(not r.strip() for r in reviewers):
        raise ValueError("reviewers: name at least one reviewer, comma-separated")
    if len(set(reviewers)) != len(reviewers):
        raise ValueError("reviewers: a reviewer is named twice")
    if not 0.0 <= overlap <= 1.0:
        raise ValueError("overlap: a fraction from 0 to 1")
    if overlap > 0 and len(reviewers) < 2:
        raise ValueError("overlap: judging an attempt twice needs at least two reviewers")


def deal(attempt_ids: Sequence[int], reviewers: Sequence[str], overlap: float, seed: int) -> list[tuple[int, str]]:
    """(attempt id, reviewer) pairs: every attempt to one reviewer, `round(overlap * n)` of them
    to two, each to whoever has the fewest so far (ties in a seeded order), so loads differ by
    at most one. The attempts are shuffled by `random.Random(seed)`: same seed, same deal."""
    import random

    check_deal(reviewers, overlap)
    rng = random.Random(seed)
    items = sorted(attempt_ids)
    rng.shuffle(items)
    order = list(reviewers)
    rng.shuffle(order)
    rank = {name: i for i, name in enumerate(order)}
    load = dict.fromkeys(reviewers, 0)
    doubled = round(overlap * len(items))
    out = []
    for index, item in enumerate(items):
        chosen = sorted(reviewers, key=lambda r: (load[r], rank[r]))[: 2 if index < doubled else 1]
        for name in chosen:
            load[name] += 1
            out.append((item, name))
    return sorted(out)
