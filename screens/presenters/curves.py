"""Metric series as the curves pane draws them, and the largest deviations from the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Series:
    label: str
    points: dict[int, float]
    role: str
    """`attempt`, `other` (a compared attempt) or `reference`."""


@dataclass
class Curves:
    """The series of one or two attempts and the reference, per metric, and the tolerances."""

    metrics: list[str]
    series: dict[str, list[Series]] = field(default_factory=dict)
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)
    """(rtol, atol) per metric: the band is reference ± (atol + rtol·|reference|)."""
    blind: bool = False
    """The reviewer is blind to an attempt drawn (domain.blind.Sight): the curves against the
    tolerance (the band, the ×tol column) are level 2's verdict in all but name, so they go."""


def deviations(curves: Curves, limit: int = 20) -> list[tuple[str, int, float, float, float, float]]:
    """(metric, step, value, compared-with value, difference, difference / tolerance), worst
    first: the first series against the last (the reference, or the other attempt). Blind: no
    ratio (nan), the largest differences first."""
    out = []
    for name in curves.metrics:
        rows = curves.series.get(name) or []
        if len(rows) < 2:
            continue
        mine, base = rows[0].points, rows[-1].points
        rtol, atol = curves.tolerance.get(name, (0.0, 0.0))
        for step in sorted(mine.keys() & base.keys()):
            a, r = mine[step], base[step]
            if not (math.isfinite(a) and math.isfinite(r)):
                out.append((name, step, a, r, math.nan, math.nan if curves.blind else math.inf))
                continue
            band = atol + rtol * abs(r)
            ratio = abs(a - r) / band if band > 0 else (math.inf if a != r else 0.0)
            out.append((name, step, a, r, a - r, math.nan if curves.blind else ratio))
    # worst first: against the tolerance, or (blind) by the size of the difference alone
    column = 4 if curves.blind else 5
    out.sort(key=lambda d: -abs(d[column]) if not math.isnan(d[column]) else -math.inf)
    return out[:limit]


def fmt(value: float) -> str:
    """A value for an axis label or a table cell: four significant digits, or nan/inf."""
    return f"{value:.4g}" if math.isfinite(value) else str(value)
