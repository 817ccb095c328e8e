"""The export screen (`e` on the study screen): writes a counted report (docs/report.md).
Closed to a reviewer while they judge any attempt blind: a report names every verdict."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Select, Static

from domain.errors import WorkbenchError
from domain.text import clean
from screens.data import reading
from screens.messages import ReportFailed, ReportWritten
from screens.typeahead import Input
from workbench import config

FORMAT_CHOICES = [
    ("Markdown (.md)", "md"),
    ("HTML, self-contained with charts (.html)", "html"),
    ("CSV, one file per table, zipped (.zip)", "csv"),
    ("JSON with record ids (.json)", "json"),
    ("LaTeX booktabs tables (.tex)", "latex"),
]


class ExportScreen(ModalScreen[Path | None]):
    """Pick a format and a file; the report is counted and written in a worker thread."""

    BINDINGS = [
        Binding("escape", "cancel", "Close", id="export.close", tooltip="Close without exporting"),
        Binding("ctrl+s", "export", "Export", id="export.run", tooltip="Write the report to the file named"),
    ]

    def __init__(self, db_path: Path, slugs: tuple[str, ...] = ()) -> None:
        super().__init__(id="export")
        self.db_path = Path(db_path)
        self.slugs = slugs

    def compose(self) -> ComposeResult:
        from workbench.report import EXTENSIONS

        with Vertical() as box:
            box.border_title = Text("Export a report" + (f" of {', '.join(map(clean, self.slugs))}" if self.slugs
                                                         else " of the whole study"))
            box.border_subtitle = "ctrl+s exports · escape cancels"
            yield Select(FORMAT_CHOICES, value="md", allow_blank=False, id="export-format")
            default = self.db_path.with_name(self.db_path.stem + "-report" + EXTENSIONS["md"])
            yield Input(str(default), id="export-path", placeholder="output file")
            yield Checkbox("Pseudonymise reviewer names", id="export-pseudonymise")
            with Horizontal():
                yield Button("Export", variant="primary", id="export-run")
                yield Button("Close", id="export-close")
            yield Static(id="export-status")

    @on(Select.Changed, "#export-format")
    def _format_changed(self, event: Select.Changed) -> None:
        from workbench.report import EXTENSIONS

        path_input = self.query_one("#export-path", Input)
        path = Path(path_input.value or "report")
        path_input.value = str(path.with_suffix(EXTENSIONS[str(event.value)]))

    @on(Button.Pressed, "#export-close")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#export-run")
    @on(Input.Submitted, "#export-path")
    def action_export(self) -> None:
        if self.query_one("#export-run", Button).disabled:
            return  # one report at a time
        fmt = str(self.query_one("#export-format", Select).value)
        path = Path(self.query_one("#export-path", Input).value.strip()).expanduser()
        if not path.name:
            self.query_one("#export-status", Static).update(Text("Give an output file."))
            return
        self.query_one("#export-status", Static).update(Text("Counting…", style="dim"))
        self.query_one("#export-run", Button).disabled = True
        self.write_report(fmt, path, self.query_one("#export-pseudonymise", Checkbox).value)

    @work(thread=True, exclusive=True, exit_on_error=False, group="export")
    def write_report(self, fmt: str, path: Path, pseudonymise: bool) -> None:
        from workbench.blind import closed_while_blind
        from workbench.report import build_for, render

        try:
            with reading(self.db_path) as db:
                closed_while_blind(db, config.reviewer(), "An export")
                report = build_for(db, fmt, list(self.slugs), pseudonymise=pseudonymise)
                data = render(report, fmt)
            path.write_bytes(data)
        except WorkbenchError as exc:
            self.post_message(ReportFailed(clean(str(exc))))
            return
        except Exception as exc:  # noqa: BLE001 - shown to the user, one line
            self.post_message(ReportFailed(clean(f"{type(exc).__name__}: {exc}")))
            return
        self.post_message(ReportWritten(path, len(data)))

    def on_report_written(self, message: ReportWritten) -> None:
        self.query_one("#export-run", Button).disabled = False
        self.query_one("#export-status", Static).update(
            Text(f"Wrote {clean(str(message.path))} ({message.size:,} bytes)."))
        self.app.notify(f"Report written: {clean(str(message.path))}", markup=False)

    def on_report_failed(self, message: ReportFailed) -> None:
        self.query_one("#export-run", Button).disabled = False
        self.query_one("#export-status", Static).update(Text(f"Not written: {message.problem}", style="bold"))
