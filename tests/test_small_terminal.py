"""Made for 80x24 (issue 20): what a reviewer needs is on screen or one key away in a small
terminal. The effort panel scrolls and opens the ledger of every human record; each screen's own
keys lead the footer; dialogs scroll their error and fields into view; a long title takes one line.
All driven by Pilot at 80x24 on real study files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_app import EVIL, EVIL_SHOWN, build, screen_text, settle
from test_cli import workbench
from test_effort import _verdicts
from test_effort_app import open_form, open_migration, until
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.widgets import Footer, Select, TextArea
from textual.widgets._footer import FooterKey

from domain.models import DecisionKind, Outcome
from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.forms import OverrideForm
from screens.ledger import LedgerList, LedgerScreen
from screens.migration import MigrationScreen
from screens.rerun import RerunLauncher
from screens.widgets.effort_panel import EffortBox, EffortPanel
from storage import ledger, queries, records
from storage.database import open_study

SIZE = (80, 24)
INTERVENTIONS = 230
LONG_TITLE = ("Port the mixture-of-experts language model with its custom fused attention kernels, "
              "the data loader and the evaluation harness from eight A100s to a TPU v5e pod slice")
LONG_NOTE = ("restarted the session after the agent looped on the same import error for an hour; "
             "told it to pin torch_xla to the image's version, to stop editing the data loader, and "
             "to run the 40-step smoke test before any full run; it did, and the next attempt ran. "
             "END-OF-NOTE")
SCREEN = Region(0, 0, *SIZE)


@pytest.fixture
def study_path(bundle: BundleBuilder, tmp_path: Path, monkeypatch) -> Path:
    """A migration with a long title, eight attempts and a long history: INTERVENTIONS
    interventions (one with a long note, one corrected), two decisions, an override and a budget
    change."""
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    folder, shas = bundle.add_migration("moe-xla", commits=3, title=LONG_TITLE)
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[min(seq, 2)]) for seq in range(8)])
    path = build(bundle, tmp_path)
    study = open_study(path)
    try:
        db = study.db
        m = queries.get_migration(db, "moe-xla")
        a3 = queries.attempt_id_by_seq(db, m.id, 3)
        _verdicts(db, a3, ["pass", "pass", "fail", "fail", "fail"])
        for n in range(INTERVENTIONS - 2):
            records.record_intervention(db, migration_id=m.id, kind="hint", minutes=2, note=f"hint {n}",
                                        reviewer="ana", attempt_id=a3 if n % 50 == 0 else None)
        first = records.record_intervention(db, migration_id=m.id, kind="fix_environment", minutes=30,
                                            note=LONG_NOTE, reviewer="ben")
        records.record_intervention(db, migration_id=m.id, kind="fix_environment", minutes=45,
                                    note="it took longer", reviewer="ben", corrects=first)
        records.record_decision(db, migration_id=m.id, kind=DecisionKind.CONTINUE, reason="keep going",
                                reviewer="ana")
        records.record_decision(db, migration_id=m.id, kind=DecisionKind.STOP, reason="out of patience",
                                reviewer="ben")
        l3 = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 3", [a3]).fetchone()[0]
        records.add_verdict_override(db, verdict_id=l3, outcome=Outcome.PASS,
                                     justification="ran on the pod, see the job log", reviewer="ben")
        records.add_budget_change(db, migration_id=m.id, compute_dollars=80, staff_hours=12, attempts=30,
                                  calendar_days=None, acceptance_level=4, reason="a bigger slice",
                                  reviewer="ana")
    finally:
        study.close()
    return path


def visible(widget) -> bool:
    """The widget is drawn whole on the screen, inside every scrolling ancestor's viewport."""
    region = widget.region
    if region.area == 0 or not SCREEN.contains_region(region):
        return False
    return all(ancestor.region.contains_region(region) for ancestor in widget.ancestors
               if isinstance(ancestor, VerticalScroll))


