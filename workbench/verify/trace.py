"""Findings from the probe's training trace: what a run did, whatever it printed (issue 35).

The probe (workbench/probe/inject/workbench_probe.py, docs/rerun.md) records per step and per
process what a program never prints: optimizer steps, the runtime it imported, parameter
checksums and input fingerprints per replica, compilations per phase. Each rule here reads that
trace and names a cause with its figures; a run without a trace gives no finding here (the log
rules still apply). docs/verification.md says what each rests on.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass
from typing import Any

from domain.models import Evidence, FailureCause
from domain.performance import family
from workbench.probe import ProbeFacts, main_report, series

ACCELERATOR_RUNTIMES = ("torch_xla", "torchax", "torch_tpu")
"""Runtimes that put tensors on an accelerator; a target naming one is not met by plain torch."""
CHECKSUM_RTOL = 1e-4
"""Replicas whose parameter sums differ by more than this (relative) at the same step are out of
sync: data-parallel replicas apply the same averaged update and stay equal to float rounding."""
CLIP_RTOL = 1e-3
"""A gradient norm within this (relative) of its clip bound is at the bound: clip_grad_norm_ scales
by bound / (norm + 1e-6), so a clipped norm sits just under it."""
MIN_SAMPLED = 3
"""Sampled steps (the probe keeps per-replica norms on steps 1-3 and every 10th) that must agree
before 'the optimizer applies one replica's own gradient' is said."""
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


def no_step_seen(probes: list[ProbeFacts], reports: list[dict[str, Any]]) -> str | None:
    """A traced run in which no process took a training step (no optimizer step, no backward
    followed by an update): the trace's rules had nothing to check, and the verdicts say so rather
    than reading as a clean trace. An optimizer built and never stepped is its own finding."""
    if not probes and not reports:
        return None
    if any(p.steps != 0 for p in probes) or optimizer_not_stepped(probes) is not None:
        return None
    return (f"the probe's trace saw no training step in {max(len(probes), len(reports))} process(es) "
            f"(no optimizer step, no backward followed by an update): its rules checked nothing")


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


def _by_step(report: dict[str, Any], name: str) -> dict[int, Any]:
    values = report.get(name)
    out = {}
    for step, value in (values.items() if isinstance(values, dict) else ()):
        try:
            out[int(step)] = value
        except ValueError:
            continue
    return out


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def _clipped_replicas(report: dict[str, Any]) -> list[tuple[int, list[list]]]:
    """Steps at which one process clipped several of its replicas' gradients (clips on the devices
    whose gradient norms it kept per replica), each clip active and each replica's norm after it at
    the bound, with the norms before it (before the reduction) not all equal."""
    replicas = _by_step(report, "replica_grad_norm")
    steps = []
    for step, clips in sorted(_by_step(report, "clips").items()):
        norms = replicas.get(step)
        if not isinstance(norms, dict) or not isinstance(clips, list):
            continue
        mine = [c for c in clips if isinstance(c, list) and len(c) == 4 and c[0] in norms]
        if len(mine) < 2 or len(mine) < len(norms):
            continue
        active = all(float(c[1]) > float(c[2]) * (1 + CLIP_RTOL) for c in mine)
        at_bound = all(_close(float(norms[c[0]]), float(c[2]), CLIP_RTOL) for c in mine)
        differ = not all(_close(float(c[1]), float(mine[0][1]), CLIP_RTOL) for c in mine)
        if active and at_bound and differ:
            steps.append((step, mine))
    return steps


