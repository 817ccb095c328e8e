"""A project set up from nothing as its user would (issue 38): `migration add` without a base or a
reference value, commits taken as they are, decisions on a named attempt. Real git repositories,
real SQLite files, the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import GIT_ENV, git
from tests.test_cli import fails_cleanly, workbench

PYTHON = shlex.quote(sys.executable)
TRAIN = "print('step 1 loss 0.9')\nprint('step 2 loss 0.5 eval_accuracy 0.93')\n"


def commit(repo: Path, files: dict[str, str], message: str, when: str | None = None) -> str:
    """One commit with this message (and author/committer time, when given); returns its SHA."""
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    done = subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", message],
                          capture_output=True, text=True, env={**os.environ, **GIT_ENV, **env})
    assert done.returncode == 0, done.stderr
    return git(repo, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def add(db: Path, repo: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if not db.exists():
        assert workbench("init", str(db), "--title", "T").returncode == 0
    return workbench("migration", "add", str(db), "m", "--repo", str(repo), "--target", "cpu:2", "--goal",
                     "eval_accuracy", "--direction", "max", "--command", f"{PYTHON} train.py", *extra)


# --------------------------------------------------------------------------- migration add


def test_the_base_is_inferred_from_the_agents_trailers_and_the_value_from_the_reference_run(tmp_path):
    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    base = commit(repo, {"train.py": TRAIN}, "the original GPU code")
    first = commit(repo, {"train.py": "raise SystemExit(1)\n"},
                   "Port to XLA\n\nCo-Authored-By: Claude <noreply@anthropic.com>")
    commit(repo, {"train.py": TRAIN + "# xla\n"}, "fix the port")
    made = add(db, repo)
    assert made.returncode == 0, made.stderr
    assert f"base      {base[:12]}: the parent of {first[:12]}, the first commit with an agent trailer" in made.stdout
    assert rows(db, "SELECT base_commit, goal_reference FROM migration") == [(base, None)]
    ran = workbench("reference", str(db), "m", "--run")
    assert ran.returncode == 0, ran.stderr
    assert "goal      eval_accuracy max 0.93: the reference value, taken from this run" in ran.stdout
    assert rows(db, "SELECT goal_reference FROM migration") == [(0.93,)]
    assert rows(db, "SELECT json_extract(detail, '$.why') FROM audit WHERE entity = 'migration' AND action = 'update'"
                ) == [("from the reference run",)]
    assert workbench("verify", str(db)).returncode == 0


def test_the_base_is_where_head_left_its_upstream(tmp_path):
    upstream, db = new_repo(tmp_path / "upstream"), tmp_path / "s.db"
    commit(upstream, {"train.py": "print('old')\n"}, "v0")
    original = commit(upstream, {"train.py": TRAIN}, "v1")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    for n in range(3):  # the agent's commits, no trailers
        commit(clone, {"train.py": TRAIN + f"# {n}\n"}, f"agent step {n}")
    made = add(db, clone, "--reference-value", "0.9")
    assert made.returncode == 0, made.stderr
    assert f"base      {original[:12]}: where HEAD left upstream, 3 commits before HEAD" in made.stdout
    assert rows(db, "SELECT base_commit, goal_reference FROM migration") == [(original, 0.9)]


def test_without_anything_that_tells_the_base_is_asked_for(tmp_path):
    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    commit(repo, {"train.py": TRAIN}, "one")
    commit(repo, {"train.py": TRAIN + "#\n"}, "two")
    fails_cleanly(add(db, repo, "--reference-value", "0.9"), "--base", "cannot tell where the agent's work starts")
    assert rows(db, "SELECT COUNT(*) FROM migration") == [(0,)]
    made = add(db, repo, "--base", "HEAD~1")
    assert made.returncode == 0 and "base      " not in made.stdout  # given, not inferred: nothing to explain


# --------------------------------------------------------------------------- decisions and overrides


def _study_with_two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A migration whose base and two agent commits carry their own logs (ordinary commits)."""
    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    base = commit(repo, {"train.py": TRAIN}, "original")
    log = "step 1 loss 0.9\nstep 2 loss 0.5 eval_accuracy 0.93\n"
    metrics = "".join(f'{{"name": "{n}", "step": {st}, "value": {v}}}\n'
                      for n, st, v in (("loss", 1, 0.9), ("loss", 2, 0.5), ("eval_accuracy", 2, 0.93)))
    commit(repo, {"train.py": TRAIN + "#1\n", ".workbench/attempt.log": log, ".workbench/metrics.jsonl": metrics},
           "Port to XLA: matches the GPU run.\n\nAttempt-Exit-Code: 0")
    commit(repo, {"train.py": TRAIN + "#2\n", ".workbench/attempt.log": "Traceback\nRuntimeError: boom\n"},
           "Try bf16.\n\nAttempt-Exit-Code: 1")
    assert workbench("init", str(db), "--title", "T", "--price", "cpu=0.05").returncode == 0
    steps = [("migration", "add", str(db), "m", "--repo", str(repo), "--base", base, "--target", "cpu:2",
              "--goal", "eval_accuracy", "--direction", "max", "--command", f"{PYTHON} train.py"),
             ("reference", str(db), "m", "--run"),
             ("import", "git", str(repo), "--db", str(db), "--migration", "m"),
             ("verify", str(db))]
    for args in steps:
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    return db, repo


