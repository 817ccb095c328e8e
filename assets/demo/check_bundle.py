#!/usr/bin/env python3
"""Check a study bundle against docs/bundle-format.md (format 1). Standard library only.

Usage: python3 check_bundle.py [DIR]   (default: assets/demo/bundle). Exits 1 on any problem.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ATTEMPT_KEYS = {
    "seq": True, "source": True, "commit": True, "command": True, "started_at": False,
    "ended_at": False, "status": True, "exit_code": False, "exit_code_source": False,
    "expected_level": False, "claim": False, "intended_hardware": False,
    "observed_hardware": False, "log": False, "metrics": False, "rerun_of": False,
}
STATUSES = {"ok", "nonzero_exit", "interrupted", "backgrounded", "blocked", "no_result"}
SOURCES = {"agent", "rerun", "reference"}
EXIT_SOURCES = {"process", "transcript", "task_output", "task_notification"}

problems: list[str] = []


def bad(where: str, what: str) -> None:
    problems.append(f"{where}: {what}")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return (is_int(v) or isinstance(v, float)) and math.isfinite(v)


def check_hw(where, v):
    if v is None:
        return
    if not (isinstance(v, dict) and isinstance(v.get("kind"), str) and is_int(v.get("count"))
            and v["count"] >= 1 and set(v) == {"kind", "count"}):
        bad(where, f"bad hardware {v!r}")


def check_iso(where, v):
    if v is None:
        return
    if not isinstance(v, str):
        bad(where, f"timestamp not a string: {v!r}")
        return
    try:
        dt.datetime.fromisoformat(v)
    except ValueError:
        bad(where, f"not ISO 8601: {v!r}")


def commits_in(bundle_or_repo: Path) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        src = str(bundle_or_repo)
        subprocess.run(["git", "clone", "-q", "--mirror", src, f"{tmp}/x"], check=True,
                       capture_output=True)
        out = subprocess.run(["git", "-C", f"{tmp}/x", "rev-list", "--all"], check=True,
                             capture_output=True, text=True).stdout
        return set(out.split())


def check_migration(mdir: Path, prices: dict) -> None:
    slug = mdir.name
    mt = mdir / "migration.toml"
    try:
        m = tomllib.loads(mt.read_text())
    except Exception as e:  # noqa: BLE001
        bad(str(mt), f"does not parse: {e}")
        return
    for k in ("title", "repo", "base_commit", "target", "goal"):
        if k not in m:
            bad(str(mt), f"missing {k}")
    if m.get("status", "in_progress") not in {"in_progress", "accepted", "stopped"}:
        bad(str(mt), "bad status")
    if not (is_int(m.get("acceptance_level", 4)) and 1 <= m.get("acceptance_level", 4) <= 5):
        bad(str(mt), "bad acceptance_level")
    t = m.get("target", {})
    if not isinstance(t.get("accelerator"), str) or t.get("accelerator") not in prices:
        bad(str(mt), f"target.accelerator {t.get('accelerator')!r} not a key of [prices]")
    if not (is_int(t.get("chips")) and t["chips"] >= 1):
        bad(str(mt), "target.chips")
    if not isinstance(t.get("runtime"), str):
        bad(str(mt), "target.runtime")
    g = m.get("goal", {})
    if not isinstance(g.get("metric"), str) or not is_num(g.get("reference")) \
            or g.get("direction") not in {"max", "min"} or not is_num(g.get("tolerance")):
        bad(str(mt), f"bad goal {g!r}")
    for k, v in m.get("budgets", {}).items():
        if k not in {"compute_dollars", "staff_hours", "attempts", "calendar_days"} or not is_num(v):
            bad(str(mt), f"bad budget {k} = {v!r}")

    repo = Path(m.get("repo", ""))
    repo = repo if repo.is_absolute() else mdir / repo
    if not repo.exists():
        bad(str(mt), f"repo {repo} missing")
        return
    commits = commits_in(repo)
    if m.get("base_commit") not in commits:
        bad(str(mt), f"base_commit {m.get('base_commit')} not in repo")

    seqs = set()
    metric_names: set[str] = set()
    af = mdir / "attempts.jsonl"
    for n, line in enumerate(af.read_text().splitlines(), 1):
        where = f"{af}:{n}"
        if not line.strip():
            continue
        try:
            a = json.loads(line)
        except json.JSONDecodeError as e:
            bad(where, f"invalid JSON: {e}")
            continue
        for k, req in ATTEMPT_KEYS.items():
            if req and k not in a:
                bad(where, f"missing {k}")
        for k in a:
            if k not in ATTEMPT_KEYS:
                bad(where, f"unknown key {k}")
        if not (is_int(a.get("seq")) and a["seq"] >= 0) or a.get("seq") in seqs:
            bad(where, f"bad or duplicate seq {a.get('seq')!r}")
        seqs.add(a.get("seq"))
        if a.get("source") not in SOURCES:
            bad(where, "bad source")
        if a.get("commit") not in commits:
            bad(where, f"commit {a.get('commit')} not in repo")
        c = a.get("command")
        if not (isinstance(c, dict) and isinstance(c.get("argv"), list) and c["argv"]
                and all(isinstance(x, str) for x in c["argv"])
                and isinstance(c.get("cwd", "."), str)
                and isinstance(c.get("env", {}), dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in c.get("env", {}).items())):
            bad(where, f"bad command {c!r}")
        check_iso(where, a.get("started_at"))
        check_iso(where, a.get("ended_at"))
        if a.get("status") not in STATUSES:
            bad(where, "bad status")
        if a.get("exit_code") is not None and not is_int(a["exit_code"]):
            bad(where, "bad exit_code")
        if a.get("exit_code_source") is not None and a["exit_code_source"] not in EXIT_SOURCES:
            bad(where, "bad exit_code_source")
        el = a.get("expected_level")
        if el is not None and not (is_int(el) and 1 <= el <= 5):
            bad(where, "bad expected_level")
        if a.get("claim") is not None and not isinstance(a["claim"], str):
            bad(where, "bad claim")
        check_hw(where, a.get("intended_hardware"))
        check_hw(where, a.get("observed_hardware"))
        if a.get("rerun_of") is not None and not is_int(a["rerun_of"]):
            bad(where, "bad rerun_of")
        if a.get("log") is not None:
            if not isinstance(a["log"], str) or not (mdir / a["log"]).is_file():
                bad(where, f"log {a.get('log')!r} missing")
        if a.get("metrics") is not None:
            mp = mdir / a["metrics"] if isinstance(a["metrics"], str) else None
            if mp is None or not mp.is_file():
                bad(where, f"metrics {a.get('metrics')!r} missing")
            else:
                for k, ml in enumerate(mp.read_text().splitlines(), 1):
                    if not ml.strip():
                        continue
                    try:
                        p = json.loads(ml)
                    except json.JSONDecodeError as e:
                        bad(f"{mp}:{k}", f"invalid JSON: {e}")
                        continue
                    if not (isinstance(p, dict) and set(p) == {"name", "step", "value"}
                            and isinstance(p["name"], str) and is_int(p["step"])
                            and p["step"] >= 0 and is_num(p["value"])):
                        bad(f"{mp}:{k}", f"bad point {p!r}")
                    else:
                        metric_names.add(p["name"])
    if isinstance(g.get("metric"), str) and g["metric"] not in metric_names:
        bad(str(mt), f"goal metric {g['metric']} appears in no series")
    print(f"{slug}: {len(seqs)} attempts, {len(commits)} commits in repo, "
          f"metrics {sorted(metric_names)}")


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "bundle"
    try:
        st = tomllib.loads((root / "study.toml").read_text())
    except Exception as e:  # noqa: BLE001
        print(f"{root}/study.toml: {e}")
        return 1
    if st.get("format") != 1:
        bad("study.toml", "format must be 1")
    s = st.get("study", {})
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", str(s.get("slug", ""))) or not s.get("title"):
        bad("study.toml", "bad [study] slug/title")
    if not is_num(s.get("staff_hourly_rate", 0)):
        bad("study.toml", "bad staff_hourly_rate")
    if not all(isinstance(r, str) for r in s.get("reviewers", [])):
        bad("study.toml", "bad reviewers")
    prices = st.get("prices", {})
    if not all(is_num(v) for v in prices.values()):
        bad("study.toml", "bad prices")
    migs = sorted(p for p in (root / "migrations").iterdir() if p.is_dir())
    if not migs:
        bad(str(root), "no migrations")
    for mdir in migs:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", mdir.name):
            bad(str(mdir), "bad migration slug")
        check_migration(mdir, prices)
    for p in problems:
        print(p)
    print("bundle OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
