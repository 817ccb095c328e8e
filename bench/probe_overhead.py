#!/usr/bin/env python3
"""The probe's overhead on step time: a small real training loop on 4 XLA:CPU devices, with and without it.

    python bench/probe_overhead.py [--python PATH] [--steps 400] [--runs 5] [--write]

The loop (WORKLOAD below) is the demo's fixed attempt: one MLP replica per device, gradients
averaged on the host, the average clipped, SGD, the replicas' losses read each step; every hook of
the probe fires in it (forward, backward, clip, optimizer step, per-replica norms and checksums,
torch_xla's counters, the batched fetches). Two comparisons, each `--runs` times, after 20
warm-up steps, in wall time and in the process's CPU time (all its threads), means (so the
steps that fetch the probe's batch count):

- alternated blocks (the figure judged): one process with the probe, which switches it off and on
  every 10 steps (its hooks return at once while off); the probe's mean step against the
  unprobed one in the same process. Neighbours' load on a shared machine moves both alike. The
  hooks' bare calls while off (a global forward hook puts every module call on torch's slower
  path) are left in the baseline: a few microseconds a step.
- alternated processes: runs without and with the probe, one after the other, the median of
  each pair's ratio. Start-up and whole-process effects count here, and so does the machine's
  drift between two runs, which on a loaded machine is larger than 3%.

Target: under 3% of step time. Needs the torch_xla environment (`make xla-env`); --python
defaults to $WORKBENCH_XLA_PYTHON, else .venv-xla/bin/python.
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
INJECT = ROOT / "workbench" / "probe" / "inject"
WARM_UP = 20
STEP = re.compile(r"^step (\d+) ([01]) wall (\S+) cpu (\S+)$", re.M)
WORKLOAD = """\
import copy, sys, time
import torch, torch_xla
import torch.nn.functional as F
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

steps, blocks = int(sys.argv[1]), sys.argv[2] == "blocks"
probe = sys.modules.get("workbench_probe")
state = probe._state if probe else None
devices = [torch.device(f"xla:{i}") for i in range(xr.global_runtime_device_count())]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
replicas = [copy.deepcopy(model).to(d) for d in devices]
g = torch.Generator().manual_seed(1)
x, y = torch.randn(2048, 16, generator=g), torch.randint(0, 4, (2048,), generator=g)
for step in range(1, steps + 1):
    on = state is not None and not (blocks and (step - 1) // 10 % 2)
    if probe:
        probe._state = state if on else None
    wall, cpu = time.perf_counter(), time.process_time()
    i = (step - 1) * 32 % 2048
    losses = []
    for replica, d, xs, ys in zip(replicas, devices, x[i:i + 32].chunk(len(devices)), y[i:i + 32].chunk(len(devices))):
        with torch.no_grad():
            for pr, pm in zip(replica.parameters(), model.parameters()):
                pr.copy_(pm.to(d))
        replica.zero_grad()
        loss = F.cross_entropy(replica(xs.to(d)), ys.to(d))
        loss.backward()
        losses.append(loss)
    torch_xla.sync()
    for k, pm in enumerate(model.parameters()):
        pm.grad = torch.stack([list(r.parameters())[k].grad.cpu() for r in replicas]).mean(0)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    loss = torch.stack([l.cpu() for l in losses]).mean()
    if step % 10 == 0:
        print(f"loss {loss.item():.6f}", file=sys.stderr)
    xm.wait_device_ops()
    print(f"step {step} {int(on)} wall {time.perf_counter() - wall:.7f} cpu {time.process_time() - cpu:.7f}")
if probe:
    probe._state = state
"""


def workload(python: str, steps: int, probed: bool, blocks: bool = False) -> dict[bool, tuple[float, float]]:
    """One run's mean step time after the warm-up, probe on and off: {on: (wall, CPU)} in seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_PROBE_DIR")}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4")
    with tempfile.TemporaryDirectory() as out:
        if probed:
            env.update(PYTHONPATH=str(INJECT), WORKBENCH_PROBE_DIR=out)
        done = subprocess.run([python, "-c", WORKLOAD, str(steps), "blocks" if blocks else "whole"], env=env,
                              capture_output=True, text=True)
        if done.returncode or (probed and not any(Path(out).glob("probe-*.json"))):
            raise SystemExit(f"the workload failed (probe {probed}): {done.stderr[-2000:]}")
    rows: dict[bool, list[tuple[float, float]]] = {}
    for s, on, w, c in STEP.findall(done.stdout):
        if int(s) > WARM_UP:
            rows.setdefault(on == "1", []).append((float(w), float(c)))
    return {on: (statistics.fmean(w for w, _ in r), statistics.fmean(c for _, c in r)) for on, r in rows.items()}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--python", default=os.environ.get("WORKBENCH_XLA_PYTHON") or str(ROOT / ".venv-xla/bin/python"))
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = p.parse_args()
    blocks = [workload(args.python, args.steps, True, blocks=True) for _ in range(args.runs)]
    pairs = []
    for i in range(args.runs):   # alternated, the side that starts swapped each round
        sides = [False, True] if i % 2 == 0 else [True, False]
        got = {side: workload(args.python, args.steps, side)[side] for side in sides}
        pairs.append((got[False], got[True]))
    figures = {}
    for k, name in enumerate(("wall", "cpu")):
        inside = [(r[True][k] / r[False][k] - 1) * 100 for r in blocks]
        apart = [(on[k] / off[k] - 1) * 100 for off, on in pairs]
        off = statistics.median(r[False][k] for r in blocks)
        on = statistics.median(r[True][k] for r in blocks)
        figures[name] = (off, on, statistics.median(inside), statistics.median(apart))
        print(f"{name:4}: alternated blocks {off * 1000:.3f} -> {on * 1000:.3f} ms a step, median "
              f"{figures[name][2]:+.2f}% (runs {', '.join(f'{v:+.1f}' for v in inside)}); alternated processes "
              f"median {figures[name][3]:+.2f}% (pairs {', '.join(f'{v:+.1f}' for v in apart)})")
    off, on, overhead, apart = figures["cpu"]
    print(f"overhead (CPU time a step, alternated blocks): {overhead:+.2f}% (target < 3%)")
    if args.write:
        from results import record

        record("probe overhead: mean step time, 4-replica MLP on 4 XLA:CPU devices", target="under 3%",
               latest=f"{on * 1000:.3f} ms CPU a step with the probe (wall {figures['wall'][1] * 1000:.3f} ms)",
               baseline=f"{off * 1000:.3f} ms CPU with it switched off in the same process, 10-step blocks "
                        f"alternated, {args.runs} runs (wall {figures['wall'][0] * 1000:.3f} ms)",
               ratio=f"{overhead:+.2f}% CPU, {figures['wall'][2]:+.2f}% wall; separate processes alternated: "
                     f"{apart:+.2f}% CPU, {figures['wall'][3]:+.2f}% wall (medians of {args.runs} pairs)",
               command=f"bench/probe_overhead.py --steps {args.steps} --runs {args.runs} --write")
    return 0 if overhead < 3 else 1


if __name__ == "__main__":
    sys.exit(main())
