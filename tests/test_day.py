"""A reviewer's day (issue 20, back end): environment failures of re-runs, edits as a diff,
imports that say why, bundles with undecodable logs, and a serve that stays on the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from domain.jobs import JobEnvironmentError, JobState
from storage.jobs import run_source
from tests.rerun_helpers import attempt, study_with_script
from workbench.rerun import jobs, preflight
from workbench.rerun.runner import run_job

XLA_SCRIPT = """\
import sys
import torch_xla
print("never here")
"""


@pytest.fixture
def xla_study(tmp_path):
    s = study_with_script(tmp_path, XLA_SCRIPT)
    yield s
    s.close()


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    """A real target environment without torch: a fresh venv (no pip, to stay quick)."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where


def _counts(study) -> tuple[int, int]:
    return (study.db.execute("SELECT COUNT(*) FROM attempt").fetchone()[0],
            study.db.execute("SELECT COUNT(*) FROM verification").fetchone()[0])


def _report(study) -> bytes:
    from workbench.report import build_report, render

    return render(build_report(study.db), "json")


def test_preflight_refuses_a_target_without_torch_xla_before_queueing(xla_study, bare_venv):
    spec = jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local", options={"venv": str(bare_venv)})
    before = _counts(xla_study)
    with pytest.raises(JobEnvironmentError) as err:
        jobs.launch(xla_study, spec, "tester")
    text = str(err.value)
    assert "torch" in text and "make xla-env" in text and "WORKBENCH_TARGET_VENV" in text and "--venv" in text
    assert str(bare_venv) in text  # the interpreter that could not import it
    assert xla_study.db.execute("SELECT COUNT(*) FROM job").fetchone()[0] == 0
    assert _counts(xla_study) == before


def test_missing_interpreter_is_refused_before_queueing(xla_study, bare_venv):
    spec = jobs.with_changes(jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local",
                                           options={"venv": str(bare_venv)}), argv=("python3.99", "train.py"))
    with pytest.raises(JobEnvironmentError, match="python3.99 is not on the target environment's PATH.*make xla-env"):
        jobs.launch(xla_study, spec, "tester")


def test_a_run_that_cannot_import_torch_xla_is_an_environment_failure_not_an_attempt(xla_study, bare_venv):
    """Past the pre-flight (a remote host, a changed environment), the runner still tells."""
    spec = jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local", options={"venv": str(bare_venv)})
    spec = jobs.with_changes(spec, argv=("python", "train.py"))
    before, report = _counts(xla_study), _report(xla_study)
    job = run_job(xla_study.path, jobs.create_job(xla_study.db, xla_study.path, spec, "tester").id)
    assert job.state is JobState.ENVIRONMENT and job.result_attempt_id is None
    assert "torch" in job.error and "make xla-env" in job.error
    assert job.log_id is not None  # the output that says so is kept
    assert _counts(xla_study) == before and _report(xla_study) == report
    from click.testing import CliRunner

    from cli.main import main

    listed = CliRunner().invoke(main, ["jobs", str(xla_study.path)]).output
    assert "environment" in listed and "make xla-env" in listed
    assert not (job.dir / "src").exists()


def test_missing_interpreter_at_run_time_is_an_environment_failure(xla_study):
    spec = jobs.with_changes(jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local"),
                             argv=("python3.99", "train.py"))
    job = run_job(xla_study.path, jobs.create_job(xla_study.db, xla_study.path, spec, "t").id)
    assert job.state is JobState.ENVIRONMENT and "WORKBENCH_TARGET_VENV" in job.error
    assert job.result_attempt_id is None


def test_no_tpu_for_pjrt_tpu_is_refused(xla_study, tmp_path):
    """A stand-in `python` on the target's PATH that imports everything: only the device is missing."""
    from tests.rerun_helpers import stand_in
    from workbench.rerun.backends import has_tpu

    if has_tpu():
        pytest.skip("this machine has a TPU")
    venv = tmp_path / "fake-venv"
    stand_in(venv / "bin", "python", "import sys\nsys.exit(0)\n")
    spec = jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local", options={"venv": str(venv)})
    spec = jobs.with_changes(spec, argv=("python", "train.py"), env={"PJRT_DEVICE": "TPU"})
    with pytest.raises(JobEnvironmentError, match="no TPU.*PJRT_DEVICE=CPU"):
        jobs.launch(xla_study, spec, "tester")


