"""What a model call costs: dollars per million tokens, by model.

Anthropic bills four kinds of tokens separately: input (not read from or written to the prompt
cache), output, cache writes (5-minute cache, 1.25x input) and cache reads (hits). The usage
block of every answer reports all four; `cost` prices them.

The table is the public price list as of 2026-11 (platform.claude.com, "Pricing"). Prices change:
point `WORKBENCH_ASSIST_PRICES` at a TOML file to override or extend it, one table per model:

    [models."claude-sonnet-5-5"]
    input = 2.0          # $ per million input tokens
    output = 10.0        # $ per million output tokens
    cache_write = 2.5    # $ per million tokens written to the prompt cache (5 minutes)
    cache_read = 0.1     # $ per million tokens read from the prompt cache

A model with no price is still called; its calls record tokens and a NULL cost, and the
commands say that the cost was not counted.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from domain.errors import WorkbenchError


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    """Writing to the 5-minute prompt cache."""
    cache_read: float
    """A prompt-cache hit."""


PRICES: dict[str, Price] = {
    "claude-opus-5-5": Price(4.00, 20.00, 5.00, 0.20),
    "claude-opus-5": Price(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-8": Price(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-7": Price(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-6": Price(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-5": Price(5.00, 25.00, 6.25, 0.50),
    "claude-sonnet-5-5": Price(2.00, 10.00, 2.50, 0.10),
    "claude-sonnet-5": Price(2.00, 10.00, 2.50, 0.20),
    "claude-sonnet-4-6": Price(3.00, 15.00, 3.75, 0.30),
    "claude-sonnet-4-5": Price(3.00, 15.00, 3.75, 0.30),
    "claude-haiku-5-5": Price(0.10, 0.50, 0.125, 0.01),
    "claude-haiku-4-5": Price(1.00, 5.00, 1.25, 0.10),
}
"""Dollars per million tokens by model id (dated ids such as `claude-haiku-4-5-20251001` fall back
to their undated name). Haiku 5.5 is priced at its band for prompts up to 100k tokens, which is
all this workbench sends."""

_DATED = re.compile(r"-\d{8}$")


def load_prices(path: Path | None = None) -> dict[str, Price]:
    """The built-in table, with the TOML file at `path` (or `WORKBENCH_ASSIST_PRICES`) over it."""
    if path is None:
        env = os.environ.get("WORKBENCH_ASSIST_PRICES")
        if not env:
            return dict(PRICES)
        path = Path(env)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot read the model price table ({exc})") from None
    table = dict(PRICES)
    for model, fields in (data.get("models") or {}).items():
        try:
            table[model] = Price(*(float(fields[k]) for k in ("input", "output", "cache_write", "cache_read")))
        except (KeyError, TypeError, ValueError):
            raise WorkbenchError(
                f"{path}: models.{model} needs numbers input, output, cache_write and cache_read"
            ) from None
    return table


def price_for(model: str, prices: dict[str, Price]) -> Price | None:
    return prices.get(model) or prices.get(_DATED.sub("", model))


def cost(price: Price | None, *, input_tokens: int, output_tokens: int, cache_write_tokens: int = 0,
         cache_read_tokens: int = 0) -> float | None:
    """Dollars for one call; None when the model has no price."""
    if price is None:
        return None
    return (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_write_tokens * price.cache_write
        + cache_read_tokens * price.cache_read
    ) / 1_000_000