def test_decide_names_the_attempt_and_the_report_takes_it_as_the_final_run(tmp_path):
    db, _ = _study_with_two_runs(tmp_path)
    fails_cleanly(workbench("decide", str(db), "m", "accept", "--attempt", "7", "--reason", "x"), "--attempt")
    fails_cleanly(workbench("decide", str(db), "m", "accept", "--attempt", "0", "--reason", "x"), "reference run")
    done = workbench("decide", str(db), "m", "accept", "--attempt", "1", "--reason", "the port matches")
    assert done.returncode == 0 and "decision 1: accept, attempt #1" in done.stdout, done.stderr
    assert rows(db, "SELECT a.seq FROM decision d JOIN attempt a ON a.id = d.attempt_id") == [(1,)]
    import json

    report = json.loads(workbench("report", str(db), "--format", "json").stdout)
    (migration,) = report["migrations"]
    assert migration["final_run"]["seq"] == 1  # not the latest attempt (2, the crash)


def test_override_from_the_cli_counts_alike_in_the_header_verify_and_the_report(tmp_path):
    import json

    from storage import queries
    from storage.database import open_study

    db, _ = _study_with_two_runs(tmp_path)
    fails_cleanly(workbench("override", str(db), "m", "9", "--level", "1", "--outcome", "fail",
                            "--justification", "x"), "no attempt 9")
    # attempt 1 passed level 1; the reviewer saw the run die later in its full log
    done = workbench("override", str(db), "m", "1", "--level", "1", "--outcome", "fail",
                     "--justification", "the full log ends in an OOM")
    assert done.returncode == 0 and "L1 pass -> fail" in done.stdout, done.stderr
    study = open_study(db)
    try:
        from storage.review import ladder_counts

        (summary,) = queries.migration_summaries(study.db)
        header = (summary.failed, summary.highest_level, summary.over_claims)
        totals = queries.study_totals(study.db)
        ladder = ladder_counts(study.db, summary.migration.id)  # the migration screen's 'failed 2/2'
        assert (ladder.failed, ladder.judged) == (2, 2)
    finally:
        study.close()
    report = json.loads(workbench("report", str(db), "--format", "json").stdout)["totals"]
    table = workbench("verify", str(db)).stdout.splitlines()
    levels = {line.split()[1]: line.split()[3] for line in table[1:] if line.split()[:1] == ["m"]}
    assert header[0] == totals["failed"] == report["failed"]["n"] == 2  # both attempts now fail
    assert levels == {"1": "0", "2": "0"} and header[1] == 0
    assert header[2] == totals["over_claims"] == report["over_claims"]["n"]


