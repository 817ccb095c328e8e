#!/usr/bin/env python3
"""Regenerate the bundled demo study (assets/demo/bundle/) by really running every attempt.

For each migration: build a fresh git repository from the source versions under
assets/demo/project/<name>/ (one commit per attempt, fixed authors and dates, so the commit SHAs
are reproducible), run each attempt's command in it with the torch_xla virtual environment, keep
its real combined stdout+stderr as the log, parse the metric series from the log lines, and write
the bundle in the format of docs/bundle-format.md. No number in the bundle is typed by hand:
metrics, hardware, exit codes, timestamps, the goal's reference value and the numbers quoted in
the claims all come from the runs.

Usage: python3 generate.py --venv PATH [--out DIR] [--work DIR]
Needs only the standard library (Python >= 3.11); torch runs inside the venv's python.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECTS = HERE / "project"

STEPS = 40
ARGV = ["python", "train.py", "--steps", str(STEPS)]
XLA_1 = {"PJRT_DEVICE": "CPU"}
XLA_4 = {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}
INTENDED = {"kind": "cpu", "count": 4}     # XLA:CPU with 4 virtual devices, standing in for 4 TPU chips

BASE_AUTHOR = ("Dana Original", "dana@example.com")
AGENT_AUTHOR = ("Migration Agent", "agent@example.com")

STUDY_TOML = """\
format = 1

[study]
slug = "demo"
title = "Demo study: PyTorch GPU projects migrated to torch_xla (XLA:CPU standing in for TPU)"
staff_hourly_rate = 95.0
reviewers = ["ana", "ben"]

# dollars per chip-hour, by accelerator kind (configuration, not measured)
[prices]
"cpu" = 0.05
"tpu-v5e" = 1.20
"tpu-v5p" = 4.20
"tpu-v6e" = 2.70
"""

# Environment variables that must not leak from the caller into the runs.
SCRUB_ENV = ("PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_FLAGS", "PT_XLA_DEBUG", "PT_XLA_DEBUG_LEVEL",
             "PT_XLA_DEBUG_FILE", "XLA_METRICS_FILE", "XLA_USE_SPMD", "TPU_NUM_DEVICES",
             "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "VIRTUAL_ENV")


# --------------------------------------------------------------------------- parsing the logs

STEP_RE = re.compile(r"^step (\d+)/(\d+) loss (\S+) grad_norm (\S+) step_time (\S+)\s*$", re.M)
ACC_RE = re.compile(r"^eval_accuracy (\S+)\s*$", re.M)
HW_RE = re.compile(r"^hardware (\S+) devices_available (\d+) devices_used (\d+)(?: \((.*)\))?\s*$", re.M)
COUNTER_RE = re.compile(r"^Counter: (\S+)\s+Value: (\d+)", re.M)
METRIC_RE = re.compile(r"^Metric: (\S+)\s+TotalSamples: (\d+)", re.M)


def parse_log(text: str) -> dict:
    steps = [(int(s), float(lo), float(g), float(t)) for s, _, lo, g, t in STEP_RE.findall(text)]
    acc = ACC_RE.findall(text)
    hw = HW_RE.search(text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return {
        "steps": steps,
        "eval_accuracy": float(acc[-1]) if acc else None,
        "eval_accuracy_text": acc[-1] if acc else None,
        "hardware": None if hw is None else {
            "kind": hw.group(1).lower(), "available": int(hw.group(2)),
            "used": int(hw.group(3)), "devices": hw.group(4)},
        "counters": {k: int(v) for k, v in COUNTER_RE.findall(text)},
        "metric_samples": {k: int(v) for k, v in METRIC_RE.findall(text)},
        "last_line": lines[-1] if lines else "",
        "loss_text": {int(m.group(1)): m.group(3) for m in STEP_RE.finditer(text)},
        "grad_norm_text": {int(m.group(1)): m.group(4) for m in STEP_RE.finditer(text)},
    }


def metric_points(parsed: dict) -> list[dict]:
    pts = []
    for step, loss, gnorm, stime in parsed["steps"]:
        pts.append({"name": "loss", "step": step, "value": loss})
        pts.append({"name": "grad_norm", "step": step, "value": gnorm})
        pts.append({"name": "step_time", "step": step, "value": stime})
    if parsed["eval_accuracy"] is not None and parsed["steps"]:
        pts.append({"name": "eval_accuracy", "step": parsed["steps"][-1][0],
                    "value": parsed["eval_accuracy"]})
    return [p for p in pts if math.isfinite(p["value"])]


# --------------------------------------------------------------------------- claims
# Each claim is the agent's words after its run; every number in it is read from a real log.

def _final(p):
    return p["loss_text"][max(p["loss_text"])] if p["loss_text"] else None


def _grad_range(p):
    vals = sorted(p["grad_norm_text"].values(), key=float)
    if not vals:
        return None
    return vals[0] if vals[0] == vals[-1] else f"{vals[0]} to {vals[-1]}"


def _agreement(p, ref):
    """How the per-step loss and grad_norm of run p compare with the reference's, as printed."""
    if p["loss_text"] == ref["loss_text"] and p["grad_norm_text"] == ref["grad_norm_text"]:
        return "the per-step loss and grad_norm match the reference line for line"
    common = sorted(set(p["loss_text"]) & set(ref["loss_text"]))
    d = max((abs(float(p["loss_text"][k]) - float(ref["loss_text"][k])) for k in common),
            default=float("nan"))
    return f"the per-step loss is within {d:.1e} of the reference's"


