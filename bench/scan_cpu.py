"""CPU time of the verifier's errors-and-counters log scan against `grep -c`'s, best of five.

    .venv/bin/python bench/scan_cpu.py [--mb 256] [--scale 0.05] [--keep DIR] [--extract]

CPU seconds (this process's, and grep's from the children's rusage) rather than wall time, so
that other work on a shared machine moves the ratio less. Writes bench/log_parse.py's synthetic
log of --mb MiB and stores it in a study database's chunk store, generates a bench/generate.py
study at --scale and imports it (or reuses DIR's), then times the scan of the big log from the
file in 1 MiB blocks (its first scan in the process, before numpy counts newlines, and the best
later one), from the chunk store, and of every stored log of the study, as verify reads them.
`--extract` times the scan with metric extraction instead (verify's, for runs without stored series).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from log_parse import write_log  # noqa: E402

from storage.logs import log_chunks  # noqa: E402
from workbench.verify.logscan import LogScanner, file_chunks  # noqa: E402
from workbench.verify.patterns import compile_patterns  # noqa: E402

RUNS = 5


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def grep(paths: list[Path]) -> float:
    def run() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["grep", "-c", "step", *map(str, paths)], capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    return min(run() for _ in range(RUNS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--extract", action="store_true", help="time the scan with metric extraction")
    args = parser.parse_args()
    from sqlite_utils import Database

    from storage import schema
    from storage.database import open_study
    from storage.logs import store_log

    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        log = out / "train.log"
        if not log.exists():
            write_log(log, args.mb)
        db = Database(out / "log.db")
        if not db["log"].exists():
            schema.migrations.apply(db)
            with db.atomic():
                store_log(db, log)
        log_id = db.execute("SELECT id FROM log").fetchone()[0]
        if not (out / "study" / "imported.db").exists():
            from generate import generate

            generate(out / "study", args.scale)
            subprocess.run([sys.executable, "-m", "cli", "import", "bundle", str(out / "study" / "bundle"), "--db",
                            str(out / "study" / "imported.db")], cwd=ROOT, check=True, capture_output=True)
        study = open_study(out / "study" / "imported.db")
        logs = [r[0] for r in study.db.execute("SELECT DISTINCT log_id FROM attempt WHERE log_id IS NOT NULL")]
        files = sorted((out / "study" / "bundle").glob("migrations/*/logs/*.log"))
        patterns = compile_patterns()

        def scan(source):
            def run() -> None:
                scanner = LogScanner(patterns, extract_metrics=args.extract)
                for chunk in source():
                    scanner.feed(chunk)
                scanner.finish()
            return run

        def study_scan() -> None:
            for i in logs:
                scanner = LogScanner(patterns, extract_metrics=args.extract)
                for chunk in log_chunks(study.db, i):
                    scanner.feed(chunk)
                scanner.finish()

        mb = log.stat().st_size / 2**20
        rows = {"file, first scan in the process": cpu(scan(lambda: file_chunks(log, 1 << 20)))}
        rows["file"] = min(cpu(scan(lambda: file_chunks(log, 1 << 20))) for _ in range(RUNS))
        rows["chunk store"] = min(cpu(scan(lambda: log_chunks(db, log_id))) for _ in range(RUNS))
        g = grep([log])
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"`uptime`: {load}")
        for name, seconds in rows.items():
            print(f"{mb:.0f} MiB log, {name}: {seconds / mb * 1000:.2f} ms/MiB "
                  f"({g / seconds:.2f} of grep's {g / mb * 1000:.2f})")
        smb = sum(f.stat().st_size for f in files) / 2**20
        seconds, g = min(cpu(study_scan) for _ in range(RUNS)), grep(files)
        print(f"study, {len(logs)} logs, {smb:.0f} MiB, chunk store: {seconds / smb * 1000:.2f} ms/MiB "
              f"({g / seconds:.2f} of grep's {g / smb * 1000:.2f})")
        study.close()
        db.close()


if __name__ == "__main__":
    main()
