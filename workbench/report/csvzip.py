"""CSV: one file per table (record-level tables included), zipped, with a README."""

from __future__ import annotations

import csv
import io
import zipfile

from workbench.report.model import StudyReport
from workbench.report.tables import FORMULA, V, all_tables, title_lines


def value(v: V | object) -> object:
    raw = v.raw if isinstance(v, V) else v
    kind = type(raw)
    if kind is int or kind is float:  # most cells: no test below applies (bool is its own type)
        return raw
    if raw is None:
        return ""
    if isinstance(raw, bool):
        return "yes" if raw else "no"
    if isinstance(raw, str) and raw.startswith(FORMULA):
        return "'" + raw  # a spreadsheet would run it as a formula
    return raw


def render_csv_zip(report: StudyReport) -> bytes:
    buffer = io.BytesIO()
    fixed = (2000, 1, 1, 0, 0, 0)  # same data, same bytes
    # Deflate's fastest level: the same files, ~1.4x the bytes, a quarter of the CPU (150,000
    # attempts: 0.24 s against 0.83 s at the default level 6; issue 39).
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        readme = "\n".join(title_lines(report) + [
            "One CSV file per table; docs/report.md defines every count.",
            f"LLM cost: {report.llm_source}.", ""])
        archive.writestr(zipfile.ZipInfo("README.txt", fixed), readme)
        for table in all_tables(report):
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow([h.lower().replace(" ", "_") for h in table.headers])
            if table.raw_rows is not None:  # its cells as written already
                writer.writerows(table.raw_rows)
            else:
                writer.writerows([value(v) for v in row] for row in table.rows)
            info = zipfile.ZipInfo(f"{table.name}.csv", fixed)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text.getvalue(), compresslevel=1)
    return buffer.getvalue()