def mlp_claim(seq: int, runs: dict) -> tuple[str, int | None]:
    p = runs[seq]["parsed"]
    ref = runs[0]["parsed"]
    if seq == 0:
        return (f"Reference run of the original project on the CPU: final loss {_final(p)}, "
                f"eval_accuracy {p['eval_accuracy_text']}.", None)
    if seq == 1:
        return ("Ported train.py to torch_xla: the model and batches now go to torch_xla.device() "
                "and the step timing syncs the XLA device too. The run with PJRT_DEVICE=CPU stops "
                f"in step {len(p['steps']) + 1} with `{p['last_line']}`: a CUDA call survived the "
                "port. Fixing that next.", 1)
    if seq == 2:
        return ("Replaced the CUDA sync with torch_xla.sync() + xm.wait_device_ops(), and added a "
                "padded-label mask and a non-finite-loss guard. Training now runs on the XLA device "
                f"and matches the GPU reference: final loss {_final(p)} (reference {_final(ref)}), "
                f"eval_accuracy {p['eval_accuracy_text']}. Next: data parallel over 4 devices.", 2)
    if seq == 3:
        hw = p["hardware"] or {}
        return (f"Training now runs data-parallel on {hw.get('used')} XLA devices "
                f"({hw.get('devices')}) and matches the GPU numbers: step 1 loss is "
                f"{p['loss_text'].get(1)}, same as the reference. Final eval_accuracy "
                f"{p['eval_accuracy_text']}. I also removed the per-step .item() guard and the "
                "nonzero mask" + ("" if "aten::nonzero" in p["counters"] else
                                  ": the metrics report shows no aten:: fallback any more")
                + ". The migration is complete.", 4)
    if seq == 4:
        bug = runs[3]["parsed"]
        hw = p["hardware"] or {}
        return ("Correction to my last report: it did not match. Each replica clipped its own "
                "gradient before the average, so the applied gradient norm was "
                f"{_grad_range(bug)} instead of the reference's {_grad_range(ref)}, and eval_accuracy "
                f"fell to "
                f"{bug['eval_accuracy_text']}. Now the averaged gradient is clipped, as the "
                f"single-device run clips the full-batch one. On {hw.get('used')} XLA devices "
                f"{_agreement(p, ref)} (final loss {_final(p)} vs {_final(ref)}) and eval_accuracy "
                f"is {p['eval_accuracy_text']} (reference {ref['eval_accuracy_text']}).", 4)
    raise ValueError(seq)


def _step_time_sum(p):
    return sum(t for _, _, _, t in p["steps"])


def bow_claim(seq: int, runs: dict) -> tuple[str, int | None]:
    p = runs[seq]["parsed"]
    ref = runs[0]["parsed"]
    if seq == 0:
        return (f"Reference run of the original project on the CPU: final loss {_final(p)}, "
                f"eval_accuracy {p['eval_accuracy_text']}.", None)
    hw = p["hardware"] or {}
    if seq == 1:
        return ("Ported to torch_xla with SPMD: the batch is sharded over a 1-D mesh of "
                f"{hw.get('used')} devices ({hw.get('devices')}). Exits 0, "
                f"{_agreement(p, ref)} (final loss {_final(p)} vs {_final(ref)}), eval_accuracy "
                f"{p['eval_accuracy_text']} (reference {ref['eval_accuracy_text']}). Done.", 4)
    if seq == 2:
        prev = runs[1]["parsed"]
        return ("Follow-up on performance: batches were padded to the longest sequence of each "
                "batch, so nearly every step had new shapes and XLA recompiled (UncachedCompile "
                f"{prev['counters'].get('UncachedCompile')} over {len(prev['steps'])} steps). Now "
                f"every batch is padded to MAX_LEN: UncachedCompile "
                f"{p['counters'].get('UncachedCompile')}, and the {len(p['steps'])} steps take "
                f"{_step_time_sum(p):.2f} s in all instead of {_step_time_sum(prev):.2f} s. Still on "
                f"{hw.get('used')} devices; {_agreement(p, ref)} (final loss {_final(p)}), "
                f"eval_accuracy {p['eval_accuracy_text']}.", 5)
    raise ValueError(seq)


