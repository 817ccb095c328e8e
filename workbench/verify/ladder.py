"""The five levels, the failure cause and the per-attempt flags, from evidence alone.

Pure functions: `judge` takes what storage and the log scan found and returns a `Judgement`;
nothing here reads the database or the agent's claim (only its expected level, to flag an
over-claim). docs/verification.md says what each level checks.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.models import (
    Attempt,
    AttemptStatus,
    Evidence,
    FailureCause,
    Hardware,
    Migration,
    Outcome,
)
from domain.performance import family, stand_in
from workbench.probe import ProbeFacts, facts_of_reports
from workbench.probe import facts as probe_facts
from workbench.verify import trace
from workbench.verify.logfacts import LogFacts
from workbench.verify.topology import Statement, Topology, launcher

PASS, FAIL, UNKNOWN = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN


@dataclass
class Run:
    """One run's evidence: its record, its log facts (None without a log) and metric series."""

    attempt: Attempt
    facts: LogFacts | None
    series: Mapping[str, dict[int, float]]
    """name -> step -> value: the stored series when present, else extracted from the log (a
    `SeriesView`, which builds a metric's dict when it is first read)."""
    series_source: str = "stored"
    """`stored` (from the bundle) or `log` (extracted by the scan)."""
    probe_reports: list[dict[str, Any]] = field(default_factory=list)
    """The probe's reports stored with the attempt (`probe_report` rows of a re-run), if any."""
    topology: Topology | None = None
    """What the log's head and the command say of devices and processes (verify/topology.py)."""
    point_line: Callable[[str, int], int | None] | None = None
    """The log line of a metric point when the log was not extracted (`steplines.PointLines`)."""
    replicates: list[Run] = field(default_factory=list)
    """The run again with other seeds: a reference run's replicates (level 2's noise), or an
    attempt's repeats (`workbench rerun --repeat`: its own spread counts too, and level 5's)."""

    _probes: list[ProbeFacts] | None = field(default=None, repr=False, compare=False)

    def probes(self) -> list[ProbeFacts]:
        """Each probed process's facts: from the stored reports when there are any, else from the
        `workbench-probe` lines of the log (a re-run's log holds both; the reports say more).
        Read once: the levels, the trace and level 5 each ask."""
        if self._probes is None:
            if self.probe_reports:
                self._probes = facts_of_reports(self.probe_reports)
            elif self.facts is None:
                self._probes = []
            else:
                found = (probe_facts(record, f"line {hit.line}", hit.text) for hit, record in self.facts.probes)
                self._probes = [f for f in found if f is not None]
        return self._probes

    def metric_evidence(self, name: str, step: int, extra: str = "") -> Evidence:
        value = self.series.get(name, {}).get(step)
        line = None
        if self.point_line is not None:
            line = self.point_line(name, step)
        elif self.facts is not None:
            found = self.facts.point(name, step)
            line = None if found is None else found[1]
        text = f"{name} = {value:.6g}" if value is not None else f"{name}: none"
        if line is not None:
            text += f" (log line {line})"
        return Evidence("metric", f"{name}@{step}", text + (f"; {extra}" if extra else ""))


@dataclass
class LevelResult:
    level: int
    outcome: Outcome
    reason: str
    evidence: list[Evidence] = field(default_factory=list)
    causes: list[tuple[FailureCause, list[Evidence]]] = field(default_factory=list)
    """Candidate causes when the level fails, most specific first."""
    setup: tuple[FailureCause, list[Evidence], str] | None = None
    """Level 3's first problem that makes a run's numbers incomparable (fewer devices, processes
    each alone): a level-2 mismatch is put down to it. A device kind is not one: a run on another
    kind computes the same numbers."""


@dataclass
class Judgement:
    levels: list[LevelResult]
    highest_level: int
    cause: FailureCause | None
    cause_evidence: list[Evidence]
    cause_note: str
    silent: bool
    over_claim: bool | None
    raised_error: bool
    wall_seconds: float | None = None
    cost_dollars: float | None = None
    time_ratio: float | None = None
    cost_ratio: float | None = None
    notes: list[Evidence] = field(default_factory=list)
    """Inefficiencies that did not fail a level (host syncs), kept for the reviewer."""


def _log(hit: Any, prefix: str = "") -> Evidence:
    return Evidence("log_line", str(hit.line), (prefix + hit.text)[:300])


def _record(field_name: str, value: Any) -> Evidence:
    return Evidence("record", field_name, f"{field_name} = {value}")


# --------------------------------------------------------------------------- level 1


def _expected_steps(run: Run, reference: Run | None, settings: dict[str, Any]) -> tuple[int | None, str]:
    if settings.get("expected_steps"):
        return int(settings["expected_steps"]), "the migration's expected_steps setting"
    if run.facts is not None and run.facts.total_steps:
        return run.facts.total_steps, "the `step N/M` total in the log"
    if reference is not None:
        steps = _last_step(reference)
        if steps is not None:
            return steps, "the reference run's last step"
    return None, ""


def _last_step(run: Run) -> int | None:
    candidates = [max(points) for name in ("loss", "grad_norm") if (points := run.series.get(name))]
    if not candidates:
        candidates = [max(points) for points in run.series.values() if points]
    if run.facts is not None and run.facts.last_step is not None:
        candidates.append(run.facts.last_step)
    return max(candidates) if candidates else None


def errors_raised(run: Run) -> list[Evidence]:
    """Tracebacks and fatal lines in the log, and a non-zero exit."""
    out: list[Evidence] = []
    a = run.attempt
    if a.exit_code not in (None, 0):
        out.append(_record("exit_code", a.exit_code))
    if run.facts is not None:
        for hit in run.facts.exceptions[:3]:
            out.append(_log(hit))
        if run.facts.tracebacks and not run.facts.exceptions:
            out.append(_log(run.facts.tracebacks[0]))
        for kind, hit in run.facts.fatal[:3]:
            if kind != "timeout":
                out.append(_log(hit, f"{kind}: "))
    return out


