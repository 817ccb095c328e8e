"""Keys typed ahead across screen changes, as a terminal over SSH delivers them (all read at
once), and long text typed without bracketed paste (screens/keygate.py, issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app import settle, table
from test_lists import arrive_together, until

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.migration import MigrationScreen
from screens.typeahead import FULL_QUIET_S, NOTE_MAX, Input


def row_keys(app: WorkbenchApp) -> list[str]:
    t = table(app)
    return [t.coordinate_to_cell_key((row, 0)).row_key.value or "" for row in range(t.row_count)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_enter_enter_in_one_burst_opens_the_first_attempt_of_the_first_migration(
        demo_db: Path, size: tuple[int, int]) -> None:
    """The second enter reaches the migration screen the first opened, once it has its rows: it
    used to reach the study's list, open the migration again and close the first while it was
    being built (NoMatches 'HeaderTitle', the app gone)."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        first_slug = row_keys(app)[0]
        arrive_together(app, "\r\r")
        await settle(pilot)
        assert [type(s).__name__ for s in app.screen_stack] == ["StudyScreen", "MigrationScreen", "AttemptScreen"]
        migration = app.screen_stack[1]
        assert isinstance(migration, MigrationScreen) and migration.migration.slug == first_slug
        attempts = migration.query_one("#attempts")
        first = attempts.coordinate_to_cell_key((0, 0)).row_key.value
        assert str(app.screen.summary.attempt.id) == first


