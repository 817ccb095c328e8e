"""Findings from the probe's training trace: what a run did, whatever it printed (issue 35).

The probe (workbench/probe/inject/workbench_probe.py, docs/rerun.md) records per step and per
process what a program never prints: optimizer steps, the runtime it imported, parameter
checksums and input fingerprints per replica, compilations per phase. Each rule here reads that
trace and names a cause with its figures; a run without a trace gives no finding here (the log
rules still apply). docs/verification.md says what each rests on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from domain.models import Evidence, FailureCause
from workbench.probe import ProbeFacts, series

ACCELERATOR_RUNTIMES = ("torch_xla", "torchax", "torch_tpu")
"""Runtimes that put tensors on an accelerator; a target naming one is not met by plain torch."""
CHECKSUM_RTOL = 1e-4
"""Replicas whose parameter sums differ by more than this (relative) at the same step are out of
sync: data-parallel replicas apply the same averaged update and stay equal to float rounding."""
MIN_EVALUATIONS = 3
"""Evaluations seen before 'a compile at every evaluation' is said (the first one always compiles)."""


@dataclass(frozen=True)
class Finding:
    """One fault the trace shows: the level it fails, its cause and the figures behind it."""

    level: int
    cause: FailureCause
    reason: str
    evidence: list[Evidence]


def _ev(p: ProbeFacts, text: str) -> Evidence:
    return Evidence("probe", p.where, text[:300])


def optimizer_not_stepped(probes: list[ProbeFacts]) -> Finding | None:
    """Level 1: an optimizer was built and backward ran, but no optimizer step was ever taken."""
    for p in probes:
        if p.steps == 0 and (p.optimizers_made or 0) > 0 and (p.trailing_backward_calls or 0) > 0:
            text = (f"the optimizer never stepped: {p.trailing_backward_calls} backward calls, "
                    f"0 optimizer steps ({p.optimizers_made} optimizer(s) built)")
            return Finding(1, FailureCause.OPTIMIZER_NOT_STEPPED, text, [_ev(p, text)])
    return None


def runtime_missing(probes: list[ProbeFacts], runtime: str | None,
                    reports: list[dict[str, Any]]) -> Finding | None:
    """Level 3: the target names an accelerator runtime, and the run trained without it: plain
    torch imported, or torch_xla imported with nothing executed on an XLA device."""
    if not runtime or runtime not in ACCELERATOR_RUNTIMES:
        return None
    training = [p for p in probes if p.steps]
    plain = [p for p in training if p.runtime == "torch"]
    if training and len(plain) == len(training):
        text = f"trained on plain torch: no accelerator runtime imported ({runtime} intended)"
        return Finding(3, FailureCause.NO_ACCELERATOR_RUNTIME, text, [_ev(plain[0], text)])
    for report in reports:
        xm = report.get("xla_metrics")
        if isinstance(xm, dict) and report.get("steps") and xm.get("executions") == 0 and xm.get("compiles") == 0:
            text = (f"imported torch_xla but compiled and executed nothing on an XLA device in "
                    f"{report.get('steps')} steps")
            return Finding(3, FailureCause.NO_ACCELERATOR_RUNTIME, text,
                           [Evidence("probe", str(report.get("_file") or "probe report"), text)])
    return None


def _replicas(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reports of processes that trained as replicas of one world (world size above 1). Processes
    that each report world size 1 are not replicas: level 3 names that wrong configuration, and
    their equal batches or drifting parameters are its effect, not another fault."""
    return [r for r in reports if isinstance(r, dict) and not r.get("idle") and r.get("steps")
            and isinstance(r.get("world_size"), int) and r["world_size"] > 1]


def replicas_out_of_sync(reports: list[dict[str, Any]]) -> Finding | None:
    """Level 3: replicas' parameter checksums differ at the same step after the first: their
    gradients were never averaged, so each trained its own model."""
    replicas = _replicas(reports)
    sums = [series(r, ("param_checksum",)).get("param_checksum", {}) for r in replicas]
    if len(sums) < 2:
        return None
    common = sorted(set.intersection(*(set(s) for s in sums)) - {1})
    if not common:
        return None
    step = common[-1]
    values = [s[step] for s in sums]
    spread = max(values) - min(values)
    scale = max(abs(v) for v in values) or 1.0
    if not all(math.isfinite(v) for v in values) or spread / scale <= CHECKSUM_RTOL:
        return None
    text = (f"replicas out of sync: parameter sums at step {step} differ across {len(values)} processes "
            f"({min(values):.6g} to {max(values):.6g}): gradients are not averaged across replicas")
    return Finding(3, FailureCause.REPLICAS_OUT_OF_SYNC, text,
                   [Evidence("probe", str(r.get("_file") or "probe report"), f"param_checksum at step {step}: "
                             f"{s[step]:.9g}") for r, s in zip(replicas[:4], sums[:4])])


def replicas_same_data(reports: list[dict[str, Any]]) -> Finding | None:
    """Level 3: every replica's input at each step is the same batch: the work is repeated, not split."""
    replicas = _replicas(reports)
    prints = [series(r, ("batch_fingerprint",)).get("batch_fingerprint", {}) for r in replicas]
    if len(prints) < 2:
        return None
    common = sorted(set.intersection(*(set(p) for p in prints)))
    if len(common) < 3:
        return None
    if any(len({p[step] for p in prints}) > 1 for step in common):
        return None
    text = (f"replicas read the same data: the {len(prints)} processes' input batches are identical at all "
            f"{len(common)} steps compared")
    return Finding(3, FailureCause.REPLICAS_SAME_DATA, text,
                   [Evidence("probe", str(r.get("_file") or "probe report"),
                             f"batch_fingerprint at step {common[0]}: {p[common[0]]:.9g}")
                    for r, p in zip(replicas[:4], prints[:4])])


def recompiles_per_evaluation(probes: list[ProbeFacts]) -> Finding | None:
    """Level 3: evaluation compiles at (nearly) every evaluation, where a stable program compiles
    its evaluation graph once and reuses it."""
    for p in probes:
        evals = p.eval_phases or 0
        compiles = dict(p.compiles_by_phase).get("eval")
        if compiles is not None and evals >= MIN_EVALUATIONS and compiles >= evals:
            text = (f"compiles at every evaluation: {compiles} compilations in {evals} evaluations "
                    f"(training: {dict(p.compiles_by_phase).get('train', 0)})")
            return Finding(3, FailureCause.RECOMPILATION, text, [_ev(p, text)])
    return None


def findings(probes: list[ProbeFacts], reports: list[dict[str, Any]], runtime: str | None) -> list[Finding]:
    """Every fault the run's trace shows, lowest level first."""
    found = [optimizer_not_stepped(probes), runtime_missing(probes, runtime, reports),
             replicas_out_of_sync(reports), replicas_same_data(reports), recompiles_per_evaluation(probes)]
    return sorted((f for f in found if f is not None), key=lambda f: f.level)
