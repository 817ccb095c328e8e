"""A diff between two commits: file list, syntax-coloured unified diff with changed words, and a
whole-file view. The diff comes from `workbench.diffs` (git, in a thread worker); only the rows
on screen are styled, so a 20,000-line diff paints at once."""

from __future__ import annotations

import re
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from domain.text import clean, plural
from screens.messages import CursorMoved, DiffLoaded, DiffScrolled, FileWanted
from screens.presenters.palette import tone
from screens.text import text
from screens.widgets.lines import VirtualLines

HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class Highlighter:
    """Syntax colours for single lines, by file name; the theme follows light or dark."""

    def __init__(self, dark: bool) -> None:
        from rich.syntax import Syntax

        self.theme = Syntax.get_theme("ansi_dark" if dark else "ansi_light")
        self._lexers: dict[str, object] = {}

    def lexer(self, path: str):
        found = self._lexers.get(path)
        if found is None:
            from pygments.lexers import TextLexer, get_lexer_for_filename
            from pygments.util import ClassNotFound

            try:
                found = get_lexer_for_filename(path, stripnl=False, ensurenl=False)
            except ClassNotFound:
                found = TextLexer()
            self._lexers[path] = found
        return found

    def highlight(self, path: str, code: str, out: Text) -> None:
        """Append `code` (already cleaned) to `out` with syntax colours."""
        lexer = self.lexer(path)
        for token, value in lexer.get_tokens(code):
            style = self.theme.get_style_for_token(token)
            out.append(value, Style(color=style.color, bold=style.bold, italic=style.italic))


class DiffView(VirtualLines):
    """The lines of a unified diff."""

    COMPONENT_CLASSES = VirtualLines.COMPONENT_CLASSES | {
        "diff-view--added", "diff-view--removed", "diff-view--added-word",
        "diff-view--removed-word", "diff-view--hunk", "diff-view--header",
    }
    DEFAULT_CSS = """
    DiffView > .diff-view--added { background: $success 12%; }
    DiffView > .diff-view--removed { background: $error 12%; }
    DiffView > .diff-view--added-word { background: $success 45%; }
    DiffView > .diff-view--removed-word { background: $error 45%; }
    DiffView > .diff-view--hunk { color: $accent; }
    DiffView > .diff-view--header { text-style: bold; color: $text; }
    """

    show_gutter = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.diff = None
        self._highlighter: Highlighter | None = None

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(DiffScrolled(self))

    def show(self, diff) -> None:
        self.diff = diff
        self._highlighter = Highlighter(self.app.current_theme.dark)
        self.cursor = 0
        self.scroll_to(0, 0, animate=False)
        self.reset()

    @property
    def line_count(self) -> int:
        return len(self.diff.lines) if self.diff is not None else 0

    def _path_at(self, index: int) -> str:
        found = self.diff.file_at(index) if self.diff is not None else None
        return found.path if found else ""

    def line_text(self, index: int) -> Text:
        from workbench.diffs import changed_words

        raw = self.diff.lines[index]
        first = raw[:1]
        if raw.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file",
                           "rename ", "similarity", "Binary files", "old mode", "new mode")):
            return text(raw, self.get_component_rich_style("diff-view--header"))
        if raw.startswith("@@"):
            return text(raw, self.get_component_rich_style("diff-view--hunk"))
        out = Text(first)
        code = clean(raw[1:])
        assert self._highlighter is not None
        self._highlighter.highlight(self._path_at(index), code, out)
        partner = self.diff.partner.get(index)
        if partner is not None and first in "+-":
            other = clean(self.diff.lines[partner][1:])
            if first == "-":
                spans, _ = changed_words(code, other)
                word = self.get_component_rich_style("diff-view--removed-word")
            else:
                _, spans = changed_words(other, code)
                word = self.get_component_rich_style("diff-view--added-word")
            if len(spans) and sum(b - a for a, b in spans) < len(code):
                for a, b in spans:
                    out.stylize(Style(bgcolor=word.bgcolor), a + 1, b + 1)
        return out

    def line_style(self, index: int) -> Style | None:
        if self.diff is None:
            return None
        first = self.diff.lines[index][:1]
        raw = self.diff.lines[index]
        if first == "+" and not raw.startswith("+++ "):
            return self.get_component_rich_style("diff-view--added")
        if first == "-" and not raw.startswith("--- "):
            return self.get_component_rich_style("diff-view--removed")
        return None

    def position(self, index: int) -> tuple[str, int, bool]:
        """(file, 1-based line in that file, in the new version?) at diff line `index`."""
        if self.diff is None or not self.diff.lines:
            return "", 1, True
        found = self.diff.file_at(index)
        if found is None:
            return "", 1, True
        old_line = new_line = 1
        for i in range(index, found.start - 1, -1):
            match = HUNK.match(self.diff.lines[i])
            if match:
                old_line, new_line = int(match.group(1)), int(match.group(2))
                for j in range(i + 1, index):
                    first = self.diff.lines[j][:1]
                    if first != "+":
                        old_line += 1
                    if first != "-":
                        new_line += 1
                break
        removed = self.diff.lines[index][:1] == "-"
        if found.status == "deleted":
            return found.old_path, old_line, False
        return found.path, (new_line if not removed else max(new_line, 1)), True


