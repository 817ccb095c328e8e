"""Uncertainty as a paper reports it (docs/report.md, "Intervals"): Wilson score intervals for
rates, seeded percentile-bootstrap intervals for medians. Small and exact, no dependency."""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence
from itertools import repeat

Z95 = 1.959963984540054
"""The standard normal's 97.5th percentile."""
RESAMPLES = 2000
SEED = 15
"""Fixed: the same data gives the same interval."""


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of k successes in n trials, as fractions; None when n is 0."""
    if n <= 0:
        return None
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_median(values: Sequence[float], *, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float] | None:
    """The 2.5th and 97.5th percentiles (inclusive method) of the medians of `resamples`
    resamples with replacement, drawn by `random.Random(seed)` as its `choices` draws them; None
    without values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0], values[0]
    pick = values.__getitem__
    medians = [statistics.median(map(pick, draw)) for draw in _draws(len(values), resamples, seed)]
    cuts = statistics.quantiles(medians, n=40, method="inclusive")
    return cuts[0], cuts[-1]


@functools.lru_cache(maxsize=2)
def _draws(n: int, resamples: int, seed: int) -> tuple[list[int], ...]:
    """The positions `random.Random(seed).choices(values, k=n)` draws, `resamples` times: they depend on
    the number of values alone, so a report's time and cost ratios (the same final runs) draw once."""
    random_ = random.Random(seed).random
    scale = float(n)  # as `choices` does
    return tuple([math.floor(random_() * scale) for _ in repeat(None, n)] for _ in range(resamples))
