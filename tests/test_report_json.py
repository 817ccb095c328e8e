"""The JSON report is written by orjson (issue 39): the same values as json.dumps wrote, and json
itself writes a report orjson would write otherwise (NaN, infinities)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from storage.database import open_study
from workbench.report import build_report, render
from workbench.report.jsonout import render_json, report_dict


def as_json_wrote(report) -> bytes:
    return (json.dumps(report_dict(report), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def test_the_json_report_holds_what_json_dumps_wrote(demo_source: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    try:
        report = build_report(study.db)
    finally:
        study.close()
    data = render(report, "json")
    assert data.endswith(b"\n") and render_json(report).encode() == data
    assert json.loads(data) == json.loads(as_json_wrote(report))
    assert json.loads(data)["attempts"] and json.loads(data)["totals"]["attempts"]["n"] > 0


def test_a_report_with_a_non_finite_value_is_written_by_json(demo_source: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    try:
        report = build_report(study.db)
    finally:
        study.close()
    attempt = next(a for m in report.migrations for a in m.attempt_facts)
    attempt.goal_value = math.inf  # a diverged metric
    data = render(report, "json")
    assert data == as_json_wrote(report) and b"Infinity" in data
    attempt.goal_value = None
    report.migrations[0].wall_hours = math.nan  # anywhere in the report, not only the attempts
    data = render(report, "json")
    assert data == as_json_wrote(report) and b"NaN" in data