class DiffPane(Vertical):
    """A diff against the previous attempt or against the migration's base commit (`v`: versus;
    `b` is the attempt screen's brief everywhere)."""

    DEFAULT_CSS = """
    DiffPane { height: 1fr; }
    DiffPane #diff-status { height: auto; max-height: 2; padding: 0 1; background: $panel; }
    DiffPane #diff-body { height: 1fr; }
    DiffPane #diff-files { width: 30%; max-width: 40; min-width: 18; height: 1fr; }
    """
    BINDINGS = [
        Binding("v", "toggle_base", "Vs base/prev", id="diff.toggle_base",
                tooltip="Diff versus the migration's base commit, or versus the previous attempt"),
        Binding("o", "open_file", "Open file", id="diff.open_file",
                tooltip="Open the whole file at this commit, at the cursor's line"),
        Binding("f", "focus_files", "Files", show=False, id="diff.files",
                tooltip="Move to the file list (enter goes to the file's changes)"),
    ]

    def __init__(self, db_path: Path, repo: str, *, new: str, previous: str | None, base: str,
                 previous_label: str = "the previous attempt", attempt_id: int | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.db_path = db_path
        self.attempt_id = attempt_id
        """The attempt shown: without a commit (`new` empty) its recorded edits are the diff."""
        self.repo = repo
        self.new = new
        self.previous = previous
        self.previous_label = previous_label
        self.base = base
        self.against_base = previous is None
        self.diff = None
        self.problem = ""

    def compose(self) -> ComposeResult:
        yield Static(Text("Loading the diff…", style="dim"), id="diff-status")
        with Horizontal(id="diff-body"):
            yield OptionList(id="diff-files")
            yield DiffView(id="diff-view")

    @property
    def old(self) -> str:
        return self.base if self.against_base or self.previous is None else self.previous

    def on_mount(self) -> None:
        self.load()

    def load(self) -> None:
        self.diff = None
        self.problem = ""
        self._status()
        self._load(self.repo, self.old, self.new)

    @work(thread=True, exclusive=True, exit_on_error=False, group="diff")
    def _load(self, repo: str, old: str, new: str) -> None:
        from domain.errors import WorkbenchError
        from screens.data import reading
        from workbench.diffs import attempt_diff, git_diff

        try:
            if new or self.attempt_id is None:
                diff = git_diff(repo, old, new)
            else:
                with reading(self.db_path) as db:
                    diff = attempt_diff(db, repo, old, new, self.attempt_id)
            self.post_message(DiffLoaded((old, new), diff))
        except WorkbenchError as exc:
            self.post_message(DiffLoaded((old, new), None, clean(str(exc))))

    def on_diff_loaded(self, message: DiffLoaded) -> None:
        message.stop()
        if message.key != (self.old, self.new):
            return
        self.diff = message.diff
        self.problem = message.problem
        files = self.query_one("#diff-files", OptionList)
        files.clear_options()
        view = self.query_one(DiffView)
        if self.diff is not None:
            view.show(self.diff)
            files.add_options([Option(_file_label(f), id=str(n))
                               for n, f in enumerate(self.diff.files)])
        self._status()

    def _status(self) -> None:
        out = Text()
        out.append_text(text(self.old[:7], "bold"))
        out.append(" → ")
        out.append_text(text(self.new[:7], "bold"))
        if self.against_base:
            out.append(" against the base commit", style="dim")
        else:
            out.append(" against ", style="dim")
            out.append_text(text(self.previous_label, "dim"))
        if self.problem:
            out.append("\n")
            out.append(self.problem, style="bold")
        elif self.diff is None:
            out.append(" · loading…", style="dim")
        elif not self.diff.lines:
            out.append(" · no changes", style="dim")
        else:
            added = sum(f.added for f in self.diff.files)
            removed = sum(f.removed for f in self.diff.files)
            out.append(f" · {plural(len(self.diff.files), 'file')} ")
            out.append(f"+{added}", style=tone("$text-success"))
            out.append(" ")
            out.append(f"-{removed}", style=tone("$text-error"))
            if self.diff.cut:
                out.append(" · cut: too long", style="bold")
        self.query_one("#diff-status", Static).update(out)

    def action_toggle_base(self) -> None:
        if self.previous is None:
            self.app.notify("No previous attempt: this is the diff against the base commit",
                            markup=False)
            return
        self.against_base = not self.against_base
        self.load()

    def action_focus_files(self) -> None:
        self.query_one("#diff-files").focus()

    @on(CursorMoved, "#diff-view")
    @on(DiffScrolled, "#diff-view")
    def _follow(self, event) -> None:
        """Highlight, in the file list, the file the cursor is in (else the top line's)."""
        event.stop()
        view = self.query_one(DiffView)
        if self.diff is None or not self.diff.files:
            return
        top = round(view.scroll_offset.y)
        height = view.scrollable_content_region.height or 1
        line = view.cursor if top <= view.cursor < top + height else top
        found = self.diff.file_at(line)
        if found is None:
            return
        index = self.diff.files.index(found)
        files = self.query_one("#diff-files", OptionList)
        if files.highlighted != index:
            self._following = index
            files.highlighted = index

    @on(OptionList.OptionHighlighted, "#diff-files")
    @on(OptionList.OptionSelected, "#diff-files")
    def _file_chosen(self, event) -> None:
        if self.diff is None or event.option.id is None:
            return
        if isinstance(event, OptionList.OptionHighlighted) and getattr(self, "_following", None) == event.option_index:
            self._following = None  # the list followed the view: the view stays where it is
            return
        found = self.diff.files[int(event.option.id)]
        view = self.query_one(DiffView)
        view.go_to(found.start, top=True)
        if isinstance(event, OptionList.OptionSelected):
            view.focus()

    def action_open_file(self) -> None:
        view = self.query_one(DiffView)
        if self.diff is None or not self.diff.files:
            return
        path, line, in_new = view.position(view.cursor)
        commit = self.new if in_new else self.old
        self.post_message(FileWanted(self.repo, commit, path, line))


def _file_label(f) -> Text:
    mark = {"added": "A", "deleted": "D", "renamed": "R", "binary": "B"}.get(f.status, "M")
    out = Text(f"{mark} ", style="bold")
    out.append_text(text(f.path))
    out.append(f" +{f.added}", style=tone("$text-success"))
    out.append(f" -{f.removed}", style=tone("$text-error"))
    return out
