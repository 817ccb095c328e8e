"""Verification and the log scan, this tree against an older checkout, side by side in one run.

    .venv/bin/python bench/verify_speed.py --before DIR [--scale 0.05] [--keep OUT]

DIR is a checkout of the code to compare with (`git worktree add DIR COMMIT`, or `git archive
COMMIT | tar -x -C DIR`). Generates a study with bench/generate.py at --scale (or reuses OUT's),
imports it once with this tree, then for each tree, on its own copy of the imported study:
`workbench verify` (every attempt judged, wall time), and over every stored log as verify reads
it (the chunk store), best of three: the scan for errors and counters only, and the scan verify
runs on a log whose series are stored (with metric extraction before issue 19, the step lines
alone after). `grep -c step` over the bundle's log files is the baseline. The two trees' verdicts
(outcome, reason, evidence of every level, cause and flags) must be the same: the run fails
otherwise. Prints a Markdown table with the date and the machine's load (`uptime`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
PY = sys.executable

SCAN = """
import inspect, sys, time
from storage.database import open_study
from storage.logs import log_chunks
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import compile_patterns
study = open_study(sys.argv[1])
logs = [r[0] for r in study.db.execute("SELECT DISTINCT log_id FROM attempt WHERE log_id IS NOT NULL")]
patterns = compile_patterns()
steps_only = "steps_only" in inspect.signature(LogScanner).parameters
def scan(**kwargs):
    total, t0 = 0, time.perf_counter()
    for log_id in logs:
        scanner = LogScanner(patterns, **kwargs)
        for chunk in log_chunks(study.db, log_id):
            scanner.feed(chunk)
            total += len(chunk)
        scanner.finish()
    return time.perf_counter() - t0, total
errors = min(scan(extract_metrics=False) for _ in range(3))
stored = min(scan(steps_only=True) if steps_only else scan(extract_metrics=True) for _ in range(3))
print(errors[0], stored[0], errors[1])
"""

VERDICTS = """
SELECT a.id, v.level, v.outcome, v.reason, v.evidence, f.cause, f.silent, f.note, f.evidence
FROM attempt a JOIN verdict v ON v.attempt_id = a.id AND v.superseded_by IS NULL
LEFT JOIN failure f ON f.attempt_id = a.id AND f.superseded_by IS NULL ORDER BY a.id, v.level
"""


def run(argv: list[str], tree: Path, timeout: float = 3600) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return done.stdout


def measure(tree: Path, pristine: Path, work: Path) -> dict:
    db = work / f"{tree.name}.db"
    shutil.copy(pristine, db)
    t0 = time.perf_counter()
    verified = len(json.loads(run([PY, "-m", "cli", "verify", str(db), "--json"], tree)))
    seconds = time.perf_counter() - t0
    errors, stored, total = (float(x) for x in run([PY, "-c", SCAN, str(db)], tree).split())
    with sqlite3.connect(db) as conn:
        verdicts = conn.execute(VERDICTS).fetchall()
    return {"attempts": verified, "verify": seconds, "errors": errors, "stored": stored, "bytes": total,
            "verdicts": verdicts}


def grep(files: list[Path]) -> tuple[float, int]:
    size = sum(f.stat().st_size for f in files)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(["grep", "-c", "step", *map(str, files)], capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        out = args.keep or Path(tmp) / "study"
        if not (out / "manifest.json").exists():
            from generate import generate

            generate(out, args.scale)
        pristine = out / "imported.db"
        if not pristine.exists():
            run([PY, "-m", "cli", "import", "bundle", str(out / "bundle"), "--db", str(pristine)], ROOT, 7200)
        work = Path(tmp)
        before = measure(args.before.resolve(), pristine, work)
        after = measure(ROOT, pristine, work)
        seconds, size = grep(sorted((out / "bundle").glob("migrations/*/logs/*.log")))
    if before["verdicts"] != after["verdicts"]:
        diff = [(a, b) for a, b in zip(before["verdicts"], after["verdicts"]) if a != b]
        print("VERDICTS DIFFER:", len(diff), diff[:3], file=sys.stderr)
        return 1
    mib, grep_rate = before["bytes"] / 2**20, size / 2**20 / seconds
    print(f"{datetime.date.today()}, scale {json.loads((out / 'manifest.json').read_text())['scale']}: "
          f"{after['attempts']:,} attempts, {mib:.0f} MiB of stored logs; `uptime`: {load}; "
          f"`grep -c step` over the log files: {grep_rate:.0f} MiB/s; verdicts identical "
          f"({len(after['verdicts']):,} verdicts)\n")
    print("| figure | before | after | after / before |")
    print("| --- | --- | --- | --- |")
    rows = [("`workbench verify`, whole study", before["attempts"] / before["verify"], after["attempts"] / after["verify"],
             "attempts/s", lambda r: f"{r:.0f} attempts/s ({r * mib / before['attempts']:.0f} MiB/s)"),
            ("log scan, errors and counters", mib / before["errors"], mib / after["errors"], "MiB/s",
             lambda r: f"{r:.0f} MiB/s ({r / grep_rate:.2f} of grep)"),
            ("log scan of a log with stored series", mib / before["stored"], mib / after["stored"], "MiB/s",
             lambda r: f"{r:.0f} MiB/s ({r / grep_rate:.2f} of grep)")]
    for name, b, a, _, fmt in rows:
        print(f"| {name} | {fmt(b)} | {fmt(a)} | x{a / b:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
