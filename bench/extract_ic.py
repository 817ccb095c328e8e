"""One scan with metric extraction of a bench log, then what a reader does, for instruction counts:

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        .venv/bin/python bench/extract_ic.py MODE [--log PATH] [--mb 4]

MODE: `start` (imports only: the interpreter's share, to subtract), `scan`, `series`
(`point_series()`), `verify` (what verify's load_run gives the ladder, `loss` and `eval_accuracy`
read from it) or `points` (the whole dict). Writes bench/log_parse.py's log of --mb MiB at --log
first when it is not there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from log_parse import write_log  # noqa: E402

from workbench.verify.logscan import LogScanner, file_chunks  # noqa: E402
from workbench.verify.patterns import compile_patterns  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["start", "scan", "series", "verify", "points"])
    parser.add_argument("--log", type=Path, default=Path("/tmp/extract-ic.log"))
    parser.add_argument("--mb", type=int, default=4)
    args = parser.parse_args()
    if not args.log.exists():
        write_log(args.log, args.mb)
    if args.mode == "start":
        return
    scanner = LogScanner(compile_patterns(), extract_metrics=True)
    for chunk in file_chunks(args.log):
        scanner.feed(chunk)
    facts = scanner.finish()
    if args.mode == "series":
        facts.point_series()
    elif args.mode == "verify":  # before series_view, verify gave the ladder point_series()
        view = facts.series_view() if hasattr(facts, "series_view") else facts.point_series()
        view["loss"], view.get("eval_accuracy")
    elif args.mode == "points":
        facts.points


if __name__ == "__main__":
    main()
