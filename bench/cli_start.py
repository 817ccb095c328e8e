"""CLI start-up (issue 19): `workbench`'s read commands and --help against `python -c pass`.

    .venv/bin/python bench/cli_start.py [--runs 20] [--db DB] [--tree DIR]... [--installed] [--write]

Each --tree is a source tree to run `python -m cli` from (default: this checkout); give a before
and an after tree to compare them in one sitting: their runs alternate, and so does their order.
Without --db the demo study is built in a temporary folder (`workbench demo --no-open`). Each
command runs once first so its .pyc files exist (PYTHONDONTWRITEBYTECODE is unset for every run),
then --runs fresh processes; medians of wall time and of CPU time (user + system), each also as a
multiple of `python -c pass`. Prints a Markdown table.

The target (issue 39) is against what any read command of this design pays before its own work:
`workbench migrations DB` at most 1.5x "the floor", a process that imports click, dataclasses and
sqlite3 and runs one query on the study (timed beside it, alternated). --write rewrites the row of
bench/RESULTS.md for the first tree, installed or editable as measured (bench/results.py).

The checkout runs through this virtual environment, which holds workbench as an editable install
(`pip install -e .`, what the Makefile does): at every start, `python -c pass` included, site runs
that install's import finder, which imports pathlib, re, fnmatch, urllib.parse and importlib.util
(about 13 ms here). With --installed each tree is built into a wheel and installed (`pip install`,
.pyc files compiled as pip does) into a fresh virtual environment whose only addition is a .pth
line to this environment's site-packages for the dependencies, and both `python -c pass` and the
commands run from there, as a user's `pip install .` runs them: the bare start is cheaper, and
the commands pay for the standard modules the finder had imported for free.

With --floors the table also times what any read command of this design pays before its own
work: `import click`, `import dataclasses` (which imports inspect, with ast, dis and tokenize),
the records and queries the list uses (domain.models, storage.queries), and the standard sqlite3
and json modules with one query: the lower bounds under the commands' rows.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = "floor: click, dataclasses, sqlite3, one query"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


INSTALLED: dict[Path, Path] = {}
"""A tree's installed copy (--installed): the python of its own virtual environment."""


def install(tree: Path, folder: Path) -> Path:
    """`tree` built into a wheel and installed into a new virtual environment under `folder`."""
    venv = folder / f"venv-{len(INSTALLED)}"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "zz-dependencies.pth").write_text(ours + "\n")
    # built from a copy: setuptools' build/ folder in the tree may hold modules deleted since
    source, wheels = folder / f"source-{len(INSTALLED)}", folder / f"wheel-{len(INSTALLED)}"
    shutil.copytree(tree, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", ".venv*", "__pycache__", "*.egg-info", "*.db", "*.db-*", ".*_cache", ".hypothesis"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(source)], check=True, cwd=folder)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *map(str, wheels.glob("*.whl"))],
                   check=True, cwd=folder)
    return python


def run(tree: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    python, env, cwd = sys.executable, {**ENV, "PYTHONPATH": str(tree)}, tree
    if tree in INSTALLED:
        python, cwd = str(INSTALLED[tree]), INSTALLED[tree].parent
        env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([python, *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def demo(folder: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "cli", "demo", "--no-open"], cwd=ROOT, check=True, text=True,
                          capture_output=True, env={**ENV, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(folder)})
    return Path(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--tree", type=Path, action="append", help="a source tree (default: this checkout)")
    parser.add_argument("--installed", action="store_true",
                        help="run each tree as installed by pip into a virtual environment of its own, not editable")
    parser.add_argument("--floors", action="store_true",
                        help="also time the imports every read command pays for (click, dataclasses, our records)")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    with tempfile.TemporaryDirectory(prefix="cli-start-") as tmp:
        db = str((args.db.resolve() if args.db else None) or demo(Path(tmp)))
        if args.installed:
            for tree in trees:
                INSTALLED[tree] = install(tree, Path(tmp))
        with sqlite3.connect(db) as conn:
            slug = conn.execute("SELECT slug FROM migration ORDER BY slug").fetchone()[0]
        commands = {
            "`python -c pass`": ["-c", "pass"],
            "`migrations DB`": ["-m", "cli", "migrations", db],
            "`attempts DB SLUG`": ["-m", "cli", "attempts", db, slug],
            "`queue DB`": ["-m", "cli", "queue", db],
            "`--help`": ["-m", "cli", "--help"],
            FLOOR: ["-c", "import click, dataclasses, sqlite3; "
                          f"sqlite3.connect({db!r}).execute('SELECT * FROM migration').fetchall()"],
        }
        if args.floors:
            commands |= {
                "floor: sqlite3, json, one query": ["-c", "import json, sqlite3; "
                                                    f"sqlite3.connect({db!r}).execute('SELECT * FROM migration').fetchall()"],
                "floor: `import dataclasses`": ["-c", "import dataclasses"],
                "floor: `import click`": ["-c", "import click"],
                "floor: domain.models, storage.queries": ["-c", "import domain.models, storage.queries"],
            }
        times: dict[tuple[Path, str], list[tuple[float, float]]] = {(t, c): [] for t in trees for c in commands}
        for tree in trees:
            for argv in commands.values():
                run(tree, argv)
        for n in range(args.runs):
            for name, argv in commands.items():
                for tree in trees if n % 2 == 0 else trees[::-1]:
                    times[tree, name].append(run(tree, argv))
    print(f"{args.runs} runs each{', installed (not editable)' if args.installed else ''}, "
          f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| command | " + " | ".join(f"{t} wall (x) | CPU (x)" for t in trees) + " |")
    print("| --- |" + " --- | --- |" * len(trees))
    for name in commands:
        cells = []
        for tree in trees:
            wall, cpu = (statistics.median(x[i] for x in times[tree, name]) for i in (0, 1))
            bare_wall, bare_cpu = (statistics.median(x[i] for x in times[tree, "`python -c pass`"]) for i in (0, 1))
            cells += [f"{wall * 1000:.0f} ms (x{wall / bare_wall:.1f})", f"{cpu * 1000:.0f} ms (x{cpu / bare_cpu:.1f})"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.write:
        from results import record

        tree = trees[0]
        wall, cpu = (statistics.median(x[i] for x in times[tree, "`migrations DB`"]) for i in (0, 1))
        floor_wall, floor_cpu = (statistics.median(x[i] for x in times[tree, FLOOR]) for i in (0, 1))
        bare = statistics.median(x[0] for x in times[tree, "`python -c pass`"])
        how = "installed (`pip install .`)" if args.installed else "editable (`pip install -e .`)"
        record(f"CLI start, {how}: `workbench migrations DB` against its floor",
               target="at most 1.5x the floor (wall)",
               latest=f"{wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU (median of {args.runs})",
               baseline=f"floor (click, dataclasses, sqlite3, one query): {floor_wall * 1000:.0f} ms wall,"
                        f" {floor_cpu * 1000:.0f} ms CPU; `python -c pass` {bare * 1000:.0f} ms",
               ratio=f"x{wall / floor_wall:.2f} wall, x{cpu / floor_cpu:.2f} CPU (x{wall / bare:.1f} of `python -c pass`)",
               command=f"bench/cli_start.py --runs {args.runs}{' --installed' if args.installed else ''} --write")


if __name__ == "__main__":
    main()
