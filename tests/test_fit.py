"""What each screen and dialog shows fits the terminal, at 80 and 120 columns (issue 37): the
footer hides keys whole behind a `…`, never cuts one under the palette's key; the Command column
is cut with `…` where the screen ends; no stray glyph in a table's empty space; each dialog shows
its title and its keys at 80x24. Driven by Pilot on a copy of the demo study."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BundleBuilder
from rich.text import Text
from test_app import build, screen_text, settle
from test_effort_app import until
from test_lists import drawn_as_afresh
from textual.geometry import Region
from textual.screen import Screen
from textual.widgets import DataTable, Footer, TextArea
from textual.widgets._footer import FooterKey

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.migration import AttemptTable, MigrationScreen
from screens.rerun import RerunLauncher
from screens.study import StudyScreen

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


SCROLLBAR_GLYPHS = "▉▊▋▌▍▎▏▁▂▃▄▅▆▇█"
"""What a scrollbar's thumb ends are drawn with: in a table's empty space, a stray glyph."""


def table_lines(app: WorkbenchApp, t: DataTable) -> list[str]:
    """The table's lines as the terminal shows them."""
    return screen_text(app).splitlines()[t.region.y : t.region.bottom]


def assert_no_stray_glyph(app: WorkbenchApp) -> None:
    """No table on screen scrolls sideways: the attempt table's Command column ran past the edge,
    and its horizontal scrollbar drew a lone `▉` (80 columns) or `▌` (120) under the rows."""
    for t in app.screen.query(DataTable):
        assert not t.show_horizontal_scrollbar, (t.id, t.virtual_size, t.size)
        assert t.virtual_size.width <= t.scrollable_content_region.width, (t.id, t.virtual_size)
        below = table_lines(app, t)[1 + t.row_count:]
        assert not any(glyph in line for line in below for glyph in SCROLLBAR_GLYPHS), (t.id, below)


def commands_drawn(app: WorkbenchApp) -> list[tuple[str, str]]:
    """Each attempt in view: its whole command, and its Command cell as drawn on its row."""
    t = app.screen.query_one(AttemptTable)
    lines = table_lines(app, t)
    header = lines[0]
    start = header.index("Command") - 1 if "Command" in header else len(header.rstrip())
    out = []
    for row, row_key in enumerate(t.rows):
        y = 1 + row - round(t.scroll_y)
        if 1 <= y < t.size.height:
            whole = app.screen.summaries[row_key.value].attempt.command.display()
            out.append((whole, lines[y][start : t.scrollable_content_region.right].strip()))
    return out


async def test_the_command_column_is_cut_with_an_ellipsis_where_the_screen_ends(demo_db: Path) -> None:
    """Commands are drawn cut with … at the screen's edge (FIXED_WIDTH guessed the other columns'
    width: at 110-120 columns they were clipped at the edge with no …, and a scrollbar glyph sat
    under the rows), whole once widened, also while an attempt was on top; at 80 columns the
    column gives way (the detail shows the command); every width draws what a fresh draw does."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")  # mlp-classifier: the longer commands
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen))
        await settle(pilot)
        t = app.screen.query_one(AttemptTable)
        cut = commands_drawn(app)
        assert any(drawn.endswith("…") for _, drawn in cut), cut
        for whole, drawn in cut:
            assert drawn == whole or (drawn.endswith("…") and whole.startswith(drawn[:-1])), (whole, drawn)
        assert all(len(line.rstrip()) <= 110 for line in table_lines(app, t))
        assert_no_stray_glyph(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await pilot.resize_terminal(220, 30)  # while the attempt is on top
        await settle(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen))
        await settle(pilot)
        assert all(drawn == whole for whole, drawn in commands_drawn(app))
        assert drawn_as_afresh(t)
        for width in (110, 80, 120, 110):
            await pilot.resize_terminal(width, 30)
            await settle(pilot)
            assert_no_stray_glyph(app)
            assert drawn_as_afresh(t), width
            if width == 80:
                assert "Command" not in table_lines(app, t)[0]
        assert commands_drawn(app) == cut


async def test_the_command_column_makes_room_for_the_scrollbar(bundle: BundleBuilder, tmp_path: Path) -> None:
    """With more attempts than rows the vertical scrollbar takes two cells from the Command
    column, not from the screen: no sideways scroll, and each command ends in … at the bar (not
    where a guess of the other columns' width put it)."""
    folder, shas = bundle.add_migration("many", commits=2)
    argv = ["python", "train.py", "--config", "configs/a-rather-long-experiment-name.yaml", "--steps", "4000"]
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1], command={"argv": argv, "cwd": ".", "env": {}})
                                   for seq in range(40)])
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen))
        await settle(pilot)
        t = app.screen.query_one(AttemptTable)
        assert t.show_vertical_scrollbar
        assert_no_stray_glyph(app)
        shown = commands_drawn(app)
        assert len(shown) == t.size.height - 1
        assert all(drawn.endswith("…") and whole.startswith(drawn[:-1]) for whole, drawn in shown), shown
        bar = t.styles.scrollbar_size_vertical
        for line in table_lines(app, t)[1:]:  # the … is the last cell before the padding and the bar
            assert line[: 100 - bar].rstrip().endswith("…") and len(line[: 100 - bar].rstrip()) == 100 - bar - 1, line


