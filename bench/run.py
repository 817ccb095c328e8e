"""Every benchmark in one run, each figure beside its baseline from the same run: one table.

    .venv/bin/python bench/run.py [--scale 0.01] [--keep DIR] [--write] [--skip NAME]...

Generates a study with bench/generate.py at --scale (or reuses DIR's), imports it, then measures:
CLI start-up, the app's launch and `j` latency (bench/ui.py), opening a log and a diff, bundle
import, Claude Code import (bench/import_throughput.py), log parsing (bench/log_parse.py),
verification, the report (bench/report.py's measurement on the imported study) and the probe's
overhead (bench/probe_overhead.py, when the torch_xla environment exists); the launch's counts
after verification. Each benchmark runs in
its own processes; one that fails or times out is reported as such and the rest still run.
Prints the table; --write also rewrites each row's figure in bench/RESULTS.md (bench/results.py),
named with the scale. At --scale 1 the generated study is ~1.5 GB on disk and the run takes a long while.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
PY = sys.executable


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""A real install has its .pyc files: without them every start-up compiles the project's modules."""


def sh(argv: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**ENV, "PYTHONPATH": str(ROOT), "WORKBENCH_REVIEWER": "bench"}, **kw)


def timed(argv: list[str], runs: int = 3, **kw) -> float:
    """Median wall seconds of a command (each run a fresh process)."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = sh(argv, **kw)
        out.append(time.perf_counter() - t0)
        if done.returncode not in (0, 2):
            raise RuntimeError(f"{' '.join(argv[:4])}: exit {done.returncode}: {done.stderr[-500:]}")
    return statistics.median(out)


def py(code: str, *args: str, timeout: float = 600) -> str:
    done = sh([PY, "-c", code, *args], timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-800:])
    return done.stdout


def ms(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


# --------------------------------------------------------------------------- the benchmarks
# Each returns rows: (benchmark, measured, baseline measured in the same run, target or ratio).


def startup(ctx) -> list[tuple]:
    """Medians of 20 fresh processes each, after one run that writes the .pyc files; the command's
    runs, its floor's (a process that imports click, dataclasses and sqlite3 and runs one query:
    issue 39's baseline) and the bare start's alternate, so a change in the machine's load hits each."""
    floor = ("import click, dataclasses, sqlite3; "
             f"sqlite3.connect({str(ctx.db)!r}).execute('SELECT * FROM migration').fetchall()")
    argvs = {"cli": [PY, "-m", "cli", "migrations", str(ctx.db)], "floor": [PY, "-c", floor], "bare": [PY, "-c", "pass"]}
    for argv in argvs.values():
        sh(argv)
    runs: dict[str, list[float]] = {name: [] for name in argvs}
    for n in range(20):
        for name in list(argvs) if n % 2 == 0 else list(argvs)[::-1]:
            runs[name].append(timed(argvs[name], runs=1))
    cli, low, bare = (statistics.median(runs[name]) for name in argvs)
    return [("CLI start-up (`workbench migrations DB`), editable", ms(cli),
             f"floor (click, dataclasses, sqlite3, one query): {ms(low)}; `python -c pass`: {ms(bare)}",
             f"x{cli / low:.2f} of the floor, x{cli / bare:.1f} of `python -c pass` (target: at most 1.5x the floor)")]


def ui(ctx) -> list[tuple]:
    done = sh([PY, str(BENCH / "ui.py"), "--log-mb", str(max(16, int(1024 * ctx.scale))), "--runs", "3",
               "--presses", "120"], timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-400:] or done.stdout[-400:])
    ctx.notes.append("bench/ui.py printed:\n\n" + "\n".join(l for l in done.stdout.splitlines() if l.startswith("|")))
    return [("app launch, `j` latency, memory with a big log open (bench/ui.py)", "see its table below", "", "")]


OPEN_LOG = """
import sys, time
t0 = time.perf_counter()
from storage.database import open_study
from storage.logs import LogReader
study = open_study(sys.argv[1])
log_id = study.db.execute("SELECT id FROM log ORDER BY size DESC LIMIT 1").fetchone()[0]
reader = LogReader(study.db, log_id)
tail = reader.tail(50)
middle = reader.lines(reader.line_count // 2, 50)
print(time.perf_counter() - t0, reader.size, reader.line_count)
"""


