"""Level 5's rules and the documented stand-ins, pure: the verifier (workbench/verify/timing.py)
applies them to what it measured, docs/verification.md states them.

- A stand-in is the backend a run may execute on in place of its target where the target cannot
  exist (XLA:CPU for a TPU, the local re-run backend's default): level 3 names it instead of
  failing the device kind, and level 5 does not read its clock against another kind's.
- Time and cost: one rule in both directions, on full-run wall time and cost.
- Siblings: an attempt far behind the best correct attempt of its migration is a finding.
"""

from __future__ import annotations

STAND_INS: dict[str, tuple[str, str]] = {"tpu": ("cpu", "XLA:CPU")}
"""Target family -> (the device kind that stands in for it, its name): torch_xla on the CPU
(`PJRT_DEVICE=CPU`, `CPU_NUM_DEVICES=N` virtual devices) stands in for N TPU chips."""


def family(kind: str) -> str:
    """`tpu` for `tpu-v5e`, `TPU` or `tpu_v4`; the kind itself, lowered, otherwise."""
    return kind.lower().replace("_", "-").split("-")[0]


def stand_in(intended_kind: str, observed_kind: str | None, on_xla: bool) -> str | None:
    """The stand-in's name when a run on `observed_kind` that executed on XLA (`on_xla`) stands in
    for `intended_kind`; None when it does not (another kind, or not on XLA: plain torch on the
    CPU stands in for nothing)."""
    if observed_kind is None or not on_xla:
        return None
    entry = STAND_INS.get(family(intended_kind))
    return entry[1] if entry is not None and family(observed_kind) == entry[0] else None


def time_cost_outcome(time_ratio: float, cost_ratio: float | None, max_time: float, max_cost: float) -> tuple[bool, str]:
    """(better, words): better when the time ratio is under `max_time` and the cost ratio under
    `max_cost`; without a cost ratio (no price) time alone decides, and the words say so. The same
    rule whichever way the run went."""
    words = f"time x{time_ratio:.2f}"
    if cost_ratio is None:
        better = time_ratio < max_time
        return better, (f"{words}, cost unknown (no price): time alone decides, "
                        + ("faster" if better else f"not faster (limit x{max_time:g})"))
    better = time_ratio < max_time and cost_ratio < max_cost
    words += f", cost x{cost_ratio:.2f}"
    if better:
        return True, f"{words}: better on both"
    return False, f"{words}: slower or costlier (limits x{max_time:g} time, x{max_cost:g} cost)"


def far_above(value: float, best: float, factor: float, slack: float = 0.0) -> bool:
    """`value` beyond `factor` times the best sibling's plus `slack`: the sibling rule (step time:
    factor 2; compilations: 1.5 times plus 2; host syncs: twice plus one, as the host-sync rule
    against the reference)."""
    return value > factor * best + slack
