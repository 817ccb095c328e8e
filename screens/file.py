"""A whole file at one commit, opened from a diff (`o`)."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from domain.text import clean
from screens.messages import FileLoaded
from screens.text import text
from screens.widgets.file_view import FileView
from screens.widgets.footer import Footer


class FileScreen(Screen):
    """A whole file at one commit; `escape` goes back to the diff."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="file.back", tooltip="Back to the diff"),
    ]

    def __init__(self, repo: str, commit: str, path: str, line: int = 1) -> None:
        super().__init__(classes="file")
        self.repo, self.commit, self.path, self.line = repo, commit, path, line

    def compose(self) -> ComposeResult:
        title = text(self.path, "bold")
        title.append(f" at {self.commit[:7]}", style="dim")
        yield Static(title, id="file-title")
        yield FileView(self.path, id="file-view")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(FileView).focus()
        self._load(self.repo, self.commit, self.path)

    @work(thread=True, exclusive=True, exit_on_error=False, group="file")
    def _load(self, repo: str, commit: str, path: str) -> None:
        from domain.errors import WorkbenchError
        from workbench.diffs import show_file

        try:
            self.post_message(FileLoaded(show_file(repo, commit, path)))
        except WorkbenchError as exc:
            self.post_message(FileLoaded([], clean(str(exc))))

    def on_file_loaded(self, message: FileLoaded) -> None:
        view = self.query_one(FileView)
        view.lines = message.lines
        view.reset()
        view.cursor = self.line - 1
        self.call_after_refresh(view.go_to, self.line - 1, top=True)
        if message.problem:
            self.query_one("#file-title", Static).update(Text(message.problem, style="bold"))
