"""What each screen and dialog shows fits the terminal, at 80 and 120 columns (issue 37): the
footer hides keys whole behind a `…`, never cuts one under the palette's key; the Command column
is cut with `…` where the screen ends; no stray glyph in a table's empty space; each dialog shows
its title and its keys at 80x24. Driven by Pilot on a copy of the demo study."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import settle
from test_effort_app import until
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from screens.app import WorkbenchApp

SIZES = [(80, 24), (120, 40)]


def shown_footer(app: WorkbenchApp) -> Footer:
    """The footer on screen: the top screen's, or (under a dialog) the nearest one's below it."""
    for screen in reversed(app.screen_stack):
        for footer in screen.query(Footer):
            return footer
    raise AssertionError("no footer on screen")


async def footer_fitted(pilot) -> Footer:
    """The footer shown, once it has laid out the keys it composed last."""
    await settle(pilot)
    footer = shown_footer(pilot.app)
    await until(pilot, lambda: not getattr(footer, "_fit_pending", False))
    return footer


def assert_whole(footer: Footer, where: str) -> None:
    """Each key is drawn whole left of the palette's key or hidden; a `…` shows when one is hidden."""
    keys = [k for k in footer.query(FooterKey) if not k.has_class("-command-palette")]
    palette = footer.query_one(".-command-palette").region
    assert palette, where
    drawn = [k for k in keys if k.display]
    assert all(k.region and k.region.right <= palette.x for k in drawn), (
        where, [(k.key_display, k.description, k.region.x, k.region.right) for k in drawn], palette.x)
    more = footer.query_one("#footer-more")
    assert more.display == (len(drawn) < len(keys)), where
    if more.display:
        assert more.region.right <= palette.x, where


# Each step: the keys pressed, and what it opens (None: a pane of the same screen).
WALK: list[tuple[str, ...]] = [
    ("e",), ("N",), ("question_mark",), ("L",), ("Q",), ("A",),
]
IN_MIGRATION = [("i",), ("a",), ("x",), ("C",), ("B",), ("R",), ("U",), ("question_mark",)]
IN_ATTEMPT = [("J",), ("r",), ("b",), ("o",), ("i",), ("question_mark",)]


async def dialogs(pilot, steps: list[tuple[str, ...]], where: str) -> None:
    """Open each dialog or screen, check the footer shown, and go back."""
    app = pilot.app
    for keys in steps:
        base = app.screen
        await pilot.press(*keys)
        await until(pilot, lambda: app.screen is not base)
        assert_whole(await footer_fitted(pilot), f"{where} {keys} {type(app.screen).__name__}")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is base)
        assert_whole(await footer_fitted(pilot), f"{where} back from {keys}")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_footer_hides_keys_whole(demo_db: Path, size: tuple[int, int]) -> None:
    """Under a dialog, or back on a screen, the footer's keys were laid out again after its fit had
    run (no place yet: all taken as fitting), and showed `t▏`, `e ▏` or `n Next fai▏` at 80 columns."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=size) as pilot:
        assert_whole(await footer_fitted(pilot), "study")
        await dialogs(pilot, WALK, "study")
        base: Screen = app.screen
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not base)
        assert_whole(await footer_fitted(pilot), "migration")
        await dialogs(pilot, IN_MIGRATION, "migration")
        migration = app.screen
        await pilot.press("j", "enter")
        await until(pilot, lambda: app.screen is not migration)
        for pane in "12345":
            await pilot.press(pane)
            assert_whole(await footer_fitted(pilot), f"attempt pane {pane}")
        await pilot.press("1")
        await dialogs(pilot, IN_ATTEMPT, "attempt")
        for step in ("right_square_bracket", "left_square_bracket", "n"):
            await pilot.press(step)
            assert_whole(await footer_fitted(pilot), f"attempt after {step}")
        await pilot.resize_terminal(size[0] + 37, size[1])
        assert_whole(await footer_fitted(pilot), "attempt widened")
        await pilot.resize_terminal(*size)
        assert_whole(await footer_fitted(pilot), "attempt narrowed again")
