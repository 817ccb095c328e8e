"""bench/RESULTS.md's table of current figures: each benchmark rewrites its own rows with `record`.

A row is one figure: its target, the latest measurement, the baseline measured beside it in the
same sitting, their ratio, the date, the commit measured and the command that made it. `record`
replaces the row whose first cell is the figure's name (or adds it at the end), so the table holds
the latest of each; the earlier ones are in git (`git log -p bench/RESULTS.md`).
"""

from __future__ import annotations

import datetime
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- figures: begin -->", "<!-- figures: end -->"
HEADER = ("| figure | target | latest | baseline, measured beside it | ratio | date | commit | command |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")


def commit(root: Path = ROOT) -> str:
    """HEAD's short hash, with `+` when the tree measured has uncommitted changes to tracked files
    (this table's own aside)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/RESULTS.md")
    return head + ("+" if changed else "")


def load() -> str:
    """The machine's load as `uptime` says it (1-minute average), which every figure here depends on."""
    return f"load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""


def _cell(text: object) -> str:
    return str(text).replace("\n", " ").replace("|", "\\|").strip()


def record(figure: str, *, target: str, latest: str, baseline: str, ratio: str, command: str,
           when: str | None = None, results: Path = RESULTS) -> None:
    """Writes the figure's row into the table (replacing the row of the same name)."""
    row = "| " + " | ".join(_cell(c) for c in (
        figure, target, latest, baseline, ratio, when or f"{datetime.date.today()}, {load()}", commit(),
        f"`{command}`")) + " |"
    text = results.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{results} has no {BEGIN} ... {END} table")
    head, rest = text.split(BEGIN, 1)
    table, tail = rest.split(END, 1)
    rows = [line for line in table.strip().splitlines()[2:] if line.startswith("|")]
    key = "| " + _cell(figure) + " |"
    for i, line in enumerate(rows):
        if line.startswith(key):
            rows[i] = row
            break
    else:
        rows.append(row)
    results.write_text(head + BEGIN + "\n" + HEADER + "\n" + "\n".join(rows) + "\n" + END + tail)
    print(f"bench/RESULTS.md: {figure}: {latest} ({ratio})")
