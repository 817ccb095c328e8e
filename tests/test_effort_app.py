"""Human effort through the app, driven by Pilot: every kind of record, checked in the database."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import build, screen_text, settle
from test_cli import workbench
from test_effort import _verdicts
from textual.widgets import Input, Select

from screens.app import WorkbenchApp
from screens.forms import BudgetForm, DecisionForm, InterventionForm, OverrideForm
from screens.migration import MigrationScreen
from screens.widgets.effort_panel import EffortPanel
from storage import queries
from storage.database import open_study

SIZE = (120, 40)


@pytest.fixture
def db_path(small_bundle: BundleBuilder, tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    return build(small_bundle, tmp_path)


def rows(path: Path, sql: str, params: list | None = None) -> list[dict]:
    study = open_study(path)
    try:
        return list(study.db.query(sql, params or []))
    finally:
        study.close()


async def until(pilot, check, timeout: float = 5.0) -> None:
    """Wait (polling the app) until `check()` holds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        assert loop.time() < end, "timed out"
        await pilot.pause(0.05)


async def open_migration(pilot, slug: str = "mlp-xla", row: int = 0) -> MigrationScreen:
    await settle(pilot)
    pilot.app.open_migration(slug)
    await until(pilot, lambda: isinstance(pilot.app.screen, MigrationScreen))
    await settle(pilot)
    for _ in range(row):
        await pilot.press("j")
    await pilot.pause()
    return pilot.app.screen


async def open_form(pilot, key: str, kind: type):
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, kind))
    await settle(pilot)
    return pilot.app.screen


async def type_into(pilot, form, selector: str, value: str) -> None:
    form.query_one(selector, Input).focus()
    await pilot.pause()
    await pilot.press(*value) if value else None
    await pilot.pause()


async def save(pilot, form) -> None:
    await pilot.press("ctrl+s")
    await settle(pilot)


def error_text(form) -> str:
    error = form.query_one("#form-error")
    return error.render().plain if error.display else ""


async def test_intervention_bad_input_is_explained_and_kept_then_saved(db_path: Path) -> None:
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot, row=1)  # attempt #1
        form = await open_form(pilot, "i", InterventionForm)
        await save(pilot, form)
        assert app.screen is form and "kind: choose one of" in error_text(form)
        form.query_one("#intervention-kind", Select).value = "fix_environment"
        await type_into(pilot, form, "#intervention-minutes", "-5")
        await type_into(pilot, form, "#intervention-note", "pinned torch_xla")
        await save(pilot, form)
        assert app.screen is form and "minutes: must not be negative" in error_text(form)
        assert form.query_one("#intervention-note", Input).value == "pinned torch_xla"  # kept
        minutes = form.query_one("#intervention-minutes", Input)
        minutes.value = "99999"
        await save(pilot, form)
        assert "more than a day" in error_text(form)
        minutes.value = "1:30"
        await save(pilot, form)
        assert app.screen is screen and form.saved_id is not None
        await until(pilot, lambda: "pinned torch_xla" in screen_text(app))
        assert "Interventions on this migration: 1, 90 min" in screen_text(app)
    (row,) = rows(db_path, "SELECT * FROM intervention")
    attempt = rows(db_path, "SELECT id FROM attempt WHERE seq = 1")[0]["id"]
    assert (row["kind"], row["minutes"], row["note"], row["reviewer"], row["attempt_id"]) == (
        "fix_environment", 90.0, "pinned torch_xla", "ana", attempt)
    assert row["at"].startswith("20")


async def test_a_correction_through_the_app_keeps_the_original(db_path: Path) -> None:
    workbench("intervene", str(db_path), "mlp-xla", "--kind", "hint", "--minutes", "10", "--note", "first")
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot)
        form = await open_form(pilot, "i", InterventionForm)
        form.query_one("#intervention-corrects", Select).value = 1
        await pilot.pause()
        assert form.query_one("#intervention-kind", Select).value == "hint"  # started from the original
        form.query_one("#intervention-minutes", Input).value = "25"
        await save(pilot, form)
        assert form.saved_id == 2
        await until(pilot, lambda: "(corrected by #2)" in screen_text(app))
    assert [(r["minutes"], r["corrects"]) for r in rows(db_path, "SELECT * FROM intervention ORDER BY id")] == [
        (10.0, None), (25.0, 1)]


