"""A study's own settings: its price table, staff rate, reviewers and intervention kinds.

Re-exported by domain.models; kept apart so that the CLI's lists, which never read it, do not pay
for creating it (issue 19).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.pickling import pickled_by_fields


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

pickled_by_fields(Study)
