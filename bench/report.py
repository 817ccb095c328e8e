"""Report cost on a large study: 15,000 attempts, generated with plain SQL inserts.

    .venv/bin/python bench/report.py [--attempts 15000] [--migrations 100] [--keep DB]

Prints the time to open the database, to count (`build_for`: as the format needs) and to render each format, in
a fresh process per measurement so no cache carries over, and beside them each format's floor in
a design that reads a row per attempt (the rows read, and the format's per-attempt part written
with nothing counted). The target: the report
costs under a second beyond opening the database. --write rewrites its row of bench/RESULTS.md (bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LADDERS = [  # (verdicts, cause, silent) — a spread like the study's
    (("fail", "unknown", "unknown", "unknown", "unknown"), "crash", 0),
    (("fail", "unknown", "unknown", "unknown", "unknown"), "incomplete", 1),
    (("pass", "fail", "pass", "unknown", "unknown"), "numerical_mismatch", 1),
    (("pass", "pass", "fail", "pass", "unknown"), "wrong_configuration", 1),
    (("pass", "pass", "pass", "fail", "unknown"), "goal_not_met", 1),
    (("pass", "pass", "pass", "pass", "fail"), "slower_or_costlier", 1),
    (("pass", "pass", "pass", "pass", "pass"), None, 0),
]


def generate(path: Path, attempts: int, migrations: int) -> None:
    from storage.database import open_study

    rng = random.Random(8)
    study = open_study(path, create=True)
    db = study.db
    conn = db.conn
    per = attempts // migrations
    with conn:
        conn.execute("INSERT INTO study (id, slug, title, staff_hourly_rate, reviewers, prices) VALUES"
                     " (1, 'bench', 'Bench study', 120, '[\"ana\", \"bob\"]', '{\"tpu-v5e\": 1.2, \"a100\": 3.0}')")
        attempt_id = verification_id = verdict_id = 0
        for m in range(1, migrations + 1):
            conn.execute(
                "INSERT INTO migration (id, slug, title, repo, base_commit, accelerator, chips, runtime, goal_metric,"
                " goal_reference, goal_direction, goal_tolerance, status) VALUES (?, ?, ?, 'repo', 'c0', 'tpu-v5e', 4,"
                " 'torch_xla', 'eval_accuracy', 0.9, 'max', 0.01, ?)",
                [m, f"project-{m:03d}", f"Project {m} to torch_xla", "accepted" if m % 2 else "in_progress"])
            attempt_rows, verification_rows, verdict_rows, failure_rows, points = [], [], [], [], []
            attempt_id += 1
            reference = attempt_id
            attempt_rows.append((attempt_id, m, 0, "reference", "python train.py", "2026-11-01T00:00:00Z",
                                 "2026-11-01T01:00:00Z", 0, None, "a100", 1))
            points += [(reference, "loss", s, 2.0 / (s + 1)) for s in range(200)]
            for seq in range(1, per + 1):
                attempt_id += 1
                verification_id += 1
                ladder, cause, silent = LADDERS[min(len(LADDERS) - 1, int(rng.random() * len(LADDERS) * seq / per * 1.3))]
                wall = rng.uniform(300, 3600)
                attempt_rows.append((attempt_id, m, seq, "agent", json.dumps(["python", "train.py", f"--seed={seq}"]),
                                     "2026-11-01T02:00:00Z", f"2026-11-01T02:{int(wall // 60) % 60:02d}:00Z",
                                     1 if cause == "crash" else 0, rng.choice([None, 2, 3, 4, 5]), "tpu-v5e", 4))
                verification_rows.append((verification_id, attempt_id, reference, wall, wall / 3600 * 4 * 1.2,
                                          rng.uniform(0.3, 1.5), rng.uniform(0.3, 2.0)))
                for level, outcome in enumerate(ladder, start=1):
                    verdict_id += 1
                    verdict_rows.append((verdict_id, attempt_id, level, outcome, verification_id))
                if cause:
                    failure_rows.append((attempt_id, cause, silent, verification_id))
            points += [(attempt_id, "loss", s, 2.0 / (s + 1) + 0.01) for s in range(200)]
            conn.executemany(
                "INSERT INTO attempt (id, migration_id, seq, source, argv, cwd, env, started_at, ended_at, status,"
                " exit_code, expected_level, claim, intended_kind, intended_count, commit_sha) VALUES"
                " (?, ?, ?, ?, ?, '.', '{\"HF_TOKEN\": \"hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567\"}', ?, ?, 'ok', ?, ?,"
                " 'Matches the reference; used Bearer abcdefghijklmnopqrstuvwxyz', ?, ?, 'c1')",
                [(r[0], r[1], r[2], r[3], r[4] if r[4].startswith("[") else json.dumps(r[4].split()), r[5], r[6],
                  r[7], r[8], r[9], r[10]) for r in attempt_rows])
            conn.executemany(
                "INSERT INTO verification (id, attempt_id, reference_attempt_id, verifier, verifier_version,"
                " inputs_hash, at, highest_level, wall_seconds, cost_dollars, time_ratio, cost_ratio)"
                " VALUES (?, ?, ?, 'bench', '1', 'h', '2026-11-02', 0, ?, ?, ?, ?)", verification_rows)
            conn.executemany(
                "INSERT INTO verdict (id, attempt_id, level, outcome, reason, evidence, verifier, verifier_version,"
                " verification_id) VALUES (?, ?, ?, ?, 'r', '[]', 'bench', '1', ?)", verdict_rows)
            conn.executemany(
                "INSERT INTO failure (attempt_id, cause, silent, note, evidence, verification_id)"
                " VALUES (?, ?, ?, 'note', '[]', ?)", failure_rows)
            conn.executemany("INSERT INTO metric_point (attempt_id, name, step, value) VALUES (?, ?, ?, ?)", points)
            for k in range(3):
                conn.execute("INSERT INTO intervention (migration_id, kind, minutes, note, reviewer, at)"
                             " VALUES (?, ?, ?, 'n', 'ana', '2026-11-02')",
                             [m, ["fix_environment", "hint", "fix_code"][k], 10.0 * (k + 1)])
            # half the migrations accepted on their last attempt: final runs for the ratio intervals
            conn.execute("INSERT INTO decision (migration_id, kind, reason, figures, reviewer, at, attempt_id)"
                         " VALUES (?, ?, 'keep going', '{}', 'bob', '2026-11-02', ?)",
                         [m, "accept" if m % 2 else "continue", attempt_id])
            conn.execute("INSERT INTO review_session (reviewer, migration_id, started_at, active_seconds)"
                         " VALUES ('ana', ?, '2026-11-02', 1800)", [m])
            conn.execute("INSERT INTO verdict_override (verdict_id, outcome, justification, reviewer, at)"
                         " VALUES (?, 'pass', 'checked by hand', 'bob', '2026-11-02')", [verdict_id])
    study.close()


MEASURE = """
import sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from storage.database import open_study
study = open_study({db!r})
study.db.execute("SELECT 1").fetchone()
t1 = time.perf_counter()
c1 = time.process_time()
import workbench.report as wr
from workbench.report import build_report, render
if hasattr(wr, "build_for"):
    report = wr.build_for(study.db, {fmt!r})