def test_a_run_that_finds_no_tpu_is_an_environment_failure(xla_study, tmp_path):
    """A stand-in `python` that fails the way torch_xla does with PJRT_DEVICE=TPU and no TPU."""
    from tests.rerun_helpers import stand_in

    venv = tmp_path / "no-tpu-venv"
    stand_in(venv / "bin", "python", "import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\n"
             "print('OSError: libtpu not found', file=sys.stderr)\nsys.exit(1)\n")
    spec = jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local", options={"venv": str(venv)})
    spec = jobs.with_changes(spec, argv=("python", "train.py"))
    before = _counts(xla_study)
    job = run_job(xla_study.path, jobs.create_job(xla_study.db, xla_study.path, spec, "t").id)
    assert job.state is JobState.ENVIRONMENT and "libtpu not found" in job.error and "PJRT_DEVICE=CPU" in job.error
    assert _counts(xla_study) == before


def test_a_program_that_fails_on_its_own_is_still_an_attempt(xla_study, tmp_path):
    """Only failures before the program starts are the environment's: a crash of the code is not."""
    from tests.rerun_helpers import stand_in

    venv = tmp_path / "crash-venv"
    stand_in(venv / "bin", "python", "import sys\nprint('step 1/5 loss 1.0')\n"
             "print(\"ModuleNotFoundError: No module named 'torch_xla.experimental'\", file=sys.stderr)\nsys.exit(1)\n")
    spec = jobs.spec_for(xla_study.db, attempt(xla_study, "toy", 1), "local", options={"venv": str(venv)})
    spec = jobs.with_changes(spec, argv=("python", "train.py"))
    job = run_job(xla_study.path, jobs.create_job(xla_study.db, xla_study.path, spec, "t").id)
    assert job.state is JobState.FINISHED and job.result_attempt_id is not None and job.exit_code == 1


@pytest.mark.skipif(not os.environ.get("WORKBENCH_TARGET_VENV"), reason="needs the torch_xla target (make xla-env)")
def test_preflight_passes_in_the_torch_xla_target():
    """The real target environment imports what the commit imports: nothing is refused."""
    s = study_with_script(Path(tempfile.mkdtemp()), XLA_SCRIPT)
    try:
        spec = jobs.spec_for(s.db, attempt(s, "toy", 1), "local", options={"venv": os.environ["WORKBENCH_TARGET_VENV"]})
        assert preflight.needed_modules(*reversed(run_source(s.db, spec))) == ("torch_xla",)
        preflight.check(s.db, spec)
    finally:
        s.close()


def test_cli_rerun_exits_2_with_one_line_naming_the_fix(xla_study, bare_venv):
    from click.testing import CliRunner

    from cli.main import main

    before = _counts(xla_study)
    result = CliRunner().invoke(main, ["rerun", str(xla_study.path), "toy", "1", "--yes", "--venv", str(bare_venv)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("workbench:")]
    assert len(errors) == 1 and "make xla-env" in errors[0] and "Traceback" not in result.output
    assert _counts(xla_study) == before
    # refused before the question: nothing asked, nothing stored
    result = CliRunner().invoke(main, ["rerun", str(xla_study.path), "toy", "1", "--venv", str(bare_venv)], input="y\n")
    assert result.exit_code == 2 and "Run this command?" not in result.output
    assert xla_study.db.execute("SELECT COUNT(*) FROM job").fetchone()[0] == 0


# --------------------------------------------------------------------------- edits as a diff


@pytest.fixture
def cc_study(bundle, tmp_path):
    """A study holding migration `mlp-xla` (base commit and reference) for transcript imports."""
    from storage.database import open_study
    from workbench.bundle import import_bundle

    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0])])
    db = open_study(tmp_path / "s.db", create=True)
    assert not import_bundle(db, bundle.root, "ana").problems
    yield db
    db.close()


