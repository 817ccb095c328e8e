"""The workbench app: a study's migrations, their attempts, help and a command palette."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding

from screens.base import PAGE_SIZE
from screens.commands import WorkbenchCommands
from screens.data import read
from screens.help import HelpScreen
from screens.messages import LoadFailed
from screens.migration import MigrationScreen
from screens.study import StudyScreen
from storage import queries
from workbench.config import ASSETS
from workbench.models import Migration, MigrationSummary
from workbench.untrusted import clean


class WorkbenchApp(App[None]):
    """Review a study: `WorkbenchApp(Path("study.db")).run()`."""

    CSS_PATH = ASSETS / "styles" / "app.tcss"
    TITLE = "workbench"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?", id="app.help",
                tooltip="Show the keys that work on this screen"),
        Binding("f1", "help", "Help", show=False, id="app.help_f1",
                tooltip="Show the keys that work on this screen"),
    ]

    def __init__(self, db_path: Path, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__()
        self.db_path = Path(db_path)
        self.page_size = page_size
        self.sub_title = clean(self.db_path.name)

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
        migration = read(path, lambda db: queries.get_migration(db, slug))
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
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(MigrationScreen(migration, page_size=self.page_size))

    def action_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        rows = []
        seen = set()
        for active in self.screen.active_bindings.values():
            binding = active.binding
            # Ours carry ids; the widgets' own (arrows, tab) are summed up in one line.
            if binding.id is None and binding.action != "command_palette":
                continue
            entry = (self.get_key_display(binding), binding.description.capitalize(),
                     binding.tooltip or "")
            if entry not in seen:
                seen.add(entry)
                rows.append(entry)
        rows.append(("↑ ↓ pgup pgdn", "Move", "Arrow and page keys move the cursor too"))
        title = "Keys: " + ("migration" if isinstance(self.screen, MigrationScreen) else "study")
        self.push_screen(HelpScreen(title, rows))
