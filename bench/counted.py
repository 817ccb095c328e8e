"""What folding re-runs into their attempts costs (storage/counted.py): the launch counts, the
ladder counts, a migration's first page of attempts and the report's count, on bench/report.py's
generated study with a share of its agent attempts re-run (each re-run verified, five verdicts).

    PYTHONPATH=. .venv/bin/python bench/counted.py [--attempts 15000] [--migrations 100] [--reruns 0.1]

Run it with another checkout first on PYTHONPATH (e.g. main's) for the baseline on the same
data: it generates its own study file with that checkout's schema, so each measures its own.
Prints one line per measurement: the median of 3 fresh processes, in ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MEASURE = """
import sys, time
from storage.database import open_study
from storage import queries, review
study = open_study(sys.argv[1])
db = study.db
db.execute("SELECT 1").fetchone()
out = {}
t = time.perf_counter(); rows = list(queries.iter_migration_summaries(db)); out["migration_summaries"] = time.perf_counter() - t
t = time.perf_counter(); totals = queries.study_totals(db); out["study_totals"] = time.perf_counter() - t
t = time.perf_counter(); review.ladder_counts(db); out["ladder_counts"] = time.perf_counter() - t
t = time.perf_counter(); queries.attempt_summaries(db, 1, limit=200); out["attempt_page"] = time.perf_counter() - t
from workbench.report import build_report
t = time.perf_counter(); report = build_report(db, attempt_texts=False); out["report_build"] = time.perf_counter() - t
out["attempts_counted"] = totals["attempts"]
out["report_attempts"] = report.totals.attempts.n
print(__import__("json").dumps(out))
"""


def add_reruns(path: Path, share: float) -> int:
    """A verified re-run (source `rerun`, same commit, five verdicts) for `share` of the agent attempts."""
    import sqlite3

    rng = random.Random(38)
    conn = sqlite3.connect(path)
    with conn:
        agents = conn.execute("SELECT id, migration_id, commit_sha FROM attempt WHERE source = 'agent'").fetchall()
        picked = [a for a in agents if rng.random() < share]
        seq = dict(conn.execute("SELECT migration_id, MAX(seq) FROM attempt GROUP BY migration_id").fetchall())
        vid = conn.execute("SELECT COALESCE(MAX(id), 0) FROM verification").fetchone()[0]
        for attempt_id, mid, commit in picked:
            seq[mid] += 1
            new = conn.execute(
                "INSERT INTO attempt (migration_id, seq, source, commit_sha, argv, status, exit_code, rerun_of,"
                " started_at, ended_at) VALUES (?, ?, 'rerun', ?, '[]', 'ok', 0, ?, '2026-11-03T00:00:00Z',"
                " '2026-11-03T00:30:00Z')", [mid, seq[mid], commit, attempt_id]).lastrowid
            vid += 1
            conn.execute("INSERT INTO verification (id, attempt_id, verifier, verifier_version, inputs_hash, at,"
                         " highest_level) VALUES (?, ?, 'bench', '1', 'h', '2026-11-03', 0)", [vid, new])
            ladder = rng.choice([("pass",) * 5, ("pass", "pass", "fail", "unknown", "unknown"),
                                 ("fail",) + ("unknown",) * 4])
            conn.executemany("INSERT INTO verdict (attempt_id, level, outcome, reason, evidence, verifier,"
                             " verifier_version, verification_id) VALUES (?, ?, ?, 'r', '[]', 'bench', '1', ?)",
                             [(new, level, outcome, vid) for level, outcome in enumerate(ladder, start=1)])
    conn.close()
    return len(picked)


def main() -> None:
    from report import generate

    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=15_000)
    parser.add_argument("--migrations", type=int, default=100)
    parser.add_argument("--reruns", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "counted.db"
        generate(db, args.attempts, args.migrations)
        n = add_reruns(db, args.reruns)
        print(f"{args.attempts:,} attempts in {args.migrations} migrations, {n:,} re-runs")
        runs = [json.loads(subprocess.run([sys.executable, "-c", MEASURE, str(db)], capture_output=True, text=True,
                                          check=True).stdout) for _ in range(3)]
        for key in runs[0]:
            values = [r[key] for r in runs]
            if key.startswith(("attempts", "report_attempts")):
                print(f"{key}: {values[0]}")
            else:
                print(f"{key}: {statistics.median(values) * 1000:.0f} ms (of {', '.join(f'{v * 1000:.0f}' for v in values)})")


if __name__ == "__main__":
    main()