def footer_keys(app: WorkbenchApp) -> list[str]:
    """The keys the footer shows whole, left to right, before the palette's key takes the rest."""
    keys = [k for k in app.screen.query_one(Footer).query(FooterKey)]
    palette = [k for k in keys if k.has_class("-command-palette")]
    right = palette[0].region.x if palette else SIZE[0]
    return [k.key_display for k in sorted(keys, key=lambda k: k.region.x)
            if not k.has_class("-command-palette") and k.region.width and k.region.right <= right]


def assert_footer_whole(app: WorkbenchApp) -> None:
    """No key is cut at the edge: each is drawn whole or hidden, and `…` shows when one is hidden."""
    footer = app.screen.query_one(Footer)
    keys = [k for k in footer.query(FooterKey) if not k.has_class("-command-palette")]
    right = footer.query_one(".-command-palette").region.x
    drawn = [k for k in keys if k.display and k.region.width]
    assert all(k.region.right <= right for k in drawn), [(k.key_display, k.region) for k in drawn]
    more = footer.query_one("#footer-more")
    assert more.display == (len(drawn) < len(keys))
    if more.display:
        assert more.region.right <= right


async def open_ledger(pilot) -> LedgerScreen:
    await pilot.press("L")
    await until(pilot, lambda: isinstance(pilot.app.screen, LedgerScreen))
    await settle(pilot)
    return pilot.app.screen


async def test_the_effort_panel_scrolls_and_opens_the_ledger(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot, "moe-xla")
        box = screen.query_one(EffortBox)
        await until(pilot, lambda: screen.query_one(EffortPanel).data is not None)
        await settle(pilot)
        assert box.region.height <= 5 and box.max_scroll_y > 0  # a few lines, the rest scrolls
        assert "L opens the ledger" not in screen_text(app)
        box.focus()
        await pilot.press("end")
        await settle(pilot)
        assert box.scroll_y > 0 and "L opens the ledger" in screen_text(app)
        await pilot.press("enter")  # the focused panel opens the ledger
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))


async def test_the_ledger_lists_every_record_newest_first_with_notes_whole(study_path: Path) -> None:
    app = WorkbenchApp(study_path, page_size=50)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla")
        ledger = await open_ledger(pilot)
        assert len(ledger.summaries) == 50  # the first page, from SQL
        entries = ledger.query_one(LedgerList)
        while not ledger.pager.complete:  # G pages on to the oldest
            await pilot.press("G")
            await settle(pilot)
        kinds = [e.kind for e in ledger.summaries.values()]
        assert kinds.count("intervention") == INTERVENTIONS
        assert (kinds.count("decision"), kinds.count("override"), kinds.count("budget")) == (2, 1, 1)
        assert entries.option_count == INTERVENTIONS + 4
        ats = [e.key for e in ledger.summaries.values()]
        assert ats == sorted(ats, reverse=True)
        budget = next(e for e in ledger.summaries.values() if e.kind == "budget")  # recorded last
        assert budget.at == max(e.at for e in ledger.summaries.values())  # so among the first shown
        long = next(e for e in ledger.summaries.values() if e.note == LONG_NOTE)
        prompt = entries.get_option(f"intervention:{long.id}").prompt.plain
        assert LONG_NOTE in prompt and "corrected by" in prompt  # whole, and struck through
        await pilot.press("g")
        entries.highlighted = list(ledger.summaries).index(f"intervention:{long.id}")
        await settle(pilot)
        assert "END-OF-NOTE" in screen_text(app)  # wrapped, not cut
        text = screen_text(app)
        assert "moe-xla" in text and "the evaluation harness" in text  # the whole title, wrapped


