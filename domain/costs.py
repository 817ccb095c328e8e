"""The one time and cost model: the verifier's level 5, the report and the stopping rules use it."""

from __future__ import annotations

import datetime


def parse_time(value: str | None) -> datetime.datetime | None:
    """An ISO 8601 timestamp (`Z` allowed; without a zone it is UTC); None when absent or bad."""
    if not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def span_seconds(started_at: str | None, ended_at: str | None) -> float | None:
    start, end = parse_time(started_at), parse_time(ended_at)
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def price_of(prices: dict[str, float], kind: str | None) -> float | None:
    if kind is None:
        return None
    lowered = {k.lower(): v for k, v in prices.items()}
    return lowered.get(kind.lower())


def chip_cost(started_at: str | None, ended_at: str | None, prices: dict[str, float], kind: str | None,
              chips: int | None) -> tuple[float | None, float | None]:
    """(wall seconds, dollars): wall hours x chips x the study's price per chip-hour for `kind`
    (case-insensitive); dollars None without a time, a price or a chip count. The one cost model:
    the verifier's level 5, the report and the stopping rules (domain.effort) use it."""
    wall = span_seconds(started_at, ended_at)
    price = price_of(prices, kind)
    if wall is None or price is None or chips is None:
        return wall, None
    return wall, wall / 3600.0 * chips * price