async def test_decisions_through_the_app_with_figures_and_status(db_path: Path) -> None:
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot)
        form = await open_form(pilot, "x", DecisionForm)
        assert "The rules suggest: CONTINUE" in screen_text(app)
        await save(pilot, form)
        assert app.screen is form
        assert "reason: the rules suggest continue; say why you stop instead" in error_text(form)
        await type_into(pilot, form, "#decision-reason", "no progress in 3 tries")
        await save(pilot, form)
        assert app.screen is screen
        form = await open_form(pilot, "C", DecisionForm)
        await save(pilot, form)  # with the suggestion: no reason needed
        assert app.screen is screen and form.saved_id is not None
    made = rows(db_path, "SELECT * FROM decision ORDER BY id")
    assert [(d["kind"], d["suggested"], d["reason"], d["reviewer"]) for d in made] == [
        ("stop", "continue", "no progress in 3 tries", "ana"), ("continue", "continue", "", "ana")]
    figures = json.loads(made[0]["figures"])
    assert figures["attempts"] == 2 and figures["budget_attempts"] == 10 and figures["acceptance_level"] == 4
    assert rows(db_path, "SELECT status FROM migration WHERE slug = 'mlp-xla'")[0]["status"] == "in_progress"
    updates = rows(db_path, "SELECT detail FROM audit WHERE entity = 'migration' AND action = 'update'")
    assert [json.loads(u["detail"])["status"] for u in updates] == ["stopped", "in_progress"]


async def test_accept_and_override_through_the_app(db_path: Path) -> None:
    study = open_study(db_path)
    m = queries.get_migration(study.db, "mlp-xla")
    a2 = queries.attempt_id_by_seq(study.db, m.id, 2)
    _verdicts(study.db, a2, ["pass", "pass", "pass", "fail", "fail"])
    study.db.conn.commit()
    study.close()
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot, row=2)  # attempt #2
        form = await open_form(pilot, "o", OverrideForm)
        assert form.query_one("#override-level", Select).value == 4  # opens on the first level not passed
        form.query_one("#override-outcome", Select).value = "pass"
        await pilot.pause()
        assert "verifier: fail" in screen_text(app)
        await save(pilot, form)
        assert "justification: say why" in error_text(form)
        await type_into(pilot, form, "#override-justification", "eval_accuracy is in the log")
        await save(pilot, form)
        assert app.screen is screen
        await until(pilot, lambda: "suggests ACCEPT" in screen.query_one(EffortPanel).render().plain)
        form = await open_form(pilot, "a", DecisionForm)
        await save(pilot, form)
        assert app.screen is screen
    (override,) = rows(db_path, "SELECT * FROM verdict_override")
    assert (override["outcome"], override["justification"], override["reviewer"]) == (
        "pass", "eval_accuracy is in the log", "ana")
    automated = rows(db_path, "SELECT outcome FROM verdict WHERE id = ?", [override["verdict_id"]])
    assert automated == [{"outcome": "fail"}]  # the automated verdict stays
    (decision,) = rows(db_path, "SELECT * FROM decision")
    assert decision["kind"] == "accept" and json.loads(decision["figures"])["highest_level"] == 4
    assert rows(db_path, "SELECT status FROM migration WHERE slug = 'mlp-xla'")[0]["status"] == "accepted"


async def test_budgets_edited_in_the_app(db_path: Path) -> None:
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot)
        form = await open_form(pilot, "B", BudgetForm)
        assert form.query_one("#budget-compute-dollars", Input).value == "50"
        await save(pilot, form)  # nothing edited: no record of a change that is not one
        assert "nothing changed" in error_text(form) and app.screen is form
        form.query_one("#budget-staff-hours", Input).value = "-5"
        await save(pilot, form)
        assert "must be 0 or more" in error_text(form)
        form.query_one("#budget-staff-hours", Input).value = "6"
        form.query_one("#budget-attempts", Input).value = "2.5"
        await save(pilot, form)
        assert "attempts: '2.5' is not a whole number" in error_text(form)
        form.query_one("#budget-attempts", Input).value = "2"
        form.query_one("#budget-staff-hours", Input).value = "6"
        form.query_one("#budget-level", Select).value = 5
        await save(pilot, form)
        assert app.screen is screen
        await until(pilot, lambda: "attempts 2 of 2" in screen.query_one(EffortPanel).render().plain)
        assert "suggests STOP" in screen.query_one(EffortPanel).render().plain
    (change,) = rows(db_path, "SELECT * FROM budget_change")
    assert (change["compute_dollars"], change["staff_hours"], change["attempts"], change["calendar_days"],
            change["acceptance_level"], change["reviewer"]) == (50.0, 6.0, 2, None, 5, "ana")


