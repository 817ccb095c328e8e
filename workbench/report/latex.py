"""LaTeX: booktabs tables for a paper; `\\input` the file (the preamble it needs is in its head).

The output is plain ASCII, so it compiles under any input encoding: TeX's specials are escaped
and every other character is mapped to a LaTeX command, or named (`[U+1F600]`) where LaTeX's
standard fonts have no glyph. Tables with free text are `tabularx` at the line width, the free
text wrapping in X columns; the others shrink to the line width only when they would exceed it.
Ids, numbers and timestamps never wrap.
"""

from __future__ import annotations

import re
import unicodedata

from domain.text import clean
from workbench.report.model import StudyReport
from workbench.report.tables import Table, document_tables, title_lines

PREAMBLE = r"\usepackage{booktabs,tabularx,graphicx}"
"""What the including document needs."""

_ASCII = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", '"': "{''}",
}
_SYMBOLS = {
    "\u2013": "--", "\u2014": "---", "\u2018": "`", "\u2019": "'", "\u201c": "``", "\u201d": "''",
    "\u2026": r"\ldots{}", "\u00a0": "~", "\u2022": r"\textbullet{}", "\u00b7": r"\textperiodcentered{}",
    "\u2264": r"$\leq$", "\u2265": r"$\geq$", "\u00d7": r"$\times$", "\u00f7": r"$\div$", "\u00b1": r"$\pm$",
    "\u00b5": r"$\mu$", "\u00b0": r"$^{\circ}$", "\u2192": r"$\rightarrow$", "\u2190": r"$\leftarrow$",
    "\u2248": r"$\approx$", "\u2260": r"$\neq$", "\u221e": r"$\infty$", "\u2212": "$-$",
    "\u00df": r"\ss{}", "\u00e6": r"\ae{}", "\u00c6": r"\AE{}", "\u00f8": r"\o{}", "\u00d8": r"\O{}",
    "\u0153": r"\oe{}", "\u0152": r"\OE{}", "\u0142": r"\l{}", "\u0141": r"\L{}", "\u0131": r"\i{}",
    "\u00a3": r"\pounds{}", "\u00a7": r"\S{}", "\u00b6": r"\P{}", "\u00a9": r"\copyright{}",
    "\u20ac": "EUR", "\u240a": " ", "\u240d": " ", "\u00bf": r"?`", "\u00a1": r"!`",
}
_GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi o pi rho sigma tau upsilon" \
         " phi chi psi omega".split()
_SYMBOLS.update({chr(0x3B1 + i): rf"$\{name}$" for i, name in enumerate(_GREEK[:17]) if name != "o"})
_SYMBOLS.update({chr(0x3C3 + i): rf"$\{name}$" for i, name in enumerate(_GREEK[17:])})
_SYMBOLS["\u03bf"] = "o"
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u",
            "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c",
            "\u0328": "k"}
_LONG = re.compile(r"[^\s]{9,}")
_BREAK = re.compile(r"(?<=[/._:=,;@-])(?=[^\s])|(?<=[^\x00-\x7f])(?=[^\s])")


def _char(c: str) -> str:
    if c in _ASCII:
        return _ASCII[c]
    if c in _SYMBOLS:
        return _SYMBOLS[c]
    decomposed = unicodedata.normalize("NFD", c)
    base, marks = decomposed[0], decomposed[1:]
    if base.isascii() and marks and all(m in _ACCENTS for m in marks):
        out = {"i": r"\i{}", "j": r"\j{}"}.get(base, base)
        for mark in marks:
            out = f"\\{_ACCENTS[mark]}{{{out}}}"
        return out
    return f"[U+{ord(c):04X}]"


class _Table(dict[int, str]):
    """`str.translate` table: ASCII filled in, other characters mapped on first sight."""

    def __missing__(self, code: int) -> str:
        self[code] = value = _char(chr(code))
        return value


_TABLE = _Table({code: _ASCII.get(chr(code), chr(code)) for code in range(128)})


def _escape(text: str) -> str:
    return text.translate(_TABLE)


def esc(text: str) -> str:
    """Any text as plain-ASCII LaTeX, on one line."""
    return _escape(" ".join(clean(text).split()))


