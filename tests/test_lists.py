"""The study and migration lists at 80x24: ladder headers, verify from the app, filters, the
empty study and its forms, live refresh."""

from __future__ import annotations

from pathlib import Path

from test_app import screen_text, settle

from screens.app import WorkbenchApp
from screens.migration import MigrationScreen
from screens.presenters import render
from storage.database import open_study
from storage.review import LadderCounts, ladder_counts


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
