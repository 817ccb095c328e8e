"""Human effort: the intervention taxonomy, budgets and stopping rules, review-time sessions.

Pure domain logic: no SQL, no Textual. storage/ gathers the inputs (`EffortInputs`), this
module turns them into where a migration stands (`Standing`) and what the rules suggest.
docs/effort.md is the specification.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Any

from domain.costs import chip_cost, parse_time
from domain.models import Budgets, DecisionKind

DEFAULT_KINDS: dict[str, str] = {
    "approve_run": "approved a full (costly) run the agent asked for",
    "fix_environment": "fixed the environment: packages, drivers, TPU VM, credentials",
    "fix_code": "fixed code by hand",
    "hint": "gave the agent a hint or instruction",
    "revert": "reverted the agent's changes",
    "restart_session": "restarted the agent's session",
    "other": "anything else (say what in the note)",
}
"""The built-in intervention kinds; a study adds its own with `[interventions] kinds` in study.toml."""

MAX_MINUTES = 24 * 60
"""One intervention record covers at most a day; more is a typing error (record several)."""

IDLE_GAP_SECONDS = 120.0
"""Review time: a session closes after this long without input."""

SEGMENT_SECONDS = 300.0
"""An open review session is stored in pieces of at most this much active time, so a crash
loses at most this much."""

KIND_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def intervention_kinds(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The built-in kinds, then the study's own (name to description), `other` last."""
    kinds = {k: v for k, v in DEFAULT_KINDS.items() if k != "other"}
    for name, description in (extra or {}).items():
        kinds.setdefault(name, description)
    kinds["other"] = DEFAULT_KINDS["other"]
    return kinds


def valid_kind_name(name: str) -> bool:
    return bool(name) and len(name) <= 40 and set(name) <= KIND_NAME_CHARS and name[0].isalpha()


def parse_minutes(text: str | float | int) -> float:
    """Minutes as typed ("15", "7.5", "1:30" for an hour and a half); ValueError says what is wrong."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip()
        if not raw:
            raise ValueError("minutes: enter how many minutes it took (0 or more)")
        try:
            if ":" in raw:
                hours, _, minutes = raw.partition(":")
                value = int(hours) * 60 + float(minutes)
            else:
                value = float(raw)
        except ValueError:
            raise ValueError(f"minutes: {raw[:20]!r} is not a number of minutes") from None
    if not math.isfinite(value):
        raise ValueError("minutes: not a number of minutes")
    if value < 0:
        raise ValueError("minutes: must not be negative")
    if value > MAX_MINUTES:
        raise ValueError(f"minutes: {value:g} is more than a day ({MAX_MINUTES}); record each day separately")
    return round(value, 2)


def check_kind(kind: str, kinds: dict[str, str]) -> str:
    kind = kind.strip()
    if kind not in kinds:
        raise ValueError(f"kind: {kind[:40]!r} is not one of {', '.join(kinds)}")
    return kind


def estimate_cost(
    started_at: str | None, ended_at: str | None, kind: str | None, chips: int | None,
    prices: dict[str, float],
) -> float | None:
    """Wall time x chips x the price per chip-hour, the verifier's cost model
    (`domain.costs.chip_cost`); None when a time, the kind, chips or the price is
    missing; a negative span counts 0."""

    if not kind or not chips:
        return None
    _, dollars = chip_cost(started_at, ended_at, prices, kind, chips)
    return None if dollars is None else max(0.0, dollars)


@dataclass(frozen=True, slots=True)
class RunCost:
    """One recorded run of a migration, as far as cost goes."""

    attempt_id: int
    source: str
    dollars: float | None
    """The verifier's figure (wall time x chips x price), else estimated the same way here."""
    started_at: str | None = None


@dataclass(frozen=True, slots=True)
class EffortInputs:
    """What storage gathers for one migration; `standing()` needs nothing else but the time."""

    budgets: Budgets
    acceptance_level: int
    staff_hourly_rate: float
    runs: tuple[RunCost, ...]
    agent_attempts: int
    intervention_minutes: float
    review_seconds: float
    highest_level: int | None
    """The highest ladder level any (non-reference) attempt reached, overrides counted; None
    when no attempt is verified."""
    first_at: str | None
    """When work on the migration began: its first attempt, else its first human record."""
    latest_attempt_id: int | None = None
    latest_decision: str | None = None
    status: str = "in_progress"