def open_log(ctx) -> list[tuple]:
    runs = [py(OPEN_LOG, str(ctx.db)).split() for _ in range(3)]
    seconds = statistics.median(float(r[0]) for r in runs)
    size, lines = int(runs[0][1]), int(runs[0][2])
    biggest = max((ctx.out / "bundle" / "migrations").glob("*/logs/*.log"), key=lambda p: p.stat().st_size)
    tail = timed(["tail", "-n", "50", str(biggest)])
    return [(f"open a log: its end and its middle, largest log ({size / 2**20:.1f} MiB, {lines:,} lines),"
             " fresh process", ms(seconds), f"`tail -n 50` of the file: {ms(tail)}", "")]


OPEN_DIFF = """
import sys, time
t0 = time.perf_counter()
from workbench.diffs import git_diff
diff = git_diff(sys.argv[1], sys.argv[2], sys.argv[3])
lines = len(diff.lines)
print(time.perf_counter() - t0, lines)
"""


def open_diff(ctx) -> list[tuple]:
    repo = ctx.out / "bundle" / "repo"
    slug = ctx.manifest["transcript_migration"]
    shas = sh(["git", "-C", str(repo), "rev-list", "--reverse", slug]).stdout.split()
    old, new = shas[4], shas[5]  # generate.py: commit 5 of the first migration adds 20,000 lines
    runs = [py(OPEN_DIFF, str(repo), old, new).split() for _ in range(3)]
    seconds = statistics.median(float(r[0]) for r in runs)
    git = timed(["git", "-C", str(repo), "diff", old, new])
    return [(f"open a diff: {ctx.manifest['diff_lines']:,}-line commit, parsed for display, fresh process",
             ms(seconds), f"`git diff` alone: {ms(git)}", f"x{seconds / git:.1f}")]


def bundle_import(ctx) -> list[tuple]:
    files = [p for p in (ctx.out / "bundle" / "migrations").rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    t0 = time.perf_counter()
    for p in files:
        p.read_bytes()
    read = time.perf_counter() - t0
    m = ctx.manifest
    return [(f"bundle import: {m['attempts']:,} attempts, {m['metric_points']:,} points,"
             f" {m['log_bytes'] / 2**20:.0f} MiB of logs", f"{ctx.import_s:.1f} s ({size / 2**20 / ctx.import_s:.0f} MiB/s,"
             f" {m['attempts'] / ctx.import_s:.0f} attempts/s)", f"reading the bundle's files: {read:.2f} s",
             f"x{ctx.import_s / read:.0f}")]


def transcript_import(ctx) -> list[tuple]:
    mb = max(2, int(200 * ctx.scale))
    done = sh([PY, str(BENCH / "import_throughput.py"), "--mb", str(mb), "--runs", "1"], timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-400:])
    row = cells([l for l in done.stdout.splitlines() if l.startswith("|")][-1])
    floor = re.search(r"ratio import/floor: (\S+) wall, (\S+) CPU", done.stdout)
    return [(f"Claude Code import: {row[0]} (bench/import_throughput.py)", row[2], f"bare `json.loads` loop: {row[1]}",
             f"x{row[3]} of the bare loop, x{floor.group(1)} of its floor (wall)"
             " (target: at most 2.5x the floor: orjson, sha256, every line into SQLite in one transaction)")]


def log_parse(ctx) -> list[tuple]:
    mb = max(16, int(256 * ctx.scale))
    done = sh([PY, str(BENCH / "log_parse.py"), "--mb", str(mb)], timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-400:])
    row = cells([l for l in done.stdout.splitlines() if l.startswith("|")][-1])
    return [(f"log parse: {row[2]}, errors and counters (bench/log_parse.py)", row[4], f"`grep -c`: {row[3]}",
             "target: at least 1/3 of grep"),
            ("log parse: same, from the SQLite chunk store", row[5], f"`grep -c`: {row[3]}", ""),
            ("log parse: with metric extraction", row[6], f"`grep -c`: {row[3]}", "")]


