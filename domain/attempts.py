"""An attempt and what hangs on it: its command, hardware, failure and evidence, and its row in
the attempt lists.

Re-exported by domain.models, where the rest of the code imports them from; they live here so that
`workbench migrations`, which reads none of them, does not pay for creating them (issue 19: each
frozen, slotted dataclass costs its generated methods' compilation at every start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.kinds import AttemptSource, AttemptStatus, FailureCause, Outcome
from domain.pickling import pickled_by_fields


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
    runs: int = 1
    """The attempt itself and its re-runs of its commit (storage.counted): more than one, and the
    ladder and over-claim are the counted ones, over its runs."""

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
class Run:
    """One run of an agent attempt (storage.runs.attempt_runs): the attempt itself or a re-run."""

    id: int
    seq: int
    source: AttemptSource
    status: AttemptStatus
    started_at: str | None
    commit: str
    counted: bool
    """Counted with the attempt: the attempt itself or a re-run of its commit, not one of
    `workbench explain`'s runs (each changes a factor on purpose: 1 device, other libraries,
    another commit)."""
    ladder: tuple[Outcome | None, ...]
    """The run's own effective outcomes, levels 1-5 (None: no verdict)."""
    hidden: bool = False
    """Blinded for the reviewer reading it (workbench.blind.runs_seen_by): no outcomes shown."""


pickled_by_fields(Command, Hardware, Attempt, Evidence, Failure, AttemptSummary)
