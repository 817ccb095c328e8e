"""LaTeX: booktabs tables for a paper (`\\usepackage{booktabs}`; `\\input` the file)."""

from __future__ import annotations

import re

from domain.text import clean
from workbench.report.model import StudyReport
from workbench.report.tables import Table, document_tables, title_lines

_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "–": "--",
}
_PATTERN = re.compile("|".join(re.escape(k) for k in _SPECIAL))


def esc(text: str) -> str:
    return _PATTERN.sub(lambda m: _SPECIAL[m.group()], clean(text))


def table(t: Table) -> str:
    if t.wide:
        spec = "".join("r" if i in t.numeric else ("p{5cm}" if i == len(t.headers) - 1 or
                                                   t.headers[i] in ("Reason", "Justification") else "l")
                       for i in range(len(t.headers)))
    else:
        spec = "".join("r" if i in t.numeric else "l" for i in range(len(t.headers)))
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\small",
        rf"\caption{{{esc(t.title)}}}",
        rf"\label{{tab:workbench-{t.name.replace('_', '-')}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(esc(h) for h in t.headers) + r" \\",
        r"\midrule",
    ]
    if t.rows:
        lines += [" & ".join(esc(v.text) for v in row) + r" \\" for row in t.rows]
    else:
        lines.append(rf"\multicolumn{{{len(t.headers)}}}{{l}}{{None.}} \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if t.note:
        lines.append(rf"\par\smallskip\footnotesize {esc(t.note)}")
    lines.append(r"\end{table}")
    return "\n".join(lines)


def render_latex(report: StudyReport) -> str:
    head = ["% workbench report: needs \\usepackage{booktabs}; \\input{} this file.",
            *("% " + clean(line) for line in title_lines(report)),
            "% Counts are defined in docs/report.md.", ""]
    return "\n".join(head) + "\n\n".join(table(t) for t in document_tables(report)) + "\n"
