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
