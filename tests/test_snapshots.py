"""Snapshot tests (pytest-textual-snapshot): every review screen at 80x24 and 120x40 on the demo
study, verified once. Review a changed SVG before `pytest --snapshot-update`.

What would move between runs is held still: the clock the effort panel's calendar days count
from, review-time tracking and polling (off), the cursor blink (off) and the workers (awaited).
Timestamps in the demo bundle are fixed; the repositories' SHAs come from the bundle too.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from test_app import settle

from screens.app import WorkbenchApp
from workbench import config

pytest.importorskip("pytest_textual_snapshot")
pytestmark = pytest.mark.skipif(not config.DEMO_BUNDLE.is_dir(), reason="the demo bundle is not generated yet")

SIZES = [(80, 24), (120, 40)]
NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
"""The effort panel's `calendar days` count to this, not to the real now."""


@pytest.fixture
def make_app(demo_db: Path, monkeypatch, tmp_path: Path):
    """The app factory: a still clock, no review-time tracking, no keymap file."""
    import domain.effort

    monkeypatch.setattr(domain.effort, "utcnow", lambda: NOW)
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")

    def factory() -> WorkbenchApp:
        app = WorkbenchApp(demo_db, keymap_path=tmp_path / "no-keymap.toml")
        app.effort.start = lambda: None  # no polling timer, no review sessions from key presses
        app.effort.input = lambda event: None
        return app

    return factory


async def still(pilot) -> None:
    """Workers done, cursors not blinking, no toasts (they time out)."""
    from textual.widgets import Input, TextArea

    await settle(pilot)
    pilot.app.clear_notifications()
    for screen in pilot.app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False
        for widget in screen.query(TextArea):
            widget.cursor_blink = False
    await settle(pilot)


def keys(*presses: str):
    """A `run_before` that presses keys, letting the workers finish after each."""

    async def run(pilot) -> None:
        await settle(pilot)
        for press in presses:
            await pilot.press(press)
            await settle(pilot)
        await still(pilot)

    return run


TO_ATTEMPT = ("j", "enter", "j", "j", "j", "enter")
"""mlp-classifier, attempt #3: the silent numerical mismatch (every pane has something)."""

SCREENS = {
    "study": keys(),
    "migration": keys("j", "enter", "j", "j"),
    "attempt-overview": keys(*TO_ATTEMPT),
    "attempt-diff": keys(*TO_ATTEMPT, "2"),
    "attempt-log": keys(*TO_ATTEMPT, "3", "e"),
    "attempt-verdicts": keys(*TO_ATTEMPT, "4"),
    "attempt-curves": keys(*TO_ATTEMPT, "5"),
    "compare": keys("j", "enter", "j", "j", "c", "j", "j", "c"),
    "help": keys(*TO_ATTEMPT, "question_mark"),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(name: str, size: tuple[int, int], snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=size, run_before=SCREENS[name])
