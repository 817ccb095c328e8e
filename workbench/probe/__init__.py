"""The probe a re-run carries into the training process, and reading what it wrote.

`inject/` is put on the run's PYTHONPATH (its `sitecustomize.py` starts the probe) with
WORKBENCH_PROBE_DIR naming the folder for its reports; the project's code is not changed.
`inject/workbench_probe.py` is standard library only and runs inside the target environment
(a TPU VM's Python, the torch_xla venv), so nothing in it imports the workbench.
docs/rerun.md describes the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def series(report: dict[str, Any]) -> dict[str, dict[int, float]]:
    """The report's per-step series: loss, grad_norm, step_time (step -> value)."""
    out: dict[str, dict[int, float]] = {}
    for name in ("loss", "grad_norm", "step_time"):
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