def test_an_attempt_without_a_commit_shows_its_edits_as_a_diff_file_by_file(cc_study, tmp_path):
    from tests.import_helpers import Transcript
    from workbench.diffs import attempt_diff, edits_diff
    from workbench.importers.claude_code import ClaudeCodeImporter

    t = Transcript()
    t.edit("train.py", "device = 'cuda'", "device = xm.xla_device()")
    t.write("xla_util.py", "import torch_xla\n\ndef dev():\n    return 1\n")
    t.edit("train.py", "loss.backward()", "loss.backward(); xm.mark_step()")
    t.bash("echo done > notes.txt", "")
    t.bash("python train.py", "step 1 loss 0.5")
    t.edit("train.py", "xm.mark_step()", "pass")
    t.bash("python train.py --fast", "step 1 loss 0.4")
    ClaudeCodeImporter(cc_study, "mlp-xla", "ana").run([t.dump(tmp_path / "s.jsonl")])  # no --repo: no commits
    rows = list(cc_study.db.query("SELECT id, seq, commit_sha FROM attempt WHERE external_id IS NOT NULL ORDER BY seq"))
    assert len(rows) == 2 and not rows[0]["commit_sha"]

    diff = edits_diff(cc_study.db, rows[0]["id"])
    assert [(f.path, f.added, f.removed) for f in diff.files] == [
        ("train.py", 2, 2), ("xla_util.py", 4, 0), ("notes.txt", 0, 0)]
    text = "\n".join(diff.lines)
    assert "-device = 'cuda'" in text and "+device = xm.xla_device()" in text
    assert "+def dev():" in text and " $ echo done > notes.txt" in text
    # paired lines, as git_diff gives them, for word highlighting
    minus = diff.lines.index("-device = 'cuda'")
    assert diff.partner[minus] == minus + 1
    second = edits_diff(cc_study.db, rows[1]["id"])  # only the edits since the previous attempt
    assert [f.path for f in second.files] == ["train.py"] and "+pass" in second.lines
    # the pane's one call: no commit, so no `git diff` (which said "bad revision ''")
    assert attempt_diff(cc_study.db, tmp_path / "no-repo", "abc", "", rows[1]["id"]).lines == second.lines


# --------------------------------------------------------------------------- imports that say why


def test_claude_code_import_without_workload_says_why_and_what_to_pass(cc_study, tmp_path):
    from click.testing import CliRunner

    from cli.main import main
    from tests.import_helpers import Transcript

    t = Transcript()
    for n in range(37):
        t.bash("ls -la" if n % 2 else "pip install torch_xla", "")
    t.bash("python -c 'import torch'", "")
    path = t.dump(tmp_path / "s.jsonl")
    result = CliRunner().invoke(main, ["import", "claude-code", str(path), "--db", str(cc_study.path),
                                       "--migration", "mlp-xla"])
    assert result.exit_code == 2
    line = next(x for x in result.output.splitlines() if x.startswith("0 attempts:"))
    assert "38 Bash calls (pip x19, ls x18, python x1)" in line
    assert "none matched the workload rule (python/torchrun" in line and "--all-bash counts every call" in line
    result = CliRunner().invoke(main, ["import", "claude-code", str(path), "--db", str(cc_study.path),
                                       "--migration", "mlp-xla", "--all-bash"])
    assert result.exit_code == 0 and "38 new" in result.output