def clip_before_reduce(reports: list[dict[str, Any]]) -> Finding | None:
    """Level 2: each replica's gradients were clipped to the bound before the replicas' gradients
    were reduced, so the update applied is the mean of clipped gradients, not the clipped mean
    (the study's 86.53% -> 84.89%). Seen where one process drives the replicas (its clips on the
    replicas' devices, each replica's norm at the bound as the optimizer steps, their norms before
    clipping different), and across the processes of one world (each process's clip active and
    made before its step's first collective, the norms before clipping different)."""
    for report in reports:
        if not isinstance(report, dict):
            continue
        steps = _clipped_replicas(report)
        if steps:
            step, clips = steps[0]
            applied = series(report, ("grad_norm",)).get("grad_norm", {}).get(step)
            norms = ", ".join(f"{float(c[1]):.4g}" for c in clips)
            text = (f"gradients clipped before the cross-replica reduction: at step {step} each of "
                    f"{len(clips)} replicas' gradients was clipped to {float(clips[0][2]):g} (norms before "
                    f"clipping {norms}), then averaged"
                    + (f": the update applied has norm {applied:.4g}" if applied is not None else "")
                    + f"; {len(steps)} step(s) sampled show it")
            return Finding(2, FailureCause.CLIP_BEFORE_REDUCE, text,
                           [Evidence("probe", str(report.get("_file") or "probe report"), text[:300])])
    replicas = _replicas(reports)
    early = [{step: c for step, clips in _by_step(r, "clips").items() if isinstance(clips, list)
              for c in clips[:1] if isinstance(c, list) and len(c) == 4 and c[3] and float(c[1]) > float(c[2]) * (1 + CLIP_RTOL)}
             for r in replicas]
    if len(early) < 2 or any(not e for e in early) or not any(r.get("collectives") or r.get("reducers") for r in replicas):
        return None
    common = sorted(set.intersection(*(set(e) for e in early)))
    for step in common:
        norms = [float(e[step][1]) for e in early]
        if not all(_close(v, norms[0], CLIP_RTOL) for v in norms):
            text = (f"gradients clipped before the cross-replica reduction: at step {step} each of {len(norms)} "
                    f"processes clipped its own gradients to {float(early[0][step][2]):g} (norms "
                    f"{', '.join(f'{v:.4g}' for v in norms)}) before its first collective")
            return Finding(2, FailureCause.CLIP_BEFORE_REDUCE, text,
                           [Evidence("probe", str(r.get("_file") or "probe report"), f"clip at step {step}: "
                                     f"norm {float(e[step][1]):.6g}, bound {float(e[step][2]):g}, before any reduction")
                            for r, e in zip(replicas[:4], early[:4])])
    return None


def no_gradient_reduction(reports: list[dict[str, Any]]) -> Finding | None:
    """Level 3: the replicas' gradients are never reduced. Where one process drives the replicas:
    the norm the optimizer applies (before its own clip, if any) is one replica's own at every step
    sampled while the replicas' norms differ. Across the processes of one world: no collective
    and no reducer (DDP, xm.reduce_gradients) in any of them, and their parameters drift apart."""
    for report in reports:
        if not isinstance(report, dict):
            continue
        replicas = _by_step(report, "replica_grad_norm")
        applied = dict(series(report, ("grad_norm",)).get("grad_norm", {}))
        for step, clips in _by_step(report, "clips").items():   # the optimizer's own clip: its norm before
            own = [c for c in clips if isinstance(c, list) and len(c) == 4 and c[0] not in (replicas.get(step) or {})]
            if own:
                applied[step] = float(own[0][1])
        matched = []
        for step, norms in sorted(replicas.items()):
            if not isinstance(norms, dict) or len(norms) < 2 or step not in applied:
                continue
            values = {d: float(v) for d, v in norms.items()}
            if all(_close(v, next(iter(values.values())), CLIP_RTOL) for v in values.values()):
                continue
            same = [d for d, v in values.items() if _close(v, applied[step], 1e-5)]
            matched.append((step, same[0] if len(same) == 1 else None, values))
        if len(matched) >= MIN_SAMPLED and all(d is not None and d == matched[0][1] for _, d, _ in matched):
            step, device, values = matched[0]
            text = (f"no gradient reduction: the optimizer applies replica {device}'s own gradient (norm "
                    f"{applied[step]:.6g} at step {step}; the {len(values)} replicas' norms "
                    f"{', '.join(f'{v:.4g}' for v in values.values())}) at all {len(matched)} steps sampled")
            return Finding(3, FailureCause.NO_GRADIENT_REDUCTION, text,
                           [Evidence("probe", str(report.get("_file") or "probe report"), text[:300])])
    replicas = _replicas(reports)
    if len(replicas) < 2 or any("collectives" not in r for r in replicas):
        return None
    if any(r.get("collectives") or r.get("reducers") for r in replicas):
        return None
    drift = replicas_out_of_sync(reports)
    if drift is None:
        return None
    text = (f"no gradient reduction: {len(replicas)} processes of world size {replicas[0]['world_size']} made "
            f"no collective call and had no reducer (DDP, xm.reduce_gradients) in "
            f"{max(int(r.get('steps') or 0) for r in replicas)} steps; {drift.reason}")
    return Finding(3, FailureCause.NO_GRADIENT_REDUCTION, text, drift.evidence)


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


