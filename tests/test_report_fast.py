"""The JSON and CSV reports written faster (issue 39): orjson writes the same values as json.dumps
wrote, json itself a report orjson would write otherwise (NaN, infinities); the attempts CSV's
cells are made in one pass, a formula still kept from running."""

from __future__ import annotations

import json
import math

from workbench.report import build_report, render
from workbench.report.jsonout import render_json, report_dict


def as_json_wrote(report) -> bytes:
    return (json.dumps(report_dict(report), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def test_the_json_report_holds_what_json_dumps_wrote(demo_study) -> None:
    report = build_report(demo_study.db)
    data = render(report, "json")
    assert data.endswith(b"\n") and render_json(report).encode() == data
    assert json.loads(data) == json.loads(as_json_wrote(report))
    assert json.loads(data)["attempts"] and json.loads(data)["totals"]["attempts"]["n"] > 0
    # orjson writes the attempts from their AttemptFacts: byte for byte what it wrote from dicts
    import orjson

    assert data == orjson.dumps(report_dict(report)) + b"\n"


def test_a_report_with_a_non_finite_value_is_written_by_json(demo_study) -> None:
    report = build_report(demo_study.db)
    attempt = next(a for m in report.migrations for a in m.attempt_facts)
    attempt.goal_value = math.inf  # a diverged metric
    data = render(report, "json")
    assert data == as_json_wrote(report) and b"Infinity" in data
    attempt.goal_value = None
    report.migrations[0].wall_hours = math.nan  # anywhere in the report, not only the attempts
    data = render(report, "json")
    assert data == as_json_wrote(report) and b"NaN" in data


def test_the_attempts_csv_keeps_a_formula_from_running_and_writes_flags(demo_study) -> None:
    import csv
    import io
    import zipfile

    db = demo_study.db
    first = db.execute("SELECT MIN(id) FROM attempt WHERE source = 'agent'").fetchone()[0]
    db.execute("UPDATE attempt SET claim = '=HYPERLINK(\"x\")' WHERE id = ?", [first])
    report = build_report(db)
    archive = zipfile.ZipFile(io.BytesIO(render(report, "csv")))
    rows = {int(r["attempt_id"]): r for r in csv.DictReader(io.StringIO(archive.read("attempts.csv").decode()))}
    assert rows[first]["claim"] == "'=HYPERLINK(\"x\")"
    facts = {a.id: a for m in report.migrations for a in m.attempt_facts}
    assert {r["failed"] for r in rows.values()} <= {"yes", "no"}
    assert all(r["failed"] == ("yes" if facts[i].failed else "no") for i, r in rows.items())
    assert all((r["goal_value"] == "") == (facts[i].goal_value is None) for i, r in rows.items())


def test_a_report_without_loss_curves_is_the_same_in_every_format_that_draws_none(demo_study) -> None:
    """Only html draws the loss curves: the other formats are built without reading them (issue 39),
    and say the same; html refuses a report built so."""
    import pytest

    from workbench.report import ATTEMPT_TEXT_FORMATS, CHART_FORMATS, FORMATS

    db = demo_study.db
    for fmt in FORMATS:
        texts = fmt in ATTEMPT_TEXT_FORMATS
        full = build_report(db, attempt_texts=texts)
        if fmt in CHART_FORMATS:
            assert any(m.loss for m in full.migrations)
            with pytest.raises(ValueError, match="charts=True"):
                render(build_report(db, attempt_texts=texts, charts=False), fmt)
        else:
            lean = build_report(db, attempt_texts=texts, charts=False)
            assert not any(m.loss for m in lean.migrations)
            assert render(lean, fmt) == render(full, fmt)


def test_building_and_rendering_leave_the_cycle_collector_as_they_found_it(demo_study) -> None:
    """The collector is paused while a report is built and rendered (issue 39), and left as it was."""
    import gc

    assert gc.isenabled()
    render(build_report(demo_study.db, attempt_texts=False), "md")
    assert gc.isenabled()
    gc.disable()
    try:
        render(build_report(demo_study.db, attempt_texts=False), "md")
        assert not gc.isenabled()
    finally:
        gc.enable()
