"""The domain: what a study of agent-driven GPU-to-TPU migrations is made of.

Frozen dataclasses only; storage/ maps them to rows and back. Nothing here imports
Textual, Rich, git or torch.
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
    accelerator: str
    """Accelerator kind, a key of the study's price table, e.g. `tpu-v5e`."""
    chips: int
    runtime: str
    """e.g. `torch_xla`."""

    def describe(self) -> str:
        return f"{self.accelerator} x {self.chips}"


@dataclass(frozen=True, slots=True)
class Goal:
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
    kind: str
    count: int

    def describe(self) -> str:
        return f"{self.kind} x {self.count}"


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    step: int
    value: float


@dataclass(frozen=True, slots=True)
class Attempt:
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
class Failure:
    id: int
    attempt_id: int
    cause: FailureCause
    silent: bool
    """True when the run raised no error: exit 0 and no traceback, yet it failed."""
    note: str = ""
    evidence: tuple[Evidence, ...] = ()
    """The log lines or metric points behind the cause."""


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


@dataclass(frozen=True, slots=True)
class Intervention:
    id: int
    migration_id: int
    kind: str
    minutes: float
    note: str
    reviewer: str
    at: str
    attempt_id: int | None = None
    corrects: int | None = None
    """Id of the intervention this record corrects; the original stays in history."""


@dataclass(frozen=True, slots=True)
class Decision:
    id: int
    migration_id: int
    kind: DecisionKind
    reason: str
    figures: dict[str, float | int | None]
    """The budget figures at the moment of the decision."""
    reviewer: str
    at: str
    suggested: DecisionKind | None = None
    """What the stopping rules suggested at that moment."""
    attempt_id: int | None = None
    """The migration's latest attempt when the decision was made."""


@dataclass(frozen=True, slots=True)
class ReviewSession:
    id: int
    reviewer: str
    migration_id: int
    started_at: str
    active_seconds: float
    ended_at: str | None = None


@dataclass(frozen=True, slots=True)
class BudgetChange:
    """A reviewer's edit of a migration's budgets and acceptance level; the latest one wins over
    the bundle's figures."""

    id: int
    migration_id: int
    budgets: Budgets
    acceptance_level: int
    reason: str
    reviewer: str
    at: str


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


@dataclass(frozen=True, slots=True)
class Edit:
    """A change the agent made to a file before an attempt (Edit, Write, MultiEdit or Bash)."""

    tool: str
    file_path: str
    """Relative to the session's working directory when inside it, else as the agent wrote it."""
    old_text: str | None = None
    """Edit/MultiEdit: the replaced text; None for Write (whole file) and Bash."""
    new_text: str | None = None
    """Edit/MultiEdit: the replacement; Write: the whole new content; None for Bash."""
    replace_all: bool = False
    patch: str = ""
    """A unified-diff rendering when the transcript has one; for Bash, the command."""
    tool_use_id: str = ""
    at: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call kept as an attempt's context: what the agent did besides running the workload."""

    tool_use_id: str
    name: str
    input: str
    """The call's input as JSON, secrets redacted."""
    result: str = ""
    """The result's text, secrets redacted, cut to a few kilobytes."""
    is_error: bool = False
    called_at: str | None = None
    result_at: str | None = None
    agent_id: str | None = None
    """The sub-agent that made the call; None for the main session."""
    spawned_agent_id: str | None = None
    """For a Task/Agent call: the sub-agent it started."""
