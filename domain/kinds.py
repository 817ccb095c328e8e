"""The closed vocabularies of a study: migration and attempt states, sources, outcomes, decisions
and failure causes.

Below domain.models, domain.attempts and domain.study, which all use them (domain.models hands them
out too, where the rest of the code imports them from).
"""

from __future__ import annotations

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
    NO_ACCELERATOR_RUNTIME = "no_accelerator_runtime"
    REPLICAS_SAME_DATA = "replicas_same_data"
    OPTIMIZER_NOT_STEPPED = "optimizer_not_stepped"
    REPLICAS_OUT_OF_SYNC = "replicas_out_of_sync"
    NON_FINITE = "non_finite"
    HANG_AT_EXIT = "hang_at_exit"
    BATCH_UNDERSPLIT = "batch_undersplit"
    LR_SCHEDULE_DIFFERS = "lr_schedule_differs"
    OPTIMIZER_STEPS_DIFFER = "optimizer_steps_differ"
    BATCH_SIZE_DIFFERS = "batch_size_differs"
    MODE_DIFFERS = "mode_differs"
    HOST_PLACEMENT = "host_placement"
    FLOAT64_EMULATED = "float64_emulated"
    CLIP_BEFORE_REDUCE = "clip_before_reduce"
    NO_GRADIENT_REDUCTION = "no_gradient_reduction"
    OTHER = "other"
