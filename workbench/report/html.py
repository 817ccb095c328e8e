"""HTML: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)."""

from __future__ import annotations

from html import escape

from domain.text import clean
from workbench.report.model import StudyReport
from workbench.report.svg import ladder_chart, loss_chart
from workbench.report.tables import Table, document_tables, rate_text, title_lines

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;
 color:#1d2125;background:#fff;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #d8dde2;text-align:left;vertical-align:top}
th{border-bottom:2px solid #1d2125}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#5b6570;font-size:12px}.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #d8dde2;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:20px}
svg{display:block;margin:6px 0;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#3b444c}svg .small{font-size:9px}
.axis{stroke:#1d2125}.grid{stroke:#e6e9ec}
.bar.ok{fill:#2f855a}.bar.failed{fill:#c05621}.bar.silent{fill:#9b2c2c}
.expected{stroke:#1d2125;stroke-width:2;stroke-dasharray:3 2}
.line{fill:none;stroke-width:1.6}.line.reference{stroke:#2b6cb0}.line.final{stroke:#c05621}
tspan.reference{fill:#2b6cb0}tspan.final{fill:#c05621}
"""


def t(text: str) -> str:
    return escape(clean(text))


def table(tb: Table) -> str:
    out = [f'<h2 id="{tb.name}">{t(tb.title)}</h2>']
    if not tb.rows:
        return "".join(out + ["<p>None.</p>"])
    out.append(f'<table id="table-{tb.name}"><thead><tr>')
    out += [f'<th class="num">{t(h)}</th>' if i in tb.numeric else f"<th>{t(h)}</th>"
            for i, h in enumerate(tb.headers)]
    out.append("</tr></thead><tbody>")
    for row in tb.rows:
        out.append("<tr>" + "".join(f'<td class="num">{t(v.text)}</td>' if i in tb.numeric else f"<td>{t(v.text)}</td>"
                                    for i, v in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    if tb.note:
        out.append(f'<p class="note">{t(tb.note)}</p>')
    return "".join(out)


def render_html(report: StudyReport) -> str:
    tot = report.totals
    cards = [
        ("Goal met", rate_text(tot.goal_met)),
        ("Attempts failed", rate_text(tot.failed)),
        ("Silent failures", rate_text(tot.silent)),
        ("Over-claims", rate_text(tot.over_claims)),
        ("Interventions / migration", "–" if tot.interventions_per_migration is None
         else f"{tot.interventions_per_migration:.2f}"),
        ("Median time ratio", "–" if tot.time_ratios.median is None else f"{tot.time_ratios.median:.2f}"),
    ]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline';"
           " img-src data:\">",
           f"<title>{t('Migration study report: ' + report.title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{t('Migration study report: ' + report.title)}</h1>"]
    out += [f'<p class="note">{t(line)}</p>' for line in title_lines(report)]
    out.append('<div class="cards">' + "".join(f'<div class="card">{t(label)}<b>{t(value)}</b></div>'
                                               for label, value in cards) + "</div>")
    for tb in document_tables(report):
        out.append(table(tb))
    out.append('<h2 id="charts">Migrations</h2>')
    for m in report.migrations:
        out.append(f'<section id="migration-{m.id}"><h3>{t(m.slug)}: {t(m.title)}</h3>')
        out.append(f'<p class="note">{t(m.target)}, {t(m.status)}; highest level '
                   f'{"–" if m.highest_level is None else m.highest_level}; goal '
                   f'{"met" if m.goal_met else "not met"}</p>')
        if m.explanations:
            out.append('<ul class="explained">' + "".join(f"<li>attempt {seq} explained: {t(sentence)}</li>"
                                                          for seq, sentence in m.explanations) + "</ul>")
        out.append(ladder_chart(m))
        out.append(loss_chart(m))
        out.append("</section>")
    out.append('<p class="note">Counts are defined in docs/report.md. Attempt-level rows are in the CSV and'
               " JSON exports.</p></body></html>")
    return "\n".join(out) + "\n"
