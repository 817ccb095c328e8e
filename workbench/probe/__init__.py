"""The probe a re-run carries into the training process, and reading what it wrote.

`inject/` is put on the run's PYTHONPATH (its `sitecustomize.py` starts the probe) with
WORKBENCH_PROBE_DIR naming the folder for its reports; the project's code is not changed.
`inject/workbench_probe.py` is standard library only and runs inside the target environment
(a TPU VM's Python, the torch_xla venv), so nothing in it imports the workbench.
docs/rerun.md describes the report.

`facts` is the one reading of probe JSON for the verifier (level 3): a `workbench-probe {json}`
line from a log, or a stored report (a `probe_report` row or a file), becomes `ProbeFacts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.environment import RanWith
from workbench.probe.inject import workbench_probe as _probe

INJECT_DIR = Path(__file__).resolve().parent / "inject"
"""The folder to put on PYTHONPATH."""


def environment(out_dir: Path | str) -> dict[str, str]:
    """What a run's environment needs for the probe (PYTHONPATH is prepended by the caller)."""
    return {"WORKBENCH_PROBE_DIR": str(out_dir)}


def read_reports(folder: Path) -> list[dict[str, Any]]:
    """Every probe report in `folder`, ordered by rank then pid; unreadable files are skipped."""
    out = []
    for path in sorted(folder.glob("probe-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data["_file"] = path.name
            out.append(data)
    out.sort(key=lambda r: (_int_or(r.get("rank"), 1 << 30), _int_or(r.get("pid"), 0)))
    return out


def main_report(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The report whose series stand for the run: rank 0 with the most steps."""
    reports = [r for r in reports if not r.get("idle")]
    if not reports:
        return None
    return max(reports, key=lambda r: (_int_or(r.get("steps"), 0), r.get("rank") in (0, None)))


def _int_or(value: Any, default: int) -> int:
    """A report's integer field, or default when a damaged report has something else there."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


STORED_SERIES = ("loss", "grad_norm", "step_time")
"""The series a run stores as its metrics where the program printed none of the same name."""


def series(report: dict[str, Any], names: tuple[str, ...] = STORED_SERIES) -> dict[str, dict[int, float]]:
    """The report's per-step series of `names` (step -> value); unreadable points are skipped."""
    out: dict[str, dict[int, float]] = {}
    for name in names:
        values = report.get(name) or {}
        if not isinstance(values, dict):
            continue
        points = {}
        for step, value in values.items():
            try:
                points[int(step)] = float(value)
            except (TypeError, ValueError):
                continue
        if points:
            out[name] = points
    return out


@dataclass(frozen=True)
class ProbeFacts:
    """What one process's probe says about devices, world size and compilation."""

    where: str
    """Where it was read: `line N` of the log, or the report's file name."""
    text: str
    """The summary line as printed (or as the report would print it): the evidence text."""
    device_kind: str | None = None
    global_device_count: int | None = None
    devices_used: int | None = None
    world_size: int | None = None
    rank: int | None = None
    launcher_world_size: int | None = None
    steps: int | None = None
    compiles: int | None = None
    fallbacks: tuple[str, ...] = ()
    step_source: str | None = None
    """`optimizer` (torch.optim steps), `backward` (weights updated by hand), None (no step seen)."""
    optimizers_made: int | None = None
    """torch.optim optimizers the program built: one built and never stepped means no training."""
    trailing_backward_calls: int | None = None
    """Backward calls after the last optimizer step (all of them when none stepped)."""
    runtime: str | None = None
    """The accelerator runtime the program imported (`torch_xla`, `torchax`, `torch_tpu`) or `torch`."""
    host_reads_per_step: float | None = None
    """Median device-to-host reads per step after the first two (torch_xla's counters, the probe's own
    fetches left out): `.item()`, `.cpu()`, printing a device tensor."""
    item_calls_per_step: float | None = None
    """Median `aten::_local_scalar_dense` calls per step after the first two (torch_xla's counter
    read at each optimizer step): level 5's host syncs per step where a trace exists."""
    compiles_by_phase: tuple[tuple[str, int], ...] = ()
    """Compilations while the modules were training and while they were in eval mode."""
    eval_phases: int | None = None
    first_non_finite: int | None = None
    """The first step whose loss or gradient norm was NaN or infinite."""
    param_dtypes: tuple[str, ...] = ()
    batch_size: float | None = None
    """The median first dimension of each step's first training input: the per-replica batch."""

    @property
    def device_count(self) -> int | None:
        """The devices the process used: the global count, or fewer when it used fewer."""
        count, used = self.global_device_count, self.devices_used
        if used is None:
            return count
        return used if count is None else min(count, used)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts(record: dict[str, Any], where: str, text: str | None = None) -> ProbeFacts | None:
    """One process's facts from its probe JSON: the object of a `workbench-probe` line, or a full
    report (reduced with the probe's own `summary`, so both say the same); None for an idle
    process or something that is not probe JSON."""
    if not isinstance(record, dict):
        return None
    if "probe_version" in record:
        try:
            record = _probe.summary(record)
        except (AttributeError, TypeError):  # a damaged report: its plain fields still count
            record = {k: record.get(k) for k in _probe.SUMMARY_KEYS}
        if record is None:
            return None
    kind = record.get("device_kind")
    fallbacks = record.get("fallbacks")
    phases = record.get("compiles_by_phase")
    bad = record.get("first_non_finite")
    bad_steps = [v for v in bad.values() if _int(v) is not None] if isinstance(bad, dict) else []
    dtypes = record.get("param_dtypes")
    return ProbeFacts(
        where=where,
        text=text if text is not None else "workbench-probe " + json.dumps(record, default=str),
        device_kind=str(kind) if kind else None,
        global_device_count=_int(record.get("global_device_count")),
        devices_used=_int(record.get("devices_used")),
        world_size=_int(record.get("world_size")),
        rank=_int(record.get("rank")),
        launcher_world_size=_int(record.get("launcher_world_size")),
        steps=_int(record.get("steps")),
        compiles=_int(record.get("compiles")),
        fallbacks=tuple(str(f) for f in fallbacks) if isinstance(fallbacks, (list, tuple)) else (),
        step_source=str(record["step_source"]) if record.get("step_source") else None,
        optimizers_made=_int(record.get("optimizers_made")),
        trailing_backward_calls=_int(record.get("trailing_backward_calls")),
        runtime=str(record["runtime"]) if record.get("runtime") else None,
        host_reads_per_step=_number(record.get("host_reads_per_step")),
        item_calls_per_step=_number(record.get("item_calls_per_step")),
        compiles_by_phase=tuple((str(k), v) for k, v in sorted(phases.items()) if _int(v) is not None)
        if isinstance(phases, dict) else (),
        eval_phases=_int(record.get("eval_phases")),
        first_non_finite=min(bad_steps) if bad_steps else None,
        param_dtypes=tuple(str(d) for d in dtypes) if isinstance(dtypes, (list, tuple)) else (),
        batch_size=_number(record.get("batch_size")),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def facts_of_reports(reports: list[dict[str, Any]]) -> list[ProbeFacts]:
    """The facts of stored reports (one per process), idle processes left out."""
    out = []
    for report in reports:
        if not isinstance(report, dict):
            continue
        found = facts(report, str(report.get("_file") or "probe report"))
        if found is not None:
            out.append(found)
    return out


def ran_with(reports: list[dict[str, Any]]) -> RanWith | None:
    """What the run ran with, from its main report's `ran_with` (probe version 2); None without."""
    main = main_report(reports)
    found = main.get("ran_with") if main is not None else None
    if not isinstance(found, dict):
        return None
    packages = found.get("packages")
    imported = found.get("imported")
    runtime = main.get("runtime") if isinstance(main.get("runtime"), dict) else {}
    return RanWith(
        python=str(found["python"]) if found.get("python") else None,
        runtime=str(runtime["name"]) if runtime.get("name") else None,
        runtime_version=str(runtime["version"]) if runtime.get("version") else None,
        launcher=str(found["launcher"]) if found.get("launcher") else None,
        device_count=_int(main.get("devices_used")) or _int(main.get("global_device_count")),
        packages={str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {},
        imported=frozenset(str(n) for n in imported) if isinstance(imported, list) else frozenset(),
    )