DIALOGS = [
    ((), ("e", "N", "question_mark")),
    (("enter",), ("i", "a", "x", "C", "B", "R", "U", "question_mark")),
    (("enter", "j", "enter"), ("J", "r", "b", "o", "i", "question_mark")),
]
"""Where each dialog opens from (keys from the study screen) and the keys that open them."""


def assert_framed(app: WorkbenchApp, where: str) -> None:
    """The dialog's box is on screen whole, with its title on the top border and its keys
    (escape's at least) on the bottom one, as drawn."""
    box = app.screen.children[0]
    title, keys = box.border_title, box.border_subtitle
    assert title and keys and "escape" in keys, (where, title, keys)
    assert Region(0, 0, *app.size).contains_region(box.region), (where, box.region)
    lines = screen_text(app).splitlines()
    assert Text.from_markup(title).plain[:30] in lines[box.region.y], (where, lines[box.region.y])
    assert Text.from_markup(keys).plain in lines[box.region.bottom - 1], (where, lines[box.region.bottom - 1])


async def test_every_dialog_fits_80x24_with_its_title_and_keys(demo_db: Path) -> None:
    """The export dialog had no title and no word of escape; the re-run dialogs said theirs in
    lines that took the room of the fields, and their keys nowhere."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        for path, openers in DIALOGS:
            await settle(pilot)
            for key in path:
                screen = app.screen
                await pilot.press(key)
                if key == "enter":
                    await until(pilot, lambda: app.screen is not screen)
                await settle(pilot)
            base = app.screen
            for key in openers:
                await pilot.press(key)
                await until(pilot, lambda: app.screen is not base)
                await settle(pilot)
                assert_framed(app, f"{type(base).__name__} {key} {type(app.screen).__name__}")
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is base)
            while not isinstance(app.screen, StudyScreen):
                await pilot.press("escape")
                await settle(pilot)


async def test_the_rerun_dialog_shows_the_command_and_its_environment_whole_at_80x24(demo_db: Path) -> None:
    """Both boxes of what will run are on screen as the dialog opens: the command box took 8 rows
    and left the environment box its top border."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen))
        await settle(pilot)
        await pilot.press("j", "enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RerunLauncher))
        await settle(pilot)
        fields = app.screen.query_one("#rerun-fields").region
        for box in ("#rerun-argv", "#rerun-env"):
            area = app.screen.query_one(box, TextArea)
            lines = area.text.splitlines()
            assert lines and area.region.height == len(lines) + 2, (box, area.region)
            assert fields.contains_region(area.region), (box, area.region, fields)
        text = screen_text(app)
        assert "CPU_NUM_DEVICES=4" in text and "PJRT_DEVICE=CPU" in text and "--steps" in text


async def test_a_footer_composes_its_keys_once_for_each_screen_shown(demo_db: Path, monkeypatch) -> None:
    """Opening a migration composed three footers' keys (about 4 ms a key): the study's, which
    nobody saw any more, and the migration's twice, for focus moves among keys it does not show.
    Now each screen shown composes its keys once, and a screen shown again keeps its keys."""
    from screens.widgets.footer import Footer as WorkbenchFooter

    composed: dict[str, int] = {}
    real = WorkbenchFooter.compose

    def counting(self):
        for node in real(self):
            if isinstance(node, FooterKey):
                composed[type(self.screen).__name__] = composed.get(type(self.screen).__name__, 0) + 1
            yield node

    monkeypatch.setattr(WorkbenchFooter, "compose", counting)

    def keys_of(screen: Screen) -> int:
        return len(screen.query_one(WorkbenchFooter).query(FooterKey))

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await footer_fitted(pilot)
        study = app.screen
        composed.clear()
        for key, opens in (("enter", MigrationScreen), ("enter", AttemptScreen)):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, opens))
            await footer_fitted(pilot)
            await pilot.pause(0.3)
            assert composed == {opens.__name__: keys_of(app.screen)}, composed
            composed.clear()
        await pilot.press("right_square_bracket")  # the next attempt: a screen of its own
        await footer_fitted(pilot)
        await pilot.pause(0.3)
        assert composed == {"AttemptScreen": keys_of(app.screen)}, composed
        composed.clear()
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MigrationScreen))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is study)
        assert_whole(await footer_fitted(pilot), "study again")
        assert composed == {}, composed