def _plain_repo_study(bundle, tmp_path, commits: int):
    from conftest import git

    from storage.database import open_study
    from workbench.bundle import import_bundle

    folder, _ = bundle.add_migration("mlp-xla", commits=1)
    db = open_study(tmp_path / "g.db", create=True)
    assert not import_bundle(db, bundle.root, "ana").problems
    repo = folder / "repo"
    for n in range(commits):
        (repo / "notes.txt").write_text(f"{n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"Ordinary commit {n}")
    return db, repo


def test_import_git_takes_an_ordinary_repositorys_commits_as_they_are(bundle, tmp_path):
    """Issue 38: each commit after the base is an attempt running the migration's command, timed
    by the commit; a trailer still wins where present."""
    from click.testing import CliRunner
    from conftest import git

    from cli.main import main
    from storage.database import open_study
    from storage.setup import update_migration

    db, repo = _plain_repo_study(bundle, tmp_path, 68)
    update_migration(db.db, 1, {"command": "python train.py --steps 40"}, "ana")
    db.close()
    (repo / "notes.txt").write_text("trailer\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Port\n\nAttempt-Command: PJRT_DEVICE=CPU python train.py --steps 2")
    cli = ["import", "git", str(repo), "--db", str(db.path), "--migration", "mlp-xla"]
    result = CliRunner().invoke(main, cli)
    assert result.exit_code == 0 and "69 new" in result.output, result.output
    study = open_study(db.path)
    rows = list(study.db.query("SELECT argv, env, status, commit_sha, started_at FROM attempt"
                               " WHERE external_id LIKE 'git:%' ORDER BY seq"))
    study.close()
    assert len(rows) == 69
    assert {(r["argv"], r["status"]) for r in rows[:68]} == {('["python", "train.py", "--steps", "40"]', "no_result")}
    assert (rows[-1]["argv"], rows[-1]["env"]) == ('["python", "train.py", "--steps", "2"]', '{"PJRT_DEVICE": "CPU"}')
    shown = git(repo, "show", "-s", "--format=%aI", rows[0]["commit_sha"])
    assert rows[0]["started_at"] == shown  # the commit's time
    again = CliRunner().invoke(main, cli)
    assert again.exit_code == 0 and "69 unchanged" in again.output, again.output
    result = CliRunner().invoke(main, [*cli, "--range", "HEAD"])
    assert result.exit_code == 2 and "A..B" in result.output


# --------------------------------------------------------------------------- bundles with undecodable logs


def test_import_bundle_exits_0_with_a_warning_when_only_logs_are_not_utf8(bundle, tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "logs" / "1.log").write_bytes(b"step 1 loss 0.5\n\xff\xfe binary\n")
    bundle.write_attempts(folder, [bundle.attempt(1, shas[1])])
    db = tmp_path / "s.db"
    result = CliRunner().invoke(main, ["import", "bundle", str(bundle.root), "--db", str(db)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "not valid UTF-8" in warnings[0] and "stored as bytes" in warnings[0]
    assert "; 1 warning" in result.output
    # a real problem still exits 2
    (folder / "attempts.jsonl").write_text((folder / "attempts.jsonl").read_text() + "{not json\n")
    result = CliRunner().invoke(main, ["import", "bundle", str(bundle.root), "--db", str(db)])
    assert result.exit_code == 2 and "1 problem reported" in result.output


# --------------------------------------------------------------------------- bad input: one line, exit 2


def test_bad_input_to_rerun_jobs_import_and_serve_is_one_line_and_exit_2(xla_study, tmp_path):
    """Every path of these commands that can fail on user input: no traceback, one line, status 2."""
    import socket

    from click.testing import CliRunner

    from cli.main import main

    db = str(xla_study.path)
    repo = xla_study.db.execute("SELECT repo FROM migration").fetchone()[0]
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    cases = [
        ["rerun", db, "toy", "1", "--chips", "-3", "--yes"],
        ["rerun", db, "toy", "999", "--yes"],
        ["rerun", db, "nope", "1", "--yes"],
        ["rerun", db, "toy", "1", "--env", "NOEQUALS", "--yes"],
        ["rerun", db, "toy", "1", "--timeout", "0", "--yes"],
        ["rerun", db, "toy", "1", "--backend", "ssh", "--yes"],
        ["rerun", db, "toy", "1", "--command", "python3.99 train.py", "--yes"],
        ["rerun", str(tmp_path / "none.db"), "toy", "1"],
        ["jobs", db, "--cancel", "999"],
        ["import", "bundle", str(tmp_path / "nowhere"), "--db", db],
        ["import", "claude-code", str(tmp_path / "none.jsonl"), "--db", db, "--migration", "toy"],
        ["import", "claude-code", str(tmp_path), "--db", db, "--migration", "toy", "--workload", "("],
        ["import", "claude-code", str(tmp_path), "--db", db, "--migration", "nope"],
        ["import", "git", str(tmp_path), "--db", db, "--migration", "toy"],
        ["import", "git", repo, "--db", db, "--migration", "toy", "--range", "HEAD"],
        ["import", "git", repo, "--db", db, "--migration", "toy", "--range", "HEAD~1..nope"],
        ["import", "git", repo, "--db", db, "--migration", "toy", "--range", "HEAD~1..HEAD", "--ref", "main"],
        ["serve", db, "--port", str(taken.getsockname()[1])],
        ["serve", db, "--host", "0.0.0.0", "--port", "0"],
        ["serve", db, "--host", "no-such-host.invalid", "--port", "0"],
    ]
    try:
        for args in cases:
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (args, result.output)
            assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    finally:
        taken.close()


def test_the_diff_pane_shows_the_edits_of_an_attempt_without_a_commit(cc_study, tmp_path):
    """Issue 20 item 2 in the app: no `bad revision ''`, the transcript's edits file by file."""
    import asyncio

    from test_app import screen_text, settle

    from screens.app import WorkbenchApp
    from screens.widgets.diff_view import DiffPane
    from tests.import_helpers import Transcript
    from workbench.importers.claude_code import ClaudeCodeImporter

    t = Transcript()
    t.edit("train.py", "device = 'cuda'", "device = xm.xla_device()")
    t.bash("python train.py", "step 1 loss 0.5")
    ClaudeCodeImporter(cc_study, "mlp-xla", "ana").run([t.dump(tmp_path / "s.jsonl")])
    path = cc_study.path

    async def run() -> None:
        app = WorkbenchApp(path)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("enter")  # the migration
            await settle(pilot)
            await pilot.press("j", "enter")  # attempt #1, below the reference
            await settle(pilot)
            await pilot.press("2")
            await settle(pilot)
            pane = app.screen.query_one(DiffPane)
            assert pane.problem == "" and pane.diff is not None
            assert [f.path for f in pane.diff.files] == ["train.py"]
            shown = screen_text(app)
            assert "bad revision" not in shown and "+device = xm.xla_device()" in shown

    asyncio.run(run())
