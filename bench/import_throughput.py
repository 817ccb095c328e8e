"""Claude Code import throughput and peak memory against its floor and a bare `json.loads` loop.

    .venv/bin/python bench/import_throughput.py [--mb 200] [--keep DIR] [--write]

Writes a synthetic transcript of about --mb megabytes (a long migration session: reads, edits,
environment checks, background runs and workload runs with large outputs), then measures, each
in a fresh subprocess so peak RSS is its own:

- parse:  `for line in f: json.loads(line)` over the file;
- floor:  what any import that keeps every line pays (issue 39's baseline): each line parsed with
  orjson, the file hashed (sha256), every line written to a SQLite table in one transaction (WAL,
  synchronous=NORMAL, as a study's import writes), the database closed (its checkpoint);
- import: `ClaudeCodeImporter` into a new study database (default workload rule).

Each is run --runs times, interleaved; medians of wall and CPU time are printed (CPU time is the
steadier figure on a shared machine). Target: import at most 2.5x the floor (CPU). Prints a
Markdown table row; --write rewrites its row of bench/RESULTS.md (bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def write_transcript(path: Path, megabytes: int) -> int:
    from import_helpers import Transcript

    rng = random.Random(7)
    target = megabytes << 20
    written = 0
    runs = 0
    with path.open("w") as fh:
        t = Transcript()
        while written < target:
            t.lines = []
            t.read("train.py", "import torch\n" * rng.randint(20, 400))
            t.edit("train.py", f"lr = {rng.random():.4f}", f"lr = {rng.random():.4f}")
            t.bash("python -c 'import torch_xla; print(torch_xla.__version__)'", "2.6.0")
            t.bash("ls -la && git status", "total 12\n" + "-rw-r--r-- 1 a a 100 train.py\n" * 20)
            t.say("Let me run the training again. " * rng.randint(1, 20))
            output = "".join(f"step {s} loss {rng.random():.6f} throughput {rng.random() * 1000:.1f}\n"
                             for s in range(rng.randint(200, 4000)))
            failed = rng.random() < 0.3
            t.bash("PJRT_DEVICE=TPU python train.py --epochs 1", output + ("Traceback\nRuntimeError: x\n" if failed else ""),
                   exit_code=1 if failed else 0)
            runs += 1
            t.say("The training now runs on the TPU and the loss matches the GPU reference." if not failed
                  else "It crashed; the optimizer step needs xm.optimizer_step.")
            for line in t.lines:
                text = json.dumps(line) + "\n"
                fh.write(text)
                written += len(text)
    return runs


def measure(mode: str, transcript: Path, workdir: Path) -> None:
    start = time.perf_counter()
    cpu = time.process_time()
    if mode == "parse":
        n = 0
        with transcript.open("rb") as fh:
            for line in fh:
                json.loads(line)
                n += 1
        detail = f"{n} lines"
    elif mode == "floor":
        import hashlib
        import sqlite3

        import orjson

        path = Path(tempfile.mkdtemp(prefix="floor-", dir=workdir)) / "floor.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE line (n INTEGER PRIMARY KEY, text BLOB NOT NULL)")
        start = time.perf_counter()
        cpu = time.process_time()
        digest = hashlib.sha256()
        n = 0
        db.execute("BEGIN")
        with transcript.open("rb") as fh:
            for line in fh:
                orjson.loads(line)
                digest.update(line)
                db.execute("INSERT INTO line (text) VALUES (?)", (line,))
                n += 1
        db.execute("COMMIT")
        db.close()
        detail = f"{n} lines, sha256 {digest.hexdigest()[:12]}"
    else:
        from conftest import BundleBuilder

        from storage.database import open_study
        from workbench.bundle import import_bundle
        from workbench.importers.claude_code import ClaudeCodeImporter

        workdir = Path(tempfile.mkdtemp(prefix="import-", dir=workdir))
        builder = BundleBuilder(workdir / "bundle")
        builder.write_study()
        builder.add_migration("mlp-xla", commits=1)
        study = open_study(workdir / "s.db", create=True)
        import_bundle(study, builder.root, "bench")
        start = time.perf_counter()
        cpu = time.process_time()
        report = ClaudeCodeImporter(study, "mlp-xla", "bench").run([transcript])
        study.close()
        detail = f"{report.inserted} attempts, {sum(f.tool_calls for f in report.files)} tool calls"
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "seconds": elapsed, "cpu": cpu, "peak_mib": peak, "detail": detail}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--runs", type=int, default=3, help="measurements of each; medians are printed")
    parser.add_argument("--measure", choices=["parse", "floor", "import"])
    parser.add_argument("--transcript", type=Path)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.transcript, args.workdir)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        transcript = work / "session.jsonl"
        runs = write_transcript(transcript, args.mb)
        size = transcript.stat().st_size / (1 << 20)
        samples: dict[str, list[dict]] = {"parse": [], "floor": [], "import": []}
        for _ in range(args.runs):  # interleaved, so a burst of load on a shared machine hits each
            for mode in samples:
                done = subprocess.run(
                    [sys.executable, __file__, "--measure", mode, "--transcript", str(transcript), "--workdir", str(work)],
                    capture_output=True, text=True, check=True,
                )
                samples[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))

        def median(mode: str, key: str) -> float:
            return statistics.median(r[key] for r in samples[mode])

        print(f"transcript: {size:.0f} MiB, {runs} workload runs; medians of {args.runs}")
        for mode in samples:
            wall, cpu = median(mode, "seconds"), median(mode, "cpu")
            print(f"{mode:>6}: {wall:.2f} s wall ({size / wall:.0f} MiB/s), {cpu:.2f} s CPU, "
                  f"peak RSS {median(mode, 'peak_mib'):.0f} MiB, {samples[mode][-1]['detail']}")
        ratio, cpu_ratio = median("import", "seconds") / median("parse", "seconds"), median("import", "cpu") / median("parse", "cpu")
        print(f"ratio import/parse: {ratio:.2f} wall, {cpu_ratio:.2f} CPU")
        print(f"| {size:.0f} MiB, {runs:,} runs | {median('parse', 'seconds'):.3f} s | {median('import', 'seconds'):.3f} s "
              f"| {ratio:.1f} | {median('parse', 'cpu'):.3f} s | {median('import', 'cpu'):.3f} s | {cpu_ratio:.1f} "
              f"| {median('parse', 'peak_mib'):.0f} MiB | {median('import', 'peak_mib'):.0f} MiB |")
        floor_cpu, floor_wall = median("floor", "cpu"), median("floor", "seconds")
        print(f"ratio import/floor: {median('import', 'seconds') / floor_wall:.2f} wall, "
              f"{median('import', 'cpu') / floor_cpu:.2f} CPU")
        if args.write:
            from results import record

            record(f"Claude Code import, {size:.0f} MiB transcript ({runs:,} workload runs), against its floor",
                   target="at most 2.5x the floor (CPU)",
                   latest=f"{median('import', 'cpu'):.3f} s CPU ({median('import', 'seconds'):.3f} s wall)",
                   baseline=f"floor (orjson, sha256, every line into SQLite in one transaction): {floor_cpu:.3f} s CPU"
                            f" ({floor_wall:.3f} s wall); bare `json.loads` loop {median('parse', 'cpu'):.3f} s CPU",
                   ratio=f"x{median('import', 'cpu') / floor_cpu:.2f} CPU, x{median('import', 'seconds') / floor_wall:.2f}"
                         f" wall (x{cpu_ratio:.1f} CPU of the bare loop)",
                   command=f"bench/import_throughput.py --mb {args.mb} --runs {args.runs} --write")


if __name__ == "__main__":
    main()
