"""What a report holds: counts that carry the ids of the records behind them.

Built by `workbench.report.build` from raw rows; rendered by the format modules. Every free
text in here is already redacted (and pseudonymised when asked).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from workbench.report.stats import RESAMPLES, SEED, wilson


@dataclass(frozen=True, slots=True)
class Count:
    """A number of records, and which ones."""

    ids: tuple[int, ...]
    table: str
    """The table the ids belong to: `attempt`, `intervention`, `migration`, ..."""

    @property
    def n(self) -> int:
        return len(self.ids)

    def json(self) -> dict[str, object]:
        return {"n": self.n, f"{self.table}_ids": list(self.ids)}


@dataclass(frozen=True, slots=True)
class Rate:
    """`part` out of `whole`; both carry their ids."""

    part: Count
    whole: Count

    @property
    def percent(self) -> float | None:
        return None if not self.whole.n else 100.0 * self.part.n / self.whole.n

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% Wilson score interval, in percent."""
        ci = wilson(self.part.n, self.whole.n)
        return None if ci is None else (100.0 * ci[0], 100.0 * ci[1])

    def json(self) -> dict[str, object]:
        ci = self.interval
        return {
            "n": self.part.n,
            "of": self.whole.n,
            "percent": None if self.percent is None else round(self.percent, 1),
            "wilson95_percent": None if ci is None else [round(ci[0], 1), round(ci[1], 1)],
            f"{self.part.table}_ids": list(self.part.ids),
            f"of_{self.whole.table}_ids": list(self.whole.ids),
        }