def float64_on_tpu(probes: list[ProbeFacts], intended_kind: str | None) -> Finding | None:
    """Level 5: float64 parameters where a TPU is intended: a TPU has no float64 unit and XLA
    emulates it with float32 pairs, several times slower (level 5 says so on the stand-in, whose
    CPU computes float64 natively)."""
    if not intended_kind or family(intended_kind) != "tpu":
        return None
    for p in probes:
        if "float64" in p.param_dtypes:
            text = (f"float64 parameters ({', '.join(p.param_dtypes)}) on {intended_kind}: a TPU emulates "
                    f"float64, several times slower than float32")
            return Finding(5, FailureCause.FLOAT64_EMULATED, text, [_ev(p, text)])
    return None


def findings(probes: list[ProbeFacts], reports: list[dict[str, Any]], runtime: str | None,
             reference: list[dict[str, Any]] | None = None, intended_kind: str | None = None) -> list[Finding]:
    """Every fault the run's trace shows, lowest level first; with the reference's reports, where
    the two traces differ too (`compare`)."""
    unreduced = no_gradient_reduction(reports)   # names the cause of the drift out of sync: one finding
    found = [optimizer_not_stepped(probes), clip_before_reduce(reports), runtime_missing(probes, runtime, reports),
             unreduced or replicas_out_of_sync(reports), replicas_same_data(reports), recompiles_per_evaluation(probes),
             float64_on_tpu(probes, intended_kind)]
    kept = [f for f in found if f is not None]
    kept += compare(reports, reference or [], runtime, {f.cause for f in kept})
    return sorted(kept, key=lambda f: f.level)


# --------------------------------------------------------------------------- the reference's trace against the run's


LR_RTOL = 1e-6
"""Learning rates that differ by more than this (relative) differ beyond float rounding."""
PHASE_COMPILES = (1.5, 2)
"""A phase compiling more than 1.5 times the reference's count plus 2 recompiles (the siblings' rule)."""


def _lr_schedule(report: dict[str, Any]) -> dict[int, list[float | None]]:
    """Step -> each param group's learning rate, at step 1 and each step where it changed."""
    out: dict[int, list[float | None]] = {}
    values = report.get("lr")
    for step, lrs in (values.items() if isinstance(values, dict) else ()):
        try:
            out[int(step)] = [float(v) if isinstance(v, (int, float)) else None for v in lrs]
        except (TypeError, ValueError):
            continue
    return out


def _lr_at(schedule: dict[int, list[float | None]], changes: list[int], step: int) -> list[float | None]:
    k = bisect.bisect_right(changes, step) - 1
    return schedule[changes[k]] if k >= 0 else []


def lr_schedule_differs(run: dict[str, Any], ref: dict[str, Any], steps: int) -> Finding | None:
    """Level 2: the first optimizer step (of those both took) whose learning rate differs beyond
    float rounding in a param group both have: another schedule trains another model."""
    mine, theirs = _lr_schedule(run), _lr_schedule(ref)
    if not mine or not theirs:
        return None
    at_mine, at_theirs = sorted(mine), sorted(theirs)
    for step in sorted({s for s in (*at_mine, *at_theirs) if s <= steps}):
        a, r = _lr_at(mine, at_mine, step), _lr_at(theirs, at_theirs, step)
        for group, (x, y) in enumerate(zip(a, r)):
            if x is None or y is None or abs(x - y) <= LR_RTOL * max(abs(x), abs(y)):
                continue
            text = (f"learning-rate schedule differs: lr {x:.6g} at step {step} against the reference's {y:.6g}"
                    + (f" (param group {group})" if len(a) > 1 else ""))
            return Finding(2, FailureCause.LR_SCHEDULE_DIFFERS, text, [_report_ev(run, f"lr at step {step}: {a}"),
                                                                        _report_ev(ref, f"reference lr at step {step}: {r}")])
    return None


def _report_ev(report: dict[str, Any], text: str) -> Evidence:
    return Evidence("probe", str(report.get("_file") or "probe report"), text[:300])


