"""A realistic Claude Code session migrating a small PyTorch script to torch_xla, over a real
git repository: edits, a crashing run, a run that exits 0 with wrong numbers, an agent commit,
a resumed session and a final run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import GIT_ENV, git
from import_helpers import Transcript

from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.importers.claude_code import ClaudeCodeImporter

GPU = """import torch
device = "cuda"
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4, device=device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
"""
XLA_DEVICE = 'import torch_xla.core.xla_model as xm\ndevice = xm.xla_device()'
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 8\nRuntimeError: torch_xla: tensor on wrong device'


def make_study(tmp_path: Path, bundle) -> tuple[Path, str, Path]:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(GPU)
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "GPU original")
    base = git(repo, "rev-parse", "HEAD")
    folder = bundle.root / "migrations" / "mlp-xla"
    folder.mkdir(parents=True)
    (folder / "migration.toml").write_text(
        f'title = "MLP"\nrepo = "{repo}"\nbase_commit = "{base}"\n'
        '[target]\naccelerator = "tpu-v5e"\nchips = 4\nruntime = "torch_xla"\n'
        '[goal]\nmetric = "loss"\nreference = 0.1\ndirection = "min"\n'
    )
    (folder / "attempts.jsonl").write_text("")
    db = tmp_path / "s.db"
    study = open_study(db, create=True)
    assert not import_bundle(study, bundle.root, "ana").problems
    study.close()
    return repo, base, db


def session_one(t: Transcript) -> None:
    t.bash("pip install torch_xla[tpu]", "Successfully installed torch_xla-2.6.0", minutes=0)
    t.bash('python -c "import torch_xla; print(torch_xla.__version__)"', "2.6.0")
    t.read("train.py", GPU)
    t.edit("train.py", 'device = "cuda"', XLA_DEVICE)
    t.say("Now let me run it on the TPU.")
    t.bash("PJRT_DEVICE=TPU python train.py", TRACEBACK, exit_code=1, minutes=5)
    t.say("The run crashes in the optimizer step: torch_xla needs xm.optimizer_step. Let me fix that.")
    t.edit("train.py", "    optimizer.step()", "    xm.optimizer_step(optimizer)")
    t.bash("PJRT_DEVICE=TPU python train.py 2>&1 | tee run.log", "step 0 loss 9.9000\nstep 1 loss 9.9000\nstep 2 loss 9.9000",
           minutes=8)
    t.say("The training now runs on the TPU. The loss matches the GPU reference run.")
    t.bash("git commit -am 'Use torch_xla'", "[main abc1234] Use torch_xla", minutes=10)


def session_two(t: Transcript) -> None:
    t.say("Resuming. Let me run it again with more steps.")
    t.bash("PJRT_DEVICE=TPU python train.py --steps 10", "step 0 loss 9.9000\nstep 9 loss 9.9000", minutes=20)
    t.say("The loss is still stuck at 9.9: the numbers are wrong. The gradients are never zeroed.")
    t.edit("train.py", "    loss.backward()", "    optimizer.zero_grad()\n    loss.backward()", minutes=22)
    t.bash("PJRT_DEVICE=TPU timeout 600 python train.py --steps 10", "step 0 loss 1.2000\nstep 9 loss 0.0800", minutes=25)
    t.say("Final loss 0.08 reaches the target of 0.1, running on 4 TPU chips.")


def agent_commit(repo: Path, content: str, when: str) -> str:
    (repo / "train.py").write_text(content)
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "Use torch_xla"], check=True, env=env)
    return git(repo, "rev-parse", "HEAD")


def run(db: Path, transcript: Path, repo: Path):
    study = open_study(db)
    try:
        return ClaudeCodeImporter(study, "mlp-xla", "ana", repo=repo).run([transcript])
    finally:
        study.close()


def attempts(db: Path) -> list[dict]:
    study = open_study(db)
    try:
        return list(study.db.query("SELECT * FROM attempt WHERE external_id IS NOT NULL ORDER BY seq"))
    finally:
        study.close()


def show(repo: Path, sha: str) -> str:
    return git(repo, "show", f"{sha}:train.py")


def test_a_migration_session_becomes_attempts_tied_to_commits(tmp_path: Path, bundle) -> None:
    repo, base, db = make_study(tmp_path, bundle)
    t = Transcript()
    session_one(t)
    transcript = t.dump(tmp_path / "claude" / f"{t.session}.jsonl")
    status_before = git(repo, "status", "--porcelain")
    branches_before = git(repo, "for-each-ref", "refs/heads")

    report = run(db, transcript, repo)
    assert (report.inserted, report.updated) == (2, 0), [f.summary() for f in report.files]
    first, second = attempts(db)
    # The crash: exit 1 from the transcript, its traceback as the log.
    assert (first["seq"], first["status"], first["exit_code"], first["exit_code_source"]) == (1, "nonzero_exit", 1, "transcript")
    assert json.loads(first["argv"]) == ["python", "train.py"] and json.loads(first["env"]) == {"PJRT_DEVICE": "TPU"}
    assert first["claim"].startswith("The run crashes") and first["expected_level"] is None
    # Exit 0, wrong numbers: the claim expects level 3 (runs on TPU) and says it matches (2).
    assert (second["status"], second["exit_code"]) == ("ok", 0)
    assert second["expected_level"] == 3
    assert "matches the GPU reference" in second["claim"]
    # Commits built from the edits on workbench refs; the user's branches, index and tree untouched.
    assert first["commit_basis"] == "built" and second["commit_basis"] == "built"
    assert XLA_DEVICE in show(repo, first["commit_sha"]) and "optimizer.step()" in show(repo, first["commit_sha"])
    assert "xm.optimizer_step(optimizer)" in show(repo, second["commit_sha"])
    assert git(repo, "rev-parse", f"{second['commit_sha']}^") == first["commit_sha"]
    assert git(repo, "rev-parse", f"{first['commit_sha']}^") == base
    assert git(repo, "rev-parse", "refs/workbench/mlp-xla/attempt-2") == second["commit_sha"]
    assert git(repo, "status", "--porcelain") == status_before
    assert git(repo, "for-each-ref", "refs/heads") == branches_before
    # Edits and context are kept.
    study = open_study(db)
    edits = list(study.db.query("SELECT attempt_id, tool, file_path FROM attempt_edit ORDER BY attempt_id, ord"))
    calls = list(study.db.query("SELECT attempt_id, name FROM attempt_tool_call ORDER BY attempt_id, ord"))
    study.close()
    assert [(e["attempt_id"], e["tool"], e["file_path"]) for e in edits] == [
        (first["id"], "Edit", "train.py"), (second["id"], "Edit", "train.py")]
    assert [c["name"] for c in calls if c["attempt_id"] == first["id"]] == ["Bash", "Bash", "Read"]

    # The same transcript again: nothing changes, the same commits are built.
    again = run(db, transcript, repo)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 2)
    assert attempts(db) == [first, second]

    # The agent committed after the second run, then the session was resumed: the file grew.
    committed = agent_commit(repo, show(repo, second["commit_sha"]), "2026-11-02T10:10:30Z")
    session_two(t)
    t.dump(transcript)
    grown = run(db, transcript, repo)
    assert (grown.inserted, grown.updated, grown.unchanged) == (2, 1, 1), [f.summary() for f in grown.files]
    rows = attempts(db)
    # Only the last attempt's claim grew: the assistant's words run up to the next attempt.
    assert rows[0] == first and rows[1] == {**second, "claim": rows[1]["claim"]}
    assert rows[1]["claim"].endswith("Resuming. Let me run it again with more steps.")
    third, fourth = rows[2:]
    assert (third["seq"], third["commit_sha"], third["commit_basis"]) == (3, committed, "agent_commit")
    assert third["expected_level"] is None and "numbers are wrong" in third["claim"]
    assert fourth["commit_basis"] == "built" and git(repo, "rev-parse", f"{fourth['commit_sha']}^") == committed
    assert "optimizer.zero_grad()" in show(repo, fourth["commit_sha"])
    assert fourth["expected_level"] == 4 and fourth["status"] == "ok"
    assert json.loads(fourth["argv"]) == ["timeout", "600", "python", "train.py", "--steps", "10"]


def test_cli_imports_a_project_folder_with_a_summary(tmp_path: Path, bundle) -> None:
    repo, _, db = make_study(tmp_path, bundle)
    t = Transcript()
    session_one(t)
    project = tmp_path / "claude-projects" / "-home-agent-projects-mlp"
    t.dump(project / f"{t.session}.jsonl")
    with (project / f"{t.session}.jsonl").open("a") as fh:
        fh.write('{"type": "assistant", "message": {"content": [{"type": "tool_u')
    args = [sys.executable, "-m", "cli", "import", "claude-code", str(project.parent), "--db", str(db),
            "--migration", "mlp-xla", "--repo", str(repo)]
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "WORKBENCH_REVIEWER": "ana"})
    assert done.returncode == 0, done.stderr
    assert f"session {t.session}" in done.stdout
    assert "2 attempts: 2 new" in done.stdout
    assert "1 bad line skipped (first at line " in done.stdout and "truncated" in done.stdout
    nothing = subprocess.run(args[:5] + [str(tmp_path / "nothing.jsonl")] + args[6:], capture_output=True, text=True)
    assert nothing.returncode == 2 and "no such file" in nothing.stderr
    wrong = subprocess.run(args[:-4] + ["--migration", "nope"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "no migration 'nope'" in wrong.stderr and "Traceback" not in wrong.stderr


def test_secrets_in_commands_and_outputs_are_redacted(tmp_path: Path, bundle) -> None:
    _, _, db = make_study(tmp_path, bundle)
    t = Transcript()
    t.bash("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 python train.py",
           "using key sk-ant-api03-abcdefghijklmnopqrstuvwxyz")
    t.say("Runs now with ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz set.")
    path = t.dump(tmp_path / "s.jsonl")
    study = open_study(db)
    try:
        ClaudeCodeImporter(study, "mlp-xla", "ana").run([path])
        dump = "\n".join(study.db.conn.iterdump())
        chunks = b"".join(r[0] for r in study.db.execute("SELECT data FROM log_chunk"))
    finally:
        study.close()
    assert "hf_abcdefghij" not in dump and "sk-ant-api03" not in dump
    assert b"sk-ant-api03" not in chunks and b"REDACTED" in chunks
