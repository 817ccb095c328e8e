"""A study made with the real commands, a Claude Code projects folder laid out like the real one,
and `workbench watch` as a real subprocess: what the live-watch tests share."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import make_repo
from tests.test_cli import workbench
from tests.test_setup import reference_files

SAMPLES = Path(__file__).parent / "data" / "claude-code"


@dataclass
class Live:
    repo: Path
    db: Path
    config: Path
    folder: Path
    """The project's folder under <config>/projects."""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CLAUDE_CONFIG_DIR": str(self.config), "WORKBENCH_REVIEWER": "ana"}

    def watch(self, slug: str = "mlp", *extra: str) -> subprocess.Popen[str]:
        return watching(self.db, slug, self.repo, self.env, "--for", "300", *extra)


def watching(db: Path, slug: str, repo: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """`workbench watch` running, stopped by Ctrl-C (`stop`) as a person stops it."""
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "watch", str(db), slug, "--project", str(repo), "--interval", "0.2", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_stops)


def _ctrl_c_stops() -> None:
    """In the child, before it runs: Ctrl-C's default back, as a terminal gives it. A test run
    started in the background (a shell's `&` without job control) hands its children SIGINT
    ignored, and the watch would never see Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def live_study(tmp_path: Path, *, slug: str = "mlp") -> Live:
    """init, migration add, reference from files; the projects folder of the repo made (empty)."""
    repo, db, config = tmp_path / "project", tmp_path / "s.db", tmp_path / "claude"
    make_repo(repo, [{"train.py": "print('train')\n"}])
    log, metrics = reference_files(tmp_path)
    for args in (("init", str(db), "--title", "Live"),
                 ("migration", "add", str(db), slug, "--repo", str(repo), "--base", "HEAD", "--target", "cpu:4", "--goal",
                  "eval_accuracy", "--direction", "max", "--reference-value", "0.9", "--command", "python train.py"),
                 ("reference", str(db), slug, "--log", str(log), "--metrics", str(metrics))):
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    folder = config / "projects" / "".join(c if c.isalnum() else "-" for c in str(repo.resolve()))
    folder.mkdir(parents=True)
    return Live(repo, db, config, folder)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, as a person stops it; its output."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out, err


def _sample_records() -> list[dict]:
    return [json.loads(raw) for raw in (SAMPLES / "session-main.jsonl").read_bytes().splitlines()]


def sample_session(repo: Path, runs: list[tuple[str, str, int]], *, claim: str | None = None) -> list[bytes]:
    """A session made of the real sample's lines (Claude Code 2.1.39: a prompt, then a Bash call and
    its result per run, as the sample's succeeding and failing calls are written), moved to `repo`:
    runs are (command, output, exit code); `claim` is an assistant text after the last run."""
    records = _sample_records()
    prompt, call, ok, fail = records[0], records[1], records[2], records[4]
    old = "/home/USER/projects/spotter-worktrees/spotter-dov"
    out = [prompt]
    for n, (command, output, code) in enumerate(runs):
        call_id = f"toolu_live{n:04d}{'x' * 16}"
        c = copy.deepcopy(call)
        c["uuid"], c["message"]["id"] = f"call-{n}", f"msg_live{n}"
        c["message"]["content"][0].update(id=call_id, input={"command": command, "description": "run"})
        r = copy.deepcopy(fail if code else ok)
        r["uuid"] = f"result-{n}"
        r["message"]["content"][0].update(tool_use_id=call_id,
                                          content=f"Exit code {code}\n{output}" if code else output)
        r["toolUseResult"] = f"Error: Exit code {code}\n{output}" if code else {**ok["toolUseResult"], "stdout": output}
        out += [c, r]
    if claim is not None:
        text = copy.deepcopy(call)
        text["uuid"], text["message"]["id"] = "claim", "msg_claim"
        text["message"]["content"] = [{"type": "text", "text": claim}]
        out.append(text)
    return [json.dumps(r).replace(old, str(repo.resolve())).encode() + b"\n" for r in out]
