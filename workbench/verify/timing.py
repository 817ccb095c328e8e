"""Level 5 and what it rests on: full-run wall time and cost against the reference's, the run's
time broken down (start-up, compilation, steady step time, device busy share, transfers and
host syncs per step), and the findings that fail it whatever the clock says (abnormal host
syncs, far behind the best correct sibling). The rules themselves are domain/performance.py's;
docs/verification.md states them.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from domain.costs import chip_cost, price_of
from domain.models import Evidence, FailureCause, Hardware, Outcome, Study
from domain.performance import far_above, time_cost_outcome
from storage.sqlite import Database
from workbench.probe import facts as probe_facts
from workbench.probe import facts_of_reports, main_report
from workbench.verify.ladder import LevelResult, Run, _log, _record, observed_devices, stand_in_of

PASS, FAIL, UNKNOWN = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN

STEP_TIMES: dict[str, float] = {
    "step_time_ms": 1e-3, "step_ms": 1e-3, "iter_time_ms": 1e-3, "time_ms": 1e-3,
    "step_time_s": 1.0, "step_time": 1.0, "iter_time": 1.0, "batch_time": 1.0,
}
"""Per-step time series a run may log (the probe's is `step_time`), and their unit in seconds."""
PHASES = {"train": "training", "eval": "evaluation"}
"""The probe's phases (the modules' training flag), as the breakdown names them."""


def cost(run: Run, prices: dict[str, float], kind: str | None, chips: int | None) -> tuple[float | None, float | None]:
    return chip_cost(run.attempt.started_at, run.attempt.ended_at, prices, kind, chips)


def step_times(run: Run, warm: int) -> tuple[str, float, float, int] | None:
    """(series, median seconds per step after warm-up, seconds of every step, steps after warm-up)
    from the first step-time series with 3 steps after warm-up."""
    for name, unit in STEP_TIMES.items():
        points = run.series.get(name) or {}
        after = [v * unit for s, v in points.items() if s > warm]
        if len(after) >= 3:
            return name, statistics.median(after), sum(points.values()) * unit, len(after)
    return None


# --------------------------------------------------------------------------- host syncs

_TRANSFERS = re.compile(r"TransferFromDeviceTime too frequent: ([0-9]{1,12}) counts during ([0-9]{1,12}) steps")


def _xla_metrics(run: Run) -> tuple[dict[str, Any], int] | None:
    """The main probe report's torch_xla metrics and its steps (a re-run's stored reports)."""
    report = main_report(run.probe_reports) if run.probe_reports else None
    xm = report.get("xla_metrics") if report else None
    steps = report.get("steps") if report else None
    if not isinstance(xm, dict) or not isinstance(steps, int) or steps <= 0:
        return None
    return xm, steps


def host_sync_rate(run: Run) -> tuple[float, Evidence] | None:
    """Host syncs per step, one reading: the probe's trace where it has one (the median of
    `aten::_local_scalar_dense` calls counted at each optimizer step, after the first two: a
    `.item()`, `.tolist()` or printed device value each, evaluations' reads not spread over the
    steps), else an older probe's count at exit over its steps, else the log's metrics report's
    over the run's last step, else torch_xla's profiler count of device-to-host transfers over
    its steps. The breakdown shows it and `host_sync` is decided on it."""
    report = main_report(run.probe_reports) if run.probe_reports else None
    traced = probe_facts(report, str(report.get("_file") or "probe report")) if report is not None else None
    if traced is not None and traced.item_calls_per_step is not None:
        rate = traced.item_calls_per_step
        return rate, Evidence("probe", traced.where, f"probe: {rate:.1f} host syncs per step (aten::_local_scalar_dense"
                              f" counted at each step, median after step 2, {traced.steps} steps)")
    found = _xla_metrics(run)
    if found is not None:
        xm, steps = found
        count = (xm.get("counters") or {}).get("aten::_local_scalar_dense") or 0
        if isinstance(count, int):
            rate = count / steps
            return rate, Evidence("probe", str((report or {}).get("_file") or "probe report"),
                                  f"probe: aten::_local_scalar_dense {count} over {steps} steps ({rate:.1f} per step)")
    facts = run.facts
    if facts is None:
        return None
    hit = facts.counters.get("aten::_local_scalar_dense")
    steps = facts.last_step or 0
    if hit is not None and steps:
        rate = int(hit.text) / steps
        return rate, Evidence("log_line", str(hit.line),
                              f"aten::_local_scalar_dense {hit.text} over {steps} steps ({rate:.1f} per step)")
    for h in facts.profiler:
        m = _TRANSFERS.search(h.text)
        if m and int(m.group(2)):
            return int(m.group(1)) / int(m.group(2)), _log(h)
    return None


def host_syncs(run: Run, reference: Run | None, settings: dict[str, Any]) -> tuple[bool, list[Evidence]]:
    """Host syncs per step and whether they are abnormal: above twice the reference's rate plus
    one where the reference reports it, else above `max_host_syncs_per_step` (logging a scalar
    or two each step, `loss.item()`, costs one or two and is normal)."""
    found = host_sync_rate(run)
    if found is None:
        return False, []
    rate, first = found
    theirs = host_sync_rate(reference) if reference is not None else None
    if theirs is not None:
        limit, against = 2 * theirs[0] + 1, f"twice the reference's {theirs[0]:.1f} per step, plus one"
    else:
        limit = float(settings["max_host_syncs_per_step"])
        against = f"max_host_syncs_per_step {limit:g}"
    abnormal = rate > limit
    ev = [Evidence(first.kind, first.ref, f"{first.text}: {'above' if abnormal else 'within'} {limit:g} per step "
                   f"({against})"[:300])]
    ev += [_log(h) for h in (run.facts.profiler if run.facts else [])
           if "TransferFromDeviceTime too frequent" in h.text and str(h.line) != first.ref][:1]
    if theirs is not None:
        ev.append(Evidence(theirs[1].kind, "reference " + theirs[1].ref, theirs[1].text))
    return abnormal, ev


# --------------------------------------------------------------------------- the stand-in


# --------------------------------------------------------------------------- the breakdown


@dataclass(frozen=True)
class Breakdown:
    """Where a run's wall time went, each figure None where nothing measured it."""

    wall: float | None
    steps: int | None
    steady: tuple[str, float, float, int] | None
    """`step_times`: series, median seconds per step after warm-up, seconds of every step, steps."""
    compile_seconds: float | None
    compiles: int | None
    busy_share: float | None
    """torch_xla's ExecuteTime over wall: the paper's chip utilisation."""
    transfers_per_step: float | None
    host_syncs: float | None
    phase_compiles: tuple[tuple[str, int], ...] = ()
    """The probe's compilations per phase (`train`, `eval`: the modules' training flag)."""

    def text(self, warm: int) -> str:
        parts = []
        if self.wall is not None and self.steady is not None:
            parts.append(f"start-up and outside the steps {max(self.wall - self.steady[2], 0.0):.3g} s")
        if self.compile_seconds is not None or self.compiles is not None:
            secs = f"{self.compile_seconds:.3g} s" if self.compile_seconds is not None else "time unknown"
            phases = ", ".join(f"{PHASES.get(k, k)} {v}" for k, v in self.phase_compiles)
            count = f"{self.compiles} compiles" if self.compiles is not None else ""
            inner = "; ".join(t for t in (count, phases) if t)
            parts.append(f"compilation {secs}" + (f" ({inner})" if inner else ""))
        if self.steady is not None:
            name, median, _, n = self.steady
            parts.append(f"median step time after step {warm}: {median * 1e3:.4g} ms ({name}, {n} steps)")
        if self.busy_share is not None:
            parts.append(f"device busy {self.busy_share:.0%} of wall (ExecuteTime)")
        if self.transfers_per_step is not None:
            parts.append(f"{self.transfers_per_step:.1f} transfers per step")
        if self.host_syncs is not None:
            parts.append(f"{self.host_syncs:.1f} host syncs per step")
        wall = f"wall {self.wall:.3g} s" if self.wall is not None else "wall unknown"
        return wall + (": " + ", ".join(parts) if parts else "")


def breakdown(run: Run, settings: dict[str, Any]) -> Breakdown:
    from domain.costs import span_seconds

    wall = span_seconds(run.attempt.started_at, run.attempt.ended_at)
    steady = step_times(run, int(settings["warmup_steps"]))
    found = _xla_metrics(run)
    compile_seconds = busy = transfers = None
    compiles: int | None = None
    steps = run.facts.last_step if run.facts is not None else None
    if found is not None:
        xm, steps = found
        compiles = xm.get("compiles") if isinstance(xm.get("compiles"), int) else None
        compile_seconds = _number(xm.get("compile_seconds"))
        execute = _number(xm.get("execute_seconds"))
        busy = execute / wall if execute is not None and wall else None
        moved = [_number(xm.get(k)) for k in ("transfers_to_device", "transfers_from_device")]
        transfers = sum(m for m in moved if m is not None) / steps if any(m is not None for m in moved) else None
    elif run.facts is not None:
        hit = run.facts.counters.get("UncachedCompile") or run.facts.counters.get("CompileTime")
        compiles = int(hit.text) if hit is not None and hit.text.isdigit() else None
    rate = host_sync_rate(run)
    report = main_report(run.probe_reports) if run.probe_reports else None
    traced = probe_facts(report, "") if report is not None else None
    return Breakdown(wall, steps, steady, compile_seconds, compiles, busy, transfers, rate[0] if rate else None,
                     traced.compiles_by_phase if traced is not None else ())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- siblings


@dataclass(frozen=True)
class Sibling:
    """A correct attempt of the same migration (its current levels 1-4 pass) as level 5 compares
    with: where it ran and its figures (None where unmeasured)."""

    attempt_id: int
    seq: int
    hardware: tuple[str | None, int | None]
    step_seconds: float | None
    compiles: int | None
    host_syncs: float | None
    phase_compiles: tuple[tuple[str, int], ...] = ()


def _hardware(run: Run) -> tuple[str | None, int | None]:
    """Where a run ran, as siblings are matched: its probe's device kind and count (a re-run),
    else its recorded observed hardware."""
    probes = facts_of_reports(run.probe_reports)
    if probes:
        p = probes[-1]
        return (p.device_kind.lower() if p.device_kind else None, p.device_count)
    hw = run.attempt.observed_hardware
    return (hw.kind.lower(), hw.count) if hw is not None else (None, None)


def sibling_of(run: Run, settings: dict[str, Any]) -> Sibling:
    bd = breakdown(run, settings)
    return Sibling(run.attempt.id, run.attempt.seq, _hardware(run), bd.steady[1] if bd.steady else None,
                   bd.compiles, bd.host_syncs, bd.phase_compiles)


def siblings_of(db: Database, migration_id: int, settings: dict[str, Any]) -> tuple[Sibling, ...]:
    """The migration's correct attempts (current levels 1-4 pass, overrides counted) with a figure
    level 5 can compare: from their stored series and probe reports (a log-only attempt's figures
    come from its log, which is not read for this: it has none here)."""
    from storage import verify_inputs

    found = (sibling_of(Run(c.attempt, None, c.series, "stored", c.probe_reports), settings)
             for c in verify_inputs.correct_attempts(db, migration_id, tuple(STEP_TIMES)))
    return tuple(s for s in found if (s.step_seconds, s.compiles, s.host_syncs) != (None, None, None))


@dataclass(frozen=True)
class Finding:
    cause: FailureCause
    text: str
    evidence: list[Evidence]


def _best(peers: Sequence[Sibling], attr: str) -> Sibling | None:
    measured = [p for p in peers if getattr(p, attr) is not None]
    return min(measured, key=lambda p: getattr(p, attr)) if measured else None


def _compile_finding(bd: Breakdown, peers: Sequence[Sibling]) -> Finding | None:
    """More compilations than 1.5 times the best correct sibling's plus 2: per phase (training
    steps and evaluations apart, each against the sibling fewest in that phase) where the probe
    counted phases for both, so an evaluation that compiles each time shows however many graphs
    training builds; else in all."""
    mine = dict(bd.phase_compiles)
    for phase, count in mine.items():
        theirs = [(dict(p.phase_compiles)[phase], p) for p in peers if phase in dict(p.phase_compiles)]
        if not theirs:
            continue
        least, best = min(theirs, key=lambda t: t[0])
        if far_above(count, least, 1.5, 2):
            return Finding(FailureCause.RECOMPILATION, f"{count} compilations in {PHASES.get(phase, phase)} against "
                           f"{least} in #{best.seq}, the best correct sibling ({bd.compiles} against {best.compiles}"
                           " in all)", [])
    if any(phase in dict(p.phase_compiles) for p in peers for phase in mine):
        return None  # counted per phase and within: the totals say nothing more
    best = _best(peers, "compiles")
    if bd.compiles is not None and best is not None and far_above(bd.compiles, best.compiles or 0, 1.5, 2):
        return Finding(FailureCause.RECOMPILATION, f"{bd.compiles} compilations against {best.compiles} in "
                       f"#{best.seq}, the best correct sibling", [])
    return None


def sibling_findings(run: Run, bd: Breakdown, siblings: Sequence[Sibling], settings: dict[str, Any]) -> list[Finding]:
    """Far behind the best correct sibling on the same hardware: per step (more than
    `max_sibling_step_ratio` times its median step time after warm-up), in compilations (more
    than 1.5 times its count plus 2, per phase where both were traced: `_compile_finding`) or in
    host syncs per step (more than twice its rate plus one)."""
    where = _hardware(run)
    peers = [s for s in siblings if s.attempt_id != run.attempt.id and s.hardware == where]
    out: list[Finding] = []
    best = _best(peers, "host_syncs")
    if bd.host_syncs is not None and best is not None and far_above(bd.host_syncs, best.host_syncs or 0.0, 2, 1):
        out.append(Finding(FailureCause.HOST_SYNC, f"{bd.host_syncs:.1f} host syncs per step against "
                           f"{best.host_syncs:.1f} in #{best.seq}, the best correct sibling", []))
    found = _compile_finding(bd, peers)
    if found is not None:
        out.append(found)
    best = _best(peers, "step_seconds")
    factor = float(settings["max_sibling_step_ratio"])
    if bd.steady is not None and best is not None and far_above(bd.steady[1], best.step_seconds or 0.0, factor):
        cause = out[0].cause if out else FailureCause.SLOWER_OR_COSTLIER
        out.append(Finding(cause, f"median step {bd.steady[1] * 1e3:.4g} ms against {(best.step_seconds or 0) * 1e3:.4g}"
                           f" ms in #{best.seq}, the best correct sibling (more than x{factor:g})", []))
    return out


# --------------------------------------------------------------------------- level 5


def time_spread(run: Run, reference: Run) -> tuple[Any, float] | None:
    """The time ratio's band from the runs' repeats (the attempt's `rerun --repeat` runs, the
    reference's replicates; domain.noise, both spreads counted) and the ratio held against it:
    every full-run wall over the reference runs' mean wall, the attempt's the mean of its runs.
    None when neither side ran twice with a wall."""
    from domain.costs import span_seconds
    from domain.noise import band

    def walls(r: Run) -> list[float]:
        found = (span_seconds(x.attempt.started_at, x.attempt.ended_at) for x in [r, *r.replicates])
        return [w for w in found if w]

    theirs, mine = walls(reference), walls(run)
    if not theirs or not mine or (len(theirs) < 2 and len(mine) < 2):
        return None
    mean = sum(theirs) / len(theirs)
    b = band([w / mean for w in theirs], [w / mean for w in mine] if len(mine) >= 2 else [])
    return (b, sum(mine) / len(mine) / mean) if b is not None else None



def level5(run: Run, reference: Run | None, study: Study, intended: Hardware, level1_outcome: Outcome,
           settings: dict[str, Any], siblings: Sequence[Sibling] = (),
           traced: Sequence[Any] = ()) -> tuple[LevelResult, dict[str, float | None]]:
    """Full-run wall time and cost against the reference's, one rule both ways; findings (the
    trace's `traced`: float64 on a TPU; abnormal host syncs, far behind the best correct sibling)
    fail it whatever the clock says; on a stand-in the clock does not decide. The breakdown is in
    every reason."""
    kind_seen, observed_count, _ = observed_devices(run)
    chips = observed_count or intended.count
    wall, dollars = cost(run, study.prices, intended.kind, chips)
    figures: dict[str, float | None] = {"wall": wall, "cost": dollars, "time_ratio": None, "cost_ratio": None}
    warm = int(settings["warmup_steps"])
    bd = breakdown(run, settings)
    ev = [_record("wall", f"{wall:.2f} s on {intended.kind} x {chips}" if wall is not None else "unknown")]
    ref_text = "no reference run"
    if reference is not None:
        ref_kind, ref_count, _ = observed_devices(reference)
        ref_hw = reference.attempt.intended_hardware
        ref_kind = ref_kind or (ref_hw.kind if ref_hw else None)
        ref_chips = ref_count or (ref_hw.count if ref_hw else 1)
        ref_wall, ref_dollars = cost(reference, study.prices, ref_kind, ref_chips)
        if wall is not None and ref_wall:
            figures["time_ratio"] = wall / ref_wall
        if dollars is not None and ref_dollars:
            figures["cost_ratio"] = dollars / ref_dollars
        ref_text = (f"the reference's {ref_wall:.3g} s on {ref_kind} x {ref_chips}" if ref_wall
                    else "the reference's wall unknown")
        ev.append(Evidence("record", "reference wall", ref_text[len("the reference's "):]))
        if ref_wall and ref_dollars is None and price_of(study.prices, ref_kind) is None:
            ref_text += f" (no price for {ref_kind})"
    said = f"breakdown: {bd.text(warm)}; against {ref_text}"
    if bd.steady is not None:
        last = max(s for s in run.series[bd.steady[0]] if s > warm)
        ev.insert(0, run.metric_evidence(bd.steady[0], last))
    if level1_outcome is not PASS:
        return LevelResult(5, UNKNOWN, f"the run did not complete (level 1), so its time says nothing; {said}", ev), figures
    abnormal, syncs = host_syncs(run, reference, settings)
    findings = sibling_findings(run, bd, siblings, settings)
    if abnormal:  # said once: against the reference's rate, not again against a sibling's
        findings = [Finding(FailureCause.HOST_SYNC, f"abnormal host syncs: {syncs[0].text}", syncs)] + [
            f for f in findings if f.cause is not FailureCause.HOST_SYNC or "median step" in f.text]
    tr, cr = figures["time_ratio"], figures["cost_ratio"]
    standin = stand_in_of(run, intended, kind_seen)
    findings = [Finding(f.cause, f.reason + (f" (on {standin[0]}, standing in for {intended.kind}, its clock does not "
                                             "show this)" if standin is not None else ""), f.evidence)
                for f in traced] + findings
    clock = "" if tr is None else time_cost_outcome(tr, cr, float(settings["max_time_ratio"]),
                                                   float(settings["max_cost_ratio"]))[1]
    if findings:
        reason = "; ".join(f.text for f in findings) + (f" ({clock})" if clock else "") + f"; {said}"
        return LevelResult(5, FAIL, reason, ev + syncs, [(f.cause, f.evidence or ev) for f in findings]), figures
    if standin is not None:
        return LevelResult(5, UNKNOWN, (
            f"ran on {standin[0]} standing in for {intended.kind}: its clock{f' ({clock})' if clock else ''} does not"
            f" show the target's, so host syncs per step and the correct siblings decide, and show nothing abnormal;"
            f" {said}"), ev + syncs + [standin[1]]), figures
    if reference is None:
        return LevelResult(5, UNKNOWN, f"no reference run to compare with; {said}", ev), figures
    if tr is None:
        return LevelResult(5, UNKNOWN, f"no wall time for this run or the reference; {said}", ev), figures
    spread = time_spread(run, reference)
    noise = ""
    if spread is not None:
        b, ratio = spread
        runs = (f"{b.m} runs of the attempt, " if b.m > 1 else "") + (
            f"{b.n} of the reference" if b.n > 1 else "one of the reference")
        noise = f"time x{ratio:.2f} ± {b.half:.2f} ({runs}): "
        if b.holds(ratio, 0.0):  # the band is around x1, the reference runs' mean
            return LevelResult(5, UNKNOWN, f"{noise}within the repeats' spread of x1, no difference (this run: {clock});"
                               f" {said}", ev + syncs), figures
        noise += "outside the repeats' spread of x1, so the mean ratio decides: "
        tr, cr = ratio, (cr * ratio / tr if cr is not None and tr else cr)
    better, words = time_cost_outcome(tr, cr, float(settings["max_time_ratio"]), float(settings["max_cost_ratio"]))
    words = noise + words
    text = f"{words} (from full-run wall time); {said}"
    if better:
        return LevelResult(5, PASS, text, ev + syncs), figures
    return LevelResult(5, FAIL, text, ev + syncs, [(FailureCause.SLOWER_OR_COSTLIER, ev)]), figures
