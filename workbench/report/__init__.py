"""Counted human-effort reports: what a study cost and found, traceable to the records.

`build_report(db, slugs)` counts from raw rows (docs/report.md defines each count), `build_for(db,
fmt, ...)` as much as one format shows; `render(report, fmt)` gives the bytes of one format: `md`,
`html`, `csv` (a zip of one CSV per table), `json` or `latex`. Every free text is redacted (workbench/redact.py) on its way in.
"""

from __future__ import annotations

from workbench.report.build import build_report, gc_paused
from workbench.report.final import ACCEPTED
from workbench.report.model import StudyReport

FORMATS = ("md", "html", "csv", "json", "latex")
ATTEMPT_TEXT_FORMATS = ("csv", "json")
"""The formats that show each attempt's row (its command, claim, failure note, status, cause...): a
report for any other format is built without those (`build_report(..., attempt_texts=False)`),
which spares a JSON decode, a shell quoting, a redaction and a few strings per attempt."""
CHART_FORMATS = ("html",)
"""The formats that draw each migration's charts (its loss curves, a bar at each attempt's seq): a
report for any other format is built without reading the curves or a group's seqs
(`build_report(..., charts=False)`)."""
PER_ATTEMPT_FORMATS = ("csv", "json")
"""The formats that show each attempt's row: a report for any other format counts groups of attempts
that every count reads alike (`build_report(..., per_attempt=False)`): the same counts from a row a
group, where a row an attempt was most of a report of 150,000 attempts. The HTML report's bar for
each attempt is its group's, drawn at each member's seq."""
EXTENSIONS = {"md": ".md", "html": ".html", "csv": ".zip", "json": ".json", "latex": ".tex"}


def build_for(db, fmt: str, slugs: list[str] | tuple[str, ...] | None = None, *, pseudonymise: bool = False,
              final: str = ACCEPTED) -> StudyReport:
    """The report built with what format `fmt` shows and no more (texts, loss curves, each attempt)."""
    return build_report(db, slugs, pseudonymise=pseudonymise, final=final, attempt_texts=fmt in ATTEMPT_TEXT_FORMATS,
                        charts=fmt in CHART_FORMATS, per_attempt=fmt in PER_ATTEMPT_FORMATS or final != ACCEPTED)


def render(report: StudyReport, fmt: str) -> bytes:
    """The report in one format, as the bytes of a file; the cycle collector paused meanwhile
    (workbench.report.build.gc_paused)."""
    with gc_paused():
        return _render(report, fmt)


def _render(report: StudyReport, fmt: str) -> bytes:
    if fmt in PER_ATTEMPT_FORMATS and not report.per_attempt:
        raise ValueError(f"a {fmt} report shows each attempt's row: build it with per_attempt=True")
    if fmt in ATTEMPT_TEXT_FORMATS and not report.attempt_texts:
        raise ValueError(f"a {fmt} report shows the attempts' texts: build it with attempt_texts=True")
    if fmt in CHART_FORMATS and not report.charts:
        raise ValueError(f"a {fmt} report draws charts: build it with charts=True")
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


__all__ = ["ATTEMPT_TEXT_FORMATS", "EXTENSIONS", "FORMATS", "CHART_FORMATS", "PER_ATTEMPT_FORMATS", "StudyReport",
           "build_for", "build_report", "render"]