SCAN = """
import sys, time
from storage.database import open_study
from storage.logs import log_chunks
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import compile_patterns
study = open_study(sys.argv[1])
t0 = time.perf_counter()
total = 0
patterns = compile_patterns()
for (log_id,) in study.db.execute("SELECT log_id FROM attempt WHERE log_id IS NOT NULL").fetchall():
    scanner = LogScanner(patterns, extract_metrics=True)
    for chunk in log_chunks(study.db, log_id):
        scanner.feed(chunk)
        total += len(chunk)
    scanner.finish()
print(time.perf_counter() - t0, total)
"""


def verification(ctx, runs: int = 3) -> list[tuple]:
    """`verify --json --force` (all judged, also on a kept study) `runs` times: the median, and the
    range, since on a shared machine one run can be a third slower than the next."""
    took = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = sh([PY, "-m", "cli", "verify", str(ctx.db), "--json", "--force"], timeout=3600)
        took.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-400:])
    verified = len(json.loads(done.stdout))
    seconds = statistics.median(took)
    scan, total = (float(x) for x in py(SCAN, str(ctx.db), timeout=3600).split())
    return [(f"verification: {verified:,} attempts, {total / 2**20:.0f} MiB of stored logs (`workbench verify`)",
             f"{seconds:.2f} s median of {runs} ({min(took):.2f}-{max(took):.2f} s; {verified / seconds:.0f} attempts/s,"
             f" {verified / max(took):.0f}-{verified / min(took):.0f}; {total / 2**20 / seconds:.0f} MiB/s)",
             f"the log scans alone: {scan:.1f} s", f"x{seconds / scan:.1f} (target: 1,000 attempts/s)")]


LAUNCH = """
import sys, time
t0 = time.perf_counter()
from storage.database import open_study
from storage import queries
study = open_study(sys.argv[1])
study.db.execute("SELECT 1").fetchone()
t1 = time.perf_counter()
summaries = list(queries.iter_migration_summaries(study.db))
t2 = time.perf_counter()
totals = queries.study_totals(study.db)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, len(summaries), totals["attempts"])
"""


def launch(ctx) -> list[tuple]:
    """The study screen's counts (every migration's summary, then the study totals), fresh process,
    median of 3: on the run's verified study and on bench/report.py's 15,000-attempt study
    (75,000 verdicts, an override per migration), generated here whatever the scale."""
    from report import generate as generate_report

    big = ctx.out / "launch-15000.db"
    if not big.exists():
        generate_report(big, 15_000, 100)
    rows = []
    for db, label in ((ctx.db, f"{ctx.manifest['attempts']:,} attempts (the run's study)"),
                      (big, "15,000 attempts, 75,000 verdicts, 100 overrides")):
        runs = sorted((py(LAUNCH, str(db)).split() for _ in range(3)), key=lambda r: float(r[1]) + float(r[2]))
        opened, summaries, totals = (float(x) for x in runs[1][:3])
        rows.append((f"launch counts: `migration_summaries` (all {runs[1][3]}) + `study_totals`, {label}",
                     f"{ms(summaries)} + {ms(totals)}", f"opening the database: {ms(opened)}", ""))
    return rows


def report(ctx) -> list[tuple]:
    from report import measure

    rows = []
    for fmt in ("md", "html", "json"):
        best = min((measure(ctx.db, fmt) for _ in range(3)), key=lambda r: r[1] + r[2])
        rows.append((f"report ({fmt}) of the imported study, beyond opening it", ms(best[1] + best[2]),
                     f"opening the database: {ms(best[0])}", "target: under 1 s"))
    return rows


def probe(ctx) -> list[tuple]:
    python = os.environ.get("WORKBENCH_XLA_PYTHON") or str(ROOT / ".venv-xla/bin/python")
    if not Path(python).exists():
        return [("probe overhead (bench/probe_overhead.py)", "not run: no torch_xla environment (`make xla-env`)", "", "")]
    done = sh([PY, str(BENCH / "probe_overhead.py"), "--python", python, "--steps", "100", "--runs", "2"], timeout=900)
    text = done.stdout
    without = re.search(r"without probe:\s+(\S+ ms)", text)
    with_ = re.search(r"with probe:\s+(\S+ ms)", text)
    overhead = re.search(r"overhead: (\S+%)", text)
    if not (without and with_ and overhead):
        raise RuntimeError(done.stderr[-400:] or text[-400:])
    return [("probe overhead: mean step time, demo MLP on 4 XLA:CPU devices", with_.group(1),
             f"without the probe: {without.group(1)}", f"{overhead.group(1)} (target: under 3%)")]


