"""A realistic large study from a fixed seed, written as a study bundle (docs/bundle-format.md).

    .venv/bin/python bench/generate.py OUT [--scale 1.0] [--seed 10]

At scale 1: 150 migrations, 15,000 attempts (a reference run and 99 agent attempts each), about
1.5 million metric points, logs totalling about 1 GB, one shared git repository (a branch per
migration, ten commits each; every tenth migration has a commit with a 20,000-line diff) and a
200 MB Claude Code transcript for the first migration. `--scale 0.01` gives 15 migrations, 150
attempts, ~10 MB of logs and a 2 MB transcript in a few seconds; tests and `bench/run.py` use
small scales. Attempts, migrations and bytes scale with --scale; the big diffs stay 20,000 lines.

Logs come from templates with seeded variation: a start-up banner, torch_xla warnings every 50
steps, `PT_XLA_DEBUG` compile-cause blocks and `pt-xla-profiler` lines every 500, step lines
`step i/N loss ... grad_norm ... step_time ...`, an `eval_accuracy` line, a torch_xla metrics
report at the end, and for failed runs a traceback (OOM on HBM, a CUDA call left in, a shape
error, a `Check failed`). Outcomes are spread like a real study: crashes, NaN losses, runs on
CPU instead of the TPU, numerical mismatches, slow runs, goal misses, and successes.

Writes OUT/bundle (study.toml, migrations/*, repo/) and OUT/transcripts/<slug>.jsonl, and prints
(and writes OUT/manifest.json) the counts. Import with
`workbench import bundle OUT/bundle --db study.db` and
`workbench import claude-code OUT/transcripts/*.jsonl --db study.db --migration <first slug>`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

MIGRATIONS = 150
ATTEMPTS = 15_000
LOG_BYTES = 1 << 30
TRANSCRIPT_BYTES = 200 << 20
DIFF_LINES = 20_000
COMMITS = 10
POINT_STEPS = 41
"""Steps per attempt whose loss, grad_norm and step_time go into the metric series (3 x 41 + the
goal metric for a run that finishes; crashed runs have fewer: about 100 an attempt in all)."""

PROJECTS = ["mlp", "cnn", "resnet", "vit", "bert", "gpt2", "unet", "lstm", "dlrm", "t5", "whisper", "detr",
            "llama", "wav2vec", "mae"]
OUTCOMES = [("ok", 0.22), ("crash", 0.30), ("nan", 0.07), ("cpu", 0.10), ("mismatch", 0.10),
            ("slow", 0.08), ("goal", 0.08), ("timeout", 0.05)]
CRASHES = [
    ("RuntimeError", "Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
                     "memory in memory space hbm. Used 17.21G of 15.48G hbm. Exceeded hbm capacity by 1.73G."),
    ("RuntimeError", "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                     "installed a driver from http://www.nvidia.com/Download/index.aspx"),
    ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (128x3072 and 768x10)"),
    ("ValueError", "Expected input batch_size (96) to match target batch_size (128)."),
    ("AttributeError", "module 'torch_xla.core.xla_model' has no attribute 'get_ordinal'"),
]
WARNING = (b"/usr/local/lib/python3.10/site-packages/torch_xla/core/xla_model.py:1046: UserWarning: "
           b"torch_xla.core.xla_model.xrt_world_size() will be removed in release 2.7. Use "
           b"torch_xla.runtime.world_size instead.\n")
DEBUG_BLOCK = (
    "Compilation Analysis: ================================================================================\n"
    "Compilation Analysis: Compilation Cause\n"
    "Compilation Analysis:   {cause}\n"
    "Compilation Analysis: Graph Info:\n"
    "Compilation Analysis:   Graph Hash: {hash:032x}\n"
    "Compilation Analysis:   Number of Graph Inputs: {inputs}\n"
    "Compilation Analysis:   Number of Graph Outputs: 1\n"
    "Compilation Analysis: Python Frame Triggered Execution:\n"
    "Compilation Analysis:   train_step (/home/agent/{project}/train.py:{line})\n"
    "Compilation Analysis:   main (/home/agent/{project}/train.py:201)\n"
    "Compilation Analysis: --------------------------------------------------------------------------------\n"
    "pt-xla-profiler: TransferFromDeviceTime too frequent: {transfers} counts during {steps} steps\n"
)
CAUSES = ["mark_step when exiting a profiler StepTrace region",
          "most likely user code trying to access tensor value before mark_step",
          "dynamic shape: the input shape changed since the last execution"]


def banner(rng: random.Random, project: str, chips: int, on_cpu: bool) -> bytes:
    device = "CPU" if on_cpu else "TPU"
    return (
        f"+ PJRT_DEVICE={device} python train.py --epochs 3 --batch-size {rng.choice([64, 128, 256])}\n"
        f"WARNING:root:PJRT is now the default runtime. For more information, see "
        f"https://github.com/pytorch/xla/blob/master/docs/pjrt.md\n"
        f"I0000 00:00:1733142530.{rng.randint(100000, 999999)} {rng.randint(1000, 9999)} pjrt_api.cc:79] "
        f"PJRT_Api is set for device type {device.lower()}\n"
        f"hardware {device} devices_available {1 if on_cpu else chips} devices_used {1 if on_cpu else chips}\n"
        f"Loading {project} dataset: {rng.randint(10, 900)}k examples, {rng.randint(2, 64)} shards\n"
    ).encode()


def metrics_report(rng: random.Random, steps: int, compiles: int) -> bytes:
    out = []
    for name in ("CompileTime", "ExecuteTime", "TransferFromDeviceTime", "TransferToDeviceTime"):
        samples = compiles if name == "CompileTime" else steps + rng.randint(0, 50)
        out.append(f"Metric: {name}\n  TotalSamples: {samples}\n  Accumulator: {rng.randint(1, 900)}ms"
                   f"{rng.randint(0, 999):03d}.{rng.randint(0, 999):03d}us\n  ValueRate: {rng.random() * 900:.3f}ms / second\n"
                   f"  Rate: {rng.random() * 200:.3f} / second\n  Percentiles: 1%={rng.random():.3f}ms; 50%="
                   f"{rng.random() * 5:.3f}ms; 99%={rng.random() * 50:.3f}ms\n")
    counters = {"CachedCompile": max(0, steps - compiles), "UncachedCompile": compiles, "MarkStep": steps,
                "CreateDataHandles": steps * 21, "aten::_local_scalar_dense": rng.choice([0, steps, 3 * steps])}
    if rng.random() < 0.3:
        counters["aten::nonzero"] = steps
    for name, value in counters.items():
        out.append(f"Counter: {name}\n  Value: {value}\n")
    return "".join(out).encode()


def write_log(path: Path, rng: random.Random, *, size: int, outcome: str, project: str, chips: int,
              ref_loss: float, acc: float) -> tuple[list[tuple[str, int, float]], int]:
    """The attempt's log, about `size` bytes; returns its metric points and its planned steps."""
    on_cpu = outcome == "cpu"
    stop = max(POINT_STEPS, size // 72)  # the lines that fit in `size`
    steps = stop if outcome not in ("crash", "timeout") else int(stop * rng.uniform(1.5, 5))  # planned
    sampled = set(range(1, steps + 1, max(1, steps // POINT_STEPS))) | {steps}
    points: list[tuple[str, int, float]] = []
    base_time = 0.012 * (8 if on_cpu else 3 if outcome == "slow" else 1) * rng.uniform(0.8, 1.2)
    drift = 1.3 if outcome == "mismatch" else 1.0
    nan_from = rng.randint(2, max(2, steps // 2)) if outcome == "nan" else None
    compiles = rng.randint(3, 12) if rng.random() < 0.8 else rng.randint(40, 400)
    parts = [banner(rng, project, chips, on_cpu)]
    block: list[str] = []
    for i in range(1, stop + 1):
        loss = ref_loss * drift * (1 + 2.0 / math.sqrt(i)) * rng.uniform(0.97, 1.03)
        grad = rng.uniform(0.3, 1.2)
        t = base_time * rng.uniform(0.9, 1.1)
        shown = "nan" if nan_from is not None and i >= nan_from else f"{loss:.6f}"
        block.append(f"step {i}/{steps} loss {shown} grad_norm {grad:.6f} step_time {t:.4f}\n")
        if i in sampled:
            if shown != "nan":
                points.append(("loss", i, round(loss, 6)))
            points.append(("grad_norm", i, round(grad, 6)))
            points.append(("step_time", i, round(t, 4)))
        if i % 50 == 0:
            block.append(WARNING.decode())
        if i % 500 == 0:
            block.append(DEBUG_BLOCK.format(cause=rng.choice(CAUSES), hash=rng.getrandbits(128),
                                            inputs=rng.randint(4, 40), project=project, line=rng.randint(60, 180),
                                            transfers=rng.randint(100, 900), steps=i))
        if len(block) >= 4096:
            parts.append("".join(block).encode())
            block = []
    parts.append("".join(block).encode())
    if outcome == "crash":
        kind, message = rng.choice(CRASHES)
        parts.append((
            "Traceback (most recent call last):\n"
            f'  File "/home/agent/{project}/train.py", line 212, in <module>\n    main()\n'
            f'  File "/home/agent/{project}/train.py", line {rng.randint(90, 200)}, in main\n'
            "    loss = train_step(model, batch, optimizer)\n"
            '  File "/usr/local/lib/python3.10/site-packages/torch_xla/core/xla_model.py", line 1120, in mark_step\n'
            "    torch_xla._XLAC._xla_step_marker(\n"
            f"{kind}: {message}\n").encode())
    elif outcome == "timeout":
        parts.append(b"Terminated: timed out after 3600 s\n")
    else:
        final = acc * (0.85 if outcome == "goal" else 1.0) * rng.uniform(0.995, 1.005)
        parts.append(f"eval_accuracy {final:.4f}\n".encode())
        points.append(("eval_accuracy", steps, round(final, 4)))
        parts.append(metrics_report(rng, steps, compiles))
    path.write_bytes(b"".join(parts))
    return points, steps


# --------------------------------------------------------------------------- code


def source(project: str, version: int, rng: random.Random) -> str:
    device = "torch.device('cuda')" if version == 0 else "torch_xla.device()"
    lines = [f"# {project}: training script, version {version}", "import torch",
             "import torch_xla" if version else "import torch.cuda", f"DEVICE = {device}",
             f"LR = {rng.choice([1e-3, 3e-4, 1e-4])}", f"BATCH = {rng.choice([64, 128, 256])}"]
    for n in range(60 + 5 * version):
        lines.append(f"def layer_{n}(x):\n    return torch.nn.functional.gelu(x) * {rng.random():.4f}")
    lines.append("def train_step(model, batch, optimizer):\n    loss = model(batch).mean()\n    loss.backward()\n"
                 + ("    xm.optimizer_step(optimizer)\n" if version else "    optimizer.step()\n") + "    return loss")
    return "\n".join(lines) + "\n"


def big_file(rng: random.Random, lines: int) -> str:
    return "".join(f"WEIGHT_{n} = [{', '.join(f'{rng.random():.5f}' for _ in range(4))}]  # generated\n"
                   for n in range(lines))


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def make_repo(repo: Path, slugs: list[str], projects: list[str], rng: random.Random, diff_lines: int) -> dict[str, list[str]]:
    """One shared repository, a branch per migration with COMMITS commits; returns slug -> SHAs."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    marks = repo / ".git" / "bench-marks"
    stream = bytearray()
    mark = 0
    by_slug: dict[str, list[int]] = {}
    stamp = 1_764_000_000
    for m, (slug, project) in enumerate(zip(slugs, projects)):
        ids = []
        for c in range(COMMITS):
            mark += 1
            stamp += 60
            stream += f"commit refs/heads/{slug}\nmark :{mark}\n".encode()
            who = "Agent <agent@example.com>" if c else "Owner <owner@example.com>"
            stream += f"author {who} {stamp} +0000\ncommitter {who} {stamp} +0000\n".encode()
            stream += _data(f"{slug}: {'original GPU code' if c == 0 else f'migration step {c}'}")
            if ids:
                stream += f"from :{ids[-1]}\n".encode()
            stream += b"M 100644 inline train.py\n" + _data(source(project, c, rng))
            if c == 0:
                stream += b"M 100644 inline README.md\n" + _data(f"# {slug}\n\nThe {project} project.\n")
            if c == COMMITS // 2 and m % 10 == 0:
                stream += b"M 100644 inline model_weights.py\n" + _data(big_file(rng, diff_lines))
            ids.append(mark)
        by_slug[slug] = ids
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet", f"--export-marks={marks}"],
                   input=bytes(stream), check=True)
    sha_of = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    return {slug: [sha_of[f":{i}"] for i in ids] for slug, ids in by_slug.items()}


# --------------------------------------------------------------------------- the study


def generate(out: Path, scale: float = 1.0, seed: int = 10) -> dict:
    start = time.perf_counter()
    rng = random.Random(seed)
    migrations = max(2, round(MIGRATIONS * math.sqrt(scale)))
    per = max(3, round(ATTEMPTS * scale / migrations))
    long_runs = 1 + 7 * (1 / per + 0.01 * (per - 1) / per)  # references and 1% of runs are 8x as long
    log_mean = LOG_BYTES * scale / (migrations * per) / long_runs
    bundle = out / "bundle"
    (bundle / "migrations").mkdir(parents=True, exist_ok=False)
    (bundle / "study.toml").write_text(
        'format = 1\n\n[study]\nslug = "scale-study"\ntitle = "Scale study (bench/generate.py)"\n'
        'staff_hourly_rate = 110.0\nreviewers = ["ana", "ben", "chen"]\n\n'
        '[prices]\n"tpu-v5e" = 1.2\n"tpu-v4" = 3.22\n"a100" = 3.67\n"cpu" = 0.05\n')
    slugs = [f"{PROJECTS[m % len(PROJECTS)]}-{m:03d}" for m in range(migrations)]
    projects = [PROJECTS[m % len(PROJECTS)] for m in range(migrations)]
    shas = make_repo(bundle / "repo", slugs, projects, rng, DIFF_LINES)
    counts = {"migrations": migrations, "attempts": 0, "metric_points": 0, "log_bytes": 0, "log_files": 0,
              "largest_log": 0, "big_diffs": sum(1 for m in range(migrations) if m % 10 == 0)}
    names, weights = zip(*OUTCOMES)
    for slug, project in zip(slugs, projects):
        folder = bundle / "migrations" / slug
        (folder / "logs").mkdir(parents=True)
        (folder / "metrics").mkdir()
        chips = rng.choice([4, 8, 16])
        accel = rng.choice(["tpu-v5e", "tpu-v5e", "tpu-v4"])
        acc = rng.uniform(0.75, 0.95)
        ref_loss = rng.uniform(0.2, 0.6)
        (folder / "migration.toml").write_text(
            f'title = "{project} to torch_xla ({slug})"\nrepo = "../../repo"\nbase_commit = "{shas[slug][0]}"\n'
            f'acceptance_level = {rng.choice([3, 4, 4, 5])}\n'
            f'[target]\naccelerator = "{accel}"\nchips = {chips}\nruntime = "torch_xla"\n'
            f'[goal]\nmetric = "eval_accuracy"\nreference = {acc:.4f}\ndirection = "max"\ntolerance = 0.01\n'
            f"[budgets]\ncompute_dollars = {rng.choice([200, 500, 1000])}.0\nstaff_hours = {rng.choice([8, 16, 40])}.0\n"
            f"attempts = {per + rng.randint(-per // 4, per // 4)}\ncalendar_days = 14\n")
        lines = []
        clock = 1_764_000_000 + rng.randint(0, 86400)
        for seq in range(per):
            outcome = "ok" if seq == 0 else rng.choices(names, weights)[0]
            size = int(rng.lognormvariate(0, 0.8) * log_mean / math.exp(0.32))
            if seq == 0 or rng.random() < 0.01:
                size *= 8  # a reference run and a few long ones
            log = folder / "logs" / f"{seq:04d}.log"
            points, steps = write_log(log, rng, size=max(2000, size), outcome=outcome, project=project,
                                      chips=chips, ref_loss=ref_loss, acc=acc)
            (folder / "metrics" / f"{seq:04d}.jsonl").write_text(
                "".join(f'{{"name": "{n}", "step": {s}, "value": {v}}}\n' for n, s, v in points))
            nbytes = log.stat().st_size
            counts["log_bytes"] += nbytes
            counts["largest_log"] = max(counts["largest_log"], nbytes)
            counts["log_files"] += 1
            counts["metric_points"] += len(points)
            commit = shas[slug][0 if seq == 0 else min(COMMITS - 1, 1 + (seq - 1) * (COMMITS - 1) // max(1, per - 1))]
            wall = steps * 0.012 * (8 if outcome == "cpu" else 3 if outcome == "slow" else 1) + rng.uniform(20, 90)
            failed = outcome in ("crash", "timeout")
            record = {
                "seq": seq, "source": "reference" if seq == 0 else "agent", "commit": commit,
                "command": {"argv": ["python", "train.py", "--epochs", "3"], "cwd": ".",
                            "env": {} if seq == 0 else {"PJRT_DEVICE": "CPU" if outcome == "cpu" else "TPU"}},
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock)),
                "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock + wall)),
                "status": "interrupted" if outcome == "timeout" else "nonzero_exit" if failed else "ok",
                "exit_code": 124 if outcome == "timeout" else 1 if failed else 0,
                "exit_code_source": "process",
                "expected_level": None if seq == 0 else rng.choice([2, 3, 4, 4, 5]),
                "claim": "" if seq == 0 else rng.choice([
                    "Runs on the TPU and the loss matches the GPU reference.",
                    "Fixed the optimizer step; training is stable now.",
                    "Moved the data loader to MpDeviceLoader; should be faster.",
                    "The crash was a leftover .cuda() call; removed it."]),
                "intended_hardware": {"kind": "a100", "count": 1} if seq == 0 else {"kind": accel, "count": chips},
                "observed_hardware": ({"kind": "a100", "count": 1} if seq == 0 else
                                      {"kind": "cpu", "count": 1} if outcome == "cpu" else {"kind": accel, "count": chips}),
                "log": f"logs/{seq:04d}.log", "metrics": f"metrics/{seq:04d}.jsonl", "rerun_of": None,
            }
            lines.append(json.dumps(record))
            clock += int(wall) + rng.randint(60, 3600)
        (folder / "attempts.jsonl").write_text("\n".join(lines) + "\n")
        counts["attempts"] += per
    transcripts = out / "transcripts"
    transcripts.mkdir()
    from import_throughput import write_transcript

    runs = write_transcript(transcripts / f"{slugs[0]}.jsonl", max(1, round(TRANSCRIPT_BYTES * scale / (1 << 20))))
    counts.update(transcript=f"transcripts/{slugs[0]}.jsonl", transcript_migration=slugs[0],
                  transcript_bytes=(transcripts / f"{slugs[0]}.jsonl").stat().st_size, transcript_runs=runs,
                  diff_lines=DIFF_LINES, big_diff=f"{slugs[0]}: commit {COMMITS // 2} adds model_weights.py",
                  scale=scale, seed=seed, seconds=round(time.perf_counter() - start, 1))
    (out / "manifest.json").write_text(json.dumps(counts, indent=2) + "\n")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write (must not hold a bundle yet)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    counts = generate(args.out, args.scale, args.seed)
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "bench"))
    main()
