"""Builders for the re-run tests: a study whose migration's commits hold a small stdlib 'training' script."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

from tests.conftest import BundleBuilder, make_repo

TRAIN = """\
import os, sys, time
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
delay = float(os.environ.get("DELAY", "0"))
print("cwd-marker", os.path.basename(os.getcwd()), flush=True)
for i in range(1, steps + 1):
    print(f"step {i}/{steps} loss {1.0 / i:.6f} grad_norm 0.5", flush=True)
    time.sleep(delay)
print("eval_accuracy 0.95", flush=True)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def study_with_script(tmp_path: Path, script: str = TRAIN):
    """A study database with one migration (`toy`): reference seq 0 and agent attempt seq 1."""
    from storage.database import open_study
    from workbench.bundle import import_bundle

    builder = BundleBuilder(tmp_path / "bundle")
    builder.write_study()
    folder = builder.root / "migrations" / "toy"
    folder.mkdir(parents=True)
    shas = make_repo(folder / "repo", [{"train.py": script, "README": "v0\n"}, {"README": "v1\n"}])
    (folder / "migration.toml").write_text(
        f'title = "toy"\nrepo = "repo"\nbase_commit = "{shas[0]}"\n'
        '[target]\naccelerator = "cpu"\nchips = 2\nruntime = "torch_xla"\n'
        '[goal]\nmetric = "eval_accuracy"\nreference = 0.9\ndirection = "max"\ntolerance = 0.01\n'
        "[budgets]\nattempts = 10\n"
    )
    (folder / "logs").mkdir()
    (folder / "metrics").mkdir()
    argv = ["python3", "train.py", "5"]
    records = [
        builder.attempt(0, shas[0], command={"argv": argv, "cwd": ".", "env": {}}, metrics=None,
                        intended_hardware={"kind": "cpu", "count": 2}),
        builder.attempt(1, shas[1], command={"argv": argv, "cwd": ".", "env": {}}, metrics=None,
                        intended_hardware={"kind": "cpu", "count": 2}),
    ]
    for r in records:
        (folder / r["log"]).write_text("".join(f"step {i}/5 loss {1.0 / i:.6f} grad_norm 0.5\n" for i in range(1, 6))
                                       + "eval_accuracy 0.95\n")
    builder.write_attempts(folder, records)
    db_path = tmp_path / "study.db"
    study = open_study(db_path, create=True)
    report = import_bundle(study, builder.root, "tester")
    assert not report.problems, report.problems
    return study


def attempt(study, slug: str, seq: int):
    from storage.converters import attempt_from_row

    rows = list(study.db.query(
        "SELECT a.* FROM attempt a JOIN migration m ON m.id = a.migration_id WHERE m.slug = ? AND a.seq = ?",
        [slug, seq]))
    return attempt_from_row(rows[0])


def stand_in(bin_dir: Path, name: str, body: str) -> Path:
    """An executable on PATH that records its arguments (JSON lines in $STANDIN_LOG) and runs `body`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


RECORD = """\
import json, os, subprocess, sys
with open(os.environ["STANDIN_LOG"], "a") as fh:
    fh.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
"""

GCLOUD = RECORD + """\
args = sys.argv[1:]
assert args[:3] == ["compute", "tpus", "tpu-vm"], args
verb, rest = args[3], args[4:]
home = os.environ["STANDIN_HOME"]
if verb == "ssh":
    command = rest[rest.index("--command") + 1]
    sys.exit(subprocess.call(["sh", "-c", command], env={**os.environ, "HOME": home}, cwd=home))
if verb == "scp":
    import shutil
    at = next(i for i, a in enumerate(rest) if ":" in a)
    target = os.path.join(home, rest[at].split(":", 1)[1])
    for f in rest[:at]:
        shutil.copy(f, target)
    sys.exit(0)
sys.exit(3)
"""

SKY = RECORD + """\
import shutil, tempfile
args = sys.argv[1:]
if args[0] in ("cancel", "down") or args[:2] == ["jobs", "cancel"]:
    sys.exit(0)
task = json.load(open(args[-1]))
home = os.environ["STANDIN_HOME"]
work = os.path.join(home, "sky_workdir")
shutil.rmtree(work, ignore_errors=True)
shutil.copytree(task["workdir"], work)
for remote, local in task.get("file_mounts", {}).items():
    dest = os.path.join(home, remote.replace("~/", ""))
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(local, dest)
env = {**os.environ, "HOME": home}
subprocess.call(["bash", "-c", task.get("setup", "true")], env=env, cwd=work)
sys.exit(subprocess.call(["bash", "-c", task["run"]], env=env, cwd=work))
"""


def wait_for(predicate, timeout: float = 30.0, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError("timed out waiting")
