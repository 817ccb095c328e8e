"""What the assist features store and show: plain frozen dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LlmCall:
    """One recorded call (a row of `llm_call`)."""

    id: int
    at: str
    purpose: str
    """`claim` or `brief`."""
    model: str
    input_hash: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    """None when the model has no price in the table."""
    response: dict | None
    error: str | None
    migration_id: int | None = None
    attempt_id: int | None = None


@dataclass(frozen=True, slots=True)
class ClaimExtraction:
    """What a model read from an attempt's claim. Advisory until a reviewer accepts it."""

    id: int
    attempt_id: int
    llm_call_id: int
    model: str
    expected_level: int | None
    success_claimed: bool
    sentence: str | None
    quote_found: bool
    """The sentence occurs in the claim text (whitespace aside): the model did not invent it."""
    at: str


@dataclass(frozen=True, slots=True)
class ClaimReview:
    id: int
    attempt_id: int
    action: str
    """`accept` (a model extraction) or `correct`."""
    expected_level: int | None
    reviewer: str
    at: str
    extraction_id: int | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class ExpectedLevel:
    """The expected level reports count for an attempt, and where it came from."""

    level: int | None
    source: str | None
    """`reviewer` (a correction), `model` (an accepted extraction), `rule` (the importer's rules),
    or None when nothing gave a level."""


@dataclass(frozen=True, slots=True)
class CostTotal:
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    unpriced_calls: int
    """Calls whose model had no price: their tokens are counted, their dollars are not."""
    by_purpose: dict[str, float] = field(default_factory=dict)