# --------------------------------------------------------------------------- re-runs and evidence


def test_a_reruns_diff_compares_with_the_attempt_it_reran(bundle, tmp_path):
    """#3 re-ran #1 after #2 was made: its Diff is against #1 (same code), not the row before it
    (#2, a later commit); #4, the agent's next step, compares with #2, not with the re-run."""
    from screens.navigation import AttemptCursor
    from storage import queries
    from storage.database import open_study
    from workbench.bundle import import_bundle

    folder, shas = bundle.add_migration("mlp", commits=4)
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, shas[1]), bundle.attempt(2, shas[2]),
                                   bundle.attempt(3, shas[1], source="rerun", rerun_of=1),
                                   bundle.attempt(4, shas[3])])
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert not import_bundle(study, bundle.root, "ana").problems
        mid = queries.get_migration(study.db, "mlp").id
        cursor = AttemptCursor(rows=queries.attempt_summaries(study.db, mid))  # #3 is a run of #1, not a row
        ids = {s.attempt.seq: s.attempt.id for s in queries.attempt_summaries(study.db, mid, folded=False)}
        assert [s.attempt.seq for s in cursor.rows] == [0, 1, 2, 4]
        assert cursor.previous_commit(ids[3], rerun_of=ids[1]) == (1, shas[1])
        assert cursor.previous_commit(ids[4]) == (2, shas[2])
        assert queries.previous_agent_commit(study.db, mid, 3) == (1, shas[1])
        assert queries.previous_agent_commit(study.db, mid, 4) == (2, shas[2])
    finally:
        study.close()


def test_an_attempt_without_evidence_is_not_an_over_claim(tmp_path):
    """An ordinary commit whose message claims a level, imported with no log and no exit code:
    its levels are unknown, and unknown is not below expectation."""
    import json

    from storage import queries
    from storage.database import open_study

    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    base = commit(repo, {"train.py": TRAIN}, "original")
    commit(repo, {"train.py": TRAIN + "# xla\n"}, "Runs on 4 TPU chips now and matches the GPU accuracy.")
    assert workbench("init", str(db), "--title", "T").returncode == 0
    for args in (("migration", "add", str(db), "m", "--repo", str(repo), "--base", base, "--target", "tpu-v5e:4",
                  "--goal", "eval_accuracy", "--direction", "max", "--reference-value", "0.9",
                  "--command", "python train.py"),
                 ("import", "git", str(repo), "--db", str(db), "--migration", "m")):
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    table = workbench("verify", str(db)).stdout.splitlines()
    assert rows(db, "SELECT expected_level IS NOT NULL, log_id, exit_code FROM attempt") == [(1, None, None)]
    column = slice(table[0].index("over-claim"), table[0].index("time"))
    assert table[1].split()[:4] == ["m", "1", "?????", "0"] and table[1][column].strip() == ""
    study = open_study(db)
    try:
        (summary,) = queries.migration_summaries(study.db)
        assert summary.over_claims == 0 and queries.study_totals(study.db)["over_claims"] == 0
    finally:
        study.close()
    report = json.loads(workbench("report", str(db), "--format", "json").stdout)["totals"]
    assert report["over_claims"]["n"] == 0


# --------------------------------------------------------------------------- setup and shell

PREPARE = ("import pathlib\npathlib.Path('data').mkdir(exist_ok=True)\n"
           "pathlib.Path('data/acc.txt').write_text('0.93\\n')\nprint('prepared')\n")
TRAIN_ON_DATA = ("import pathlib\nacc = pathlib.Path('data/acc.txt').read_text().strip()\n"
                 "print('step 1 loss 0.9')\nprint(f'step 2 loss 0.5 eval_accuracy {acc}')\n")


