"""The LaTeX export compiles: real pdflatex on a study whose texts hold non-ASCII characters and
markup-like strings, with no error and no overfull box over 1pt. Skips (with the reason) where
pdflatex is not installed, except in CI, where .ci/run installs TeX."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import build_study

from storage import records
from workbench.report import build_report, render
from workbench.report.latex import esc

PDFLATEX = shutil.which("pdflatex")
pytestmark = pytest.mark.skipif(
    PDFLATEX is None and not os.environ.get("CI"),
    reason="pdflatex is not installed (apt-get install -y texlive-latex-recommended texlive-latex-extra);"
           " .ci/run installs it",
)

AWKWARD = ("loss \u2264 0.5 \u00d7 baseline in 3 \u00b5s, caf\u00e9 \u2014 na\u00efve \u201cquoted\u201d \u2018x\u2019,"
           " \u00df \u00f8 \u0141\u00f3d\u017a \u03b1=0.1 \u2192 \u221e \u00b1 1\u00b0 \u20ac5 \u00a3 \u2026 \U0001F600"
           " \u65e5\u672c \\textbf{x} $5 & 10% #1 _a_ {b} ~c ^d <e> |f| \"g\" \\\\ \\end{table} [/] ")
LONG = ("see /home/runner/work/very/long/path/to/the/checkout/src/models/a_module_with_a_long_name.py and"
        " the token Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG9mcmVkcGx1Z3h5enp5 in the log")


def compile_latex(tmp_path: Path, tex: bytes) -> tuple[subprocess.CompletedProcess[str], str]:
    (tmp_path / "report.tex").write_bytes(tex)
    (tmp_path / "paper.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs,tabularx,graphicx}\n"
                                        "\\begin{document}\n\\input{report.tex}\n\\end{document}\n")
    done = subprocess.run([PDFLATEX or "pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    log = (tmp_path / "paper.log").read_text(errors="replace") if (tmp_path / "paper.log").exists() else ""
    return done, log


def overfull(log: str) -> list[str]:
    return [m.group() for m in re.finditer(r"Overfull \\[hv]box \((\d+(?:\.\d+)?)pt too \w+\)[^\n]*", log)
            if float(m.group(1)) > 1.0]


def test_esc_gives_plain_ascii_for_any_text():
    out = esc(AWKWARD + LONG)
    assert out.isascii()
    assert r"$\leq$" in out and r"$\times$" in out and r"\'{e}" in out and "[U+1F600]" in out
    assert "\\textbf{" not in out and "\\end{table}" not in out


def test_the_latex_export_compiles_without_errors_or_overfull_boxes(tmp_path):
    study, ids = build_study(tmp_path / "study.db")
    try:
        db = study.db
        db["migration"].update(ids["alpha"], {"title": "Caf\u00e9 \u00d7 \u00b5-models \u2264 \u03b1"})
        records.add_intervention(db, migration_id=ids["alpha"], kind="hint \u2014 na\u00efve", minutes=5,
                                 note=AWKWARD, reviewer="Zo\u00eb")
        from domain.models import DecisionKind

        records.record_decision(db, migration_id=ids["beta"], kind=DecisionKind.CONTINUE, reason=AWKWARD + LONG, reviewer="Bj\u00f6rn \u00c5str\u00f6m <bjorn.astrom@uni.example>")
        records.add_budget_change(db, migration_id=ids["beta"], compute_dollars=1234.5, staff_hours=12.0,
                                  attempts=40, calendar_days=14.0, acceptance_level=4, reason=LONG + AWKWARD,
                                  reviewer="ana")
        tex = render(build_report(db), "latex")
        tex_hidden = render(build_report(db, pseudonymise=True), "latex")
    finally:
        study.close()
    assert tex.decode("ascii")  # plain ASCII: compiles under any input encoding
    for name, data in (("plain", tex), ("pseudonymised", tex_hidden)):
        folder = tmp_path / name
        folder.mkdir()
        done, log = compile_latex(folder, data)
        assert done.returncode == 0, (name, done.stdout[-3000:])
        assert not re.search(r"^! ", log, re.M), (name, log[-3000:])
        assert not overfull(log), (name, overfull(log))
        assert (folder / "paper.pdf").stat().st_size > 5000


def test_latex_escaping_is_linear_on_a_megabyte_line():
    from linearity import grows_linearly

    from workbench.report.latex import esc_wrapping

    for unit in ("a", "a/", "ab ", "\u00e9", " "):
        assert grows_linearly(lambda n, u=unit: esc_wrapping("a" * 8 + u * (n // len(u))), 250_000), unit
        assert esc_wrapping(unit * 1_000_000).isascii()
