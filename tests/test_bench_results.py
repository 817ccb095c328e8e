"""bench/RESULTS.md is a table of current figures (issue 39): a benchmark's `--write` replaces its
own row (bench/results.py), and the file in the repository is such a table."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results)


def _rows(path: Path) -> list[list[str]]:
    table = path.read_text().split(results.BEGIN, 1)[1].split(results.END, 1)[0]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.strip().splitlines()[2:]]


def test_a_figure_rewrites_its_own_row_and_a_new_one_is_added(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# Figures\n\n{results.BEGIN}\n{results.HEADER}\n"
                    "| a | t | 1 ms | b | x1 | d | c | `cmd` |\n| b | t | 2 ms | b | x2 | d | c | `cmd` |\n"
                    f"{results.END}\n\nNotes stay.\n")
    results.record("a", target="t", latest="3 ms", baseline="base | with a bar", ratio="x3", command="run a",
                   results=path)
    results.record("new", target="t", latest="4 ms", baseline="-", ratio="x4", command="run new", results=path)
    rows = _rows(path)
    assert [r[0] for r in rows] == ["a", "b", "new"]
    assert rows[0][2:5] == ["3 ms", "base \\| with a bar", "x3"] and rows[0][7] == "`run a`"
    assert rows[1][2] == "2 ms"  # the other figure's row is left alone
    assert path.read_text().endswith(f"{results.END}\n\nNotes stay.\n")


def test_the_repository_file_is_one_row_a_figure_with_every_column() -> None:
    rows = _rows(ROOT / "bench" / "RESULTS.md")
    assert len(rows) >= 15
    assert all(len(r) == 8 for r in rows), [r[0] for r in rows if len(r) != 8]
    names = [r[0] for r in rows]
    assert len(names) == len(set(names))
    assert len((ROOT / "bench" / "RESULTS.md").read_text().splitlines()) < 200
