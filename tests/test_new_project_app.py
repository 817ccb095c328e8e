"""Issue 38 in the app: decisions name the run decided on (`a` on an attempt's screen records
that attempt, not the migration's latest) and the reason keeps what was typed; the new-migration
form offers `cpu:N` where XLA:CPU stands in for the TPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import build, screen_text, settle
from test_effort_app import open_form, open_migration, rows, save, until

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.forms import DecisionForm

SIZE = (120, 40)


@pytest.fixture
def db_path(small_bundle: BundleBuilder, tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    return build(small_bundle, tmp_path)


async def test_accept_on_an_attempts_screen_records_that_attempt_and_the_reason_typed(db_path: Path) -> None:
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, row=1)  # attempt #1; the latest is the re-run #3
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        form = await open_form(pilot, "a", DecisionForm)
        assert "On attempt mlp-xla #1" in screen_text(app)
        await pilot.press(*"it works")
        await pilot.press("tab")
        await pilot.press(*" on 4 chips")
        await pilot.pause()
        await save(pilot, form)
        await until(pilot, lambda: not isinstance(app.screen, DecisionForm))
    (decision,) = rows(db_path, "SELECT d.kind, d.reason, a.seq FROM decision d JOIN attempt a ON a.id = d.attempt_id")
    assert decision == {"kind": "accept", "reason": "it works on 4 chips", "seq": 1}


async def test_the_migration_forms_target_offers_cpu_n(tmp_path: Path) -> None:
    from textual.widgets import Input

    from screens.setup import NewMigrationForm
    from workbench.studies import init_study

    db = tmp_path / "s.db"
    init_study(db, "My study", {"cpu": 0.05}, slug=None, reviewer="ana")
    app = WorkbenchApp(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        form = await open_form(pilot, "N", NewMigrationForm)
        target = form.query_one("#new-target", Input)
        assert "cpu:4 where XLA:CPU stands in for the TPU" in target.placeholder
        target.focus()
        await pilot.pause()
        await pilot.press("c", "right")  # the suggestion, accepted
        await until(pilot, lambda: target.value == "cpu:4")


async def test_the_migration_form_takes_the_logs_metric_words_and_a_setup(tmp_path: Path) -> None:
    """The form does what `migration add --metric WORDS=NAME --setup` does: the goal given as the
    log writes it resolves through the names typed beside it; a bad mapping is said on the form."""
    from conftest import make_repo
    from test_lists import fill

    from screens.setup import NewMigrationForm
    from storage import queries
    from storage.database import open_study
    from storage.setup import migration_setup
    from workbench.studies import init_study

    db = tmp_path / "s.db"
    init_study(db, "My study", {"cpu": 0.05}, slug=None, reviewer="ana")
    make_repo(tmp_path / "project", [{"train.py": "print('step 1: train loss 2.5, val loss 2.4')\n"}])
    app = WorkbenchApp(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_form(pilot, "N", NewMigrationForm)
        fields = {"#new-slug": "gpt", "#new-repo": str(tmp_path / "project"), "#new-target": "cpu:4",
                  "#new-goal": "val loss", "#new-command": "python train.py", "#new-base": "HEAD",
                  "#new-setup": "python prepare.py", "#new-metrics": "validation"}
        await fill(pilot, fields)
        assert isinstance(app.screen, NewMigrationForm)
        assert "--metric: 'validation' must be WORDS=NAME" in str(app.screen.query_one("#form-error").render())
        await fill(pilot, {"#new-metrics": "val loss=validation_loss ; train loss=train_loss"})
        await until(pilot, lambda: not isinstance(app.screen, NewMigrationForm))
    s = open_study(db)
    try:
        migration = queries.get_migration(s.db, "gpt")
        assert migration.goal.metric == "validation_loss"
        assert queries.verify_settings(s.db, migration.id)["metric_names"] == {
            "val loss": "validation_loss", "train loss": "train_loss"}
        assert migration_setup(s.db, migration.id) == "python prepare.py"
    finally:
        s.close()


async def test_the_launcher_offers_the_migrations_command_takes_typing_and_runs_once(tmp_path: Path) -> None:
    """An attempt recorded without a command gets the migration's; the command box has the focus
    (also after Cancel and r again); Run is off while the pre-flight runs: two presses, one job."""
    import asyncio

    from textual.widgets import Button, Input, TextArea

    from screens.rerun import JobScreen, RerunLauncher, open_launcher
    from storage import queries
    from storage.database import open_study
    from storage.setup import update_migration
    from tests.rerun_helpers import TRAIN, attempt, study_with_script
    from tests.test_target_paths import fake_venv

    slow = fake_venv(tmp_path / "slow-venv")  # its python waits 2 s: the pre-flight takes that long
    python = slow / "bin" / "python"
    python.write_text(python.read_text().replace("echo venv-marker", "sleep 2; echo venv-marker"))
    study = study_with_script(tmp_path, "import torch\n" + TRAIN)
    migration = queries.get_migration(study.db, "toy")
    update_migration(study.db, migration.id, {"command": "python train.py 3"}, "ana")
    study.db.execute("UPDATE attempt SET argv = '[]' WHERE seq = 1")
    study.db.conn.commit()
    a = attempt(study, "toy", 1)
    study.close()
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause(0.3)
        open_launcher(app.screen, migration, a)
        await until(pilot, lambda: isinstance(app.screen, RerunLauncher) and app.screen.query("#rerun-argv"))
        area = app.screen.query_one("#rerun-argv", TextArea)
        await until(pilot, lambda: area.text.splitlines() == ["python", "train.py", "3"])
        assert app.focused is area
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RerunLauncher))
        open_launcher(app.screen, migration, a)
        await until(pilot, lambda: isinstance(app.screen, RerunLauncher) and app.screen.query("#rerun-argv"))
        launcher = app.screen
        area = launcher.query_one("#rerun-argv", TextArea)
        await until(pilot, lambda: area.text.startswith("python"))
        launcher.query_one("#rerun-venv", Input).value = str(slow)
        area.move_cursor(area.document.end)
        await pilot.press("0")  # typed keys reach the command: 3 -> 30
        await until(pilot, lambda: area.text.splitlines()[-1] == "30")
        await pilot.press("ctrl+r")
        assert launcher.query_one("#rerun-go", Button).disabled and "pre-flight" in screen_text(app)
        await pilot.press("ctrl+r")
        launcher.query_one("#rerun-go", Button).press()
        await until(pilot, lambda: isinstance(app.screen, JobScreen), timeout=30)
        await asyncio.sleep(1.0)
    s = open_study(tmp_path / "study.db")
    try:
        assert [j.spec.argv for j in __import__("workbench.rerun.jobs", fromlist=["list_jobs"]).list_jobs(s.db)] == [
            ("python", "train.py", "30")]
    finally:
        s.close()


async def test_a_long_rerun_shows_steps_elapsed_and_an_estimate_from_the_reference(tmp_path: Path) -> None:
    """Its own log format (`step N: train loss X`, no total): the steps seen, and the time left
    from the pace so far and the reference run's 40 steps."""
    from textual.widgets import ProgressBar, Static

    from domain.jobs import progress_text
    from screens.rerun import JobScreen
    from storage.imports import replace_metric_points
    from tests.rerun_helpers import attempt, study_with_script
    from workbench.rerun import jobs

    assert progress_text(10, 40, 20.0, total_from_reference=True) == \
        "step 10 of ~40 (the reference's steps) · about 1 min 00 s left"
    script = ("import time\nfor i in range(1, 41):\n    print(f'step {i}: train loss {1 / i:.3f}', flush=True)\n"
              "    time.sleep(0.15)\n")
    study = study_with_script(tmp_path, script)
    reference = attempt(study, "toy", 0)
    replace_metric_points(study.db, reference.id, [("loss", s, 1.0 / s) for s in range(1, 41)], "t")
    study.db.conn.commit()
    spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"), argv=("python3", "train.py"))
    job = jobs.launch(study, spec, "ana")
    study.close()
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        await app.push_screen(JobScreen(tmp_path / "study.db", job.id))
        screen = app.screen

        def status() -> str:
            return str(screen.query_one("#job-status", Static).content)

        await until(pilot, lambda: "of ~40 (the reference's steps)" in status() and "left" in status(), timeout=30)
        assert screen.query_one(ProgressBar).total == 40
        await until(pilot, lambda: screen.done, timeout=60)


async def test_the_migration_screen_follows_migration_edit_live(db_path: Path) -> None:
    """`workbench migration edit --target` in a shell while the app shows the migration: its
    header shows the new target without a restart."""
    from test_cli import workbench

    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot)
        assert "cpu x 8" not in screen_text(app)
        done = workbench("migration", "edit", str(db_path), "mlp-xla", "--target", "cpu:8", "--title", "Edited live")
        assert done.returncode == 0, done.stderr
        await until(pilot, lambda: screen.migration.target.chips == 8, timeout=15)
        await settle(pilot)
        assert "Edited live" in screen_text(app) and "cpu x 8" in screen_text(app)
