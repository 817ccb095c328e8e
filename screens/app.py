"""The workbench app: a study's migrations, their attempts, help and a command palette."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.actions import SkipAction
from textual.app import App
from textual.binding import Binding
from textual.command import CommandPalette
from textual.content import Content
from textual.widget import AwaitMount

from domain.models import Migration, MigrationSummary
from domain.text import clean, plural
from screens.base import PAGE_SIZE, scope_of
from screens.commands import WorkbenchCommands
from screens.data import after_first_page, read_plain
from screens.keygate import KeyGate
from screens.live import LiveWatches
from screens.messages import AttemptShown, FileWanted, LoadFailed
from screens.presenters import palette
from screens.review_time import EffortHooks
from screens.study import StudyScreen
from storage import queries
from storage.fastread import read_only_reason
from workbench.config import ASSETS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from textual.app import SystemCommand
    from textual.screen import Screen

    from screens.verifying import VerifyProgress


GC_THRESHOLDS = (4000, 10, 10)
"""The collector's thresholds once the first page is shown (Python's defaults: 700, 10, 10). A
young collection frees what a few key presses left in reference cycles (Textual's strips cache
themselves), about 800 objects a `j`: at 7,000 each took 15-50 ms on a loaded machine, at 4,000
10-30 ms, and neither let a full collection happen in 300 presses; at 700 seven did."""


def default_keymap_path() -> Path:
    """`WORKBENCH_KEYMAP`, else keymap.toml in the user config dir."""
    import os

    import platformdirs

    env = os.environ.get("WORKBENCH_KEYMAP")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir("workbench", appauthor=False)) / "keymap.toml"


def load_keymap(path: Path) -> dict[str, str] | str:
    """`{binding id: keys}` from a TOML file's `[keymap]` table (for example
    `"attempt.next" = "ctrl+n"`); a problem comes back as one line to show."""
    if not path.is_file():
        return {}
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"{clean(str(path))}: keymap not read ({clean(str(exc))})"
    table = data.get("keymap", {})
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        return f"{clean(str(path))}: [keymap] must map binding ids to key strings"
    return {str(k): v for k, v in table.items()}


class WorkbenchApp(App[None]):
    """Review a study: `WorkbenchApp(Path("study.db")).run()`."""

    CSS_PATH = ASSETS / "styles" / "app.tcss"
    TITLE = "workbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    """Screens under 30 rows get `-short` (app.tcss gives the tables more of the height)."""
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?", id="app.help",
                tooltip="Show the keys that work on this screen"),
        Binding("f1", "help", "Help", show=False, id="app.help_f1",
                tooltip="Show the keys that work on this screen"),
        Binding("V", "verify", "Verify", show=False, id="app.verify",
                tooltip="Verify what this screen shows (the study, a migration or an attempt) "
                        "with the ladder verifier; unchanged attempts are skipped"),
        Binding("u", "next_left", "Next left", id="app.next_left",
                tooltip="Opened from my queue: the next attempt of the queue you have not judged yet"),
        Binding("q", "leave", "Back", show=False, id="app.leave",
                tooltip="Back to the previous screen, as escape (the study screen's q quits)"),
    ]
    WRITE_KEYS = frozenset({
        "app.verify", "study.verify", "migration.verify", "study.rerun_unknown", "migration.rerun_unknown",
        "study.new_migration", "migration.reference", "migration.watch", "attempt.rerun", "attempt.judge",
        "effort.intervene", "effort.accept", "effort.stop", "effort.continue", "effort.budgets", "effort.override",
        "brief.accept_claim", "job.cancel",
    })
    """The ids of the keys that record something: a read-only study's footer leaves them out (the
    keys still say why they do nothing: `refuse_write`)."""

    def __init__(self, db_path: Path, *, page_size: int = PAGE_SIZE,
                 keymap_path: Path | None = None) -> None:
        super().__init__()
        self.db_path = Path(db_path)
        self.page_size = page_size
        self.read_only = read_only_reason(self.db_path) if self.db_path.is_file() else None
        """Why this process cannot write the study (storage.fastread), or None: then the header
        starts with read-only (`format_title`) and every dialog that writes is refused with a
        toast (`push_screen`)."""
        self.sub_title = clean(self.db_path.name)
        self.effort = EffortHooks(self, save=self.read_only is None)
        """Review time from input, and other reviewers' records within seconds (docs/effort.md)."""
        self.live = LiveWatches(self)
        """The migrations whose Claude Code sessions are followed live (`W`, screens/live.py)."""
        self.keys = KeyGate(self, super().on_event)
        """Hands each key on once the one before it is handled (screens/keygate.py)."""
        self.keymap_problem = ""
        keymap = load_keymap(keymap_path or default_keymap_path())
        if isinstance(keymap, str):
            self.keymap_problem = keymap
        elif keymap:
            self.set_keymap(keymap)
        palette.use(self.get_css_variables())
        self.attempt_names: list[tuple[str, int, int, str]] = []
        """(slug, seq, attempt id, source) of every attempt, for the palette; loaded at start."""
        self.verifying: VerifyProgress | None = None
        """The progress dialog of the running (or last) verify run."""
        self.first_page_shown = threading.Event()
        """Set once the study screen has painted its first page (or failed to read it): reads the
        first page does not need (the palette's names, the study's totals) wait for it in their
        workers rather than compete with it (issue 19)."""
        self._gc_held = False
        """The cyclic garbage collector is paused until the first page (`_hold_gc`)."""
        self._gc_restore: tuple[int, ...] | None = None
        """The collector's thresholds before `_tune_gc`, while it is tuned."""

    @on(events.Load)
    def _hold_gc(self) -> None:
        """Pause the cyclic garbage collector from the start of the run to the first page: its
        collections cost the launch 40-70 ms (300-odd collections while Textual builds the screen,
        for little cyclic garbage). Only collection is put off; `first_page_done` (or the end of
        the run) turns it back on."""
        if gc.isenabled():
            gc.disable()
            self._gc_held = True

    def first_page_done(self) -> None:
        """The study screen painted its first page, or cannot: the reads that waited may start,
        and garbage collection resumes, tuned for the rest of the run (`_tune_gc`)."""
        self.first_page_shown.set()
        if self._gc_held:
            self._gc_held = False
            self._tune_gc()
            gc.enable()

    def _tune_gc(self) -> None:
        """Freeze what the launch built (modules, classes, the study screen: 75,000-odd objects
        with no cyclic garbage among them) so full collections no longer walk it, and collect the
        youngest generation after GC_THRESHOLDS[0] allocations rather than 700, so that what a
        key press draws is mostly freed before a collection promotes it. Moving through a
        migration's attempts then went from 2-3 full collections of 50-120 ms per 100 `j`s to
        none in 300 (issue 19; bench/ui.py --pauses). The end of the run puts both back."""
        self._gc_restore = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)

    def _restore_gc(self) -> None:
        if self._gc_restore is not None:
            gc.unfreeze()
            gc.set_threshold(*self._gc_restore)
            self._gc_restore = None

    @on(events.Mount)
    def _start_effort(self) -> None:
        self.effort.start()

    @on(events.Unmount)
    def _stop_effort(self) -> None:
        self.first_page_done()  # an app closed before its first page leaves the collector on
        self._restore_gc()
        self.live.stop_all()
        self.effort.stop()
        self.keys.close()

    async def on_event(self, event: events.Event) -> None:
        self.effort.input(event)
        if isinstance(event, events.Key) and not event.is_forwarded:
            await self.keys.arrive(event)  # read from the terminal: in turn, behind the keys before it
        else:
            await super().on_event(event)

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.read_only:
            self.notify(f"{clean(self.db_path.name)} is read-only ({self.read_only}): review and export work;"
                        " nothing can be recorded, review time included", severity="warning", timeout=10, markup=False)
        if self.keymap_problem:
            self.notify(self.keymap_problem, severity="warning", markup=False)
        self._load_attempt_names(self.db_path)
        self._warm_imports()

    @work(thread=True, exclusive=True, exit_on_error=False, group="warm-imports")
    def _warm_imports(self) -> None:
        """Once the first page is shown, import what opening a migration and an attempt needs:
        their screens, widgets and the modules their workers read with (about 140 ms of imports,
        sqlite-utils and click among them, that the first Enter on each paid before its screen
        showed; issue 39). Imported here, in a thread, the first Enter finds them loaded; a key
        pressed sooner waits on the import lock for what is left, no longer than before."""
        after_first_page(self)
        import screens.attempt  # noqa: F401 - loaded, not used here
        import screens.migration  # noqa: F401
        import screens.queue  # noqa: F401 - an attempt shown tells the queue
        import storage.explanations  # noqa: F401 - the attempt screen's first read
        import workbench.blind  # noqa: F401
        import workbench.diffs  # noqa: F401
        import workbench.ranwith  # noqa: F401

    def watch_app_focus(self, focused: bool) -> None:
        """The app gained focus with nothing focused: the screen's AUTO_FOCUS widget gets it.

        Served (`workbench serve`), Textual's web driver starts the app blurred, since the
        browser's terminal has no focus yet; the study screen, made while blurred, got no auto
        focus, and Textual gives back on focus only what was focused at the blur: nothing. So
        Enter opened nothing until Tab. (Textual's own restore runs first, in `_watch_app_focus`.)
        """
        screen = self.screen
        if not focused or screen.focused is not None:
            return
        selector = self.AUTO_FOCUS if screen.AUTO_FOCUS is None else screen.AUTO_FOCUS
        for widget in screen.query(selector) if selector else ():
            if widget.focusable:
                screen.set_focus(widget, scroll_visible=False)
                return

    def format_title(self, title: str, sub_title: str) -> Content:
        """A read-only study says so first in the header, where 80 columns still show it (a long
        study title cuts what follows it)."""
        shown = super().format_title(title, sub_title)
        return Content.assemble(("read-only", "reverse"), " ", shown) if self.read_only else shown

    def refuse_write(self) -> bool:
        """True, after a toast that says why, when the study cannot be written: the caller starts
        no write."""
        if self.read_only is None:
            return False
        self.notify(f"{clean(self.db_path.name)} is read-only ({self.read_only}): nothing can be recorded",
                    severity="warning", markup=False)
        return True

    def push_screen(self, screen, callback=None, wait_for_dismiss: bool = False):  # type: ignore[override]
        """Every write of the app opens a dialog that says so (`WRITES_STUDY`): on a read-only
        study it is refused here, in one place, rather than failing when saved."""
        if getattr(screen, "WRITES_STUDY", False) and self.refuse_write():
            if wait_for_dismiss:
                refused = asyncio.get_running_loop().create_future()
                refused.set_result(None)
                return refused
            return AwaitMount(self.screen, [])
        if not isinstance(screen, str) and not screen.is_running:
            self._size_classes(screen)
        return super().push_screen(screen, callback, wait_for_dismiss)  # type: ignore[call-overload]

    def _size_classes(self, screen: Screen) -> None:
        """Give a new screen its breakpoint classes (`-short`, `-tall`) before it is styled: Textual
        sets them on the Resize that follows the push, after the screen was styled and laid out
        once, and the change styled every widget again and laid them out a second time (12-20 ms
        of an attempt screen's opening, and a frame; issue 39). The Resize then changes nothing."""
        width, height = self.size
        classes: dict[str, bool] = {}
        for size, breakpoints in ((width, self.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None
                                   else screen.HORIZONTAL_BREAKPOINTS),
                                  (height, self.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None
                                   else screen.VERTICAL_BREAKPOINTS)):
            reached = [(at, name) for at, name in breakpoints or () if size >= at]
            for _, name in breakpoints or ():
                classes[name] = False
            if reached:
                classes[max(reached)[1]] = True
        if classes:
            screen.update_classes(classes, update=False)

    def _theme_changed(self, _theme) -> None:
        """The presenters' colours follow the theme (rows drawn from now on use them)."""
        palette.use(self.get_css_variables())

    @work(thread=True, exclusive=True, exit_on_error=False, group="attempt-names")
    def _load_attempt_names(self, path: Path) -> None:
        after_first_page(self)
        names = read_plain(path, queries.attempt_names)
        if not isinstance(names, LoadFailed):
            self.attempt_names = names

    def open_attempt(self, slug: str, attempt_id: int) -> None:
        """Show one attempt (a jump from the palette): its migration, then the attempt."""
        from screens.migration import MigrationScreen

        for screen in self.screen_stack:
            if isinstance(screen, MigrationScreen) and screen.migration.slug == slug:
                summary = screen.follow(attempt_id)
                if summary is not None:
                    while self.screen is not screen:
                        self.pop_screen()
                    screen.open(summary)
                    return
        self._pending_attempt = attempt_id
        self.open_migration(slug)

    def on_attempt_shown(self, message: AttemptShown) -> None:
        """An attempt screen moved: the migration screen's (or the queue's) cursor follows it."""
        from screens.migration import MigrationScreen
        from screens.queue import QueueScreen

        for screen in self.screen_stack:
            if isinstance(screen, MigrationScreen) and screen.migration.id == message.migration_id:
                screen.follow(message.attempt_id)
            elif isinstance(screen, QueueScreen):
                screen.follow(message.attempt_id)

    def open_queue(self) -> None:
        """My queue (screens/queue.py), on top of the screen shown now."""
        from screens.queue import QueueScreen

        self.push_screen(QueueScreen(page_size=self.page_size))

    def open_agreement(self) -> None:
        """The agreement screen (screens/agreement.py), on top of the screen shown now."""
        from screens.agreement import AgreementScreen

        self.push_screen(AgreementScreen())

    def open_ledger(self, migration: Migration | None) -> None:
        """The ledger (screens/ledger.py) of a migration, or of the study with None, on top of the
        screen shown now: opened from here because the ledger opens attempts, whose screens open it."""
        from screens.ledger import LedgerScreen

        self.push_screen(LedgerScreen(migration, page_size=self.page_size))

    def _keys_screen(self):
        """The screen the keys act on: the one shown, or under the command palette the one it was
        opened over (the palette lists that screen's keys and asks `check_action` about them)."""
        if isinstance(self.screen, CommandPalette) and len(self.screen_stack) > 1:
            return self.screen_stack[-2]
        return self.screen

    def _queue_cursor(self):
        """The queue an attempt screen opened from my queue steps through (else None)."""
        screen = self._keys_screen()
        cursor = getattr(screen, "cursor", None)
        if cursor is None:  # the footer asks at every refresh: no import where no screen has one
            return None
        from screens.navigation import QueueCursor

        return cursor if isinstance(cursor, QueueCursor) and hasattr(screen, "show") else None

    async def action_next_left(self) -> None:
        """`u` on an attempt screen opened from my queue: the queue's next attempt not judged yet."""
        cursor = self._queue_cursor()
        if cursor is None:
            return
        found = cursor.next_left(self.screen.summary.attempt.id)
        if found is None:
            self.notify("Nothing left in your queue (among the loaded rows)", markup=False)
            return
        await self.screen.show(found)

    def on_file_wanted(self, message: FileWanted) -> None:
        from screens.file import FileScreen

        self.push_screen(FileScreen(message.repo, message.commit, message.path, message.line))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands but Quit: on the study screen WorkbenchCommands lists its `q`
        (Quit) with the screen's other keys, so Quit was there twice; elsewhere `q` does not quit,
        and `ctrl+q` still does anywhere."""
        for command in super().get_system_commands(screen):
            if command.title != "Quit":
                yield command

    def get_default_screen(self) -> StudyScreen:
        return StudyScreen(page_size=self.page_size)

    @property
    def study_screen(self) -> StudyScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, StudyScreen)
        return screen

    def loaded_migrations(self) -> list[MigrationSummary]:
        """The migrations the study screen has loaded so far, in its order."""
        return list(self.study_screen.summaries.values())

    def open_migration(self, slug: str) -> None:
        """Show a migration's attempts on top of the study screen."""
        summary = self.study_screen.summaries.get(slug)
        if summary is None:
            self._find_migration(self.db_path, slug)
        else:
            self._show_migration(summary.migration)

    @work(thread=True, exclusive=True, exit_on_error=False, group="find-migration")
    def _find_migration(self, path: Path, slug: str) -> None:
        migration = read_plain(path, lambda db: queries.get_migration(db, slug))
        if isinstance(migration, LoadFailed):
            self.call_from_thread(self.screen.post_message, migration)
        elif migration is None:
            self.call_from_thread(
                self.notify, f"No migration {clean(slug)!r} in this study",
                severity="warning", markup=False,
            )
        else:
            self.call_from_thread(self._show_migration, migration)

    def _show_migration(self, migration: Migration) -> None:
        from screens.migration import MigrationScreen

        while len(self.screen_stack) > 1:
            self.pop_screen()
        pending, self._pending_attempt = getattr(self, "_pending_attempt", None), None
        self.push_screen(MigrationScreen(migration, page_size=self.page_size, open_attempt=pending))

    def run_action_on(self, node, action: str) -> None:
        """Run a binding's action on the widget or screen that owns it (from the palette)."""
        self.call_later(self.run_action, action, node)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`V` only where there is something to verify (the study, migration and attempt screens)."""
        if action == "next_left":
            return self._queue_cursor() is not None
        if action == "verify":
            return scope_of(self._keys_screen()) is not None
        return True

    @property
    def verify_running(self) -> bool:
        """A `V` run of this app is going on."""
        return any(w.group == "verify" and not w.is_finished for w in self.workers)

    def action_verify(self) -> None:
        from screens.verifying import VerifyProgress

        scope = scope_of(self.screen)
        if scope is None or self.refuse_write():
            return
        if self.verify_running:
            self.notify("A verify run is going on already", severity="warning", markup=False)
            return
        self.verifying = VerifyProgress(scope[2])
        self.push_screen(self.verifying)
        self._verify(self.db_path, scope)

    def action_rerun_unknown(self) -> None:
        """`U`: re-run with the probe every attempt of this screen's scope whose level 3 is unknown."""
        from screens.rerun_unknown import open_rerun_unknown

        scope = scope_of(self.screen)
        if scope is not None and scope[1] is None:
            open_rerun_unknown(self.screen, scope[0], scope[2])

    @work(thread=True, exclusive=True, exit_on_error=False, group="verify")
    def _verify(self, path: Path, scope) -> None:
        from screens.data import describe_error
        from screens.verifying import verify_scope

        dialog = self.verifying

        def step(done: int, total: int, label: str) -> None:
            if dialog is not None:
                self.call_from_thread(dialog.step, done, total, label)

        from workbench.verify import NotAllVerified

        try:
            changed, total, left = verify_scope(path, scope, step)
        except NotAllVerified as exc:  # the others' verdicts are written and shown
            self.call_from_thread(self._verified, f"Verified {scope[2]}, but {describe_error(exc)}", "warning")
            return
        except Exception as exc:  # noqa: BLE001 - whatever stopped it, the dialog goes and says so
            self.call_from_thread(self._verified, f"Verify failed: {describe_error(exc)}", "error")
            return
        self.call_from_thread(self._verified, "\n".join([f"Verified {scope[2]}: {plural(total, 'attempt')}, "
                                                         f"{changed} with new verdicts", *left]),
                              "warning" if left else "information")

    def _verified(self, line: str, severity: str) -> None:
        """The run is over: the dialog goes, the lists read their rows again, a toast says so."""
        if self.verifying is not None and self.screen is self.verifying:
            self.verifying.dismiss()
        self.notify(line, severity=severity, markup=False)  # type: ignore[arg-type]
        self.effort.study_changed()

    def action_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()

    def action_leave(self) -> None:
        """`q` leaves a screen as in a pager (lazygit, tig); a dialog keeps what is typed in it
        and closes with escape."""
        from textual.screen import ModalScreen

        if isinstance(self.screen, ModalScreen):
            raise SkipAction()
        self.action_back()

    def action_help(self) -> None:
        from screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        rows = []
        seen = set()
        for active in self.screen.active_bindings.values():
            binding = active.binding
            # Ours carry ids; the widgets' own (arrows, tab) are summed up in one line.
            if binding.id is None and binding.action != "command_palette":
                continue
            # the first letter up, the rest as written (`capitalize()` made "L3" "l3")
            entry = (self.get_key_display(binding), binding.description[:1].upper() + binding.description[1:],
                     binding.tooltip or "")
            if entry not in seen:
                seen.add(entry)
                rows.append(entry)
        rows.append(("↑ ↓ pgup pgdn", "Move", "Arrow and page keys move the cursor too"))
        title = "Keys: " + getattr(self.screen, "help_title", "study")
        self.push_screen(HelpScreen(title, rows))
