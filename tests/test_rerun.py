"""Re-run jobs without torch: a stdlib script in a real git repository, every backend, the job's life."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domain.errors import WorkbenchError
from domain.models import AttemptSource, AttemptStatus
from storage import queries
from tests.rerun_helpers import GCLOUD, SKY, attempt, stand_in, study_with_script, wait_for
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState
from workbench.rerun.runner import run_job


@pytest.fixture
def study(tmp_path):
    s = study_with_script(tmp_path)
    yield s
    s.close()


def _git_state(repo: Path) -> tuple[str, str, str, str]:
    def g(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout

    return g("status", "--porcelain"), g("branch", "-a"), g("rev-parse", "HEAD"), g("stash", "list")


def _repo(study) -> Path:
    return Path(study.db.execute("SELECT repo FROM migration").fetchone()[0])


def test_local_rerun_becomes_a_verified_attempt_and_leaves_the_repository_alone(study):
    a = attempt(study, "toy", 1)
    before = _git_state(_repo(study))
    spec = jobs.spec_for(study.db, a, "local")
    assert spec.env == {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "2"} and spec.chips == 2
    job = jobs.create_job(study.db, study.path, spec, "tester")
    assert job.state is JobState.QUEUED  # stored before anything runs
    job = run_job(study.path, job.id)
    assert job.state is JobState.FINISHED and job.exit_code == 0, job.error
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.source is AttemptSource.RERUN and new.rerun_of == a.id and new.commit == a.commit
    assert new.status is AttemptStatus.OK and new.exit_code == 0 and new.seq == 2
    assert new.intended_hardware.count == 2 and new.command.env["CPU_NUM_DEVICES"] == "2"
    assert [p.value for p in queries.metric_series(study.db, new.id, "loss")][:2] == [1.0, 0.5]
    verdicts = queries.verdicts(study.db, new.id)
    assert len(verdicts) == 5 and verdicts[0].outcome.value == "pass"
    assert job.wall_seconds is not None and job.wall_seconds > 0
    # a fresh detached worktree, removed afterwards; nothing of the user's repository changed
    assert not (job.dir / "src").exists()
    assert _git_state(_repo(study)) == before
    wt = subprocess.run(["git", "-C", str(_repo(study)), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(job.dir) not in wt
    log = job.log_path.read_text()
    assert "cwd-marker src" in log and "step 5/5" in log


def test_keep_worktree_and_nonzero_exit(study):
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"),
                             keep_worktree=True, env={"EXIT": "3"})
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "tester").id)
    assert job.state is JobState.FINISHED and job.exit_code == 3
    assert (job.dir / "src" / "train.py").is_file()
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.status is AttemptStatus.NONZERO_EXIT
    assert queries.verdicts(study.db, new.id)[0].outcome.value == "fail"


def test_bad_specs_are_refused_before_anything_runs(study):
    a = attempt(study, "toy", 1)
    with pytest.raises(WorkbenchError, match="needs a host"):
        jobs.create_job(study.db, study.path, jobs.spec_for(study.db, a, "ssh"), "t")
    with pytest.raises(WorkbenchError, match="empty"):
        jobs.create_job(study.db, study.path, jobs.with_changes(jobs.spec_for(study.db, a, "local"), argv=()), "t")
    assert study.db.execute("SELECT COUNT(*) FROM job").fetchone()[0] == 0


def test_missing_program_fails_the_job_without_an_attempt(study):
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"), argv=("no-such-program-xyz",))
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "t").id)
    assert job.state is JobState.FAILED and "no-such-program-xyz" in job.error and job.result_attempt_id is None


def _launch(study, **changes):
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"), **changes)
    return jobs.launch(study, spec, "tester")


def test_detached_launch_streams_output_and_cancel_stops_it(study):
    job = _launch(study, argv=("python3", "train.py", "200"), env={"DELAY": "0.05"})
    wait_for(lambda: b"step 3/200" in (job.log_path.read_bytes() if job.log_path.exists() else b""))
    data, offset = jobs.read_output(job, 0)
    assert jobs.progress(data)[1] == 200 and offset == len(data)
    jobs.cancel(jobs.get_job(study.db, job.id))
    job = jobs.wait(study.db, job.id, timeout=30)
    assert job.state is JobState.CANCELLED and job.result_attempt_id is None
    assert job.log_id is not None  # the partial log is kept
    assert not (job.dir / "src").exists()


def test_timeout_stops_the_run_and_records_a_timed_out_attempt(study):
    job = _launch(study, argv=("python3", "train.py", "200"), env={"DELAY": "0.05"}, timeout_s=1.5)
    job = jobs.wait(study.db, job.id, timeout=30)
    assert job.state is JobState.FAILED and "timed out" in job.error
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.status is AttemptStatus.INTERRUPTED and new.exit_code == 124
    assert queries.current_failure(study.db, new.id).cause.value == "timeout"


def test_the_job_outlives_an_app_killed_with_sigkill(study, tmp_path):
    """The 'app' (a process that launches and watches) dies; the runner finishes on its own."""
    code = (
        "import sys, time\n"
        "from storage.database import open_study\n"
        "from tests.rerun_helpers import attempt\n"
        "from workbench.rerun import jobs\n"
        f"s = open_study({str(study.path)!r})\n"
        "spec = jobs.with_changes(jobs.spec_for(s.db, attempt(s, 'toy', 1), 'local'),"
        " argv=('python3', 'train.py', '30'), env={'DELAY': '0.05'})\n"
        "job = jobs.launch(s, spec, 'app')\n"
        "print(job.id, flush=True)\n"
        "time.sleep(600)\n"
    )
    app = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                           cwd=Path(__file__).resolve().parents[1])
    job_id = int(app.stdout.readline())
    wait_for(lambda: jobs.get_job(study.db, job_id).state is JobState.RUNNING)
    app.send_signal(signal.SIGKILL)
    app.wait()
    assert jobs.recover(study.db) == []  # its runner is alive: nothing to mark
    job = jobs.wait(study.db, job_id, timeout=60)
    assert job.state is JobState.FINISHED and job.result_attempt_id is not None


def test_recovery_marks_a_job_whose_runner_died_interrupted_and_keeps_its_log(study):
    job = _launch(study, argv=("python3", "train.py", "400"), env={"DELAY": "0.05"})
    wait_for(lambda: b"step 5/400" in (job.log_path.read_bytes() if job.log_path.exists() else b""))
    job = jobs.get_job(study.db, job.id)
    child = job.child_pid
    os.kill(job.runner_pid, signal.SIGKILL)  # the machine or the runner dies
    wait_for(lambda: not jobs.runner_alive(jobs.get_job(study.db, job.id)))
    assert jobs.recover(study.db) == [job.id]
    job = jobs.get_job(study.db, job.id)
    assert job.state is JobState.INTERRUPTED and job.log_id is not None
    from storage.logs import LogReader

    assert any("step 5/400" in line for line in LogReader(study.db, job.log_id).lines(0, 10))
    wait_for(lambda: not Path(f"/proc/{child}").exists() or b"State:\tZ" in Path(f"/proc/{child}/status").read_bytes())
    assert jobs.recover(study.db) == []


def test_cli_rerun_wait(study, tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    path = str(study.path)
    result = CliRunner().invoke(main, ["rerun", path, "toy", "1", "--backend", "local", "--wait", "--yes",
                                       "--env", "X=1"])
    assert result.exit_code == 0, result.output
    assert "command   python3 train.py 5" in result.output and "step 5/5" in result.output
    assert "new run #2:" in result.output
    result = CliRunner().invoke(main, ["rerun", path, "toy", "1"], input="n\n")
    assert result.exit_code == 2 and "nothing ran" in result.output
    result = CliRunner().invoke(main, ["jobs", path])
    assert "finished" in result.output


def test_cli_rerun_repeat_runs_in_turn_with_seeds_and_verifies_each_with_all(study):
    """`--repeat 3`: three jobs in one runner, one after another, WORKBENCH_SEED 1-3 and `{seed}`
    in the command; each result is verified once all have run, so the first counts the other two."""
    from click.testing import CliRunner

    from cli.main import main
    from storage import verify_inputs

    result = CliRunner().invoke(main, ["rerun", str(study.path), "toy", "1", "--wait", "--yes", "--repeat", "3",
                                       "--command", "python3 train.py 5 {seed}"])
    assert result.exit_code == 0, result.output
    assert "repeat    3 times, one after another, WORKBENCH_SEED 1-3" in result.output
    assert result.output.count("queued after it") == 2 and result.output.count("job ") >= 6
    made = sorted(jobs.list_jobs(study.db), key=lambda j: j.id)
    assert len(made) == 3 and len({j.runner_pid for j in made}) == 1
    assert all(a.ended_at <= b.started_at for a, b in zip(made, made[1:]))   # in turn, never at once
    results = [queries.attempt_summary(study.db, j.result_attempt_id).attempt for j in made]
    assert [(r.command.env["WORKBENCH_SEED"], r.command.argv[-1]) for r in results] == [("1", "1"), ("2", "2"), ("3", "3")]
    for r in results:   # the script ignores its seed: repeats that never differ measure no noise
        level2 = queries.verdicts(study.db, r.id)[1]
        assert level2.outcome.value == "pass" and level2.reason.endswith("noise not measured"), level2.reason
        assert verify_inputs.replicates(study.db, r) == [x for x in results if x.id != r.id]


# --------------------------------------------------------------------------- remote backends


def test_gcloud_backend_against_a_stand_in(study, tmp_path, monkeypatch):
    home = tmp_path / "tpu-home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "gcloud", GCLOUD)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STANDIN_LOG", str(calls))
    monkeypatch.setenv("STANDIN_HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "gcloud", host="my-tpu", zone="us-west4-a"),
                             options={"project": "p1"})
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "t").id)
    assert job.state is JobState.FINISHED and job.exit_code == 0, (job.error, (job.dir / "runner.log").read_text())
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert all(a[:4] == ["gcloud", "compute", "tpus", "tpu-vm"] for a in argvs)
    ssh_calls = [a for a in argvs if a[4] == "ssh"]
    assert all(a[5] == "my-tpu" and "--zone" in a and "us-west4-a" in a and "--worker=all" in a
               and "--project" in a for a in ssh_calls)
    assert any(a[4] == "scp" for a in argvs)
    assert "step 5/5" in job.log_path.read_text()
    assert not list(home.glob(".workbench-jobs/*"))  # cleaned up remotely


def test_skypilot_backend_against_a_stand_in(study, tmp_path, monkeypatch):
    home = tmp_path / "sky-home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "sky", SKY)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("STANDIN_LOG", str(calls))
    monkeypatch.setenv("STANDIN_HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = jobs.spec_for(study.db, attempt(study, "toy", 1), "skypilot", host="wb-cluster",
                         options={"accelerators": "tpu-v5e-8", "down": True})
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "t").id)
    assert job.state is JobState.FINISHED and job.exit_code == 0, (job.error, (job.dir / "runner.log").read_text())
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert argvs[0][:4] == ["sky", "launch", "-y", "-c"] and argvs[0][4] == "wb-cluster"
    assert argvs[-1] == ["sky", "down", "-y", "wb-cluster"]
    task = json.loads((job.dir / "task.yaml").read_text())
    assert task["resources"] == {"accelerators": "tpu-v5e-8"} and task["workdir"].endswith("src")
    assert "step 5/5" in job.log_path.read_text()


# --------------------------------------------------------------------------- ssh against a real sshd


@pytest.fixture
def sshd(tmp_path):
    sshd_bin = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
    if sshd_bin is None:
        pytest.skip("no OpenSSH server here (Debian: apt-get install openssh-server; .ci/run installs it)")
    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    auth = keys / "authorized_keys"
    auth.write_text((keys / "user.pub").read_text())
    auth.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = keys / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\nAuthorizedKeysFile {auth}\n"
        f"PidFile {keys / 'sshd.pid'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPermitUserEnvironment no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([sshd_bin, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    client_config = keys / "config"
    client_config.write_text(
        f"Host tpu-vm-test\n  HostName 127.0.0.1\n  Port {port}\n  User {os.environ.get('USER') or 'root'}\n"
        f"  IdentityFile {keys / 'user'}\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
    )
    ok = False
    for _ in range(50):
        if subprocess.run(["ssh", "-F", str(client_config), "tpu-vm-test", "true"], capture_output=True).returncode == 0:
            ok = True
            break
        time.sleep(0.1)
    if not ok:
        proc.kill()
        pytest.skip("sshd did not accept the test key here: " + proc.stderr.read1(4000).decode(errors="replace"))
    yield client_config
    proc.terminate()
    proc.wait(10)


def test_ssh_backend_against_a_real_sshd(study, sshd):
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "ssh", host="tpu-vm-test"),
                             options={"ssh_options": ["-F", str(sshd)]})
    job = run_job(study.path, jobs.create_job(study.db, study.path, spec, "t").id)
    assert job.state is JobState.FINISHED and job.exit_code == 0, (job.error, (job.dir / "runner.log").read_text())
    log = job.log_path.read_text()
    assert "step 5/5" in log and "cwd-marker" in log and "@@workbench-probe-file" not in log
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.rerun_of == attempt(study, "toy", 1).id
    remote = subprocess.run(["ssh", "-F", str(sshd), "tpu-vm-test", "ls -a ~/.workbench-jobs 2>/dev/null"],
                            capture_output=True, text=True).stdout.split()
    assert [n for n in remote if n.startswith("job-")] == []


def test_ssh_cancel_stops_the_remote_process(study, sshd):
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "ssh", host="tpu-vm-test"),
                             options={"ssh_options": ["-F", str(sshd)]}, argv=("python3", "train.py", "400"),
                             env={"DELAY": "0.05"})
    job = jobs.launch(study, spec, "t")
    wait_for(lambda: b"step 3/400" in (job.log_path.read_bytes() if job.log_path.exists() else b""))
    jobs.cancel(job)
    job = jobs.wait(study.db, job.id, timeout=60)
    assert job.state is JobState.CANCELLED
    marker = f"WORKBENCH_JOB_ID={job.id}\0".encode()

    def running() -> list[str]:
        out = []
        for env in Path("/proc").glob("[0-9]*/environ"):
            try:
                if marker in env.read_bytes() and b"State:\tZ" not in (env.parent / "status").read_bytes():
                    out.append(env.parent.name)
            except OSError:
                pass
        return out

    wait_for(lambda: not running(), timeout=15)