def _loss_like(name: str, goal_metric: str) -> bool:
    return name in (goal_metric, "loss") or name.endswith(("_loss", "/loss", ".loss"))


def first_non_finite(points: Mapping[int, float]) -> int | None:
    """The first step whose value is NaN or infinite, if any."""
    return min((s for s, v in points.items() if not math.isfinite(v)), default=None)


def non_finite(run: Run, goal_metric: str) -> tuple[str, int] | None:
    """The earliest non-finite point of a loss series (`loss`, `train_loss`, `val/loss`) or of the
    goal metric: (name, step). A loss that turns NaN ends the training whatever the exit code
    (gradient norms may be infinite on the steps a loss scaler skips, so they are not read here)."""
    found = [(step, name) for name in run.series if _loss_like(name, goal_metric)
             if (step := first_non_finite(run.series[name])) is not None]
    if not found:
        return None
    step, name = min(found)
    return name, step


def non_finite_text(name: str, value: float, step: int) -> str:
    word = "NaN" if math.isnan(value) else "infinite" if value > 0 else "-infinite"
    return f"{name} is {word} from step {step}"


def level1(run: Run, reference: Run | None, goal_metric: str, settings: dict[str, Any]) -> LevelResult:
    a = run.attempt
    errors = errors_raised(run)
    if errors:
        what = "exited with status %s" % a.exit_code if a.exit_code not in (None, 0) else "exited 0"
        tb = run.facts is not None and (run.facts.tracebacks or run.facts.fatal)
        reason = what + (" and its log holds a traceback or fatal error" if tb else "")
        done = hung_at_exit(run, reference, goal_metric, settings)
        if done:
            ev = errors + _last_step_evidence(run, _last_step(run))
            return LevelResult(1, FAIL, f"{reason}: it {done}, then hung at exit until the timeout killed it", ev,
                               [(FailureCause.HANG_AT_EXIT, ev)])
        return LevelResult(1, FAIL, reason, errors)
    if a.exit_code is None:
        if a.status is AttemptStatus.INTERRUPTED:
            return LevelResult(1, FAIL, "interrupted before it exited", [_record("status", a.status.value)])
        if a.status is AttemptStatus.NONZERO_EXIT:
            return LevelResult(1, FAIL, "ended with a non-zero exit (code unknown)", [_record("status", a.status.value)])
        return LevelResult(1, UNKNOWN, f"no exit code (status {a.status.value})", [_record("status", a.status.value)])
    if run.facts is None:
        return LevelResult(1, UNKNOWN, "exited 0, but there is no log to check for errors and its end",
                           [_record("exit_code", 0)])
    expected, source = _expected_steps(run, reference, settings)
    last = _last_step(run)
    evidence = [_record("exit_code", 0)]
    diverged = non_finite(run, goal_metric)
    if diverged is not None:
        name, step = diverged
        ev = evidence + [run.metric_evidence(name, step)]
        return LevelResult(1, FAIL, f"exited 0 without an error, but {non_finite_text(name, run.series[name][step], step)}"
                           + (f" (it printed up to step {last})" if last is not None else ""), ev,
                           [(FailureCause.NON_FINITE, ev)])
    if expected is not None:
        if last is None or last < expected:
            return LevelResult(1, FAIL, f"exited 0 without an error but stopped at step {last or 0} of {expected} ({source})",
                               evidence + _last_step_evidence(run, last))
        return LevelResult(1, PASS, f"exited 0, no traceback or fatal error, reached step {last} of {expected}",
                           evidence + _last_step_evidence(run, last))
    if goal_metric in run.series:
        step = max(run.series[goal_metric])
        return LevelResult(1, PASS, f"exited 0, no traceback or fatal error, printed its final {goal_metric}",
                           evidence + [run.metric_evidence(goal_metric, step)])
    return LevelResult(1, FAIL, "exited 0 but shows no step count or final metric: its end is not reached", evidence)


def hung_at_exit(run: Run, reference: Run | None, goal_metric: str, settings: dict[str, Any]) -> str | None:
    """How a run killed by `timeout` (exit 124) with no traceback had already finished its work
    (reached its expected last step, else printed its goal metric), if it had: it hung at exit
    (a process group or a collective left waiting), it was not slow."""
    a = run.attempt
    if a.exit_code != 124 or run.facts is None or run.facts.exceptions:
        return None
    expected, _ = _expected_steps(run, reference, settings)
    last = _last_step(run)
    if expected is not None:
        return f"reached step {last} of {expected}" if last is not None and last >= expected else None
    return f"printed its final {goal_metric}" if goal_metric in run.series else None


def _last_step_evidence(run: Run, last: int | None) -> list[Evidence]:
    if last is None:
        return []
    for name in ("loss", "grad_norm"):
        if last in run.series.get(name, {}):
            return [run.metric_evidence(name, last)]
    return []


# --------------------------------------------------------------------------- level 2


