"""Throughput of the verifier's one-pass log scan against `grep -c` on the same file.

    .venv/bin/python bench/log_parse.py [--mb 256] [--keep]

Writes a synthetic training log of about --mb megabytes (the demo's step lines, a torch_xla
warning every 50 steps, a debug compile block every 500, and a metrics report at the end) to a
temporary folder, warms the page cache, then times, each best of three:
`grep -c step FILE`, the scan for errors and counters only (series stored, the log over
EXTRACT_LIMIT) from the file and from the study database's chunk store, and the scan with metric
extraction (no stored series; one run only when over 512 MiB). Prints a Markdown table row;
--write rewrites its rows of bench/RESULTS.md (bench/results.py).

`--hostile` writes instead a log of 1 MiB single lines built to make backtracking patterns
explode (long runs of letters, digits, spaces, `torch_xla`, `Epoch 1`, unclosed tqdm brackets),
random binary blocks and a few step lines, and times the scan (both ways) and logsearch's error
and warning search against `grep -c` on it (issue 20: a fixed multiple of grep on any input).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage.logs import log_chunks  # noqa: E402
from workbench.verify.logscan import LogScanner, file_chunks  # noqa: E402
from workbench.verify.patterns import compile_patterns  # noqa: E402

REPORT = (Path(__file__).resolve().parent.parent / "assets/demo/bundle/migrations/mlp-classifier/logs/002.log")


def write_log(path: Path, megabytes: int) -> int:
    tail = REPORT.read_bytes().split(b"eval_accuracy", 1)[-1] if REPORT.exists() else b""
    target = megabytes << 20
    step = 0
    with path.open("wb") as fh:
        while fh.tell() < target:
            block = []
            for _ in range(1000):
                step += 1
                block.append(f"step {step}/999999999 loss {1.0 / (1 + step % 977):.6f} "
                             f"grad_norm 0.499999 step_time 0.0{step % 97:03d}\n")
                if step % 50 == 0:
                    block.append("/usr/lib/python3/site-packages/torch_xla/__init__.py:251: UserWarning: "
                                 "`devkind` argument is deprecated and will be removed in a future release.\n")
                if step % 500 == 0:
                    block.append("Compilation Analysis: ================================\n"
                                 "Compilation Analysis: Compilation Cause\n"
                                 "Compilation Analysis:   user torch_xla.sync\n"
                                 "Compilation Analysis: Graph Hash: c74c3b91b855b2b123f833b0d5f86943\n")
            fh.write("".join(block).encode())
        fh.write(b"eval_accuracy" + tail)
    return step


HOSTILE = [b"A", b"1.", b"a1", b"a-", b" ", b"token", b"torch_xla", b"torch_xla ", b"Epoch 1 ", b"it/s", b"|a| 1/2 [",
           b"{'", b"eval_1", b"step ", b"=", b"'"]


def write_hostile(path: Path, megabytes: int) -> None:
    noise = random.Random(20)
    with path.open("wb") as fh:
        n = 0
        while fh.tell() < megabytes << 20:
            fh.write(b"step %d/9 loss 0.5\n" % n)
            if n % 4 == 3:
                fh.write(noise.randbytes(1 << 20) + b"\n")
            else:
                shape = HOSTILE[n % len(HOSTILE)]
                fh.write(b"eval_" * (n % 2) + shape * ((1 << 20) // len(shape)) + b"x\n")
            n += 1


def run_hostile(path: Path, megabytes: int) -> None:
    from workbench.logsearch import ERROR, WARNING, lines_per_piece

    write_hostile(path, megabytes)
    mb = path.stat().st_size / (1 << 20)
    t_grep = best(lambda: subprocess.run(["grep", "-c", "step", str(path)], capture_output=True))
    t_err = best(lambda: scan(path, False))
    t_full = best(lambda: scan(path, True))
    t_search = best(lambda: list(lines_per_piece(file_chunks(path, 1 << 20), ERROR, WARNING)))
    print("| date | file | grep -c | scan, errors and counters | scan with metric extraction | logsearch errors and warnings |")
    print("| --- | --- | --- | --- | --- | --- |")
    row = [f"{mb / t_grep:.0f} MiB/s"] + [f"{mb / t:.0f} MiB/s ({t_grep / t:.2f} of grep)" for t in (t_err, t_full, t_search)]
    print(f"| {datetime.date.today()} | {mb:.0f} MiB of 1 MiB hostile and binary lines | " + " | ".join(row) + " |")


def best(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def scan(path: Path, extract: bool, db=None, log_id=None):
    scanner = LogScanner(compile_patterns(), extract_metrics=extract)
    for chunk in (log_chunks(db, log_id) if db is not None else file_chunks(path, 1 << 20)):
        scanner.feed(chunk)
    return scanner.finish()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--hostile", action="store_true", help="time a log of hostile 1 MiB lines instead")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's rows of bench/RESULTS.md")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="wb-bench-"))
    path = folder / "train.log"
    if args.hostile:
        run_hostile(path, args.mb)
        if not args.keep:
            path.unlink()
            folder.rmdir()
        return
    steps = write_log(path, args.mb)
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    count = {}

    def grep():
        count["grep"] = int(subprocess.run(["grep", "-c", "step", str(path)], capture_output=True,
                                           text=True).stdout)

    t_grep = best(grep)
    facts = {}
    t_full = best(lambda: facts.__setitem__("full", scan(path, True)), runs=1 if args.mb > 512 else 3)
    t_err = best(lambda: facts.__setitem__("err", scan(path, False)))
    from sqlite_utils import Database

    from storage import schema
    from storage.logs import store_log

    db = Database(folder / "bench.db")
    schema.migrations.apply(db)
    with db.atomic():
        log_id = store_log(db, path)
    t_stored = best(lambda: facts.__setitem__("stored", scan(path, False, db, log_id)))
    assert facts["stored"].last_step == steps and facts["stored"].lines == facts["err"].lines
    full = facts["full"]
    assert len(full.points["loss"]) == steps, (len(full.points["loss"]), steps)
    assert facts["err"].last_step == steps and facts["err"].counters
    mb = size / (1 << 20)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"file: {mb:.0f} MiB, {full.lines:,} lines, {steps:,} steps; grep -c step: {count['grep']:,}")
    print("| date | machine | file | grep -c | scan, errors and counters | same, from the SQLite chunk store | scan with metric extraction |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {datetime.date.today()} | {machine} | {mb:.0f} MiB, {full.lines:,} lines "
          f"| {mb / t_grep:.0f} MiB/s | {mb / t_err:.0f} MiB/s ({t_grep / t_err:.2f} of grep) "
          f"| {mb / t_stored:.0f} MiB/s ({t_grep / t_stored:.2f} of grep) "
          f"| {mb / t_full:.0f} MiB/s ({t_grep / t_full:.2f} of grep) |")
    db.close()
    if args.write:
        from results import record

        command = f"bench/log_parse.py --mb {args.mb} --write"
        grep = f"`grep -c step` on the same file: {mb / t_grep:.0f} MiB/s"
        record(f"log scan, errors and counters (series stored), {args.mb} MiB log", target="at least 1/3 of grep",
               latest=f"{mb / t_err:.0f} MiB/s from the file, {mb / t_stored:.0f} MiB/s from the chunk store",
               baseline=grep, ratio=f"{t_grep / t_err:.2f} of grep ({t_grep / t_stored:.2f} from the store)",
               command=command)
        record(f"log scan with metric extraction, {args.mb} MiB log", target="at least 0.2 of grep",
               latest=f"{mb / t_full:.0f} MiB/s", baseline=grep, ratio=f"{t_grep / t_full:.2f} of grep", command=command)
    if not args.keep:
        import shutil

        shutil.rmtree(folder)
    else:
        print(path)


if __name__ == "__main__":
    main()