BENCHMARKS = {"startup": startup, "ui": ui, "open_log": open_log, "open_diff": open_diff, "import": bundle_import,
              "transcript": transcript_import, "log_parse": log_parse, "verify": verification, "launch": launch,
              "report": report,
              "probe": probe}


class Context:
    def __init__(self, out: Path, scale: float) -> None:
        self.out, self.scale, self.notes = out, scale, []
        self.db = out / "study.db"


def machine() -> str:
    cpu = ""
    try:
        cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                    if l.startswith("model name")), "")
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.machine()}, {os.cpu_count()} cores{f' ({cpu})' if cpu else ''}, Python"
            f" {platform.python_version()}, SQLite {__import__('sqlite3').sqlite_version}, load {load:.1f} at start")


def write(rows: list[tuple], scale: float, args: argparse.Namespace) -> None:
    """Each row as its figure in bench/RESULTS.md, named with the scale (a row's sizes follow from it)."""
    from results import record

    command = "bench/run.py --scale {:g}{} --write".format(scale, "".join(f" --skip {s}" for s in args.skip))
    for name, measured, baseline, last in rows:
        if measured == "see its table below":
            continue
        target = ""
        if last.startswith("target: "):
            target, last = last.removeprefix("target: "), ""
        elif "(target: " in last:
            last, _, target = last.partition(" (target: ")
            target = target.rstrip(")")
        record(f"{name} (bench/run.py, scale {scale:g})", target=target or "none stated", latest=measured,
               baseline=baseline, ratio=last, command=command)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) this folder")
    parser.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    parser.add_argument("--skip", action="append", default=[], choices=sorted(BENCHMARKS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        out = args.keep or Path(tmp) / "study"
        ctx = Context(out, args.scale)
        started = time.perf_counter()
        if not (out / "manifest.json").exists():
            from generate import generate

            generate(out, args.scale)
        ctx.manifest = json.loads((out / "manifest.json").read_text())
        ctx.scale = ctx.manifest["scale"]
        generated = time.perf_counter() - started
        if not ctx.db.exists():
            t0 = time.perf_counter()
            done = sh([PY, "-m", "cli", "import", "bundle", str(out / "bundle"), "--db", str(ctx.db)],
                      timeout=7200)
            ctx.import_s = time.perf_counter() - t0
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
        else:
            ctx.import_s = float("nan")
        rows: list[tuple] = []
        for name, bench in BENCHMARKS.items():
            if name in args.skip:
                continue
            t0 = time.perf_counter()
            try:
                got = bench(ctx)
            except Exception as exc:  # one failing benchmark does not stop the others
                got = [(name, f"failed: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:160] if str(exc).strip() else ''}", "", "")]
            rows += got
            print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        m = ctx.manifest
        lines = [
            "## All benchmarks in one run (`bench/run.py`)",
            "",
            f"{datetime.date.today()}, {machine()}. Study from `bench/generate.py --scale {ctx.scale:g}`"
            f" (seed {m['seed']}): {m['migrations']} migrations, {m['attempts']:,} attempts,"
            f" {m['metric_points']:,} metric points, {m['log_bytes'] / 2**20:.0f} MiB of logs (largest"
            f" {m['largest_log'] / 2**20:.1f} MiB), {m['diff_lines']:,}-line diffs, a"
            f" {m['transcript_bytes'] / 2**20:.0f} MiB transcript; generated in {generated:.1f} s. Baselines are"
            " measured in the same run on the same data.",
            "",
            "| benchmark | measured | baseline | ratio / target |",
            "| --- | --- | --- | --- |",
            *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
            "",
            *[note + "\n" for note in ctx.notes],
        ]
        print("\n".join(lines))
        if args.write:
            write(rows, ctx.scale, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