async def test_review_time_counts_input_and_not_idle_terminals(db_path: Path) -> None:
    now = [0.0]
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        app.effort.review.clock = lambda: now[0]
        await open_migration(pilot)
        for t in (10.0, 40.0, 70.0):
            now[0] = t
            await pilot.press("j")
        now[0] = 70.0 + 125  # past the idle gap: the session closes at its last input
        app.effort._poll()
        await settle(pilot)
        assert [r["active_seconds"] for r in rows(db_path, "SELECT * FROM review_session")] == [60.0]
        now[0] = 10_000.0  # one key, then the terminal is left open overnight
        await pilot.press("k")
        now[0] = 10_000.0 + 12 * 3600
        app.effort._poll()
        await settle(pilot)
        now[0] = 50_000.0
        await pilot.press("j")
        now[0] = 50_030.0
        await pilot.press("k")
    # quitting stores the open session
    sessions = rows(db_path, "SELECT * FROM review_session ORDER BY id")
    assert [(s["reviewer"], s["active_seconds"]) for s in sessions] == [("ana", 60.0), ("ana", 30.0)]
    mlp = rows(db_path, "SELECT id FROM migration WHERE slug = 'mlp-xla'")[0]["id"]
    assert {s["migration_id"] for s in sessions} == {mlp}


async def test_another_reviewers_record_shows_within_seconds(db_path: Path) -> None:
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot)
        panel = screen.query_one(EffortPanel)
        await until(pilot, lambda: panel.data is not None)
        result = await asyncio.to_thread(
            workbench, "intervene", str(db_path), "mlp-xla", "--kind", "hint", "--minutes", "3",
            "--note", "from ben's terminal", env={"WORKBENCH_REVIEWER": "ben"})
        assert result.returncode == 0, result.stderr
        await until(pilot, lambda: "from ben's terminal" in panel.render().plain, timeout=5.0)
        assert "by ben" in panel.render().plain


async def test_override_from_the_verdicts_pane_takes_the_highlighted_level(db_path: Path) -> None:
    from screens.attempt import AttemptScreen
    from screens.widgets.verdict_list import VerdictList

    study = open_study(db_path)
    m = queries.get_migration(study.db, "mlp-xla")
    a2 = queries.attempt_id_by_seq(study.db, m.id, 2)
    _verdicts(study.db, a2, ["pass", "pass", "fail", "fail", "fail"])
    study.db.conn.commit()
    study.close()
    app = WorkbenchApp(db_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, row=2)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        attempt_screen = app.screen
        await pilot.press("4")  # the verdicts pane
        await settle(pilot)
        verdicts = attempt_screen.query_one(VerdictList)
        index = next(n for n in range(verdicts.option_count) if verdicts.get_option_at_index(n).id == "level:3")
        verdicts.highlighted = index
        await pilot.pause()
        form = await open_form(pilot, "o", OverrideForm)
        assert form.query_one("#override-level", Select).value == 3
        form.query_one("#override-outcome", Select).value = "pass"
        await type_into(pilot, form, "#override-justification", "ran on the TPU: see probe")
        await save(pilot, form)
        assert app.screen is attempt_screen
        await until(pilot, lambda: "override by" in screen_text(app) or "ana" in screen_text(app))
    (override,) = rows(db_path, "SELECT o.outcome, v.level, v.outcome AS automated FROM verdict_override o"
                                " JOIN verdict v ON v.id = o.verdict_id")
    assert override == {"outcome": "pass", "level": 3, "automated": "fail"}


def test_the_change_watcher_never_creates_a_database(tmp_path: Path) -> None:
    import sqlite3

    from storage.review import ChangeWatcher

    missing = tmp_path / "a dir with spaces" / "nope?.db"
    with pytest.raises(sqlite3.OperationalError):
        ChangeWatcher(missing).changed()
    assert not missing.exists()
