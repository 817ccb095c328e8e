"""What a fresh process pays to scan with metric extraction: CPU from start to the end of one scan,
imports included (issue 19: a compiled walk must not cost more to load than it saves).

    PYTHONPATH=$PWD .venv/bin/python bench/scan_fresh.py study|log [--keep DIR]

DIR is bench/scan_cpu.py's --keep folder: `log` scans its train.log from the file in 1 MiB blocks,
`study` every stored log of its study from the chunk store, as verify reads them.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage.database import open_study  # noqa: E402
from storage.logs import log_chunks  # noqa: E402
from workbench.verify.logscan import LogScanner, file_chunks  # noqa: E402
from workbench.verify.patterns import compile_patterns  # noqa: E402


def main() -> None:
    what = sys.argv[1]
    keep = Path(sys.argv[sys.argv.index("--keep") + 1]) if "--keep" in sys.argv else Path("/tmp/extract-keep")
    patterns = compile_patterns()
    if what == "study":
        study = open_study(keep / "study" / "imported.db")
        for (log_id,) in study.db.execute("SELECT DISTINCT log_id FROM attempt WHERE log_id IS NOT NULL").fetchall():
            scanner = LogScanner(patterns, extract_metrics=True)
            for chunk in log_chunks(study.db, log_id):
                scanner.feed(chunk)
            scanner.finish()
    else:
        scanner = LogScanner(patterns, extract_metrics=True)
        for chunk in file_chunks(keep / "train.log", 1 << 20):
            scanner.feed(chunk)
        scanner.finish()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{what}: {usage.ru_utime + usage.ru_stime:.2f} s CPU in all, max RSS {usage.ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
