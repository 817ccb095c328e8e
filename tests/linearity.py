"""Linear time shown without a time limit: the same work on an input four times as long must take
less than eight times as long (a quadratic one takes sixteen), plus a margin for a busy machine.
Measured again, best of five, before it fails."""

from __future__ import annotations

import time
from collections.abc import Callable


def seconds(run: Callable[[], object], repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def grows_linearly(run: Callable[[int], object], n: int, margin: float = 0.05) -> bool:
    """True when run(4n) takes under 8x run(n) + margin seconds (rechecked, best of five)."""
    small, large = seconds(lambda: run(n)), seconds(lambda: run(4 * n))
    if large > 8 * small + margin:
        small, large = seconds(lambda: run(n), 5), seconds(lambda: run(4 * n), 5)
    return large <= 8 * small + margin