async def test_the_ledger_filters_by_kind_text_reviewer_and_attempt(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla")
        ledger = await open_ledger(pilot)

        async def apply(value: str) -> list[str]:
            await pilot.press("slash")
            bar = ledger.query_one("#ledger-filter")
            bar.value = value
            await pilot.press("enter")
            await settle(pilot)
            return [e.kind for e in ledger.summaries.values()]

        assert await apply("kind:decision") == ["decision", "decision"]
        assert "filter kind:decision · 2 shown" in screen_text(app)
        assert await apply("patience") == ["decision"]
        assert await apply("kind:fix_environment reviewer:ben") == ["intervention", "intervention"]
        assert sorted(await apply("attempt:3")) == ["intervention"] * 5 + ["override"]
        assert await apply("kind:override pod") == ["override"]
        assert await apply("nothing-says-this") == []
        assert "No record meets the filter" in screen_text(app)
        await apply("attempt:three")  # a bad term: one line, the list unchanged
        assert ledger.filter.describe() == "nothing-says-this"
        await pilot.press("slash", "escape")  # escape clears
        await settle(pilot)
        assert len(ledger.summaries) == 100 and not ledger.filter


async def test_enter_on_a_ledger_record_opens_its_attempt(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla")
        ledger = await open_ledger(pilot)
        entries = ledger.query_one(LedgerList)
        ids = list(ledger.summaries)
        whole = ids.index(next(k for k, e in ledger.summaries.items() if e.kind == "budget"))
        entries.highlighted = whole  # a budget change concerns the migration, not one attempt
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is ledger and "not one attempt" in " ".join(str(n.message) for n in app._notifications)
        entries.highlighted = ids.index(next(k for k, e in ledger.summaries.items() if e.kind == "override"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        assert app.screen.summary.attempt.seq == 3


async def test_escape_from_an_attempt_opened_in_the_ledger_comes_back_to_the_ledger(study_path: Path) -> None:
    """The attempt opens on top of the ledger, as the queue opens its attempts: escape comes back
    to the ledger with its cursor where it was, not to the attempt's migration screen."""
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ledger = await open_ledger(pilot)  # from the study screen: the whole study's
        entries = ledger.query_one(LedgerList)
        at = list(ledger.summaries).index(next(k for k, e in ledger.summaries.items() if e.kind == "override"))
        entries.highlighted = at
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        assert app.screen.summary.attempt.seq == 3
        await pilot.press("right_square_bracket")  # [ and ] step through the attempt's migration
        await settle(pilot)
        assert app.screen.summary.attempt.seq == 4
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is ledger
        assert entries.highlighted == at and ledger.focused is entries
        assert not any(isinstance(screen, MigrationScreen) for screen in app.screen_stack)


async def test_the_ledger_follows_another_processs_records(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("L")  # from the study screen: the whole study's ledger
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        ledger = app.screen
        await settle(pilot)
        assert ledger.migration is None
        result = await asyncio.to_thread(
            workbench, "intervene", str(study_path), "moe-xla", "--kind", "hint", "--minutes", "3",
            "--note", "from ben's terminal", env={"WORKBENCH_REVIEWER": "ben"})
        assert result.returncode == 0, result.stderr
        await until(pilot, lambda: next(iter(ledger.summaries.values())).note == "from ben's terminal",
                    timeout=10.0)
        assert "from ben's terminal" in screen_text(app)
        # the counts come from their own worker, which may finish after the entries'
        await until(pilot, lambda: ledger.counts is not None and ledger.counts["intervention"] == INTERVENTIONS + 1,
                    timeout=10.0)


async def test_each_screens_own_keys_lead_the_footer(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla", row=3)
        shown = footer_keys(app)
        for key in ("⏎", "esc", "c", "?", "L"):
            assert key in shown, shown
        assert_footer_whole(app)
        assert app.screen.query_one("#footer-more").display  # 80 columns hold some of the keys
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        shown = footer_keys(app)
        for key in ("esc", "[", "]", "c", "r", "b", "?"):
            assert key in shown, shown
        assert_footer_whole(app)
        await pilot.resize_terminal(240, SIZE[1])  # wider: every key again, and no `…`
        await settle(pilot)
        await until(pilot, lambda: not app.screen.query_one("#footer-more").display)
        assert_footer_whole(app)
        await pilot.resize_terminal(*SIZE)
        await settle(pilot)
        await until(pilot, lambda: app.screen.query_one("#footer-more").display)
        assert_footer_whole(app)
        await pilot.press("3")  # the log pane's own keys come after the screen's
        await settle(pilot)
        shown = footer_keys(app)
        for key in ("[", "]", "c", "r", "b", "?"):
            assert key in shown, shown


async def test_the_override_dialogs_error_is_scrolled_into_view(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla", row=3)
        form = await open_form(pilot, "o", OverrideForm)
        error = form.query_one("#form-error")
        form.query_one("#override-outcome", Select).value = "pass"
        await pilot.press("ctrl+s")  # no justification
        await settle(pilot)
        assert "justification: say why" in str(error.render())
        assert visible(error)


async def test_the_rerun_dialog_shows_its_command_and_scrolls_fields_into_view(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla", row=3)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await settle(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RerunLauncher))
        await settle(pilot)
        dialog = app.screen
        command = dialog.query_one("#rerun-argv", TextArea)
        assert visible(command)  # the command is what to read: on screen as the dialog opens
        keep = dialog.query_one("#rerun-keep")
        assert not visible(keep)
        keep.focus()  # focus scrolls the field into view, animated: waited for, a busy machine is slow
        await until(pilot, lambda: visible(keep) and not visible(command))
        command.focus()
        await until(pilot, lambda: visible(command))


async def test_a_long_title_takes_one_line_and_t_shows_it_whole(study_path: Path) -> None:
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_migration(pilot, "moe-xla")
        title = screen.query_one("#migration-title")
        assert title.region.height == 1
        text = screen_text(app)
        assert "…" in text.splitlines()[title.region.y] and "evaluation harness" not in text
        assert LONG_TITLE in title.tooltip.plain
        table = screen.query_one("#attempts")
        assert table.region.height - 1 >= 8  # every one of the eight attempts has its row
        await pilot.press("t")
        await settle(pilot)
        assert title.region.height > 1 and "evaluation harness" in screen_text(app)
        await pilot.press("t")
        await settle(pilot)
        assert title.region.height == 1
        assert isinstance(app.screen, MigrationScreen)


async def test_the_palette_opens_the_ledger_and_a_hostile_note_stays_text(study_path: Path) -> None:
    study = open_study(study_path)
    try:
        m = queries.get_migration(study.db, "moe-xla")
        records.record_intervention(study.db, migration_id=m.id, kind="other", minutes=1,
                                    note=f"pasted {EVIL} from the log", reviewer=EVIL)
    finally:
        study.close()
    app = WorkbenchApp(study_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_migration(pilot, "moe-xla")
        await pilot.press("ctrl+p", *"Ledger")
        await settle(pilot)
        assert "Ledger (L)" in screen_text(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        await settle(pilot)
        text = screen_text(app)
        assert all(shown in text for shown in EVIL_SHOWN) and "\x1b" not in text
        await pilot.press("slash", *"[/]", "enter")  # the filter's words are text too
        await settle(pilot)
        assert [e.note for e in app.screen.summaries.values()] == [f"pasted {EVIL} from the log"]
        assert app.is_running


def test_ledger_pages_meet_without_gaps_or_repeats(study_path: Path) -> None:
    """Keyset pages of any size, with or without a filter, add up to the whole list in order."""
    study = open_study(study_path)
    try:
        db = study.db
        m = queries.get_migration(db, "moe-xla")
        whole = ledger.ledger_page(db, m.id, limit=None)
        assert len(whole) == INTERVENTIONS + 4 and whole == ledger.ledger_page(db, None, limit=None)
        for size in (1, 7, 100):
            pages, before = [], None
            while True:
                page = ledger.ledger_page(db, m.id, before=before, limit=size)
                pages += page
                if len(page) < size:
                    break
                before = page[-1].key
            assert pages == whole
        hints = ledger.parse_ledger_filter("kind:hint")
        assert ledger.ledger_page(db, m.id, hints, limit=None) == [e for e in whole if e.label == "hint"]
        newest = ledger.ledger_page(db, m.id, down_to=whole[9].key, limit=None)
        assert newest == whole[:10]
        assert ledger.ledger_counts(db, m.id) == {"intervention": INTERVENTIONS, "decision": 2,
                                                  "override": 1, "budget": 1}
        for bad in ("kind:", "level:3", "attempt:x"):
            with pytest.raises(ValueError):
                ledger.parse_ledger_filter(bad)
    finally:
        study.close()