def effective_batch(report: dict[str, Any]) -> tuple[float, int, str] | None:
    """(samples per optimizer step, the first step, how it was counted): the median over steps of
    the step's first training input's first dimension times the backward calls before the step
    (gradient accumulation), times the processes of the world where each is a replica (under SPMD
    the input is the global batch already)."""
    sizes = series(report, ("batch_size", "backward_calls"))
    batch, calls = sizes.get("batch_size", {}), sizes.get("backward_calls", {})
    if not batch:
        return None
    world = report.get("world_size")
    replicas = world if isinstance(world, int) and world > 1 and not report.get("spmd") else 1
    per_step = {s: b * calls.get(s, 1.0) * replicas for s, b in batch.items()}
    first = min(per_step)
    how = (f"{batch[first]:g} per forward x {calls.get(first, 1.0):g} backward call(s)"
           + (f" x {replicas} replicas" if replicas > 1 else ""))
    return statistics.median(per_step.values()), first, how


def steps_differ(run: dict[str, Any], ref: dict[str, Any]) -> Finding | None:
    """Level 2: the run took another number of optimizer steps than the reference (an optimizer
    stepping every other iteration, a changed batch per step over the same data)."""
    mine, theirs = _count(run.get("steps")), _count(ref.get("steps"))
    if not mine or not theirs or mine == theirs:
        return None
    text = f"optimizer steps differ: {mine} optimizer steps against the reference's {theirs}"
    a, r = effective_batch(run), effective_batch(ref)
    if a is not None and r is not None and a[0] != r[0]:
        text += f" ({a[0]:g} samples per step against {r[0]:g})"
    return Finding(2, FailureCause.OPTIMIZER_STEPS_DIFFER, text,
                   [_report_ev(run, f"steps: {mine} ({run.get('step_source') or 'optimizer'})"),
                    _report_ev(ref, f"reference steps: {theirs}")])


def batch_differs(run: dict[str, Any], ref: dict[str, Any]) -> Finding | None:
    """Level 3: the same number of optimizer steps, each over another number of samples (a
    per-replica batch not divided by the replicas, a batch changed by the port)."""
    a, r = effective_batch(run), effective_batch(ref)
    if a is None or r is None or a[0] == r[0]:
        return None
    text = (f"effective batch differs: {a[0]:g} samples per optimizer step against the reference's {r[0]:g} "
            f"(step {a[1]}: {a[2]}; the reference's: {r[2]})")
    return Finding(3, FailureCause.BATCH_SIZE_DIFFERS, text,
                   [_report_ev(run, f"batch_size at step {a[1]}: {a[2]}"),
                    _report_ev(ref, f"reference batch_size at step {r[1]}: {r[2]}")])