async def test_a_filter_typed_ahead_then_enter_opens_a_row_of_the_filtered_list(demo_db: Path) -> None:
    """`/mlp`, enter, enter: the second enter opens the one migration the filter left (it was
    lost: it reached the filter line, or the list while it was read again)."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        arrive_together(app, "/mlp\r\r")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen) and app.screen.migration.slug == "mlp-classifier"


async def test_a_key_after_enter_reaches_the_attempt_screen_enter_opened(demo_db: Path) -> None:
    """`j enter 3` on a migration's list: the second attempt opens on its log (the `3` reached the
    list under it, before the attempt screen existed)."""
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        second = row_keys(app)[1]
        arrive_together(app, "j\r3")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen) and str(app.screen.summary.attempt.id) == second
        assert app.screen.query_one("#log-view").has_focus
        arrive_together(app, "q\r")  # back to the list, and open the same row again
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen) and str(app.screen.summary.attempt.id) == second


async def judge_note(app: WorkbenchApp, pilot) -> Input:
    """The judge form's note line, focused, on the demo's second attempt (the first is the reference).
    Each list is waited for: these tests are about the note, not keys typed ahead (tested above)."""
    await until(pilot, lambda: table(app).row_count > 0)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, MigrationScreen) and table(app).row_count > 1)
    await pilot.press("j", "enter")
    await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
    await settle(pilot)
    await pilot.press("J")
    await settle(pilot)
    note = app.screen.query_one("#judge-note", Input)
    note.focus()
    await settle(pilot)
    return note


async def test_a_long_note_typed_key_by_key_ends_capped_with_a_message(demo_db: Path) -> None:
    """60 KB of keys in one burst (a terminal that does not bracket a paste): the note holds its
    first NOTE_MAX characters, in order, and a toast says what was left out."""
    words = "the loss went flat at step 300 (lr 3e-4); p f u / ? q J. "
    typed = (words * (60_000 // len(words) + 1))[:60_000]
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        note = await judge_note(app, pilot)
        arrive_together(app, typed)
        await settle(pilot)
        assert note.value == typed[:NOTE_MAX] and note.has_focus
        await pilot.pause(FULL_QUIET_S * 2)  # said once the keys stop
        said = [n.message for n in app._notifications]
        assert any(f"at most {NOTE_MAX:,} characters" in m and "50,000 characters were left out" in m for m in said)


async def test_a_note_is_capped_as_typed_and_as_pasted(demo_db: Path) -> None:
    """Past the cap a key is refused with the message (not only the bell), and a paste keeps
    what fits (Textual's Input refused the whole paste)."""
    from textual import events

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        note = await judge_note(app, pilot)
        note.post_message(events.Paste("y" * (NOTE_MAX - 3) + "\nsecond line"))
        await settle(pilot)
        assert note.value == "y" * (NOTE_MAX - 3)
        await pilot.press("a", "b", "c", "d")
        await settle(pilot)
        assert note.value == "y" * (NOTE_MAX - 3) + "abc"
        await pilot.pause(FULL_QUIET_S * 2)
        await pilot.press("e", "f")
        await pilot.pause(FULL_QUIET_S * 2)
        said = [n.message for n in app._notifications]
        assert said == [f"This box holds at most {NOTE_MAX:,} characters: 1 character was left out",
                        f"This box holds at most {NOTE_MAX:,} characters: 2 characters were left out"]


CRASHING = """
import sys
from screens.study import StudyScreen

def crash(self):
    raise RuntimeError("a bug the test put in the first page's handler")

StudyScreen._show_counts = crash  # the app's own code path from here on, in a real terminal
from cli.main import main
main(["open", sys.argv[1]], prog_name="workbench")
"""


def test_a_crash_exits_non_zero_and_names_the_file_that_keeps_its_traceback(demo_db: Path, tmp_path: Path) -> None:
    """The app run by `workbench open` in a real pseudo-terminal, with an error in a handler: it
    exited 0 and its traceback went with the terminal's screen. Now it exits 1 and says where the
    traceback is kept (the user state dir)."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import subprocess
    import sys
    import termios
    import time

    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": str(root), "TERM": "xterm-256color"}
    process = subprocess.Popen([sys.executable, "-c", CRASHING, str(demo_db)], stdin=terminal, stdout=terminal,
                               stderr=terminal, env=env, cwd=tmp_path)
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert process.wait(timeout=30) == 1
    said = re.search(r"its traceback is in (\S+\.txt)", shown.decode(errors="replace"))
    assert said, shown[-2000:]
    kept = Path(said.group(1))
    assert kept.parent == tmp_path / "state" / "workbench" / "crashes"
    text = kept.read_text()
    assert f"study: {demo_db}" in text and "Traceback (most recent call last)" in text
    assert "RuntimeError: a bug the test put in the first page's handler" in text


async def test_the_help_scrolls_with_j_k_g_and_G(demo_db: Path) -> None:
    """At 80x24 the attempt screen's help is longer than the box: j/k move it a line, G to the
    end, g to the top (it ignored them)."""
    from textual.containers import VerticalScroll

    from screens.help import HelpScreen

    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one(VerticalScroll)
        assert box.max_scroll_y > 2 and box.scroll_y == 0
        await pilot.press("j", "j")
        assert box.scroll_y == 2
        await pilot.press("k")
        assert box.scroll_y == 1
        await pilot.press("G")
        assert box.scroll_y == box.max_scroll_y
        await pilot.press("g")
        assert box.scroll_y == 0
        await pilot.press("k")
        assert box.scroll_y == 0 and isinstance(app.screen, HelpScreen)


async def test_the_log_pane_scrolls_sideways_with_h_and_l(bundle, tmp_path: Path) -> None:
    """A log line wider than the pane: l shows more of it, h goes back, never left of the start."""
    from test_app import build

    from screens.widgets.log_view import LogView

    folder, shas = bundle.add_migration("wide", commits=2)
    (folder / "logs" / "1.log").write_text("step 1 loss 0.5 " + "x" * 400 + " END\nstep 2 loss 0.4\n")
    bundle.write_attempts(folder, [bundle.attempt(1, shas[1])])
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key in ("enter", "enter", "3"):
            await pilot.press(key)
            await settle(pilot)
        log = app.screen.query_one(LogView)
        assert log.has_focus and log.max_scroll_x > 100 and log.scroll_x == 0
        await pilot.press("l", "l")
        step = log.scroll_x // 2
        assert step >= 8 and log.scroll_x == 2 * step
        await pilot.press("h")
        assert log.scroll_x == step
        await pilot.press("h", "h", "left")
        assert log.scroll_x == 0


async def test_lines_typed_together_into_a_text_area_go_in_as_one_edit_in_order(demo_db: Path) -> None:
    """The re-run dialog's environment box: enter is a new line, the characters around it land in
    order, and the keys read behind the first are one edit (one Changed), not one per key."""
    from textual.widgets import TextArea

    changed: list[object] = []
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40), message_hook=changed.append) as pilot:
        await settle(pilot)
        for keys in (["enter"], ["j", "enter"], ["r"]):
            await pilot.press(*keys)
            await settle(pilot)
        env = app.screen.query_one("#rerun-env", TextArea)
        env.focus()
        env.move_cursor(env.document.end)
        await settle(pilot)
        before = env.text
        changed.clear()
        arrive_together(app, "\rFOO=1\rBAR=two words")
        await settle(pilot)
        assert env.text == before + "\nFOO=1\nBAR=two words"
        # the first key goes in at once, the 19 read behind it as one edit (a Changed is seen at each hop up)
        assert len({id(m) for m in changed if isinstance(m, TextArea.Changed)}) == 2


async def test_an_enter_sent_at_start_opens_the_first_migration(demo_db: Path) -> None:
    """An Enter read before the study list has begun reading its first page (sent as the app
    starts, before its screen is mounted) waits for that page, then opens its first row: it went
    to the empty list and was lost, since the gate held keys only once the list said it was
    reading (a race that lost the Enter under load)."""
    from test_lists import arrive_together

    app = WorkbenchApp(demo_db)
    arrive_together(app, "\r")  # in the app's queue ahead of its screen's mount
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen), [type(s).__name__ for s in app.screen_stack]
        study = app.screen_stack[0].query_one("#migrations")
        assert app.screen.migration.slug == study.coordinate_to_cell_key((0, 0)).row_key.value
