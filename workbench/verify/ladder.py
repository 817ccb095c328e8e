"""The five levels, the failure cause and the per-attempt flags, from evidence alone.

Pure functions: `judge` takes what storage and the log scan found and returns a `Judgement`;
nothing here reads the database or the agent's claim (only its expected level, to flag an
over-claim). docs/verification.md says what each level checks.
"""

from __future__ import annotations

import math
import re
import statistics
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.costs import chip_cost
from domain.ladder import highest_level, over_claim
from domain.models import (
    Attempt,
    AttemptStatus,
    Evidence,
    FailureCause,
    Hardware,
    Migration,
    Outcome,
    Study,
)
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

    def probes(self) -> list[ProbeFacts]:
        """Each probed process's facts: from the stored reports when there are any, else from the
        `workbench-probe` lines of the log (a re-run's log holds both; the reports say more)."""
        if self.probe_reports:
            return facts_of_reports(self.probe_reports)
        if self.facts is None:
            return []
        found = (probe_facts(record, f"line {hit.line}", hit.text) for hit, record in self.facts.probes)
        return [f for f in found if f is not None]

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


def level1(run: Run, reference: Run | None, goal_metric: str, settings: dict[str, Any]) -> LevelResult:
    a = run.attempt
    errors = errors_raised(run)
    if errors:
        what = "exited with status %s" % a.exit_code if a.exit_code not in (None, 0) else "exited 0"
        tb = run.facts is not None and (run.facts.tracebacks or run.facts.fatal)
        reason = what + (" and its log holds a traceback or fatal error" if tb else "")
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
    """Level 2 on the metric series alone, and whether anything was compared."""
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
        rtol, atol = tolerance(settings, name)
        for start in range(0, len(common), window):
            block = common[start : start + window]
            a = sum(mine[s] for s in block) / len(block)
            r = sum(ref[s] for s in block) / len(block)
            if not _agree(a, r, rtol, atol):
                worst = max(block, key=lambda s: abs(mine[s] - ref[s]) / (abs(ref[s]) or 1.0))
                rel = abs(mine[worst] - ref[worst]) / (abs(ref[worst]) or 1.0)
                reason = (f"{name} disagrees with the reference over steps {block[0]}-{block[-1]}: mean "
                          f"{a:.6g} vs {r:.6g} (rtol {rtol:g}, atol {atol:g}); worst at step {worst}, "
                          f"{mine[worst]:.6g} vs {ref[worst]:.6g} ({rel:.1%})") + _bfloat16_note(name, mine, ref)
                ev = [run.metric_evidence(name, worst, f"reference {ref[worst]:.6g}")]
                ev += [run.metric_evidence(name, s, f"reference {ref[s]:.6g}") for s in block if s != worst][:2]
                return LevelResult(2, FAIL, reason, ev,
                                   [(FailureCause.NUMERICAL_MISMATCH, ev)]), True
        ref_end = max(ref)
        if ref_end not in mine:
            unknown.append(f"{name} agrees through step {common[-1]}; the run stopped before step {ref_end}")
            evidence.append(run.metric_evidence(name, common[-1]))
            continue
        ertol, eatol = tolerance(settings, name, end=True)
        if not _agree(mine[ref_end], ref[ref_end], ertol, eatol):
            ev = [run.metric_evidence(name, ref_end, f"reference {ref[ref_end]:.6g}")]
            return LevelResult(2, FAIL, f"{name} at the end (step {ref_end}) is {mine[ref_end]:.6g} vs "
                               f"{ref[ref_end]:.6g} (rtol {ertol:g}, atol {eatol:g})", ev,
                               [(FailureCause.NUMERICAL_MISMATCH, ev)]), True
        agreed.append(f"{name} over {len(common)} steps")
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
        rtol, atol = tolerance(settings, name, end=True)
        if not _agree(mine[ms], ref[ms], rtol, atol):
            ev = [run.metric_evidence(name, ms, f"reference {ref[ms]:.6g}")]
            return LevelResult(2, FAIL, f"{name} at step {ms} is {mine[ms]:.6g} vs the reference's {ref[ms]:.6g} "
                               f"(rtol {rtol:g}, atol {atol:g})", ev, [(FailureCause.NUMERICAL_MISMATCH, ev)]), True
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


_TRANSFERS = re.compile(r"TransferFromDeviceTime too frequent: ([0-9]{1,12}) counts during ([0-9]{1,12}) steps")


def host_sync_rate(facts: LogFacts | None) -> tuple[float, Evidence] | None:
    """Host syncs per step: `aten::_local_scalar_dense` over the steps, else torch_xla's
    profiler count of device-to-host transfers over its steps."""
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
    found = host_sync_rate(run.facts)
    if found is None:
        return False, []
    rate, first = found
    theirs = host_sync_rate(reference.facts) if reference is not None else None
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


