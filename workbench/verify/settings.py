"""What the verifier checks against: documented defaults, overridden per migration.

Overrides come from a migration's `[verify]` table (docs/verification.md) or from a reviewer
(`workbench verify DB --migration SLUG --set KEY=VALUE`); both are stored in
`verify_setting`, the latest record winning. Changing one re-verifies the migration's attempts
and keeps the old verdicts in history.
"""

from __future__ import annotations

import copy
import json
from typing import Any

DEFAULTS: dict[str, Any] = {
    # level 1
    "expected_steps": None,
    # level 2
    "rtol": 0.01,
    "atol": 1e-4,
    "window": 5,
    "end_rtol": None,
    "end_atol": None,
    "compare": ["loss", "train_loss", "grad_norm"],
    "compare_eval": True,
    "metrics": {},
    "tensor_rtol": 1e-3,
    "clip_share_tol": 0.1,
    # level 3
    "fallback_ignore": ["aten::_local_scalar_dense"],
    "warmup_steps": 10,
    "max_compiles_per_step": 0.5,
    "warmup_compiles": 10,
    # level 5
    "max_time_ratio": 1.0,
    "max_cost_ratio": 1.0,
    "max_host_syncs_per_step": 4.0,
    "max_sibling_step_ratio": 2.0,
    # extraction
    "patterns": [],
    "default_patterns": True,
    "metric_names": {},
}
"""Every setting and its default; docs/verification.md explains each."""

def merge(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults with the overrides applied; unknown keys are refused."""
    out = copy.deepcopy(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise ValueError(f"unknown verify setting {key!r} (known: {', '.join(sorted(DEFAULTS))})")
        out[key] = value
    return out


def tolerance(settings: dict[str, Any], metric: str, *, end: bool = False) -> tuple[float, float]:
    """(rtol, atol) for one metric: its own `metrics.NAME` table, else the global ones."""
    own = settings.get("metrics", {}).get(metric, {})
    rtol = own.get("rtol", settings["rtol"])
    atol = own.get("atol", settings["atol"])
    if end:
        rtol = own.get("end_rtol", settings["end_rtol"] if settings["end_rtol"] is not None else rtol)
        atol = own.get("end_atol", settings["end_atol"] if settings["end_atol"] is not None else atol)
    return float(rtol), float(atol)


def parse_assignment(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` from the command line; VALUE is JSON when it parses, else a string.

    `metrics.loss.rtol=0.05` sets one metric's own tolerance.
    """
    if "=" not in text:
        raise ValueError(f"expected KEY=VALUE, not {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def apply_assignment(overrides: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(overrides)
    parts = key.split(".")
    if parts[0] not in DEFAULTS:
        raise ValueError(f"unknown verify setting {parts[0]!r}")
    target = out
    for part in parts[:-1]:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise ValueError(f"{key!r}: {part!r} is not a table")
    target[parts[-1]] = value
    merge(out)
    return out
