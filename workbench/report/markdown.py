"""Markdown: the study totals and per-migration tables, GitHub-flavoured."""

from __future__ import annotations

from domain.text import clean
from workbench.report.model import StudyReport
from workbench.report.tables import Table, document_tables, migration_line, title_lines


def cell(text: str) -> str:
    text = clean(text).replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("`", "\\`").replace("*", "\\*").replace("_", "\\_")


def table(t: Table) -> str:
    lines = [f"## {t.title}", ""]
    if not t.rows:
        return "\n".join(lines + ["None.", ""])
    lines.append("| " + " | ".join(cell(h) for h in t.headers) + " |")
    lines.append("| " + " | ".join("---:" if i in t.numeric else "---" for i in range(len(t.headers))) + " |")
    for row in t.rows:
        lines.append("| " + " | ".join(cell(v.text) for v in row) + " |")
    if t.note:
        lines += ["", cell(t.note)]
    return "\n".join(lines + [""])


def render_markdown(report: StudyReport) -> str:
    out = [f"# Migration study report: {cell(report.title)}", ""]
    out += [cell(line) + "  " for line in title_lines(report)] + [""]
    out += ["Counts are defined in docs/report.md. Attempt-level rows are in the CSV and JSON exports.", ""]
    out += ["## Migrations", ""]
    for m in report.migrations:
        out.append(f"- {cell(migration_line(m))}")
        out += [f"  - attempt {seq} explained: {cell(sentence)}" for seq, sentence in m.explanations]
    out.append("")
    for t in document_tables(report):
        out.append(table(t))
    return "\n".join(out).rstrip() + "\n"
