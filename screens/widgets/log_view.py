"""An attempt's full log, virtual: only the lines on screen are read from the database.

`LogView` reads lines through `storage.logs.LogReader` on its own connection (opened in the UI
thread, closed on unmount; one read is an index row and one or two 256 KiB chunks), caching
blocks of lines. Search, the error scan and the warning scan stream through the log in thread
workers that open their own connection. `LogPane` adds the search box and a status line.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import Static
from textual.worker import get_current_worker

from screens.data import reading
from screens.messages import CursorMoved
from screens.text import ansi_text
from screens.typeahead import Input, focus_now, step_aside_while_typing
from screens.widgets.lines import CACHED_LINES, VirtualLines

BLOCK = 256
"""Lines read and cached together."""
CACHED_BLOCKS = 64
MAX_FOUND = 1_000_000
"""Search results kept; a search stops after this many matching lines."""


class LogView(VirtualLines):
    """The lines of one stored log."""

    COMPONENT_CLASSES = VirtualLines.COMPONENT_CLASSES | {"log-view--match"}
    DEFAULT_CSS = """
    LogView > .log-view--match {
        background: $warning 35%;
    }
    """
    BINDINGS = [
        Binding("w", "toggle_wrap", "Wrap", id="log.wrap", tooltip="Wrap long lines, or not"),
    ]

    def __init__(self, db_path: Path, log_id: int | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.db_path = db_path
        self.log_id = log_id
        self._study = None
        self._reader = None
        self._blocks: OrderedDict[int, list[str]] = OrderedDict()
        self.matches: set[int] = set()
        self.wrap = False
        self._rows: tuple[tuple[int, int], list[tuple[int, int]]] | None = None
        self._wraps: OrderedDict[tuple[int, int], list[Strip]] = OrderedDict()
        self.problem = ""

    def on_mount(self) -> None:
        self.open_log()

    def open_log(self) -> None:
        if self.log_id is None:
            return
        from storage.database import open_study
        from storage.logs import LogReader

        try:
            self._study = open_study(self.db_path)
            self._reader = LogReader(self._study.db, self.log_id)
        except Exception as exc:  # a missing file or log: say so, never crash the screen
            from screens.data import describe_error

            self.problem = describe_error(exc)
            self._close()
        self.reset()

    def _close(self) -> None:
        if self._study is not None:
            self._study.close()
        self._study = None
        self._reader = None

    def on_unmount(self) -> None:
        self._close()

    @property
    def line_count(self) -> int:
        return self._reader.line_count if self._reader is not None else 0

    def raw_line(self, index: int) -> str:
        block, offset = divmod(index, BLOCK)
        lines = self._blocks.get(block)
        if lines is None:
            assert self._reader is not None
            lines = self._reader.lines(block * BLOCK, BLOCK)
            self._blocks[block] = lines
            if len(self._blocks) > CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(block)
        return lines[offset] if offset < len(lines) else ""

    def line_text(self, index: int) -> Text:
        return ansi_text(self.raw_line(index))

    def line_style(self, index: int) -> Style | None:
        if index in self.matches:
            return self.get_component_rich_style("log-view--match")
        return None

    # --- wrapping: the scroll position stays in whole lines; rows are laid out per screen --------
    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self._rows = None
        self._wraps.clear()
        self.reset()

    def _resize(self) -> None:
        if self.wrap:
            # Scroll positions are whole lines; the last lines' wrapped rows need room below.
            height = self.scrollable_content_region.height
            self.virtual_size = Size(self.scrollable_content_region.width,
                                     self.line_count + max(height - 1, 0))
        else:
            super()._resize()

    def go_to(self, index: int, *, top: bool = False) -> None:
        super().go_to(index, top=top)
        if self.wrap and self.line_count:
            self._show_cursor_rows()

    def _show_cursor_rows(self) -> None:
        """When wrapping, scroll down (a line at a time) until every row of the cursor's line
        is on screen."""
        width = self.scrollable_content_region.width
        height = self.scrollable_content_region.height or 1
        y = round(self.scroll_offset.y)
        if self.cursor < y:
            return
        while y < self.cursor:
            rows = self._layout(y, width, height)
            parts = len(self._wrapped(self.cursor, max(width - self.gutter_width, 1)))
            if (self.cursor, min(parts, height) - 1) in rows:
                break
            y += 1
        if y != round(self.scroll_offset.y):
            self.scroll_to(y=y, animate=False)

    def _layout(self, top: int, width: int, height: int) -> list[tuple[int, int]]:
        """(line, row within the line) for each screen row when wrapping, from line `top`."""
        key = (top, width)
        if self._rows is not None and self._rows[0] == key and len(self._rows[1]) >= height:
            return self._rows[1]
        body = max(width - self.gutter_width, 1)
        rows: list[tuple[int, int]] = []
        line = top
        while len(rows) < height and line < self.line_count:
            for part in range(min(len(self._wrapped(line, body)), height - len(rows))):
                rows.append((line, part))
            line += 1
        self._rows = (key, rows)
        return rows

    def _wrapped(self, line: int, body: int) -> list[Strip]:
        """Line `line` broken at words into rows of at most `body` cells (a word longer than
        a row is folded)."""
        key = (line, body)
        found = self._wraps.get(key)
        if found is not None:
            self._wraps.move_to_end(key)
            return found
        console = self.app.console
        parts = self.line_text(line).wrap(console, body, overflow="fold", no_wrap=False)
        found = [Strip(list(part.render(console))).crop(0, body) for part in parts] or [Strip([])]
        self._wraps[key] = found
        if len(self._wraps) > CACHED_LINES:
            self._wraps.popitem(last=False)
        return found

    def render_line(self, y: int) -> Strip:
        if not self.wrap:
            return super().render_line(y)
        width = self.scrollable_content_region.width
        height = self.scrollable_content_region.height
        rows = self._layout(self.scroll_offset.y, width, height)
        base = self.rich_style
        if y >= len(rows):
            return Strip.blank(width, base)
        line, part = rows[y]
        gutter = self.gutter_width
        body = max(width - gutter, 1)
        piece = self._wrapped(line, body)[part]
        from rich.segment import Segment

        label = f"{line + 1:>{gutter - 1}} " if part == 0 else " " * gutter
        segments = [Segment(label, base + self.get_component_rich_style("lines--gutter")),
                    *piece]
        strip = Strip(segments).extend_cell_length(width)
        under = self.line_style(line)
        if line == self.cursor:
            under = self.get_component_rich_style("lines--cursor")
        return strip.apply_style(base + under if under is not None else base).crop(0, width)

    def refresh(self, *args, **kwargs):
        self._rows = None
        return super().refresh(*args, **kwargs)


class LogPane(Vertical):
    """A log with `/` search (`n`/`N`), jumps to errors (`e`) and XLA warnings (`t`/`T`)."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > #log-status { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    LogPane > Input { display: none; }
    LogPane > Input.-searching { display: block; }
    """
    BINDINGS = [
        Binding("slash", "search", "Search", key_display="/", id="log.search", priority=True,
                tooltip="Search the log (smartcase); n and N go to the next and previous match"),
        Binding("n", "next_match", "Next match", show=False, id="log.next_match",
                tooltip="Go to the next search match"),
        Binding("N", "previous_match", "Previous match", show=False, id="log.previous_match",
                tooltip="Go to the previous search match"),
        Binding("e", "next_error", "Error", id="log.error",
                tooltip="Go to the first error (again: the next one)"),
        Binding("t", "next_warning", "XLA warning", id="log.warning",
                tooltip="Go to the next torch_xla / XLA warning"),
        Binding("T", "previous_warning", "Previous warning", show=False, id="log.previous_warning",
                tooltip="Go to the previous torch_xla / XLA warning"),
    ]

    def __init__(self, db_path: Path, log_id: int | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.db_path = db_path
        self.log_id = log_id
        self.found: list[int] = []
        self.needle = ""
        self.search_done = True
        self.errors: list[int] = []
        self.warnings: list[int] = []
        self.scan_done = False
        self._pending: str | None = None
        self._line: int | None = None
        """A line asked for (`go_to_line`) before the pane was mounted."""

    def compose(self) -> ComposeResult:
        yield LogView(self.db_path, self.log_id, id="log-view")
        yield Input(placeholder="search the log (enter finds, escape closes)", id="log-search")
        yield Static(id="log-status")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        self._status()
        if self.log_id is not None and self.view._reader is not None:
            self.scan(self.db_path, self.log_id)
        if self._line is not None:
            self.call_after_refresh(self.go_to_line, self._line)
            self._line = None

    def _status(self) -> None:
        view = self.view
        line = Text()
        if self.log_id is None:
            line.append("No log recorded for this attempt.")
        elif view.problem:
            line.append(view.problem, style="bold")
        else:
            line.append(f"line {view.cursor + 1 if view.line_count else 0} of {view.line_count:,}")
            if view.wrap:
                line.append(" · wrap")
            if self.needle:
                line.append(" · ")
                line.append(f"/{self.needle}", style="bold")
                line.append(f" {len(self.found):,} line{'s' if len(self.found) != 1 else ''}")
                if not self.search_done:
                    line.append(" (searching…)")
            if self.scan_done:
                line.append(f" · {len(self.errors)} error line{'s' if len(self.errors) != 1 else ''}"
                            f", {len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}")
            else:
                line.append(" · scanning…")
        self.query_one("#log-status", Static).update(line)

    @on(CursorMoved)
    def _moved(self) -> None:
        self._status()

    # --- error and warning scan -----------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="log-scan")
    def scan(self, path: Path, log_id: int) -> None:
        from storage.logs import log_chunks
        from workbench.logsearch import ERROR, WARNING, lines_per_piece

        worker = get_current_worker()
        errors: list[int] = []
        warnings: list[int] = []
        with reading(path) as db:
            def pieces():
                for chunk in log_chunks(db, log_id, batch=4):
                    if worker.is_cancelled:
                        return
                    yield chunk

            # One pass: both patterns over the same chunk before the next is read.
            for chunk_errors, chunk_warnings in lines_per_piece(pieces(), ERROR, WARNING):
                errors += chunk_errors[: MAX_FOUND - len(errors)]
                warnings += chunk_warnings[: MAX_FOUND - len(warnings)]
                if (chunk_errors or chunk_warnings) and not worker.is_cancelled:
                    self.app.call_from_thread(self._scanned, list(errors), list(warnings), False)
        if not worker.is_cancelled:
            self.app.call_from_thread(self._scanned, errors, warnings, True)

    def _scanned(self, errors: list[int], warnings: list[int], done: bool) -> None:
        self.errors, self.warnings, self.scan_done = errors, warnings, done
        pending, self._pending = self._pending, None
        if pending == "error":
            self.action_next_error()
        elif pending == "warning":
            self.action_next_warning()
        self._status()

    def _jump(self, lines: list[int], forward: bool, what: str, *, wrap_first: bool = True) -> None:
        view = self.view
        if not lines:
            if not self.scan_done and what in ("error", "warning"):
                self._pending = what
                self.app.notify(f"Still scanning the log for {what}s…", markup=False)
            else:
                self.app.notify(f"No {what} lines in this log", severity="warning", markup=False)
            return
        import bisect

        if forward:
            i = bisect.bisect_right(lines, view.cursor)
            target = lines[i] if i < len(lines) else lines[0]
        else:
            i = bisect.bisect_left(lines, view.cursor) - 1
            target = lines[i] if i >= 0 else lines[-1]
        view.go_to(target, top=True)

    def action_next_error(self) -> None:
        view = self.view
        if self.errors and view.cursor < self.errors[0]:
            view.go_to(self.errors[0], top=True)
            return
        self._jump(self.errors, True, "error")

    def action_next_warning(self) -> None:
        self._jump(self.warnings, True, "warning")

    def action_previous_warning(self) -> None:
        self._jump(self.warnings, False, "warning")

    # --- search -----------------------------------------------------------------------------------
    def action_search(self) -> None:
        """`/` (a priority binding: what is typed after it goes into the search line)."""
        step_aside_while_typing(self)
        box = self.query_one(Input)
        box.add_class("-searching")
        box.value = self.needle
        focus_now(box)

    @on(Input.Submitted, "#log-search")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        box = self.query_one(Input)
        box.remove_class("-searching")
        self.view.focus()
        needle = event.value
        self.needle = needle
        self.found = []
        self.view.matches = set()
        self.view.refresh()
        if needle and self.log_id is not None and self.view._reader is not None:
            self.search_done = False
            self._first_jump = True
            self.search(self.db_path, self.log_id, needle)
        self._status()

    def key_escape(self, event) -> None:
        box = self.query_one(Input)
        if box.has_class("-searching"):
            event.stop()
            box.remove_class("-searching")
            self.view.focus()

    @work(thread=True, exclusive=True, exit_on_error=False, group="log-search")
    def search(self, path: Path, log_id: int, needle: str) -> None:
        from storage.logs import log_chunks
        from workbench.logsearch import matching_lines, search_pattern

        worker = get_current_worker()
        batch: list[int] = []
        total = 0
        with reading(path) as db:
            for line in matching_lines(log_chunks(db, log_id, batch=4), search_pattern(needle)):
                if worker.is_cancelled:
                    return
                batch.append(line)
                total += 1
                if len(batch) >= 2000 or total == 1:
                    self.app.call_from_thread(self._found, needle, batch, False)
                    batch = []
                if total >= MAX_FOUND:
                    break
        if not worker.is_cancelled:
            self.app.call_from_thread(self._found, needle, batch, True)

    def _found(self, needle: str, lines: list[int], done: bool) -> None:
        if needle != self.needle:
            return
        self.found.extend(lines)
        self.view.matches.update(lines)
        self.view.refresh()
        self.search_done = done
        if self._first_jump and self.found:
            self._first_jump = False
            self._jump(self.found, True, "matching")
        elif done and not self.found:
            self.app.notify(f"Not found: {needle}", severity="warning", markup=False)
        self._status()

    def action_next_match(self) -> None:
        if not self.needle:
            self.action_search()
            return
        self._jump(self.found, True, "matching")

    def action_previous_match(self) -> None:
        if not self.needle:
            self.action_search()
            return
        self._jump(self.found, False, "matching")

    def go_to_line(self, line: int) -> None:
        """Show 1-based line `line` (a verdict's evidence); asked before the pane is mounted (the
        attempt screen makes it when first shown), once it is laid out."""
        if not self.is_mounted:
            self._line = line
            return
        self.view.go_to(line - 1, top=True)
        self.view.focus()