def level3(run: Run, intended: Hardware, settings: dict[str, Any]) -> LevelResult:
    kind, count, evidence = observed_devices(run)
    problems: list[tuple[FailureCause, str, list[Evidence]]] = []
    if kind is not None and not _kind_matches(intended.kind, str(kind)):
        problems.append((FailureCause.WRONG_CONFIGURATION, f"ran on {kind}, not {intended.kind}", evidence[:1]))
    if count is not None and count < intended.count:
        problems.append((FailureCause.WRONG_CONFIGURATION, f"ran on {count} device(s) where {intended.count} are intended",
                         evidence[:1]))
    facts = run.facts
    probes = run.probes()
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
        return LevelResult(3, FAIL, "; ".join(p[1] for p in problems), ev, [(c, es) for c, _, es in problems])
    if count is None:
        return LevelResult(3, UNKNOWN, f"no evidence of the device count (intended {intended.describe()})", evidence)
    notes = ""
    if facts is not None:
        recompiled, why, rev = recompilation(facts, settings, probes)
        if recompiled is False:
            notes = f"; no repeated compilation ({why})"
            evidence += rev
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


# --------------------------------------------------------------------------- level 5

def cost(run: Run, prices: dict[str, float], kind: str | None, chips: int | None) -> tuple[float | None, float | None]:
    return chip_cost(run.attempt.started_at, run.attempt.ended_at, prices, kind, chips)


STEP_TIMES: dict[str, float] = {
    "step_time_ms": 1e-3, "step_ms": 1e-3, "iter_time_ms": 1e-3, "time_ms": 1e-3,
    "step_time_s": 1.0, "step_time": 1.0, "iter_time": 1.0, "batch_time": 1.0,
}
"""Per-step time series a run may log, and their unit in seconds: level 5's preferred figure."""


def step_times(run: Run, warm: int) -> tuple[str, float, float, int] | None:
    """(series, median seconds per step after warm-up, seconds spent in the warm-up steps (the
    compilation), steps after warm-up) from the first step-time series with 3 steps after it."""
    for name, unit in STEP_TIMES.items():
        points = run.series.get(name) or {}
        after = [v * unit for s, v in points.items() if s > warm]
        if len(after) >= 3:
            return name, statistics.median(after), sum(v * unit for s, v in points.items() if s <= warm), len(after)
    return None


def _throughput(run: Run, reference: Run, settings: dict[str, Any], rates: tuple[float | None, float | None]
                ) -> tuple[float, float | None, str, list[Evidence]] | None:
    """Level 5 on training throughput when both runs log step times: the time ratio of the median
    step after warm-up, the cost ratio from it and each run's dollars per second."""
    warm = int(settings["warmup_steps"])
    mine, theirs = step_times(run, warm), step_times(reference, warm)
    if mine is None or theirs is None or theirs[1] <= 0:
        return None
    tr = mine[1] / theirs[1]
    cr = tr * rates[0] / rates[1] if rates[0] is not None and rates[1] else None
    text = (f"median step time after step {warm}: {mine[1] * 1e3:.4g} ms ({mine[0]}, {mine[3]} steps) vs the "
            f"reference's {theirs[1] * 1e3:.4g} ms ({theirs[0]}); warm-up and compilation apart: "
            f"{mine[2]:.3g} s vs {theirs[2]:.3g} s")
    last = max(s for s in run.series[mine[0]] if s > warm)
    return tr, cr, text, [run.metric_evidence(mine[0], last)]


def level5(run: Run, reference: Run | None, migration: Migration, study: Study, intended: Hardware,
           level1_outcome: Outcome, settings: dict[str, Any]) -> tuple[LevelResult, dict[str, float | None]]:
    """Time and cost against the reference: the median step time after warm-up when both runs log
    step times, else process wall time (start-up and compilation included)."""
    _, observed_count, _ = observed_devices(run)
    chips = observed_count or intended.count
    kind = intended.kind
    wall, dollars = cost(run, study.prices, kind, chips)
    figures: dict[str, float | None] = {"wall": wall, "cost": dollars, "time_ratio": None, "cost_ratio": None}
    if reference is None:
        return LevelResult(5, UNKNOWN, "no reference run to compare with"), figures
    ref_kind, ref_count, _ = observed_devices(reference)
    ref_hw = reference.attempt.intended_hardware
    ref_kind = ref_kind or (ref_hw.kind if ref_hw else None)
    ref_wall, ref_dollars = cost(reference, study.prices, ref_kind, ref_count or (ref_hw.count if ref_hw else 1))
    if wall is not None and ref_wall:
        figures["time_ratio"] = wall / ref_wall
    if dollars is not None and ref_dollars:
        figures["cost_ratio"] = dollars / ref_dollars
    ev = [
        _record("wall", f"{wall:.2f} s on {kind} x {chips}" if wall is not None else "unknown"),
        Evidence("record", "reference wall", f"{ref_wall:.2f} s on {ref_kind} x {ref_count or 1}" if ref_wall else "unknown"),
    ]
    used = "process wall time"
    rates = (dollars / wall if dollars is not None and wall else None,
             ref_dollars / ref_wall if ref_dollars is not None and ref_wall else None)
    steps = _throughput(run, reference, settings, rates)
    if steps is not None:
        figures["time_ratio"], figures["cost_ratio"], used, step_ev = steps
        ev = step_ev + ev
    if level1_outcome is not PASS:
        return LevelResult(5, UNKNOWN, "the run did not complete (level 1), so its time says nothing", ev), figures
    tr, cr = figures["time_ratio"], figures["cost_ratio"]
    if tr is None:
        return LevelResult(5, UNKNOWN, "no wall time for this run or the reference", ev), figures
    mt, mc = float(settings["max_time_ratio"]), float(settings["max_cost_ratio"])
    text = (f"time x{tr:.2f} of the reference" + (f", cost x{cr:.2f}" if cr is not None else ", cost unknown (no price)")
            + f" (from {used})")
    if tr >= mt or (cr is not None and cr >= mc):
        return LevelResult(5, FAIL, f"{text}: slower or costlier (limits x{mt:g} time, x{mc:g} cost)", ev,
                           [(FailureCause.SLOWER_OR_COSTLIER, ev)]), figures
    if cr is None:
        return LevelResult(5, UNKNOWN, f"{text}: faster, cost unknown", ev), figures
    return LevelResult(5, PASS, f"{text}: better on both", ev), figures


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
    return LevelResult(result.level, FAIL, "; ".join(reasons), evidence, causes)


