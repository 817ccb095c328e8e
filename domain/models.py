"""The domain: what a study of agent-driven GPU-to-TPU migrations is made of.

Frozen dataclasses only; storage/ maps them to rows and back. Nothing here imports
Textual, Rich, git or torch. The CLI's lists load this module at every start, and each dataclass
costs its creation (issue 19): records the lists never read live beside their topic
(domain/verdicts.py, domain/effort.py, domain/transcript.py), and every class has a docstring
(dataclass otherwise works one out from its signature at every import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class MigrationStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    ACCEPTED = "accepted"
    STOPPED = "stopped"


class AttemptSource(StrEnum):
    AGENT = "agent"
    RERUN = "rerun"
    REFERENCE = "reference"


class AttemptStatus(StrEnum):
    """How an execution ended, as far as the record shows (see the transcript notes)."""

    OK = "ok"
    NONZERO_EXIT = "nonzero_exit"
    INTERRUPTED = "interrupted"
    BACKGROUNDED = "backgrounded"
    BLOCKED = "blocked"
    NO_RESULT = "no_result"


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"


class Direction(StrEnum):
    MAX = "max"
    MIN = "min"


class DecisionKind(StrEnum):
    CONTINUE = "continue"
    ACCEPT = "accept"
    STOP = "stop"


class FailureCause(StrEnum):
    """The failure taxonomy; docs/failure-taxonomy.md defines each cause."""

    ENVIRONMENT = "environment"
    API_MISUSE = "api_misuse"
    RECOMPILATION = "recompilation"
    CPU_FALLBACK = "cpu_fallback"
    HOST_SYNC = "host_sync"
    NUMERICAL_MISMATCH = "numerical_mismatch"
    WRONG_CONFIGURATION = "wrong_configuration"
    OUT_OF_MEMORY = "out_of_memory"
    TIMEOUT = "timeout"
    GOAL_NOT_MET = "goal_not_met"
    INCOMPLETE = "incomplete"
    CRASH = "crash"
    SLOWER_OR_COSTLIER = "slower_or_costlier"
    OTHER = "other"


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
class Study:
    """One study: its price table, staff rate, reviewers and intervention kinds."""

    slug: str
    title: str
    prices: dict[str, float] = field(default_factory=dict)
    """Dollars per chip-hour by accelerator kind."""
    staff_hourly_rate: float = 0.0
    reviewers: tuple[str, ...] = ()
    intervention_kinds: dict[str, str] = field(default_factory=dict)
    """The study's own intervention kinds (name to description) beside the built-in ones."""


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
class Command:
    """How a run was started: its argv, working directory and the environment that matters."""

    argv: tuple[str, ...]
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    """Only the environment that matters to the run (PJRT_DEVICE and the like)."""

    def display(self) -> str:
        import shlex

        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        line = shlex.join(self.argv)
        return f"{prefix} {line}" if prefix else line


@dataclass(frozen=True, slots=True)
class Hardware:
    """Accelerators of one kind and how many."""

    kind: str
    count: int

    def describe(self) -> str:
        return f"{self.kind} x {self.count}"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution of the project: the agent's, a re-run of one, or the reference run."""

    id: int
    migration_id: int
    seq: int
    source: AttemptSource
    commit: str
    command: Command
    status: AttemptStatus
    started_at: str | None = None
    ended_at: str | None = None
    exit_code: int | None = None
    exit_code_source: str | None = None
    """Where the exit code came from: process, transcript, task_output, task_notification."""
    expected_level: int | None = None
    """The ladder level the agent said it expected; None when it said nothing checkable."""
    claim: str = ""
    intended_hardware: Hardware | None = None
    observed_hardware: Hardware | None = None
    log_id: int | None = None
    rerun_of: int | None = None
    """Id of the attempt this one re-ran."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """A pointer into what a verdict rests on: a log line, a metric point or a probe field."""

    kind: str
    """`log_line`, `metric`, `probe`, `record` (a field of the attempt record) or `tensor`."""
    ref: str
    """1-based line number, `name@step`, field name or tensor name."""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an attempt failed, by the taxonomy (docs/failure-taxonomy.md)."""

    id: int
    attempt_id: int
    cause: FailureCause
    silent: bool
    """True when the run raised no error: exit 0 and no traceback, yet it failed."""
    note: str = ""
    evidence: tuple[Evidence, ...] = ()
    """The log lines or metric points behind the cause."""


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


@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """One row of the migration screen and of `workbench attempts`."""

    attempt: Attempt
    ladder: tuple[Outcome | None, ...]
    """Effective outcome per level 1-5; None where no verdict exists yet."""
    failure: Failure | None
    interventions: int
    over_claim: bool | None = None
    """From the current verification: the agent expected more than was verified."""
    hidden: bool = False
    """Blinded for the reviewer reading it (domain.blind.blinded): the claim, expected level,
    outcomes and cause are blanked, not absent."""

    @property
    def highest_level(self) -> int:
        """The highest L for which levels 1 to L all pass; 0 when level 1 does not."""
        level = 0
        for outcome in self.ladder:
            if outcome is not Outcome.PASS:
                break
            level += 1
        return level