def _agree(a: float, r: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(r):
        return math.isnan(a) and math.isnan(r)
    return abs(a - r) <= atol + rtol * abs(r)


def _compared_metrics(reference: Run, goal_metric: str, settings: dict[str, Any]) -> tuple[list[str], list[str]]:
    per_step = [m for m in settings["compare"] if m in reference.series]
    per_step += [m for m in settings.get("metrics", {}) if m in reference.series and m not in per_step
                 and not _is_eval(m, goal_metric)]
    at_end: list[str] = []
    if settings["compare_eval"]:
        at_end = sorted(m for m in reference.series if _is_eval(m, goal_metric))
    return per_step, at_end


def _is_eval(name: str, goal_metric: str) -> bool:
    return name == goal_metric or bool(re.match(r"(eval|val|valid|test|final)[_/]", name))


def level2(run: Run, reference: Run | None, goal_metric: str, settings: dict[str, Any],
           tensors: LevelResult | None = None) -> LevelResult:
    """The metric series against the reference's, and with `tensors` (the checkpoint comparison,
    `workbench.verify.tensors`, when both runs saved one) the checkpoints too: either failing
    fails the level; a skipped checkpoint comparison leaves the series to decide, and says so."""
    series, compared = _level2_series(run, reference, goal_metric, settings)
    if tensors is None:
        return series
    if tensors.outcome is UNKNOWN:
        return LevelResult(2, series.outcome, f"{series.reason}; {tensors.reason}", series.evidence, series.causes)
    if tensors.outcome is FAIL:
        if series.outcome is FAIL:
            ev = series.evidence + tensors.evidence
            return LevelResult(2, FAIL, f"{series.reason}; and {tensors.reason}", ev,
                               [(FailureCause.NUMERICAL_MISMATCH, ev)])
        return tensors
    # the checkpoints agree
    if series.outcome is FAIL:
        return LevelResult(2, FAIL, f"{series.reason} (the checkpoints agree: {tensors.reason})",
                           series.evidence, series.causes)
    if series.outcome is PASS:
        return LevelResult(2, PASS, f"{series.reason}, {tensors.reason}", series.evidence + tensors.evidence)
    if not compared:
        return LevelResult(2, PASS, f"agrees with the reference: {tensors.reason} ({series.reason})",
                           tensors.evidence)
    return LevelResult(2, UNKNOWN, f"{series.reason}; {tensors.reason}", series.evidence + tensors.evidence)


CLIP_SHARE_MIN = 0.3
"""A series whose reference sits at its largest value on this share of its steps is clipped."""


def _at_bound(name: str, mine: dict[int, float], ref: dict[int, float], common: list[int],
              tol: float) -> tuple[Outcome, str] | None:
    """A series sitting at a bound (a gradient norm clipped to its limit on most steps: the
    reference's largest value, within 1e-4, on at least `CLIP_SHARE_MIN` of its steps) is not a
    quantity to compare point by point: the shares of steps at the bound are compared instead,
    agreeing within `tol` (a share). None for a series that is not clipped."""
    values = [ref[s] for s in common]
    bound = max(values)
    if len(values) < 5 or not math.isfinite(bound) or bound <= 0:
        return None
    at = bound * (1 - 1e-4)
    share_r = sum(v >= at for v in values) / len(values)
    if share_r < CLIP_SHARE_MIN:
        return None
    share_a = sum(mine[s] >= at for s in common) / len(common)
    words = (f"{name} sits at its bound {bound:.6g} on {share_r:.0%} of the reference's steps (clipped), so the shares"
             f" of clipped steps are compared: {share_a:.0%} vs {share_r:.0%} over {len(common)} steps")
    if abs(share_a - share_r) > tol:
        return FAIL, f"{words}, more than {tol:.0%} apart"
    return PASS, words


def _bfloat16_grid(value: float) -> bool | None:
    """Whether a logged value is a bfloat16 number as far as its printed digits tell (None when
    they cannot: too few digits for the spacing of bfloat16 numbers near it)."""
    text = repr(value)
    if not math.isfinite(value) or value == 0 or "e" in text or "." not in text:
        return None
    slack = 0.5 * 10.0 ** -len(text.split(".")[1])  # the printing's rounding
    bits = struct.unpack("<I", struct.pack("<f", value))[0] & 0xFFFF0000
    low, high = (struct.unpack("<f", struct.pack("<I", b))[0] for b in (bits, bits + 0x10000))
    if slack * 4 > abs(high - low):
        return None
    return min(abs(value - low), abs(value - high)) <= slack * 1.001


def _bfloat16_note(name: str, mine: dict[int, float], ref: dict[int, float]) -> str:
    """A hint for a mismatch: every telling value of the attempt's series is a bfloat16 number
    and the reference's are not (weights or activations kept in bfloat16: drift)."""
    told = 0
    for grid in map(_bfloat16_grid, mine.values()):  # the first value off the grid ends it: the common case
        if grid is False:
            return ""
        told += grid is True
    if told < 8 or False not in map(_bfloat16_grid, ref.values()):
        return ""
    return f"; every {name} value the attempt logged is a bfloat16 number ({told} telling), the reference's are not"


def _level2_series(run: Run, reference: Run | None, goal_metric: str,
                   settings: dict[str, Any]) -> tuple[LevelResult, bool]:
    """Level 2 on the metric series alone, and whether anything was compared; without replicates
    (of the reference, or repeats of the attempt that differ) the reason says the noise was not
    measured."""
    result, compared = _compare_series(run, reference, goal_metric, settings)
    spread = any(dict(r.series.get(n) or {}) != dict(run.series.get(n) or {})
                 for r in run.replicates for n in settings["compare"])
    if compared and reference is not None and not reference.replicates and not spread and result.outcome is not UNKNOWN:
        result.reason += "; one reference run: noise not measured"
    return result, compared


def _samples(run: Run, name: str) -> list[Mapping[int, float]]:
    """The run's and its replicates' series of `name` (those that have one)."""
    return [r.series[name] for r in [run, *run.replicates] if r.series.get(name)]


def _band_at(samples: list[Mapping[int, float]], steps: list[int], own: list[Mapping[int, float]]) -> Any:
    """The band (domain.noise) of the reference's and its replicates' means over `steps`, the
    attempt's repeats' spread counted when it has two or more, and the attempt's value to hold
    against it (the mean of its repeats' means; None with no repeats): (None, None) when neither
    side has two runs with every one of the steps."""
    from domain.noise import band

    def means(found: list[Mapping[int, float]]) -> list[float]:
        return [sum(x[k] for k in steps) / len(steps) for x in found if all(k in x for k in steps)]

    mine = means(own) if len(own) >= 2 else []
    mine = mine if len(mine) >= 2 else []
    return band(means(samples), mine), (sum(mine) / len(mine) if mine else None)


def _noise_words(name: str, where: str, value: float, b: Any) -> str:
    runs = f"{b.n} seeds" if b.n > 1 else "one reference run"
    if b.m > 1:
        runs += f"; the attempt's {b.m} repeats ± {b.sd_attempt:.2g}"
    return f"{name} {where}: {value:.6g} vs {b.mean:.6g} ± {b.sd:.2g} ({runs}): {b.sigmas(value):.1f}σ"


def _windows(run: Run, name: str, mine: Mapping[int, float], ref: Mapping[int, float], common: list[int],
             samples: list[Mapping[int, float]], tol: tuple[float, float], window: int) -> Any:
    """Each window of `window` steps: against the replicates' band when there are replicates (of
    the reference, of the attempt, or both), else the fixed tolerance. The failing level
    (`LevelResult`), else the largest deviation in sigmas with its words (None without replicates)."""
    own = _samples(run, name)
    rtol, atol = tol
    worst: tuple[float, str] | None = None
    for start in range(0, len(common), window):
        block = common[start : start + window]
        a = sum(mine[s] for s in block) / len(block)
        r = sum(ref[s] for s in block) / len(block)
        b, value = _band_at(samples, block, own)
        if b is not None:  # the replicates' band decides, not the fixed tolerance
            a = a if value is None else value
            words = _noise_words(name, f"steps {block[0]}–{block[-1]}", a, b)
            if not b.holds(a, atol):
                ev = [run.metric_evidence(name, s, f"reference {ref[s]:.6g}") for s in block][:3]
                return LevelResult(2, FAIL, f"{words}, outside the noise (95% band ± {b.half:.2g})", ev,
                                   [(FailureCause.NUMERICAL_MISMATCH, ev)])
            if worst is None or b.sigmas(a) > worst[0]:
                worst = (b.sigmas(a), words)
        elif not _agree(a, r, rtol, atol):
            far = max(block, key=lambda s: abs(mine[s] - ref[s]) / (abs(ref[s]) or 1.0))
            rel = abs(mine[far] - ref[far]) / (abs(ref[far]) or 1.0)
            reason = (f"{name} disagrees with the reference over steps {block[0]}-{block[-1]}: mean "
                      f"{a:.6g} vs {r:.6g} (rtol {rtol:g}, atol {atol:g}); worst at step {far}, "
                      f"{mine[far]:.6g} vs {ref[far]:.6g} ({rel:.1%})") + _bfloat16_note(name, mine, ref)
            ev = [run.metric_evidence(name, far, f"reference {ref[far]:.6g}")]
            ev += [run.metric_evidence(name, s, f"reference {ref[s]:.6g}") for s in block if s != far][:2]
            return LevelResult(2, FAIL, reason, ev, [(FailureCause.NUMERICAL_MISMATCH, ev)])
    return worst


def _point(run: Run, name: str, step: int, ref: Mapping[int, float], samples: list[Mapping[int, float]],
           tol: tuple[float, float], words: tuple[str, str]) -> LevelResult | None:
    """One value (the end, an evaluation) against the replicates' band, else the fixed tolerance:
    the failing level, or None when it agrees."""
    mine = run.series[name][step]
    ev = [run.metric_evidence(name, step, f"reference {ref[step]:.6g}")]
    b, value = _band_at(samples, [step], _samples(run, name))
    mine = mine if value is None else value
    if b is not None and not b.holds(mine, tol[1]):
        return LevelResult(2, FAIL, _noise_words(name, words[0], mine, b)
                           + f", outside the noise (95% band ± {b.half:.2g})", ev, [(FailureCause.NUMERICAL_MISMATCH, ev)])
    if b is None and not _agree(mine, ref[step], *tol):
        return LevelResult(2, FAIL, f"{name} {words[0]} is {mine:.6g} {words[1]} {ref[step]:.6g} "
                           f"(rtol {tol[0]:g}, atol {tol[1]:g})", ev, [(FailureCause.NUMERICAL_MISMATCH, ev)])
    return None


def _compare_series(run: Run, reference: Run | None, goal_metric: str,
                    settings: dict[str, Any]) -> tuple[LevelResult, bool]:
    if reference is None:
        return LevelResult(2, UNKNOWN, "no reference run to compare with"), False
    from workbench.verify.settings import tolerance

    per_step, at_end = _compared_metrics(reference, goal_metric, settings)
    if not per_step and not at_end:
        return LevelResult(2, UNKNOWN, "the reference run has no metric series to compare"), False
    window = max(1, int(settings["window"]))
    agreed: list[str] = []
    unknown: list[str] = []
    evidence: list[Evidence] = []
    for name in per_step:
        ref = reference.series[name]
        mine = run.series.get(name, {})
        common = sorted(set(ref) & set(mine))
        if not common:
            unknown.append(f"{name} (the attempt has no {name} series)")
            continue
        clipped = _at_bound(name, mine, ref, common, float(settings["clip_share_tol"]))
        if clipped is not None:
            if clipped[0] is FAIL:
                ev = [run.metric_evidence(name, common[-1], f"reference {ref[common[-1]]:.6g}")]
                return LevelResult(2, FAIL, clipped[1], ev, [(FailureCause.NUMERICAL_MISMATCH, ev)]), True
            agreed.append(clipped[1])
            continue
        rtol, atol = tolerance(settings, name)
        nan_at = next((s for s in common if not math.isfinite(mine[s]) and math.isfinite(ref[s])), None)
        if nan_at is not None:
            common = [s for s in common if s < nan_at]
        samples = _samples(reference, name)
        worst = _windows(run, name, mine, ref, common, samples, (rtol, atol), window)
        if isinstance(worst, LevelResult):
            return worst, True
        if nan_at is not None:
            ev = [run.metric_evidence(name, nan_at, f"reference {ref[nan_at]:.6g}")]
            return LevelResult(2, FAIL, f"{non_finite_text(name, mine[nan_at], nan_at)} where the reference's is "
                               f"{ref[nan_at]:.6g}" + (f" (agrees before it, over {len(common)} steps)" if common else ""),
                               ev, [(FailureCause.NON_FINITE, ev)]), True
        ref_end = max(ref)
        if ref_end not in mine:
            unknown.append(f"{name} agrees through step {common[-1]}; the run stopped before step {ref_end}")
            evidence.append(run.metric_evidence(name, common[-1]))
            continue
        bad = _point(run, name, ref_end, ref, samples, tolerance(settings, name, end=True),
                     (f"at the end (step {ref_end})", "vs"))
        if bad is not None:
            return bad, True
        agreed.append(f"{name} over {len(common)} steps"
                      + (f" within the noise (largest: {worst[1]}, within noise)" if worst else ""))
        evidence.append(run.metric_evidence(name, ref_end, f"reference {ref[ref_end]:.6g}"))
    for name in at_end:
        ref = reference.series[name]
        mine = run.series.get(name, {})
        if not mine:
            unknown.append(f"{name} (not recorded by the attempt)")
            continue
        common = sorted(set(ref) & set(mine))
        if not common:  # an eval is compared only with the reference's eval at the same step
            unknown.append(f"{name} at step {max(mine)} (the reference has no {name} at that step)")
            continue
        ms = common[-1]
        bad = _point(run, name, ms, ref, _samples(reference, name), tolerance(settings, name, end=True),
                     (f"at step {ms}", "vs the reference's"))
        if bad is not None:
            return bad, True
        evidence.append(run.metric_evidence(name, ms, f"reference {ref[ms]:.6g}"))
        if ms < max(ref):
            unknown.append(f"{name} agrees at step {ms}; the run has none at the reference's last, step {max(ref)}")
            continue
        agreed.append(name)
    if unknown and not agreed and not evidence:
        return LevelResult(2, UNKNOWN, "nothing to compare: " + "; ".join(unknown)), False
    if unknown:
        return LevelResult(2, UNKNOWN, "agrees so far, unknown beyond: " + "; ".join(unknown)
                           + (f" (agrees: {', '.join(agreed)})" if agreed else ""), evidence), True
    return LevelResult(2, PASS, "agrees with the reference: " + ", ".join(agreed), evidence), True


# --------------------------------------------------------------------------- level 3


def _kind_matches(intended: str, observed: str) -> bool:
    i, o = intended.lower(), observed.lower()
    return i == o or i.startswith(o + "-") or o.startswith(i + "-") or i.split("-")[0] == o.split("-")[0]


def _probe(p: ProbeFacts) -> Evidence:
    return Evidence("probe", p.where, p.text[:300])


def _stated(s: Statement, prefix: str = "") -> Evidence:
    return Evidence("log_line", str(s.line), (prefix + s.text)[:300])


def observed_devices(run: Run) -> tuple[str | None, int | None, list[Evidence]]:
    """Device kind and count from the probe, else what the log states (device count, global
    devices, mesh shape, world size), else sharding specs, else the run's own report."""
    facts = run.facts
    kind = count = None
    evidence: list[Evidence] = []
    probes = run.probes()
    if probes:
        probe = probes[-1]
        kind, count = probe.device_kind, probe.device_count
        evidence.append(_probe(probe))
        ranks = {p.rank for p in probes if (p.world_size or 1) > 1 and p.steps}
        if len(ranks) > 1 and probe.global_device_count:   # one world of processes: their devices add up
            used = sum(p.devices_used or 1 for p in probes if (p.world_size or 1) > 1 and p.steps)
            count = min(probe.global_device_count, used)
    said = run.topology.device_kind() if run.topology is not None else None
    if kind is None and said is not None:
        kind = said[0]
        evidence.append(_stated(said[1], f"the run states device kind {kind}: "))
    stated = run.topology.device_count() if run.topology is not None else None
    if count is None and stated is not None:
        count = stated[0]
        evidence.append(_stated(stated[1], f"the run states {count} device(s): "))
    # a spec naming no device is not a sharding spec (an error quoting `global_devices=[...]`)
    specs = [h for h in facts.sharding if int(h.text) > 0] if facts is not None else []
    if count is None and specs:
        hit = max(specs, key=lambda h: int(h.text))
        count = int(hit.text)
        evidence.append(_log(hit, f"sharding over {hit.text} devices: "))
    hw = run.attempt.observed_hardware
    if hw is not None:
        if count is None:
            count = hw.count
            evidence.append(_record("observed_hardware", hw.describe()))
        if kind is None:
            kind = hw.kind
    return kind, count, evidence


def processes_alone(run: Run) -> tuple[str, list[Evidence]] | None:
    """Processes that each believe they are alone, from the log and the command: the launcher
    started N > 1 but a process reports a world size other than N, or several processes (rank
    prefixes, N-fold step lines) all report world size 1. SPMD and replica runs are one process
    with world size 1 by design and pass."""
    topo = run.topology
    if topo is None:
        return None
    sizes = topo.values("world_size")
    command = Evidence("record", "command", "command: " + " ".join(run.attempt.command.argv)[:280])
    if topo.launcher is not None and topo.launcher[1] > 1:
        name, n = topo.launcher
        wrong = [(v, s) for v, s in sizes if v != n]
        if wrong:
            v, s = wrong[0]
            return (f"the launcher starts {n} processes ({name} {n}) but {len(wrong)} process(es) report "
                    f"world size {v}", [command] + [_stated(s) for _, s in wrong[:4]])
        return None
    # start lines alone do not count processes here: a program may print its start line twice
    processes = max(len(topo.ranks), topo.repeats)
    if processes > 1 and sizes and all(v == 1 for v, _ in sizes):
        ev = [_stated(s) for _, s in sizes[:4]]
        if topo.repeat_example is not None:
            line, text = topo.repeat_example
            ev.append(Evidence("log_line", str(line), f"printed {topo.repeats} times: {text}"[:300]))
        return f"{processes} processes each report world size 1", ev
    return None


def replicas_same_data(run: Run) -> tuple[str, list[Evidence]] | None:
    """The batch each replica reads against the global batch the run states: replicas x
    per-replica batch above the global batch means the replicas read the same examples (no
    per-replica sampler: `per_replica_batch=32` with a global batch of 32 and 4 replicas)."""
    topo = run.topology
    if topo is None:
        return None
    per, whole = topo.values("per_replica_batch"), topo.values("global_batch")
    replicas = topo.values("replicas") or ([topo.device_count()] if topo.device_count() else [])
    if not per or not whole or not replicas:
        return None
    (p, ps), (g, gs), (r, rs) = per[0], whole[0], replicas[0]
    if r < 2 or p * r <= g:
        return None
    ev = [_stated(s) for i, s in enumerate((ps, gs, rs)) if s not in (ps, gs, rs)[:i]]
    return (f"replicas read the same data: {r} replicas each read a batch of {p} where the global batch is {g} "
            f"({p * r} examples read per step for {g})", ev)


def batch_undersplit(facts: LogFacts, intended: int) -> tuple[str, list[Evidence]] | None:
    """Sharding specs over the intended devices that all split their first (batch) dim fewer ways
    and replicate the rest (`devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate`: 2 ways over 4
    devices): counting the device ids would say 4."""
    full = [h for h in facts.batch_splits if int(h.text.split(" of ")[1]) >= intended]
    if not full or len(full) != sum(int(h.text) >= intended for h in facts.sharding):
        return None  # a spec over every device with no replication splits the work over them all
    widest = max(full, key=lambda h: int(h.text.split(" of ")[0]))
    split = int(widest.text.split(" of ")[0])
    if split >= intended:
        return None
    return (f"batch split over fewer devices than intended: {split} ways over {intended} devices, the others "
            f"holding copies (last_tile_dim_replicate)", [Evidence("log_line", str(widest.line), f"a sharding spec splits its batch {widest.text} devices")])


NO_EXECUTION = ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime", "UncachedCompile", "CachedCompile")
"""What a torch_xla metrics report shows once anything ran on an XLA device."""


def never_executed(facts: LogFacts) -> Evidence | None:
    """A torch_xla metrics report, printed at or after the last step, that shows no compilation
    or execution at all: the process imported torch_xla but trained on host tensors (only
    bookkeeping such as `MarkStep`, `DeviceLockWait`), whatever device name it printed."""
    if not facts.counters or any(n in facts.counters or n in facts.counter_series for n in NO_EXECUTION):
        return None
    last = max(facts.counters.values(), key=lambda h: h.line)
    if facts.last_step is not None and (last.step or 0) < facts.last_step:
        return None
    names = ", ".join(sorted(facts.counters)[:4])
    return Evidence("log_line", str(last.line), f"metrics report with no CompileTime, ExecuteTime or compile "
                    f"counter (counters: {names})"[:300])


def recompilation(facts: LogFacts, settings: dict[str, Any],
                  probes: list[ProbeFacts] = ()) -> tuple[bool | None, str, list[Evidence]]:
    """torch_xla's rule: more than `max_compiles_per_step` compilations per step after warm-up.

    Evidence in this order: profiler lines, compilation-cause blocks, the compile counter of the
    log's metrics reports, else the compile count each probed process reported at exit."""
    warm = int(settings["warmup_steps"])
    rate_max = float(settings["max_compiles_per_step"])
    for hit in facts.profiler:
        if "CompileTime too frequent" in hit.text:
            return True, "torch_xla's profiler: compiles too frequent", [_log(hit)]
    last = facts.last_step
    after = [h for h in facts.compile_causes if h.step is not None and h.step >= warm]
    if facts.compile_causes and last is not None and last > warm:
        rate = len(after) / (last - warm)
        if rate > rate_max:
            return True, (f"{len(after)} compilation-cause blocks after step {warm} over {last - warm} steps "
                          f"({rate:.2f} per step > {rate_max:g})"), [_log(h) for h in after[:3]]
        return False, f"{len(after)} compilation-cause blocks after warm-up", []
    series = facts.counter_series.get("UncachedCompile") or facts.counter_series.get("CompileTime") or []
    if not series or last is None:
        counted = [p for p in probes if p.compiles is not None and p.steps]
        if counted:
            p = max(counted, key=lambda p: p.compiles / p.steps)
            return _final_count("the probe's compile count", p.compiles, p.steps, settings, _probe(p))
        return None, "no compile counts in the log", []
    name = "UncachedCompile" if facts.counter_series.get("UncachedCompile") else "CompileTime"
    snaps = [(h.step, int(h.text), h) for h in series if h.step is not None]
    warm_snaps = [s for s in snaps if s[0] >= warm]
    if len(snaps) >= 2 and warm_snaps and warm_snaps[-1][0] > warm_snaps[0][0]:
        (s0, c0, _), (s1, c1, h1) = warm_snaps[0], warm_snaps[-1]
        rate = (c1 - c0) / (s1 - s0)
        grown = rate > rate_max
        return grown, (f"{name} grew from {c0} at step {s0} to {c1} at step {s1} ({rate:.2f} per step)"), [_log(h1, f"{name} ")]
    total = int(series[-1].text)
    steps = series[-1].step or last
    hit = series[-1]
    return _final_count(name, total, steps, settings,
                        Evidence("log_line", str(hit.line), f"{name}: {total} after {steps} steps"))


def _final_count(name: str, total: int, steps: int, settings: dict[str, Any],
                 evidence: Evidence) -> tuple[bool | None, str, list[Evidence]]:
    """One compile count at the end of `steps` steps against warm-up plus the per-step rate."""
    warm = int(settings["warmup_steps"])
    rate_max = float(settings["max_compiles_per_step"])
    if steps <= warm:
        return None, f"only {steps} steps: too few to judge compilation after warm-up", []
    allowed = int(settings["warmup_compiles"]) + rate_max * (steps - warm)
    if total > allowed:
        return True, (f"{name} {total} after {steps} steps: more than {settings['warmup_compiles']} during warm-up "
                      f"plus {rate_max:g} per step after it ({allowed:g})"), [evidence]
    return False, f"{name} {total} after {steps} steps", [evidence]


def fallbacks(facts: LogFacts, settings: dict[str, Any], probes: list[ProbeFacts] = ()) -> list[Evidence]:
    """`aten::` counters above 0 in the log's metrics reports, then those the probe found at exit
    that the log does not show, then `not lowered` profiler lines."""
    ignore = set(settings["fallback_ignore"])
    out = [
        Evidence("log_line", str(hit.line), f"{name} ran on the CPU {hit.text} times")
        for name, hit in sorted(facts.counters.items())
        if name.startswith("aten::") and name not in ignore and int(hit.text) > 0
    ]
    seen = set(facts.counters)
    for p in probes:
        for name in p.fallbacks:
            if name.startswith("aten::") and name not in ignore and name not in seen:
                seen.add(name)
                out.append(Evidence("probe", p.where, f"{name} ran on the CPU (the probe's counters at exit)"))
    for hit in facts.profiler:
        if "not lowered" in hit.text:
            out.append(_log(hit))
    return out


def on_xla(facts: LogFacts | None, run: Run) -> Evidence | None:
    """Evidence that the run executed on torch_xla: compilations the probe counted, else a
    metrics report's compile counters above 0 (a process that imported torch_xla but kept its
    tensors on the host compiles nothing)."""
    for p in run.probes():
        if p.compiles:
            return _probe(p)
    for name in ("UncachedCompile", "CachedCompile", "CompileTime"):
        hit = facts.counters.get(name) if facts is not None else None
        if hit is not None and hit.text.isdigit() and int(hit.text) > 0:
            return Evidence("log_line", str(hit.line), f"{name} {hit.text}: the run executed on XLA")
    return None


def stand_in_of(run: Run, intended: Hardware, kind: str | None) -> tuple[str, Evidence] | None:
    """(the stand-in's name, the evidence it ran on XLA) when the run, on `kind`, executed on the
    documented stand-in for the intended kind (domain.performance.STAND_INS)."""
    if kind is None or family(kind) == family(intended.kind):
        return None
    xla = on_xla(run.facts, run)
    name = stand_in(intended.kind, kind, xla is not None)
    return (name, xla) if name is not None and xla is not None else None


def level3(run: Run, intended: Hardware, settings: dict[str, Any]) -> LevelResult:
    kind, count, evidence = observed_devices(run)
    problems: list[tuple[FailureCause, str, list[Evidence]]] = []
    standin = stand_in_of(run, intended, kind)
    if kind is not None and not _kind_matches(intended.kind, str(kind)) and standin is None:
        problems.append((FailureCause.WRONG_CONFIGURATION, f"ran on {kind}, not {intended.kind}", evidence[:1]))
    kind_problems = len(problems)
    if count is not None and count < intended.count:
        problems.append((FailureCause.WRONG_CONFIGURATION, f"ran on {count} device(s) where {intended.count} are intended",
                         evidence[:1]))
    facts = run.facts
    probes = run.probes()
    idle = never_executed(facts) if facts is not None else None
    if idle is not None and not any(p.compiles for p in probes):
        problems.insert(0, (FailureCause.NO_ACCELERATOR_RUNTIME, "ran without the accelerator runtime: its torch_xla "
                            "metrics report shows nothing compiled or executed on an XLA device", [idle]))
    alone_in_log = processes_alone(run)
    if alone_in_log is not None:
        problems.append((FailureCause.WRONG_CONFIGURATION, alone_in_log[0], alone_in_log[1]))
    elif probes:
        launched = (launcher(run.attempt.command.argv) or ("", 0))[1]
        alone = [p for p in probes
                 if p.world_size == 1 and ((p.launcher_world_size or 0) > 1 or (launched or 0) > 1)]
        if not alone and len(probes) > 1 and all(p.world_size == 1 for p in probes):
            alone = probes
        if alone:
            problems.append((FailureCause.WRONG_CONFIGURATION,
                             f"{len(alone)} process(es) under a multi-process launch each report world size 1",
                             [_probe(p) for p in alone[:4]]))
    same = replicas_same_data(run)
    if same is not None:
        problems.append((FailureCause.REPLICAS_SAME_DATA, same[0], same[1]))
    under = batch_undersplit(facts, intended.count) if facts is not None else None
    if under is not None:
        problems.append((FailureCause.BATCH_UNDERSPLIT, under[0], under[1]))
    if facts is not None:
        fb = fallbacks(facts, settings, probes)
        if fb:
            ops = ", ".join(e.text.split(" ran on")[0] for e in fb if " ran on" in e.text) or "ops not lowered"
            problems.append((FailureCause.CPU_FALLBACK, f"CPU fallbacks: {ops}", fb))
        recompiled, why, rev = recompilation(facts, settings, probes)
        if recompiled:
            problems.append((FailureCause.RECOMPILATION, f"repeated compilation: {why}", rev))
    if problems:
        ev = [e for _, _, es in problems for e in es]
        setup = next(((c, es, why) for c, why, es in problems[kind_problems:]
                      if c in CONFIGURATION), None)
        return LevelResult(3, FAIL, "; ".join(p[1] for p in problems), ev, [(c, es) for c, _, es in problems], setup)
    if count is None:
        return LevelResult(3, UNKNOWN, f"no evidence of the device count (intended {intended.describe()})", evidence)
    notes = ""
    if facts is not None:
        recompiled, why, rev = recompilation(facts, settings, probes)
        if recompiled is False:
            notes = f"; no repeated compilation ({why})"
            evidence += rev
    if standin is not None:
        return LevelResult(3, PASS, f"{standin[0]} x{count} standing in for {intended.kind} x{intended.count} (the"
                           f" documented stand-in: it shows the device count, world size and mesh, not the target's"
                           f" speed), no CPU fallback{notes}", evidence + [standin[1]])
    ran = f"{kind} x {count}" if kind else f"{count} device(s), kind not stated in the evidence,"
    return LevelResult(3, PASS, f"ran on {ran} as intended ({intended.describe()}), no CPU fallback{notes}", evidence)


# --------------------------------------------------------------------------- level 4


def level4(run: Run, migration: Migration) -> LevelResult:
    goal = migration.goal
    points = run.series.get(goal.metric)
    want = f"{goal.direction.value} {goal.reference:g} (tolerance {goal.tolerance:g})"
    if not points:
        return LevelResult(4, UNKNOWN, f"no {goal.metric} recorded (goal: {want})")
    if math.isnan(goal.reference):
        return LevelResult(4, UNKNOWN, f"no reference value for {goal.metric} yet: it is taken from the reference run")
    step = max(points)
    value = points[step]
    ev = [run.metric_evidence(goal.metric, step)]
    if goal.met_by(value):
        return LevelResult(4, PASS, f"{goal.metric} {value:.6g} meets the goal ({want})", ev)
    return LevelResult(4, FAIL, f"{goal.metric} {value:.6g} misses the goal ({want})", ev,
                       [(FailureCause.GOAL_NOT_MET, ev)])


# --------------------------------------------------------------------------- cause and flags

_ENV = re.compile(r"ModuleNotFoundError|ImportError|undefined symbol|No module named|cannot open shared object|"
                  r"FileNotFoundError|PermissionError|DefaultCredentialsError|version mismatch")
_API = re.compile(r"NVIDIA driver|torch\.cuda|CUDA|cuda|nccl|NCCL|Torch not compiled with CUDA")


def crash_cause(run: Run) -> tuple[FailureCause, list[Evidence], str]:
    a = run.attempt
    facts = run.facts
    lines = (facts.exceptions if facts else []) + [h for _, h in (facts.fatal if facts else [])]
    oom = [h for k, h in (facts.fatal if facts else []) if k == "oom"]
    if oom or a.exit_code == 137 and any(k == "killed" for k, _ in (facts.fatal if facts else [])):
        return FailureCause.OUT_OF_MEMORY, [_log(h) for h in oom[:2]] + [_record("exit_code", a.exit_code)], "out of memory"
    if a.status is AttemptStatus.INTERRUPTED or a.exit_code in (124, -9, -15) or (
        facts and any(k == "timeout" for k, _ in facts.fatal) and a.exit_code not in (0, None) and not facts.exceptions
    ):
        ev = [_record("status", a.status.value), _record("exit_code", a.exit_code)]
        ev += [_log(h) for k, h in (facts.fatal if facts else []) if k == "timeout"][:2]
        return FailureCause.TIMEOUT, ev, "stopped for taking too long"
    if a.exit_code == 137:
        return FailureCause.OUT_OF_MEMORY, [_record("exit_code", 137)], "killed (exit 137), most often the OOM killer"
    for hit in facts.exceptions if facts else []:
        if _ENV.search(hit.text):
            return FailureCause.ENVIRONMENT, [_log(hit)], "could not import or find what it needs"
        if _API.search(hit.text):
            return FailureCause.API_MISUSE, [_log(hit)], "a GPU-only call survived the port"
    if lines:
        return FailureCause.CRASH, [_log(h) for h in lines[:3]], "raised an error"
    return FailureCause.CRASH, [_record("exit_code", a.exit_code)], "exited with an error status"


def with_findings(result: LevelResult, found: list[trace.Finding]) -> LevelResult:
    """A level with the trace's findings for it: failed, their causes first (the trace saw the
    training itself; the log's own findings follow)."""
    if not found:
        return result
    reasons = [f.reason for f in found]
    evidence = [e for f in found for e in f.evidence]
    causes = [(f.cause, f.evidence) for f in found]
    if result.outcome is FAIL:
        reasons.append(result.reason)
        evidence += result.evidence
        causes += result.causes
    setup = result.setup or next(((f.cause, f.evidence, f.reason) for f in found if f.cause in CONFIGURATION), None)
    return LevelResult(result.level, FAIL, "; ".join(reasons), evidence, causes, setup)


CONFIGURATION = (FailureCause.WRONG_CONFIGURATION, FailureCause.NO_ACCELERATOR_RUNTIME,
                 FailureCause.REPLICAS_SAME_DATA, FailureCause.REPLICAS_OUT_OF_SYNC, FailureCause.BATCH_UNDERSPLIT,
                 FailureCause.BATCH_SIZE_DIFFERS, FailureCause.NO_GRADIENT_REDUCTION)
"""Level 3 causes that make a run's numbers meaningless: a level-2 mismatch is their effect."""
