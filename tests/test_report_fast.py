"""The JSON and CSV reports written faster (issue 39): orjson writes the same values as json.dumps
wrote, json itself a report orjson would write otherwise (NaN, infinities); the attempts CSV's
cells are made in one pass, a formula still kept from running."""

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


def test_the_attempts_csv_keeps_a_formula_from_running_and_writes_flags(demo_source: Path, tmp_path: Path) -> None:
    import csv
    import io
    import zipfile

    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    try:
        first = study.db.execute("SELECT MIN(id) FROM attempt WHERE source = 'agent'").fetchone()[0]
        study.db.execute("UPDATE attempt SET claim = '=HYPERLINK(\"x\")' WHERE id = ?", [first])
        report = build_report(study.db)
    finally:
        study.close()
    archive = zipfile.ZipFile(io.BytesIO(render(report, "csv")))
    rows = {int(r["attempt_id"]): r for r in csv.DictReader(io.StringIO(archive.read("attempts.csv").decode()))}
    assert rows[first]["claim"] == "'=HYPERLINK(\"x\")"
    facts = {a.id: a for m in report.migrations for a in m.attempt_facts}
    assert {r["failed"] for r in rows.values()} <= {"yes", "no"}
    assert all(r["failed"] == ("yes" if facts[i].failed else "no") for i, r in rows.items())
    assert all((r["goal_value"] == "") == (facts[i].goal_value is None) for i, r in rows.items())