@dataclass(frozen=True, slots=True)
class Limit:
    """One budget line: how much is used of how much."""

    name: str
    used: float
    budget: float | None
    unit: str

    @property
    def fraction(self) -> float | None:
        if self.budget is None:
            return None
        if self.budget <= 0:
            return math.inf if self.used > 0 else 1.0
        return self.used / self.budget

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.used >= self.budget

    @property
    def near(self) -> bool:
        f = self.fraction
        return f is not None and 0.8 <= f < 1.0


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a migration stands against its budgets and acceptance criterion, at `at`."""

    at: str
    compute_dollars: float
    unpriced_runs: int
    staff_minutes: float
    staff_dollars: float
    attempts: int
    days: float
    highest_level: int | None
    acceptance_level: int
    limits: tuple[Limit, ...]
    suggestion: DecisionKind
    reasons: tuple[str, ...]
    latest_attempt_id: int | None = None
    latest_decision: str | None = None
    status: str = "in_progress"
    hidden: bool = False
    """Blinded for the reviewer reading it (domain.blind.Sight.standing): no best level, no
    reasons, and the suggestion is not to be shown."""

    @property
    def staff_hours(self) -> float:
        return self.staff_minutes / 60.0

    def figures(self) -> dict[str, Any]:
        """What a decision record keeps of this moment (`decision.figures`)."""
        return {
            "compute_dollars": round(self.compute_dollars, 4),
            "unpriced_runs": self.unpriced_runs,
            "staff_hours": round(self.staff_hours, 4),
            "staff_dollars": round(self.staff_dollars, 2),
            "attempts": self.attempts,
            "days": round(self.days, 3),
            "highest_level": self.highest_level,
            "acceptance_level": self.acceptance_level,
            "budget_compute_dollars": self._budget("compute"),
            "budget_staff_hours": self._budget("staff"),
            "budget_attempts": None if (attempts := self._budget("attempts")) is None else int(attempts),
            "budget_calendar_days": self._budget("days"),
            "latest_attempt_id": self.latest_attempt_id,
        }

    def _budget(self, name: str) -> float | None:
        return next((lim.budget for lim in self.limits if lim.name == name), None)

    def needs_reason(self, kind: DecisionKind) -> bool:
        """A decision against the rules' suggestion must say why; a reviewer who may not see the
        suggestion always says why (whether a reason is asked would tell it)."""
        return self.hidden or kind is not self.suggestion


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def standing(inputs: EffortInputs, now: datetime.datetime | None = None) -> Standing:
    """The figures and the rules' suggestion.

    Accept when an attempt reached the acceptance level; else stop when any budget is used up;
    else continue. A migration already accepted or stopped keeps that as the suggestion only if
    the rules agree.
    """

    now = now or utcnow()
    compute = sum(r.dollars for r in inputs.runs if r.dollars is not None)
    unpriced = sum(1 for r in inputs.runs if r.dollars is None)
    staff_minutes = inputs.intervention_minutes + inputs.review_seconds / 60.0
    start = parse_time(inputs.first_at)
    days = max(0.0, (now - start).total_seconds() / 86400.0) if start else 0.0
    b = inputs.budgets
    limits = (
        Limit("compute", compute, b.compute_dollars, "$"),
        Limit("staff", staff_minutes / 60.0, b.staff_hours, "h"),
        Limit("attempts", float(inputs.agent_attempts), None if b.attempts is None else float(b.attempts), ""),
        Limit("days", days, b.calendar_days, "d"),
    )
    reasons: list[str] = []
    level = inputs.highest_level
    if level is not None and level >= inputs.acceptance_level:
        suggestion = DecisionKind.ACCEPT
        reasons.append(f"an attempt reached L{level}; L{inputs.acceptance_level} is required")
    else:
        exhausted = [lim for lim in limits if lim.exhausted]
        if exhausted:
            suggestion = DecisionKind.STOP
            reasons += [f"{describe_limit(lim)}: budget used up" for lim in exhausted]
        else:
            suggestion = DecisionKind.CONTINUE
            got = "no attempt verified yet" if level is None else f"best so far L{level}"
            reasons.append(f"{got}; L{inputs.acceptance_level} is required and budget remains")
        reasons += [f"{describe_limit(lim)}: over 80% used" for lim in limits if lim.near]
    return Standing(
        at=now.isoformat(timespec="milliseconds"),
        compute_dollars=compute,
        unpriced_runs=unpriced,
        staff_minutes=staff_minutes,
        staff_dollars=staff_minutes / 60.0 * inputs.staff_hourly_rate,
        attempts=inputs.agent_attempts,
        days=days,
        highest_level=level,
        acceptance_level=inputs.acceptance_level,
        limits=limits,
        suggestion=suggestion,
        reasons=tuple(reasons),
        latest_attempt_id=inputs.latest_attempt_id,
        latest_decision=inputs.latest_decision,
        status=inputs.status,
    )


def _amount(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:,.2f}"
    if unit == "":
        return f"{value:g}"
    return f"{value:.1f}{unit}"


def describe_limit(lim: Limit) -> str:
    names = {"compute": "compute", "staff": "staff time", "attempts": "attempts", "days": "calendar days"}
    used = _amount(lim.used, lim.unit)
    if lim.budget is None:
        return f"{names[lim.name]} {used} (no budget)"
    return f"{names[lim.name]} {used} of {_amount(lim.budget, lim.unit)}"


def parse_budget(text: str, name: str, *, integer: bool = False) -> float | int | None:
    """A budget as typed in a form: empty means no budget; ValueError says what is wrong."""
    raw = text.strip().lstrip("$")
    if not raw:
        return None
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{name}: {raw[:20]!r} is not {kind} (leave it empty for no budget)") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: must be 0 or more")
    return value


def check_acceptance_level(value: int | str) -> int:
    try:
        level = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"acceptance level: {str(value)[:20]!r} is not a level from 1 to 5") from None
    if not 1 <= level <= 5:
        raise ValueError("acceptance level: must be from 1 to 5")
    return level


# --------------------------------------------------------------------------- review time


@dataclass(frozen=True, slots=True)
class ReviewPiece:
    """A closed stretch of active review of one migration, ready to store."""

    migration_id: int
    started_at: str
    ended_at: str
    active_seconds: float


@dataclass
class _Open:
    migration_id: int
    first: float
    last: float
    wall_first: datetime.datetime


@dataclass
class Sessionizer:
    """Turns input times into review sessions: active time is from a session's first input to
    its last; a gap of `idle_gap` seconds without input closes it, so a terminal left open
    overnight counts nothing. Times are monotonic seconds; wall-clock times are only labels.
    """

    idle_gap: float = IDLE_GAP_SECONDS
    segment: float = SEGMENT_SECONDS
    _open: _Open | None = field(default=None, init=False)

    def touch(self, migration_id: int | None, t: float, wall: datetime.datetime | None = None) -> list[ReviewPiece]:
        """Input at monotonic time `t` while the reviewer looks at `migration_id` (None: no migration)."""
        wall = wall or utcnow()
        closed = self.tick(t)
        cur = self._open
        if cur is not None and cur.migration_id != migration_id:
            closed += self._close()
            cur = None
        if migration_id is None:
            return closed
        if cur is None:
            self._open = _Open(migration_id, t, t, wall)
        else:
            cur.last = t
            if cur.last - cur.first >= self.segment:
                closed += self._close()
                self._open = _Open(migration_id, t, t, wall)
        return closed

    def tick(self, t: float) -> list[ReviewPiece]:
        """Close the open session if its last input is `idle_gap` or more before `t`."""
        if self._open is not None and t - self._open.last >= self.idle_gap:
            return self._close()
        return []

    def close(self) -> list[ReviewPiece]:
        """Close whatever is open (the app is quitting)."""
        return self._close()

    @property
    def open_seconds(self) -> float:
        return 0.0 if self._open is None else self._open.last - self._open.first

    def _close(self) -> list[ReviewPiece]:
        cur, self._open = self._open, None
        if cur is None or cur.last <= cur.first:
            return []
        active = cur.last - cur.first
        end = cur.wall_first + datetime.timedelta(seconds=active)
        return [ReviewPiece(
            cur.migration_id,
            cur.wall_first.isoformat(timespec="milliseconds"),
            end.isoformat(timespec="milliseconds"),
            round(active, 3),
        )]


# --------------------------------------------------------------------------- the records
# Interventions, decisions, review sessions and budget changes as stored (storage.queries reads
# them); here rather than in domain/models.py, which the CLI's lists load at every start (issue 19).


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
    """The attempt decided on (the one on screen, `decide --attempt`), else the latest when it was made."""


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