def _phase(report: dict[str, Any], name: str, key: str) -> int | None:
    phases = report.get("phases")
    phase = phases.get(name) if isinstance(phases, dict) else None
    value = phase.get(key) if isinstance(phase, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def modes_differ(run: dict[str, Any], ref: dict[str, Any]) -> Finding | None:
    """Level 2: the modules' training flag differs from the reference's over the same steps: a
    port that trains in eval mode (dropout and batch-norm statistics off: it left training mode
    fewer times and ran more than twice the reference's share of forwards in eval mode, or never
    ran one in training mode), or evaluates in training mode (never in eval mode where the
    reference was). Evaluating more or less often is not a fault of the modes."""
    mine, theirs = run.get("eval_phases"), ref.get("eval_phases")
    train = (_phase(run, "train", "forwards"), _phase(ref, "train", "forwards"))
    evals = (_phase(run, "eval", "forwards"), _phase(ref, "eval", "forwards"))
    if None in train or None in evals or not isinstance(mine, int) or not isinstance(theirs, int):
        return None
    share = [e / (t + e) if t + e else 0.0 for t, e in zip(train, evals)]  # type: ignore[operator]
    trains_in_eval = (train[1] and not train[0]) or (mine < theirs and share[0] > 2 * share[1])
    if not trains_in_eval and not (theirs and not mine):
        return None
    text = (f"training and evaluation modes differ: the modules entered eval mode {mine} time(s) against the "
            f"reference's {theirs}, with {share[0]:.0%} of forwards in eval mode against {share[1]:.0%}")
    if not train[0]:
        text += " (it never ran a forward in training mode)"
    return Finding(2, FailureCause.MODE_DIFFERS, text,
                   [_report_ev(run, f"eval_phases {mine}; forwards: train {train[0]}, eval {evals[0]}"),
                    _report_ev(ref, f"reference eval_phases {theirs}; forwards: train {train[1]}, eval {evals[1]}")])


def host_placement(run: dict[str, Any]) -> Finding | None:
    """Level 3: some of the optimizer's parameters on the host (`cpu`) beside others on a device:
    each step moves them. All of them on the host is a design (a master copy the host averages
    into, replicas on the devices), or no accelerator at all (`no_accelerator_runtime`)."""
    devices = run.get("param_devices")
    if not isinstance(devices, list) or "cpu" not in devices or all(d == "cpu" for d in devices):
        return None
    text = f"parameters on the host: the optimizer's parameters lived on {', '.join(map(str, devices))}"
    return Finding(3, FailureCause.HOST_PLACEMENT, text, [_report_ev(run, f"param_devices {devices}")])


def phase_compiles(run: dict[str, Any], ref: dict[str, Any]) -> Finding | None:
    """Level 3: a phase (training or evaluation) compiled far more often than the reference's
    (both on XLA): more than 1.5 times its count plus 2."""
    if not isinstance(run.get("xla_metrics"), dict) or not isinstance(ref.get("xla_metrics"), dict):
        return None
    factor, slack = PHASE_COMPILES
    for name in ("train", "eval"):
        mine, theirs = _phase(run, name, "compiles"), _phase(ref, name, "compiles")
        if mine is not None and theirs is not None and mine > factor * theirs + slack:
            text = (f"recompiles in {'training' if name == 'train' else 'evaluation'}: {mine} compilations against "
                    f"the reference's {theirs}")
            return Finding(3, FailureCause.RECOMPILATION, text,
                           [_report_ev(run, f"phases.{name}.compiles {mine}"),
                            _report_ev(ref, f"reference phases.{name}.compiles {theirs}")])
    return None


def non_finite_values(run: dict[str, Any], ref: dict[str, Any] | None) -> Finding | None:
    """Level 1: the loss the trace fetched turned NaN or infinite (where the reference's is finite
    at that step); level 2: the optimizer applied a non-finite gradient where the reference's
    stayed finite (a loss scaler's skipped steps never reach the optimizer's step hook)."""
    for name, level in (("loss", 1), ("grad_norm", 2)):
        step = _first_bad(run, name)
        if step is None or (ref is None and level == 2):
            continue
        theirs = _first_bad(ref, name) if ref is not None else None
        if theirs is not None and theirs <= step:
            continue
        value = series(run, (name,)).get(name, {}).get(step, math.nan)
        word = "NaN" if math.isnan(value) else "infinite"
        known = series(ref, (name,)).get(name, {}).get(step) if ref is not None else None
        text = (f"the trace's {name} is {word} from step {step}"
                + (f" where the reference's is {known:.6g}" if known is not None else ""))
        return Finding(level, FailureCause.NON_FINITE, text, [_report_ev(run, f"{name} at step {step}: {value}")])
    return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _first_bad(report: dict[str, Any], name: str) -> int | None:
    bad = report.get("first_non_finite")
    step = bad.get(name) if isinstance(bad, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def compare(reports: list[dict[str, Any]], reference: list[dict[str, Any]], runtime: str | None,
            found: set[FailureCause]) -> list[Finding]:
    """Where the run's trace differs from the reference's (each process's main report): the
    learning-rate schedule, optimizer steps, samples per step, modes, placement, compilations
    per phase, non-finite values. `found`: the causes the run's own trace gave (a batch read by
    every replica is not also a batch of another size)."""
    run, ref = main_report(reports), main_report(reference)
    if run is None:
        return []
    out = [non_finite_values(run, ref)]
    if FailureCause.NO_ACCELERATOR_RUNTIME not in found:   # all on the host: that fault, not another
        out.append(host_placement(run))
    if ref is not None and FailureCause.OPTIMIZER_NOT_STEPPED not in found:
        steps = min(_count(run.get("steps")), _count(ref.get("steps")))
        differ = steps_differ(run, ref)
        out += [differ, lr_schedule_differs(run, ref, steps), phase_compiles(run, ref)]
        if differ is None:   # over other steps, batches and evaluations differ by that
            out += [modes_differ(run, ref)]
            if FailureCause.REPLICAS_SAME_DATA not in found:
                out.append(batch_differs(run, ref))
    return [f for f in out if f is not None and (f.cause not in found or f.cause is FailureCause.NON_FINITE)]