else:  # a tree from before build_for (--tree)
    more = {{"loss_curves": {fmt!r} in wr.LOSS_FORMATS}} if hasattr(wr, "LOSS_FORMATS") else {{}}
    report = build_report(study.db, attempt_texts={fmt!r} in wr.ATTEMPT_TEXT_FORMATS, **more)
t2 = time.perf_counter()
data = render(report, {fmt!r}) if {fmt!r} else b""
t3 = time.perf_counter()
c3 = time.process_time()
print(t1 - t0, t2 - t1, t3 - t2, len(data), report.totals.attempts.n, c3 - c1)
"""


FLOOR = """
import sys, time
sys.path.insert(0, {root!r})
from storage.database import open_study
from storage.report import report_attempt_rows, report_migrations
study = open_study({db!r})
ids = [m.id for m in report_migrations(study.db)]
t0, c0 = time.perf_counter(), time.process_time()
rows = report_attempt_rows(study.db, ids, texts={fmt!r} in ("csv", "json"))
{write}
print(time.perf_counter() - t0, time.process_time() - c0, len(rows))
"""
"""A format's floor in a design that reads a row per attempt: reading the attempt rows (one Python
tuple each, with their texts for csv and json) and writing each attempt's part of the format with
nothing counted, redacted or looked up: what such a report costs before it counts anything."""

FLOOR_WRITE = {
    "md": "",
    "latex": "",
    # one bar a verified attempt in the ladder charts: what html draws per attempt
    "html": "svg = ''.join([f'<rect x=\"{{r[2] * 1.5:.1f}}\" y=\"{{r[11] or 0}}\" width=\"1.0\" height=\"9\">'"
            " f'<title>#{{r[2]}}</title></rect>' for r in rows if r[19] is not None])",
    # every column of every row, as they come, by csv's writer into a zip at deflate's level 1
    "csv": "import csv, io, zipfile\ntext = io.StringIO()\ncsv.writer(text, lineterminator='\\n').writerows(rows)\n"
           "buffer = io.BytesIO()\nzipfile.ZipFile(buffer, 'w', zipfile.ZIP_DEFLATED).writestr("
           "'attempts.csv', text.getvalue(), compresslevel=1)",
    # every row as a list, no field names, by orjson
    "json": "import orjson\ndata = orjson.dumps(rows)",
}


def floor(db: Path, fmt: str, tree: Path = ROOT) -> tuple[float, float]:
    code = FLOOR.format(root=str(tree), db=str(db), fmt=fmt, write=FLOOR_WRITE[fmt])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def measure(db: Path, fmt: str, tree: Path = ROOT) -> tuple[float, float, float, int, int, float]:
    out = subprocess.run([sys.executable, "-c", MEASURE.format(root=str(tree), db=str(db), fmt=fmt)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4]), float(out[5])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=15_000)
    parser.add_argument("--migrations", type=int, default=100)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="measure the code of this tree (another worktree, for a before and after)")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.keep or Path(tmp) / "bench.db"
        if not db.exists():
            start = time.perf_counter()
            generate(db, args.attempts, args.migrations)
            print(f"generated {args.attempts:,} attempts in {args.migrations} migrations:"
                  f" {time.perf_counter() - start:.1f} s, {db.stat().st_size / 2**20:.0f} MiB")
        print("| format | open | count | render | count + render | CPU of count + render | output |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        found = {}
        for fmt in ("md", "html", "csv", "json", "latex"):
            runs = [measure(db, fmt, args.tree) for _ in range(args.runs)]
            best = found[fmt] = min(runs, key=lambda r: r[1] + r[2])
            assert best[4] == args.attempts // args.migrations * args.migrations, best  # per migration, rounded down
            print(f"| {fmt} | {best[0] * 1000:.0f} ms | {best[1] * 1000:.0f} ms | {best[2] * 1000:.0f} ms |"
                  f" {(best[1] + best[2]) * 1000:.0f} ms | {best[5] * 1000:.0f} ms | {best[3] / 2**20:.1f} MiB |")
        floors = {fmt: min((floor(db, fmt, args.tree) for _ in range(args.runs)), key=lambda f: f[1]) for fmt in found}
        print("| format | count + render (CPU) | floor (CPU): the rows read and its per-attempt part written | ratio |")
        print("| --- | --- | --- | --- |")
        for fmt in found:
            print(f"| {fmt} | {found[fmt][5] * 1000:,.0f} ms | {floors[fmt][1] * 1000:,.0f} ms |"
                  f" x{found[fmt][5] / floors[fmt][1]:.2f} |")
        if args.write:
            from results import record

            def beyond(fmt: str) -> str:
                return f"{(found[fmt][1] + found[fmt][2]) * 1000:,.0f} ms (CPU {found[fmt][5] * 1000:,.0f})"

            worst = max((found[f][1] + found[f][2]) for f in found)
            worst_cpu = max(found[f][5] for f in found)
            record(f"report of {found['md'][4]:,} attempts in {args.migrations} migrations (bench/report.py's study),"
                   " count + render beyond opening it", target="under 1 s in every format",
                   latest=", ".join(f"{fmt} {beyond(fmt)}" for fmt in found) + f" (best of {args.runs})",
                   baseline=f"opening the database: {min(f[0] for f in found.values()) * 1000:.0f} ms; each"
                   " format's floor (the attempt rows read, a tuple each, and its per-attempt part written with"
                   " nothing counted: bench/report.py's FLOOR_WRITE), CPU: " + ", ".join(
                       f"{fmt} {floors[fmt][1] * 1000:,.0f} ms" for fmt in found),
                   ratio=f"slowest {worst:.2f} s wall, {worst_cpu:.2f} s CPU; of the floors: " + ", ".join(
                       f"{fmt} x{found[fmt][5] / floors[fmt][1]:.2f}" for fmt in found), command=f"bench/report.py --attempts {args.attempts}"
                   f" --migrations {args.migrations} --runs {args.runs} --write")


if __name__ == "__main__":
    main()
