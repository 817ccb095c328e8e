"""The report's cells and tables as data: a cell is a `V`, the raw value (written to CSV) and its
display text (everything else), so a number reads the same in every format.

Below workbench/report/tables.py and workbench/report/agreement.py, which both build tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class V:
    raw: Any
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Table:
    name: str
    """File stem in the CSV zip; id in HTML."""
    title: str
    headers: list[str]
    rows: list[list[V]] = field(default_factory=list)
    numeric: tuple[int, ...] = ()
    """Columns that hold numbers (right-aligned)."""
    note: str = ""
    wrap: tuple[int, ...] = ()
    """Columns of free text that may wrap (LaTeX sets them as tabularx X columns); ids, numbers
    and timestamps never wrap."""
    raw_rows: list[list[Any]] | None = None
    """Record-level tables (CSV only) hold their cells as the CSV writes them instead of `V` cells
    (workbench.report.tables.attempts_table): faster by far."""


def n(value: int | None) -> V:
    return V(value, "–" if value is None else str(value))


def num(value: float | None, digits: int = 2) -> V:
    return V(None if value is None else round(value, 6), "–" if value is None else f"{value:,.{digits}f}")


def pct(value: float | None) -> V:
    return V(None if value is None else round(value, 1), "–" if value is None else f"{value:.1f}%")


def interval(ci: tuple[float, float] | None, digits: int, unit: str = "") -> V:
    if ci is None:
        return V(None, "")
    return V(f"{ci[0]:.{digits}f}-{ci[1]:.{digits}f}", f"{ci[0]:.{digits}f}{unit}–{ci[1]:.{digits}f}{unit}")


def yes(value: bool | None) -> V:
    return V(value, "–" if value is None else ("yes" if value else "no"))


def s(value: str | None) -> V:
    return V(value or "", value or "")