# --------------------------------------------------------------------------- migrations

MIGRATIONS = [
    {
        "slug": "mlp-classifier",
        "project": "mlp",
        "title": "MLP classifier to torch_xla on 4 chips "
                 "(XLA:CPU with 4 virtual devices standing in for 4 TPU chips)",
        "common_files": ["README.md"],
        "attempts": [
            # seq, version dir, source, commit message, date, env
            (0, "v0", "reference", "Original GPU project: seeded MLP classifier",
             "2026-11-30T09:00:00+00:00", {}),
            (1, "v1", "agent", "Port to torch_xla: run on the XLA device",
             "2026-12-01T10:00:00+00:00", XLA_1),
            (2, "v2", "agent", "Sync the XLA device instead of CUDA; mask padded labels; "
                               "guard non-finite loss",
             "2026-12-01T10:20:00+00:00", XLA_1),
            (3, "v3", "agent", "Data parallel over all XLA devices (replicas, host all-reduce)",
             "2026-12-01T10:40:00+00:00", XLA_4),
            (4, "v4", "agent", "Clip the averaged gradient, not each replica's",
             "2026-12-01T11:00:00+00:00", XLA_4),
        ],
        "claim": mlp_claim,
        "budgets": {"compute_dollars": 5.0, "staff_hours": 4.0, "attempts": 10,
                    "calendar_days": 3},
    },
    {
        "slug": "bow-classifier",
        "project": "bow",
        "title": "Bag-of-embeddings text classifier to torch_xla SPMD on 4 chips "
                 "(XLA:CPU with 4 virtual devices standing in for 4 TPU chips)",
        "common_files": ["README.md"],
        "attempts": [
            (0, "v0", "reference", "Original GPU project: bag-of-embeddings classifier",
             "2026-11-28T14:00:00+00:00", {}),
            (1, "v1", "agent", "Port to torch_xla: SPMD, batch sharded over all devices",
             "2026-12-01T13:00:00+00:00", XLA_4),
            (2, "v2", "agent", "Pad every batch to MAX_LEN: fixed shapes, one compiled step",
             "2026-12-01T13:30:00+00:00", XLA_4),
        ],
        "claim": bow_claim,
        "budgets": {"compute_dollars": 2.0, "staff_hours": 2.0, "attempts": 6},
    },
]


# --------------------------------------------------------------------------- helpers

