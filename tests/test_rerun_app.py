"""The re-run launcher and the live job view in the app, on a toy study (a stdlib script)."""

from __future__ import annotations

import time

from tests.rerun_helpers import attempt, study_with_script
from workbench.rerun import jobs
from workbench.rerun.jobs import JobState


async def _until(pilot, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.1)
        if predicate():
            return
    raise AssertionError("timed out")


async def test_r_shows_the_command_in_full_and_runs_only_on_run(tmp_path):
    from textual.widgets import Footer, Log, ProgressBar, Static, TextArea

    def footer_text(screen) -> str:
        footer = screen.query_one(Footer)
        return " ".join(str(key.render()) for key in footer.query("FooterKey"))

    from screens.app import WorkbenchApp
    from screens.rerun import JobScreen, RerunLauncher, open_launcher

    study = study_with_script(tmp_path)
    a = attempt(study, "toy", 1)
    from storage import queries

    migration = queries.get_migration(study.db, "toy")
    study.close()
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause(0.3)
        open_launcher(app.screen, migration, a)
        await pilot.pause(0.3)
        assert isinstance(app.screen, RerunLauncher)
        argv = app.screen.query_one("#rerun-argv", TextArea)
        assert argv.text.splitlines() == ["python3", "train.py", "5"]
        env = app.screen.query_one("#rerun-env", TextArea).text
        assert "CPU_NUM_DEVICES=2" in env and "PJRT_DEVICE=CPU" in env
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, RerunLauncher)
        from storage.database import open_study

        s = open_study(tmp_path / "study.db")
        assert s.db.execute("SELECT COUNT(*) FROM job").fetchone()[0] == 0  # nothing ran
        s.close()
        open_launcher(app.screen, migration, a)
        await pilot.pause(0.3)
        app.screen.query_one("#rerun-argv", TextArea).text = "python3\ntrain.py\n7"
        app.screen.query_one("#rerun-repeat").value = "2"   # two runs in turn: seeds 1 and 2
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: isinstance(app.screen, JobScreen))
        screen = app.screen
        await _until(pilot, lambda: screen.done)
        log = "\n".join(str(line) for line in screen.query_one(Log).lines)
        assert "step 7/7" in log
        status = str(screen.query_one("#job-status", Static).content)
        assert "finished" in status and "new run #2" in status
        await pilot.pause(0.3)
        bar = screen.query_one(ProgressBar)
        assert bar.total is not None and bar.progress == bar.total  # stopped, not animating
        assert "Back" in footer_text(screen) and "Cancel job" not in footer_text(screen)  # nothing to cancel
    s = open_study(tmp_path / "study.db")
    first, second = sorted(jobs.list_jobs(s.db), key=lambda j: j.id)
    second = jobs.wait(s.db, second.id, timeout=60)
    assert first.state is second.state is JobState.FINISHED and first.spec.argv == ("python3", "train.py", "7")
    assert [j.spec.env["WORKBENCH_SEED"] for j in (first, second)] == ["1", "2"] and first.ended_at <= second.started_at
    s.close()


async def test_the_form_shows_each_variable_that_differs_and_records_the_choice(tmp_path):
    """A recorded CPU_NUM_DEVICES=1 is kept over the local backend's 2 and shown with why; using
    the backend's value is a checkbox, and the job records the change."""
    from dataclasses import replace

    from textual.widgets import Checkbox, Static, TextArea

    from screens.app import WorkbenchApp
    from screens.rerun import JobScreen, RerunLauncher, open_launcher
    from storage import queries
    from storage.database import open_study

    study = study_with_script(tmp_path)
    a = attempt(study, "toy", 1)
    migration = queries.get_migration(study.db, "toy")
    study.close()
    recorded = replace(a, command=replace(a.command, env={"CPU_NUM_DEVICES": "1", "SEED": "3"}))
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause(0.3)
        open_launcher(app.screen, migration, a)  # nothing recorded: nothing differs
        await pilot.pause(0.3)
        assert not app.screen.query_one("#rerun-env-defaults", Checkbox).display
        await pilot.press("escape")
        await pilot.pause(0.2)
        open_launcher(app.screen, migration, recorded)
        await pilot.pause(0.3)
        form = app.screen
        assert isinstance(form, RerunLauncher)
        env = form.query_one("#rerun-env", TextArea)
        assert "CPU_NUM_DEVICES=1" in env.text.splitlines() and "PJRT_DEVICE=CPU" in env.text.splitlines()
        shown = str(form.query_one("#rerun-env-differs", Static).render())
        assert "CPU_NUM_DEVICES: recorded 1 (kept); the local backend would set 2" in shown
        assert "stand in for the 2 chips" in shown and "SEED" not in shown
        box = form.query_one("#rerun-env-defaults", Checkbox)
        assert box.display and "CPU_NUM_DEVICES" in str(box.label)
        box.value = True
        await pilot.pause(0.2)
        assert "CPU_NUM_DEVICES=2" in env.text.splitlines() and "SEED=3" in env.text.splitlines()
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: isinstance(app.screen, JobScreen))
        screen = app.screen
        await _until(pilot, lambda: screen.done)
        assert "environment changed: CPU_NUM_DEVICES 1→2" in str(screen.query_one("#job-status", Static).content)
    s = open_study(tmp_path / "study.db")
    job = jobs.list_jobs(s.db)[0]
    assert job.spec.env["CPU_NUM_DEVICES"] == "2" and job.spec.env["SEED"] == "3"
    [change] = job.spec.options["env_changes"]
    assert change["name"] == "CPU_NUM_DEVICES" and (change["recorded"], change["used"]) == ("1", "2")
    assert change["why"].startswith("backend default chosen by the reviewer: XLA:CPU devices stand in")
    s.close()


def test_the_recorded_environment_wins_and_edits_are_named():
    recorded = {"CPU_NUM_DEVICES": "1", "PJRT_DEVICE": "CPU"}
    env, differ = jobs.environment(recorded, "local", 4)
    assert env["CPU_NUM_DEVICES"] == "1" and [d.name for d in differ] == ["CPU_NUM_DEVICES"]
    assert jobs.env_changes(recorded, env, differ) == []
    edited = {**env, "PJRT_DEVICE": "TPU"}
    assert jobs.env_changes(recorded, edited, differ) == [
        {"name": "PJRT_DEVICE", "recorded": "CPU", "used": "TPU", "why": "edited by the reviewer"}]
