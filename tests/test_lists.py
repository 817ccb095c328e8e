"""The study and migration lists at 80x24: ladder headers, verify from the app, filters, the
empty study and its forms, live refresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import screen_text, settle

from screens.app import WorkbenchApp
from screens.migration import MigrationScreen
from screens.presenters import render
from storage.database import open_study
from storage.review import LadderCounts, ladder_counts
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE


@pytest.fixture
def unverified(tmp_path: Path) -> Path:
    """The demo bundle imported, nothing verified yet."""
    study = open_study(tmp_path / "fresh.db", create=True)
    assert not import_bundle(study, DEMO_BUNDLE, "ana").problems
    study.close()
    return tmp_path / "fresh.db"


def test_ladder_counts_group_verified_attempts_by_highest_level(demo_db: Path) -> None:
    db = open_study(demo_db).db
    counts = ladder_counts(db)
    assert counts.levels == {0: 1, 1: 1, 2: 2, 4: 2} and counts.unverified == 0
    assert counts.failed == 6 and counts.judged == 6
    one = ladder_counts(db, 1)
    assert one.attempts == sum(one.levels.values()) < counts.attempts


async def test_headers_show_the_ladder(demo_db: Path) -> None:
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "L0 " in text and "L5 " in text and "0 unverified" in text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        header = str(app.screen.query_one("#migration-header").render())
        assert "unverified" in header and "failed " in header


def test_unverified_attempts_never_read_as_failed_none() -> None:
    totals = {"migrations": 1, "attempts": 5, "failed": 0, "silent": 0, "over_claims": 0,
              "interventions": 0}
    shown = render.study_totals(totals, LadderCounts({}, 5, 0, 0)).plain
    assert "failed 0/5" not in shown and "5 unverified" in shown and "nothing verified" in shown


async def test_verify_from_the_study_migration_and_attempt_screens(demo_db: Path) -> None:
    from screens.attempt import AttemptScreen
    from screens.verifying import VerifyProgress

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "V Verify" in screen_text(app)
        await pilot.press("V")
        assert isinstance(app.verifying, VerifyProgress)  # the progress dialog was shown
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert not isinstance(app.screen, VerifyProgress)  # done: the dialog went
        assert app.verifying is not None and app.verifying.progress == (6, 6, "done")
        toasts = [n.message for n in app._notifications]
        assert any("Verified the whole study: 6 attempt(s)" in t for t in toasts)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        await pilot.press("V")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        toasts = [n.message for n in app._notifications]
        assert any("Verified bow-classifier #1: 1 attempt(s)" in t for t in toasts)


async def test_verify_on_the_migration_screen_fills_the_ladder(unverified: Path) -> None:
    app = WorkbenchApp(unverified)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "6 unverified" in text and "failed 0/" not in text
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        header = app.screen.query_one("#migration-header")
        assert "4 unverified" in str(header.render())
        await pilot.press("V")
        await app.workers.wait_for_complete()
        await settle(pilot)
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert "0 unverified" in str(header.render()) and "failed 4/4" in str(header.render())
        assert "✓✓✓✓✗" in screen_text(app)  # the rows were read again in place
        toasts = [n.message for n in app._notifications]
        assert any("Verified mlp-classifier: 4 attempt(s), 4 with new verdicts" in t for t in toasts)