@dataclass(frozen=True, slots=True)
class Spread:
    """Median and range of values, each tied to the record it came from."""

    values: tuple[tuple[int, float], ...]
    """(id, value) pairs."""
    table: str
    interval: tuple[float, float] | None = None
    """The median's 95% bootstrap interval (workbench.report.stats.bootstrap_median)."""

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float | None:
        return statistics.median(v for _, v in self.values) if self.values else None

    @property
    def low(self) -> float | None:
        return min(v for _, v in self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(v for _, v in self.values) if self.values else None

    def json(self) -> dict[str, object]:
        return {
            "n": self.n,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "median_bootstrap95": None if self.interval is None else list(self.interval),
            "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "percentiles": [2.5, 97.5]},
            f"{self.table}_ids": [i for i, _ in self.values],
            "values": [v for _, v in self.values],
        }


@dataclass(slots=True)
class AttemptFacts:
    """One attempt as the report sees it (references included, flagged by `source`). Not frozen:
    a report makes one per attempt, and a frozen dataclass sets each of these 40 fields through
    `object.__setattr__`, which made this `__init__` 2.5x slower (15,000 attempts: ~70 ms)."""

    id: int
    migration_id: int
    seq: int
    source: str
    command: str
    claim: str
    status: str
    exit_code: int | None
    expected_level: int | None
    """The effective expected level: a reviewer's claim review, else the importer's rules
    (storage.queries.expected_level_of)."""
    expected_source: str | None
    """`reviewer`, `model` (an accepted extraction), `rule`, or None without a level."""
    verification_id: int | None
    level: int | None
    """Highest effective level (overrides count); None when not verified."""
    level_automated: int | None
    failed: bool
    failed_automated: bool
    silent: bool
    silent_automated: bool
    over_claim: bool
    over_claim_automated: bool
    passes_level1: bool
    """Its effective level-1 verdict passes: the run reached its end."""
    failure_id: int | None
    cause: str | None
    failure_note: str
    wall_seconds: float | None
    chip_hours: float | None
    cost_dollars: float | None
    time_ratio: float | None
    cost_ratio: float | None
    ladder: tuple[str | None, ...]
    """Effective outcome of levels 1-5 (`pass`, `fail`, `unknown`, None without a verdict)."""
    last_step: int | None = None
    """The highest step of any of its recorded metric series."""
    smoke: bool = False
    """It did not cover the reference run's steps: never a final run (workbench.report.final)."""
    goal_value: float | None = None
    """Its value of the migration's goal metric at that series' last step (what level 4 judges)."""
    untimed: bool = False
    """No wall time: neither the verifier's nor a start and an end time. Adds nothing to compute."""
    unpriced: bool = False
    """No cost because its accelerator has no price in the study. Adds nothing to compute cost."""
    rerun_of: int | None = None
    """For a re-run (source `rerun`): the agent attempt it re-ran."""
    levels_from_reruns: tuple[tuple[int, int], ...] = ()
    """(level, re-run id) for each level whose counted outcome a re-run gave (storage.counted)."""

    @property
    def is_rerun(self) -> bool:
        """A re-run is evidence about an agent attempt, not an attempt of the agent (storage.counted:
        a run with `rerun_of` set; a re-run stored without one counts as an attempt, as in the app)."""
        return self.rerun_of is not None

    @property
    def verified(self) -> bool:
        return self.verification_id is not None


@dataclass(slots=True)
class AttemptGroup(AttemptFacts):
    """Attempts of one migration that every count reads alike, as a report that shows no attempt's
    row counts them (storage.report.report_attempt_groups; workbench.report.PER_ATTEMPT_FORMATS):
    `id` and `seq` are the earliest one's, `wall_seconds`, `chip_hours` and `cost_dollars` their sums,
    `goal_value` the best of theirs, and what only one run can say (ratios, last step) None."""

    members: tuple[int, ...] = ()
    """The attempts' ids: every count holds each of them."""
    member_seqs: tuple[int, ...] = ()
    """Their seqs, in the same order (the HTML report draws a bar at each); empty in a report
    built without charts."""


@dataclass(frozen=True, slots=True)
class GoalValues:
    """The goal a reader can check: the target, and the values that met it or not, each with the
    attempt it came from."""

    metric: str
    direction: str
    """`max` or `min`: which way is better."""
    reference: float | None
    """The migration's goal value (the reference run's result it must reach)."""
    tolerance: float
    reference_attempt_id: int | None
    final_value: float | None
    final_attempt_id: int | None
    best_value: float | None
    """The best value of any verified attempt, in the goal's direction."""
    best_attempt_id: int | None
    best_seq: int | None

    def json(self) -> dict[str, object]:
        return {"metric": self.metric, "direction": self.direction, "reference_value": self.reference,
                "tolerance": self.tolerance, "reference_attempt_id": self.reference_attempt_id,
                "final_value": self.final_value, "final_attempt_id": self.final_attempt_id,
                "best_verified_value": self.best_value, "best_verified_attempt_id": self.best_attempt_id}


@dataclass(frozen=True, slots=True)
class InterventionRow:
    id: int
    migration_id: int
    attempt_id: int | None
    kind: str
    minutes: float
    note: str
    reviewer: str
    at: str
    corrects: int | None
    corrected_by: int | None

    @property
    def current(self) -> bool:
        return self.corrected_by is None


@dataclass(frozen=True, slots=True)
class DecisionRow:
    id: int
    migration_id: int
    kind: str
    reason: str
    reviewer: str
    at: str
    suggested: str | None = None
    """What the stopping rules suggested when it was made (docs/effort.md); None: no suggestion."""
    attempt_id: int | None = None
    """The attempt it was made on: an accept decision names the final run."""


@dataclass(frozen=True, slots=True)
class BudgetChangeRow:
    """A reviewer's edit of a migration's budgets (`budget_change`); the latest one is in force."""

    id: int
    migration_id: int
    compute_dollars: float | None
    staff_hours: float | None
    attempts: int | None
    calendar_days: float | None
    acceptance_level: int
    reason: str
    reviewer: str
    at: str


@dataclass(frozen=True, slots=True)
class OverrideRow:
    """A reviewer's override, once however many re-verifications carried it."""

    id: int
    """The reviewer's act (a re-verification's copy names it: `carried_from`)."""
    verdict_id: int
    """The current verdict it judges; one left behind (no longer counting), the superseded one."""
    attempt_id: int
    migration_id: int
    seq: int
    level: int
    automated: str
    outcome: str
    justification: str
    reviewer: str
    at: str
    effective: bool
    """The latest override of its verdict: the one that counts."""


@dataclass(frozen=True, slots=True)
class ReviewRow:
    id: int
    migration_id: int
    reviewer: str
    started_at: str
    active_seconds: float


@dataclass(frozen=True, slots=True)
class KindTotal:
    kind: str
    interventions: Count
    minutes: float


@dataclass(frozen=True, slots=True)
class Money:
    """Dollars, and the records they were summed from."""

    dollars: float
    sources: Count


@dataclass
class MigrationReport:
    id: int
    slug: str
    title: str
    status: str
    target: str
    attempts: Count
    verified: Count
    failed: Count
    failed_automated: Count
    silent: Count
    silent_automated: Count
    over_claims: Count
    over_claims_automated: Count
    stated_expectation: Count
    """Attempts whose agent named an expected level (verified or not)."""
    judged_expectation: Count
    """Verified attempts whose agent named an expected level: the over-claim denominator."""
    highest_level: int | None
    highest_level_automated: int | None
    highest_attempt_id: int | None
    goal_met: bool
    goal_met_automated: bool
    interventions: Count
    intervention_minutes: float
    by_kind: list[KindTotal]
    review: Count
    review_seconds: float
    decisions: list[DecisionRow]
    budget_changes: list[BudgetChangeRow]
    wall_hours: float
    chip_hours: float
    compute: Money
    llm: Money
    staff_hours: float
    staff_cost: float
    timed: Count
    """The runs whose own wall time `wall_hours` sums (a re-run standing in for its attempt is summed
    as itself)."""
    chip_timed: Count
    """The runs whose own chip-hours `chip_hours` sums."""
    untimed: Count
    unpriced: Count
    runs: Count
    """Agent attempts and re-runs: what compute is summed over."""
    reruns: Count
    reruns_confirming: Count
    """Verified re-runs that reached the same level as the attempt they re-ran and decided none of
    its levels."""
    reruns_changing: Count
    """The other verified re-runs: another level, or a level of the attempt decided."""
    decided_by_reruns: Count
    """Agent attempts with a level that a re-run decided (AttemptFacts.levels_from_reruns)."""
    final_attempt_id: int | None
    final_seq: int | None
    time_ratio: float | None
    cost_ratio: float | None
    reference_attempt_id: int | None
    goal_metric: str
    goal: GoalValues | None = None
    final_why_none: str | None = None
    """Why it has no final run (a code of workbench.report.final.WHY_NONE); None when it has one."""
    attempt_facts: list[AttemptFacts] = field(default_factory=list)
    """Its attempts and re-runs (not the reference runs), by seq."""
    loss: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """`reference` and `final` loss series, where they exist."""
    explanations: list[tuple[int, str]] = field(default_factory=list)
    """(seq, sentence) of each agent attempt's current `workbench explain` result (docs/explain.md)."""
    explained: list[dict[str, Any]] = field(default_factory=list)
    """The same, for the JSON export: seq, explained_by (a factor or None), commit (for code), sentence."""

    @property
    def total_cost(self) -> float:
        return self.compute.dollars + self.llm.dollars + self.staff_cost

    @property
    def faster(self) -> bool | None:
        return None if self.time_ratio is None else self.time_ratio < 1.0

    @property
    def cheaper(self) -> bool | None:
        return None if self.cost_ratio is None else self.cost_ratio < 1.0


@dataclass
class Totals:
    migrations: Count
    goal_met: Rate
    goal_met_automated: Rate
    interventions: Count
    attempts: Count
    verified: Count
    failed: Rate
    failed_automated: Rate
    silent: Rate
    silent_automated: Rate
    over_claims: Rate
    over_claims_automated: Rate
    stated_expectation: Rate
    time_ratios: Spread
    cost_ratios: Spread
    with_final_run: Count
    without_final_run: dict[str, Count]
    """Migrations without a final run, by the reason (workbench.report.final.WHY_NONE)."""
    faster: Rate
    """Migrations whose final run's time ratio is below 1, of those with a time ratio."""
    cheaper: Rate
    faster_and_cheaper: Rate
    intervention_minutes: float
    review_seconds: float
    staff_hours: float
    staff_cost: float
    wall_hours: float
    chip_hours: float
    compute: Money
    llm: Money
    untimed: Count
    """Attempts without times (AttemptFacts.untimed)."""
    unpriced: Count
    """Attempts on an accelerator without a price (AttemptFacts.unpriced)."""
    runs: Count
    reruns: Count
    reruns_confirming: Count
    reruns_changing: Count
    decided_by_reruns: Count

    @property
    def interventions_per_migration(self) -> float | None:
        return self.interventions.n / self.migrations.n if self.migrations.n else None

    @property
    def total_cost(self) -> float:
        return self.compute.dollars + self.llm.dollars + self.staff_cost


@dataclass
class StudyReport:
    slug: str
    title: str
    staff_hourly_rate: float
    prices: dict[str, float]
    migrations: list[MigrationReport]
    totals: Totals
    interventions: list[InterventionRow]
    overrides: list[OverrideRow]
    review_sessions: list[ReviewRow]
    llm_source: str
    """Where the LLM cost came from (the `llm_call` table, or why it is 0)."""
    llm_calls: list[tuple[int, int, float]] = field(default_factory=list)
    """(id, migration id, cost) of each model call counted in the LLM cost."""
    pseudonymised: bool = False
    final_rule: str = "accepted"
    """Which final-run rule the ratios use (workbench.report.final.RULES)."""
    selected: tuple[str, ...] = ()
    """The slugs asked for with --migration; empty for the whole study."""
    agreement: Any = None
    """Reviewer agreement (workbench/report/agreement.py): an AgreementReport, None without judgements."""
    attempt_texts: bool = True
    """The attempts carry their command, claim, failure note, status, expected source and cause;
    False: those are empty (or None), and only the formats that show none of them can be rendered
    (workbench.report.render)."""
    charts: bool = True
    """Each migration's `loss` was read, and each group's `member_seqs`; False: left empty, and html
    (which draws them) cannot be rendered."""
    per_attempt: bool = True
    """Each attempt has its facts; False: groups of alike attempts do (AttemptGroup), and only the
    formats that show no attempt's row can be rendered (workbench.report.render)."""