def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    e.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    if env:
        e.update(env)
    out = subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
                         cwd=repo, env=e, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def commit_version(repo: Path, src: Path, common: list[Path], message: str, date: str,
                   author: tuple[str, str]) -> str:
    for f in [*common, *sorted(src.iterdir())]:
        if f.is_file():
            dst = repo / f.name
            shutil.copyfile(f, dst)
            os.chmod(dst, 0o644)
    git(repo, "add", "-A")
    name, email = author
    git(repo, "commit", "-q", "-m", message, env={
        "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date})
    return git(repo, "rev-parse", "HEAD")


def run_attempt(repo: Path, venv: Path, env_extra: dict, log_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_ENV}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"        # keeps stdout and stderr in order in the combined log
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(env_extra)
    started = now_iso()
    with open(log_path, "wb") as log:
        proc = subprocess.run(ARGV, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=600)
    ended = now_iso()
    return {"started_at": started, "ended_at": ended, "exit_code": proc.returncode}


def toml_value(v) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    raise TypeError(v)


# --------------------------------------------------------------------------- main

def build_migration(m: dict, venv: Path, out: Path, work: Path) -> list[dict]:
    slug = m["slug"]
    mdir = out / "migrations" / slug
    (mdir / "logs").mkdir(parents=True)
    (mdir / "metrics").mkdir()
    repo = work / slug
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    src_root = PROJECTS / m["project"]
    common = [src_root / f for f in m["common_files"]]

    runs: dict[int, dict] = {}
    rows = []
    for seq, version, source, message, date, env_extra in m["attempts"]:
        author = BASE_AUTHOR if source == "reference" else AGENT_AUTHOR
        sha = commit_version(repo, src_root / version, common, message, date, author)
        log_rel = f"logs/{seq:03d}.log"
        print(f"[{slug}] seq {seq} ({version}, {sha[:10]}): {' '.join(ARGV)} "
              f"{' '.join(f'{k}={v}' for k, v in env_extra.items())}", flush=True)
        res = run_attempt(repo, venv, env_extra, mdir / log_rel)
        dirty = git(repo, "status", "--porcelain")
        if dirty:
            raise SystemExit(f"run left files in the repository: {dirty}")
        text = (mdir / log_rel).read_text(errors="replace")
        parsed = parse_log(text)
        runs[seq] = {"parsed": parsed, **res}
        pts = metric_points(parsed)
        metrics_rel = None
        if pts:
            metrics_rel = f"metrics/{seq:03d}.jsonl"
            with open(mdir / metrics_rel, "w") as f:
                for p in pts:
                    f.write(json.dumps(p) + "\n")
        hw = parsed["hardware"]
        row = {
            "seq": seq,
            "source": source,
            "commit": sha,
            "command": {"argv": ARGV, "cwd": ".", "env": dict(env_extra)},
            "started_at": res["started_at"],
            "ended_at": res["ended_at"],
            "status": "ok" if res["exit_code"] == 0 else "nonzero_exit",
            "exit_code": res["exit_code"],
            "exit_code_source": "process",
            "expected_level": None,
            "claim": None,
            "intended_hardware": None if source == "reference" else dict(INTENDED),
            "observed_hardware": None if hw is None else {"kind": hw["kind"], "count": hw["used"]},
            "log": log_rel,
            "metrics": metrics_rel,
            "rerun_of": None,
        }
        rows.append(row)
        final = parsed["steps"][-1] if parsed["steps"] else None
        print(f"    exit {res['exit_code']}  steps {len(parsed['steps'])}  "
              f"final loss {final[1] if final else None}  eval_accuracy {parsed['eval_accuracy']}  "
              f"devices {hw['used'] if hw else None}", flush=True)

    for row in rows:
        claim, level = m["claim"](row["seq"], runs)
        row["claim"] = claim
        row["expected_level"] = level
    with open(mdir / "attempts.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")

    ref_acc = runs[0]["parsed"]["eval_accuracy"]
    if ref_acc is None:
        raise SystemExit(f"[{slug}] the reference run printed no eval_accuracy")
    base = rows[0]["commit"]
    lines = [
        "# XLA:CPU with 4 virtual devices (PJRT_DEVICE=CPU CPU_NUM_DEVICES=4) stands in for 4 TPU",
        "# chips. Generated by assets/demo/generate.py: the goal's reference is the reference run's",
        "# final eval_accuracy.",
        f"title = {toml_value(m['title'])}",
        'repo = "repo.bundle"',
        f"base_commit = {toml_value(base)}",
        'status = "in_progress"',
        "acceptance_level = 4",
        "",
        "[target]",
        'accelerator = "cpu"',
        "chips = 4",
        'runtime = "torch_xla"',
        "",
        "[goal]",
        'metric = "eval_accuracy"',
        f"reference = {toml_value(ref_acc)}",
        'direction = "max"',
        "tolerance = 0.01",
        "",
        "[budgets]",
        *[f"{k} = {toml_value(v)}" for k, v in m["budgets"].items()],
    ]
    (mdir / "migration.toml").write_text("\n".join(lines) + "\n")
    subprocess.run(["git", "bundle", "create", str(mdir / "repo.bundle"), "--all"], cwd=repo,
                   check=True, capture_output=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--venv", required=True, type=Path, help="torch_xla virtual environment")
    ap.add_argument("--out", type=Path, default=HERE / "bundle")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "workbench-demo-work",
                    help="where the migrations' git repositories are built and run")
    args = ap.parse_args()
    venv = args.venv.resolve()
    if not (venv / "bin" / "python").exists():
        print(f"no python in venv {venv}", file=sys.stderr)
        return 1
    out = args.out.resolve()
    staging = out.with_name(out.name + ".new")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    (staging / "study.toml").write_text(STUDY_TOML)
    args.work.mkdir(parents=True, exist_ok=True)
    for m in MIGRATIONS:
        build_migration(m, venv, staging, args.work)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