def esc_wrapping(text: str) -> str:
    """`esc`, with break points after punctuation and inside long runs, so a path or a token
    wraps in an X column instead of running past it."""
    text = " ".join(clean(text).split())
    text = _LONG.sub(lambda m: "\x00".join(m.group()[i:i + 8] for i in range(0, len(m.group()), 8)), text)
    text = _BREAK.sub("\x00", text)  # clean() has made every NUL visible: \x00 marks breaks only
    return _escape(text).replace("\x00", r"\allowbreak{}")


def _header(text: str, align: str) -> str:
    """A header set on one line per word, so a column is as wide as its widest word."""
    words = [esc(w) for w in text.split()]
    if len(words) < 2:
        return esc(text)
    return rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}" + r"\\".join(words) + r"\end{tabular}"


def _spec(t: Table, columns: list[int]) -> str:
    return "".join(r">{\raggedright\arraybackslash}X" if i in t.wrap else ("r" if i in t.numeric else "l")
                   for i in columns)


def _cell(t: Table, i: int, text: str) -> str:
    return esc_wrapping(text) if i in t.wrap else esc(text)


def _tabular(t: Table) -> tuple[str, list[str], str]:
    """(begin, header and body lines, end). Up to eight columns, free text wraps in X columns of a
    `tabularx`; with more, the fixed columns leave too little room, so each record's free text
    goes on a full-width line below it."""
    below = list(t.wrap) if len(t.headers) > 8 else []
    columns = [i for i in range(len(t.headers)) if i not in below]
    header = " & ".join(_header(t.headers[i], "r" if i in t.numeric else "l") for i in columns) + r" \\"
    width = r"@{\hspace{1em}}>{\raggedright\arraybackslash}p{\dimexpr\linewidth-1em\relax}@{}"
    body = []
    for row in t.rows:
        body.append(" & ".join(_cell(t, i, row[i].text) for i in columns) + r" \\")
        if below:
            text = "; ".join(f"{esc(t.headers[i])}: {_cell(t, i, row[i].text)}" for i in below)
            body.append(rf"\multicolumn{{{len(columns)}}}{{{width}}}{{{text}}} \\")
    if not t.rows:
        body.append(rf"\multicolumn{{{len(columns)}}}{{l}}{{None.}} \\")
    if t.wrap and not below:
        return rf"\begin{{tabularx}}{{\linewidth}}{{{_spec(t, columns)}}}", [header, r"\midrule", *body], \
            r"\end{tabularx}"
    return rf"\workbenchfit{{\begin{{tabular}}{{{_spec(t, columns)}}}", [header, r"\midrule", *body], \
        r"\end{tabular}}"


def table(t: Table) -> str:
    begin, rows, end = _tabular(t)
    lines = [r"\begin{table}[htbp]", r"\centering", r"\footnotesize", r"\setlength{\tabcolsep}{3pt}",
             rf"\caption{{{esc(t.title)}}}", rf"\label{{tab:workbench-{t.name.replace('_', '-')}}}",
             begin, r"\toprule", *rows, r"\bottomrule", end]
    if t.note:
        lines.append(rf"\par\smallskip {esc_wrapping(t.note)}")
    lines.append(r"\end{table}")
    return "\n".join(lines)


FIT = (r"\ifdefined\workbenchfit\else\newsavebox\workbenchbox"
       r"\newcommand{\workbenchfit}[1]{\sbox\workbenchbox{#1}\ifdim\wd\workbenchbox>\linewidth"
       r"\resizebox{\linewidth}{!}{\usebox\workbenchbox}\else\usebox\workbenchbox\fi}\fi")
"""Sets a table at its natural width, shrunk to the line width only when it would exceed it."""


def render_latex(report: StudyReport) -> str:
    head = [f"% workbench report: needs {PREAMBLE}; \\input{{}} this file.",
            *("% " + esc(line) for line in title_lines(report)),
            "% Counts are defined in docs/report.md.", FIT, ""]
    explained = [rf"\item {esc(m.slug)}, attempt {seq}: {esc(sentence)}"
                 for m in report.migrations for seq, sentence in m.explanations]
    tail = ["", "% Each attempt's current explanation (workbench explain, docs/explain.md).",
            r"\begin{itemize}", *explained, r"\end{itemize}"] if explained else []
    return "\n".join(head) + "\n\n".join(table(t) for t in document_tables(report)) + "\n" + "\n".join(tail) \
        + ("\n" if tail else "")
