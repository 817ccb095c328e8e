"""The reference's own noise, measured from replicates (the reference run again with other
seeds): the band a faithful run falls in, and a deviation in units of the replicates' spread.

The band is the two-sided 95% prediction interval for one more run drawn like the replicates:
mean ± t(0.975, n-1) x s x sqrt(1 + 1/n), s the replicates' sample standard deviation. It widens
for few replicates (t is 12.7 for 2, 2.78 for 5, 2.26 for 10), so 2 seeds say little and 5 say
enough to tell a backend's drift from a bug.

When the attempt is replicated too (m re-runs, `workbench rerun --repeat`), their mean is compared
and both spreads count: the variance is s_r^2 (1 + 1/n) + s_a^2 / m, the degrees of freedom
Welch-Satterthwaite's, and the deviation is in units of sqrt(s_r^2 + s_a^2 / m); with the reference
run once, the attempt's repeats alone give the band (s_a^2 (1 + 1/m), m-1 degrees), and none when
they never differ (a program that does not read its seed: the fixed tolerances decide).
docs/verification.md states it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

SEED = "WORKBENCH_SEED"
"""Each replicate's seed, 1 to N, in the environment (and in place of `{seed}` in the command):
projects that take a seed another way read it from there (docs/verification.md)."""

T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)
"""Student's t, two-sided 95% (0.975 quantile), for 1 to 30 degrees of freedom; 1.96 beyond."""


def t975(df: int) -> float:
    return T975[df - 1] if 1 <= df <= len(T975) else 1.96


@dataclass(frozen=True, slots=True)
class Band:
    """What n replicates (and m repeats of the attempt) say of one quantity."""

    n: int
    mean: float
    sd: float
    half: float
    """Half-width of the 95% interval around `mean` that a faithful value falls in."""
    m: int = 1
    """The attempt's runs whose mean is compared (1: the attempt alone)."""
    sd_attempt: float = 0.0

    def sigmas(self, value: float) -> float:
        """The deviation from the replicates' mean in units of their spread (inf when they do not
        spread and the value differs)."""
        gap = abs(value - self.mean)
        if self.sd > 0:
            return gap / self.sd
        return 0.0 if gap == 0 else math.inf

    def holds(self, value: float, atol: float) -> bool:
        """Within the band, widened by `atol` (replicates that never spread still allow rounding)."""
        return abs(value - self.mean) <= self.half + atol


def band(values: Sequence[float], attempt: Sequence[float] = ()) -> Band | None:
    """The band of two or more replicates' values, both spreads counted when the attempt's own
    repeats (`attempt`, two or more) are given; None when neither side has two."""
    n, m = len(values), len(attempt)
    if n < 2 and m < 2:
        return None
    if m < 2:
        sd = statistics.stdev(values)
        return Band(n, statistics.fmean(values), sd, t975(n - 1) * sd * math.sqrt(1 + 1 / n))
    sa = statistics.stdev(attempt)
    if n < 2:  # one reference run: the attempt's repeats alone spread (repeats that never differ measure nothing)
        if sa == 0:
            return None
        return Band(n, statistics.fmean(values), sa, t975(m - 1) * sa * math.sqrt(1 + 1 / m), m, sa)
    sr = statistics.stdev(values)
    a, b = sr * sr * (1 + 1 / n), sa * sa / m
    df = (a + b) ** 2 / (a * a / (n - 1) + b * b / (m - 1)) if a or b else n + m - 2
    return Band(n, statistics.fmean(values), math.sqrt(sr * sr + b), t975(max(1, int(df))) * math.sqrt(a + b), m, sa)
