"""The domain: what a study of agent-driven GPU-to-TPU migrations is made of.

Frozen dataclasses only; storage/ maps them to rows and back. Nothing here imports
Textual, Rich, git or torch. The CLI's lists load this module at every start, and each dataclass
costs its creation (issue 19): records the lists never read live beside their topic
(domain/verdicts.py, domain/effort.py, domain/transcript.py), and every class has a docstring
(dataclass otherwise works one out from its signature at every import). An attempt's records
(domain/attempts.py) and the study's settings (domain/study.py) are still imported from here, but
created only when first asked for: `workbench migrations` reads neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from domain.kinds import (  # noqa: F401  (handed out from here too)
    AttemptSource,
    AttemptStatus,
    DecisionKind,
    Direction,
    FailureCause,
    MigrationStatus,
    Outcome,
)
from domain.pickling import pickled_by_fields

if TYPE_CHECKING:  # re-exported below, created on first use
    from domain.attempts import Attempt, AttemptSummary, Command, Evidence, Failure, Hardware  # noqa: F401
    from domain.study import Study  # noqa: F401


LADDER = {
    1: "runs",
    2: "matches reference",
    3: "intended hardware",
    4: "project goal",
    5: "time and cost",
}
"""The study's acceptance ladder, level to short name."""


@dataclass(frozen=True, slots=True)
class Target:
    """The hardware a migration aims at: accelerator kind, chips and runtime."""

    accelerator: str
    """Accelerator kind, a key of the study's price table, e.g. `tpu-v5e`."""
    chips: int
    runtime: str
    """e.g. `torch_xla`."""

    def describe(self) -> str:
        return f"{self.accelerator} x {self.chips}"


@dataclass(frozen=True, slots=True)
class Goal:
    """The metric a migration must reach: the value to meet, which way is better, the slack allowed."""

    metric: str
    reference: float
    direction: Direction
    tolerance: float
    """Absolute slack allowed on the wrong side of the reference value."""

    def met_by(self, value: float) -> bool:
        if self.direction is Direction.MAX:
            return value >= self.reference - self.tolerance
        return value <= self.reference + self.tolerance


@dataclass(frozen=True, slots=True)
class Budgets:
    """Limits a migration is stopped against; None means no limit."""

    compute_dollars: float | None = None
    staff_hours: float | None = None
    attempts: int | None = None
    calendar_days: float | None = None


@dataclass(frozen=True, slots=True)
class Migration:
    """One project's migration from GPU to TPU code, with its target, goal and budgets."""

    id: int
    slug: str
    title: str
    repo: str
    """Path of the git repository holding the original and the migrated code."""
    base_commit: str
    """The original GPU code."""
    target: Target
    goal: Goal
    budgets: Budgets
    status: MigrationStatus
    acceptance_level: int = 4


@dataclass(frozen=True, slots=True)
class MigrationSummary:
    """One row of the study screen and of `workbench migrations`."""

    migration: Migration
    attempts: int
    failed: int
    silent_failures: int
    interventions: int
    highest_level: int | None
    over_claims: int = 0
    """Attempts whose agent expected a higher level than the one verified."""
    cost_dollars: float | None = None
    """Compute cost of the verified attempts so far; None when none has a cost yet."""
    hidden: bool = False
    """Blinded for the reviewer reading it (domain.blind.blinded_migration): it holds an
    attempt they judge blind, so its verdict counts are blanked."""


pickled_by_fields(Target, Goal, Budgets, Migration, MigrationSummary)


_ELSEWHERE = {
    "Attempt": "domain.attempts", "AttemptSummary": "domain.attempts", "Command": "domain.attempts",
    "Evidence": "domain.attempts", "Failure": "domain.attempts", "Hardware": "domain.attempts",
    "Study": "domain.study",
}
"""The records this module hands out from the modules that define them (PEP 562)."""


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
