#!/usr/bin/env python3
"""The probe's overhead on step time: the demo's 4-replica MLP on XLA:CPU, with and without the probe.

    python bench/probe_overhead.py [--python PATH] [--steps 200] [--runs 3]

Runs the demo's fixed attempt (assets/demo/project/mlp/v4/train.py) alternately without and with the
probe, `--runs` times each, and compares the mean of the step_time the program prints itself
(after 10 warm-up steps). Target: under 3% of step time. Needs the torch_xla environment
(`make xla-env`); --python defaults to $WORKBENCH_XLA_PYTHON, else .venv-xla/bin/python.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "assets" / "demo" / "project" / "mlp" / "v4" / "train.py"
INJECT = ROOT / "workbench" / "probe" / "inject"
STEP = re.compile(r"^step (\d+)/\d+ .* step_time (\S+)", re.M)


def run(python: str, steps: int, probed: bool) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4")
    with tempfile.TemporaryDirectory() as out:
        if probed:
            env.update(PYTHONPATH=str(INJECT), WORKBENCH_PROBE_DIR=out)
        text = subprocess.run([python, str(SCRIPT), "--steps", str(steps)], env=env, capture_output=True,
                              text=True, check=True).stdout
    return [float(t) for s, t in STEP.findall(text) if int(s) > 10]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--python", default=os.environ.get("WORKBENCH_XLA_PYTHON") or str(ROOT / ".venv-xla/bin/python"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = p.parse_args()
    base: list[float] = []
    probed: list[float] = []
    for _ in range(args.runs):
        base += run(args.python, args.steps, False)
        probed += run(args.python, args.steps, True)
    # the program prints step_time to 0.1 ms: the mean over hundreds of steps resolves finer than that
    b, w = statistics.fmean(base), statistics.fmean(probed)
    overhead = (w - b) / b * 100
    print(f"steps measured per side: {len(base)} (after 10 warm-up steps, {args.runs} runs)")
    print(f"mean step time without probe: {b * 1000:.3f} ms")
    print(f"mean step time with probe:    {w * 1000:.3f} ms")
    print(f"overhead: {overhead:+.2f}% (target < 3%)")
    if args.write:
        from results import record

        record("probe overhead: mean step time, demo MLP on 4 XLA:CPU devices", target="under 3%",
               latest=f"{w * 1000:.3f} ms with the probe", baseline=f"{b * 1000:.3f} ms without it, alternated",
               ratio=f"{overhead:+.2f}% ({len(base)} steps a side)",
               command=f"bench/probe_overhead.py --steps {args.steps} --runs {args.runs} --write")
    return 0 if overhead < 3 else 1


if __name__ == "__main__":
    sys.exit(main())
