"""`workbench verify --rerun-unknown`: an attempt whose level 3 is unknown is re-run with the
probe on the local backend (a tiny real script, a real runner process), and the CLI says which
job it started."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from domain.models import Outcome
from storage import queries
from tests.rerun_helpers import study_with_script
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_REVIEWER": "ana", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_rerun_unknown_starts_a_probe_rerun_of_each_unknown_level3(tmp_path: Path):
    study = study_with_script(tmp_path)
    path = str(study.path)
    refused = _cli("verify", path, "--rerun-unknown")
    assert refused.returncode != 0 and "--rerun-unknown needs --backend" in refused.stderr
    done = _cli("verify", path, "--rerun-unknown", "--backend", "local", "--chips", "1", "--yes")
    assert done.returncode == 0, done.stderr
    toy = queries.get_migration(study.db, "toy")
    attempt_id = queries.attempt_id_by_seq(study.db, toy.id, 1)
    assert queries.verdicts(study.db, attempt_id)[2].effective is Outcome.UNKNOWN
    started = re.findall(r"job (\d+) started for toy #1", done.stderr)
    assert len(started) == 1, done.stderr
    assert "verified 1 of 1 attempts" in done.stderr
    job = jobs.wait(study.db, int(started[0]), timeout=60)
    assert job.state is JobState.FINISHED and job.spec.attempt_id == attempt_id and job.spec.chips == 1
    new = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert new.source.value == "rerun" and queries.verdicts(study.db, new.id)
    # nothing unknown is left to re-run among the agent's attempts but the same one; re-runs are never re-run
    again = _cli("verify", path, "--rerun-unknown", "--backend", "local", "--chips", "1", "--yes")
    assert again.returncode == 0, again.stderr
    assert f"for toy #{new.seq}" not in again.stderr
    for job_id in re.findall(r"job (\d+) started", again.stderr):
        jobs.wait(study.db, int(job_id), timeout=60)
    study.close()


def test_attempts_without_a_trace_are_offered_for_a_rerun_too(tmp_path: Path):
    """An attempt whose level 3 is known but that has no trace (no probe report of its own or of a
    re-run) is offered; its re-run's trace answers it; a re-run made by an older probe is offered."""
    from storage import records
    from workbench.verify import verify_study
    from workbench.verify.unknown import unknown_at_level3, unknown_in

    study = study_with_script(tmp_path)
    verify_study(study.db, "ana")
    toy = queries.get_migration(study.db, "toy")
    attempt = queries.attempt_summary(study.db, queries.attempt_id_by_seq(study.db, toy.id, 1)).attempt
    level3 = queries.verdicts(study.db, attempt.id)[2]
    records.add_verdict_override(study.db, verdict_id=level3.id, outcome=Outcome.PASS,
                                 justification="ran on 2 chips: the reviewer saw the console", reviewer="ana")
    assert queries.verdicts(study.db, attempt.id)[2].effective is Outcome.PASS
    assert [(slug, a.seq) for slug, a in unknown_in(study.db)] == [("toy", 1)]   # no trace
    spec = jobs.spec_for(study.db, attempt, "local", chips=1)
    job = jobs.wait(study.db, jobs.launch(study, spec, "ana").id, timeout=60)
    assert job.state is JobState.FINISHED
    rerun = queries.attempt_summary(study.db, job.result_attempt_id).attempt
    assert queries.probe_reports(study.db, rerun.id)   # the current probe's report: a trace
    assert unknown_at_level3(study.db, [attempt, rerun]) == []
    # as an older probe (version 1, before the trace) would have written it
    study.db.execute("UPDATE probe_report SET data = json_set(data, '$.probe_version', 1) WHERE attempt_id = ?",
                     [rerun.id])
    assert [a.seq for a in unknown_at_level3(study.db, [attempt, rerun])] == [1, rerun.seq]
    study.close()


def test_changed_lists_only_attempts_verified_again(tmp_path: Path):
    import json

    study = study_with_script(tmp_path)
    path = str(study.path)
    first = _cli("verify", path, "--changed", "--json")
    assert first.returncode == 0 and [r["seq"] for r in json.loads(first.stdout)] == [1]
    again = _cli("verify", path, "--changed", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == []
    assert "verified 0 of 1 attempts (1 unchanged)" in again.stderr
    assert [r["changed"] for r in json.loads(_cli("verify", path, "--json").stdout)] == [False]
    study.close()


async def test_u_in_the_app_reruns_every_unknown_level3_and_follows_the_jobs(tmp_path: Path):
    """`U` on the study lists each attempt whose level 3 is unknown with its command, runs nothing
    until Run, then follows the jobs (queued to done) on one screen; it is in the palette too."""
    from textual.widgets import Button, DataTable, Input, Static

    from screens.app import WorkbenchApp
    from screens.rerun import JobScreen
    from screens.rerun_unknown import JobsScreen, RerunUnknownDialog
    from tests.test_app import screen_text, settle
    from workbench.verify import verify_study

    study = study_with_script(tmp_path)
    verify_study(study.db, "ana")
    toy = queries.get_migration(study.db, "toy")
    attempt_id = queries.attempt_id_by_seq(study.db, toy.id, 1)
    assert queries.verdicts(study.db, attempt_id)[2].effective is Outcome.UNKNOWN
    study.close()
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"unknown")
        await settle(pilot)
        assert "Re-run unknown L3 (U)" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("U")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, RerunUnknownDialog)
        await _until(pilot, lambda: not dialog.query_one("#unknown-go", Button).disabled)
        listing = str(dialog.query_one("#unknown-list", Static).render())
        assert "1 attempt:" in listing and "toy #1: python3 train.py 5" in listing
        from storage.database import open_study

        s = open_study(tmp_path / "study.db")
        assert s.db.execute("SELECT COUNT(*) FROM job").fetchone()[0] == 0  # nothing runs before Run
        s.close()
        dialog.query_one("#unknown-chips", Input).value = "1"
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: isinstance(app.screen, JobsScreen))
        screen = app.screen
        table = screen.query_one(DataTable)
        await _until(pilot, lambda: table.row_count == 1 and "finished" in str(table.get_row_at(0)[2]))
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[1] == "toy #1" and row[4].startswith("new run #2")
        assert "1 done, 0 running, 0 queued" in str(screen.query_one("#jobs-status", Static).render())
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobScreen)
    s = open_study(tmp_path / "study.db")
    [job] = jobs.list_jobs(s.db)
    assert job.spec.attempt_id == attempt_id and job.spec.chips == 1 and job.state is JobState.FINISHED
    assert queries.attempt_summary(s.db, job.result_attempt_id).attempt.source.value == "rerun"
    s.close()


async def _until(pilot, predicate, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.1)
        if predicate():
            return
    raise AssertionError("timed out")
