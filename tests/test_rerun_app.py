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
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: isinstance(app.screen, JobScreen))
        screen = app.screen
        await _until(pilot, lambda: screen.done)
        log = "\n".join(str(line) for line in screen.query_one(Log).lines)
        assert "step 7/7" in log
        status = str(screen.query_one("#job-status", Static).content)
        assert "finished" in status and "new attempt #2" in status
        await pilot.pause(0.3)
        bar = screen.query_one(ProgressBar)
        assert bar.total is not None and bar.progress == bar.total  # stopped, not animating
        assert "Back" in footer_text(screen) and "Cancel job" not in footer_text(screen)  # nothing to cancel
    s = open_study(tmp_path / "study.db")
    job = jobs.list_jobs(s.db)[0]
    assert job.state is JobState.FINISHED and job.spec.argv == ("python3", "train.py", "7")
    s.close()