def _wrong_configuration(failed: list[LevelResult]) -> LevelResult | None:
    """Level 3's failure when its cause is a wrong configuration, else None."""
    return next((r for r in failed if r.level == 3 and r.causes
                 and r.causes[0][0] is FailureCause.WRONG_CONFIGURATION), None)


def judge(
    run: Run,
    reference: Run | None,
    migration: Migration,
    study: Study,
    settings: dict[str, Any],
    tensors: LevelResult | None = None,
) -> Judgement:
    intended = run.attempt.intended_hardware or Hardware(migration.target.accelerator, migration.target.chips)
    l1 = level1(run, reference, migration.goal.metric, settings)
    l2 = level2(run, reference, migration.goal.metric, settings, tensors)
    l3 = level3(run, intended, settings)
    traced = trace.findings(run.probes(), run.probe_reports, migration.target.runtime)
    l1 = with_findings(l1, [f for f in traced if f.level == 1])
    l3 = with_findings(l3, [f for f in traced if f.level == 3])
    l4 = level4(run, migration)
    if l1.outcome is not PASS and l4.outcome is FAIL:
        l4 = LevelResult(4, UNKNOWN, f"the run did not complete: {l4.reason}", l4.evidence)
    l5, figures = level5(run, reference, migration, study, intended, l1.outcome, settings)
    levels = [l1, l2, l3, l4, l5]
    highest = highest_level({r.level: r.outcome.value for r in levels})
    errors = errors_raised(run)
    raised = bool(errors)
    failed = [r for r in levels if r.outcome is FAIL]
    cause = None
    cause_ev: list[Evidence] = []
    note = ""
    abnormal, notes = host_syncs(run, reference, settings)
    if failed:
        first = failed[0]
        if first.level == 1:
            if raised or run.attempt.exit_code not in (0, None) or run.attempt.status is AttemptStatus.INTERRUPTED:
                cause, cause_ev, note = crash_cause(run)
            elif first.causes:   # the trace's own finding (an optimizer that never stepped)
                (cause, cause_ev), note = first.causes[0], first.reason
            else:
                cause, cause_ev, note = FailureCause.INCOMPLETE, first.evidence, first.reason
        elif first.level == 2 and (setup := _wrong_configuration(failed)) is not None:
            # a run on the wrong configuration (processes each alone, fewer devices) cannot match
            # the reference's numbers: the configuration is the cause, the mismatch its effect
            (cause, cause_ev), note = setup.causes[0], f"{setup.reason}; so {first.reason}"
        elif first.level == 5 and abnormal:
            cause, cause_ev, note = FailureCause.HOST_SYNC, notes, f"{first.reason}; abnormal host syncs: {notes[0].text}"
        else:
            cause, cause_ev = first.causes[0] if first.causes else (FailureCause.OTHER, first.evidence)
            note = first.reason
    silent = bool(failed) and not raised and run.attempt.exit_code == 0
    over = over_claim(run.attempt.expected_level, {r.level: r.outcome.value for r in levels})
    return Judgement(
        levels=levels,
        highest_level=highest,
        cause=cause,
        cause_evidence=list(cause_ev),
        cause_note=note,
        silent=silent,
        over_claim=over,
        raised_error=raised,
        wall_seconds=figures["wall"],
        cost_dollars=figures["cost"],
        time_ratio=figures["time_ratio"],
        cost_ratio=figures["cost_ratio"],
        notes=notes,
    )
