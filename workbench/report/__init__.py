"""Counted human-effort reports: what a study cost and found, traceable to the records.

`build_report(db, slugs)` counts from raw rows (docs/report.md defines each count);
`render(report, fmt)` gives the bytes of one format: `md`, `html`, `csv` (a zip of one CSV per
table), `json` or `latex`. Every free text is redacted (workbench/redact.py) on its way in.
"""

from __future__ import annotations

from workbench.report.build import build_report
from workbench.report.model import StudyReport

FORMATS = ("md", "html", "csv", "json", "latex")
ATTEMPT_TEXT_FORMATS = ("csv", "json")
"""The formats that show each attempt's command, claim and failure note: a report for any other
format is built without them (`build_report(..., attempt_texts=False)`), which spares a JSON
decode, a shell quoting and a redaction per attempt."""
EXTENSIONS = {"md": ".md", "html": ".html", "csv": ".zip", "json": ".json", "latex": ".tex"}


def render(report: StudyReport, fmt: str) -> bytes:
    """The report in one format, as the bytes of a file."""
    if fmt in ATTEMPT_TEXT_FORMATS and not report.attempt_texts:
        raise ValueError(f"a {fmt} report shows the attempts' texts: build it with attempt_texts=True")
    if fmt == "md":
        from workbench.report.markdown import render_markdown

        return render_markdown(report).encode()
    if fmt == "html":
        from workbench.report.html import render_html

        return render_html(report).encode()
    if fmt == "csv":
        from workbench.report.csvzip import render_csv_zip

        return render_csv_zip(report)
    if fmt == "json":
        from workbench.report.jsonout import json_bytes

        return json_bytes(report)
    if fmt == "latex":
        from workbench.report.latex import render_latex

        return render_latex(report).encode()
    raise ValueError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")


__all__ = ["ATTEMPT_TEXT_FORMATS", "EXTENSIONS", "FORMATS", "StudyReport", "build_report", "render"]