def _project_with_prepared_data(tmp_path: Path) -> tuple[Path, str]:
    """Data made by a prepare script and ignored by git: present in the user's tree only."""
    repo = new_repo(tmp_path / "project")
    base = commit(repo, {".gitignore": "data/\n", "prepare.py": PREPARE, "train.py": TRAIN_ON_DATA}, "original")
    commit(repo, {"train.py": TRAIN_ON_DATA + "# ported\n"}, "port to XLA")
    subprocess.run([sys.executable, "prepare.py"], cwd=repo, check=True, capture_output=True)
    return repo, base


def test_the_migrations_setup_runs_in_each_worktree_before_the_command(tmp_path):
    repo, base = _project_with_prepared_data(tmp_path)
    db = tmp_path / "s.db"
    assert workbench("init", str(db), "--title", "T").returncode == 0
    for args in (("migration", "add", str(db), "m", "--repo", str(repo), "--base", base, "--target", "cpu",
                  "--goal", "eval_accuracy", "--direction", "max", "--command", f"{PYTHON} train.py",
                  "--setup", f"{PYTHON} prepare.py"),
                 ("reference", str(db), "m", "--run"),
                 ("import", "git", str(repo), "--db", str(db), "--migration", "m")):
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    ran = workbench("rerun", str(db), "m", "1", "--yes", "--wait")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"setup     {PYTHON} prepare.py" in ran.stdout and "prepared" in ran.stdout
    assert rows(db, "SELECT source, status, argv FROM attempt WHERE source = 'rerun'") == [
        ("rerun", "ok", json.dumps([sys.executable, "train.py"]))]  # the command as recorded, not the wrapper
    assert rows(db, "SELECT goal_reference FROM migration") == [(0.93,)]
    cleared = workbench("migration", "edit", str(db), "m", "--setup", "")
    assert cleared.returncode == 0 and "setup" in cleared.stdout
    assert rows(db, "SELECT setup FROM migration") == [(None,)]


def test_a_command_that_needs_a_shell(tmp_path):
    repo, base = _project_with_prepared_data(tmp_path)
    db = tmp_path / "s.db"
    line = f"{PYTHON} prepare.py && {PYTHON} train.py"
    assert workbench("init", str(db), "--title", "T").returncode == 0
    for args in (("migration", "add", str(db), "m", "--repo", str(repo), "--base", base, "--target", "cpu",
                  "--goal", "eval_accuracy", "--direction", "max", "--command", line, "--shell"),
                 ("reference", str(db), "m", "--run"),
                 ("import", "git", str(repo), "--db", str(db), "--migration", "m")):
        done = workbench(*args)
        assert done.returncode == 0, (args, done.stderr)
    assert rows(db, "SELECT argv FROM attempt ORDER BY seq") == [(json.dumps(["sh", "-c", line]),)] * 2
    fails_cleanly(workbench("migration", "edit", str(db), "m", "--shell"), "--shell", "--command")


def test_the_base_is_the_last_commit_before_the_first_claude_code_session(tmp_path):
    from tests.test_setup import claude_session  # its session starts 2026-11-02T10:01:00Z

    repo, db = new_repo(tmp_path / "project"), tmp_path / "s.db"
    commit(repo, {"train.py": "print('v0')\n"}, "start", when="2026-10-30T09:00:00Z")
    base = commit(repo, {"train.py": TRAIN}, "the GPU code", when="2026-11-01T09:00:00Z")
    commit(repo, {"train.py": TRAIN + "# xla\n"}, "port", when="2026-11-02T11:00:00Z")
    claude_session(repo, tmp_path / "claude")
    assert workbench("init", str(db), "--title", "T").returncode == 0
    made = workbench("migration", "add", str(db), "m", "--repo", str(repo), "--target", "cpu", "--goal",
                     "eval_accuracy", "--direction", "max", env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    assert made.returncode == 0, made.stderr
    assert f"base      {base[:12]}: the last commit before the first Claude Code session (2026-11-02T10:01" in made.stdout
