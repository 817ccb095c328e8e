"""The export screen: `e` on the study screen, pick a format, a file is written."""

from __future__ import annotations

import json
from pathlib import Path

from test_app import workers_done
from test_report import build_study
from textual.widgets import Input, Select

from screens.app import WorkbenchApp
from screens.export import ExportScreen


async def test_e_opens_the_export_screen_and_writes_the_report(tmp_path: Path) -> None:
    study, _ = build_study(tmp_path / "study.db")
    study.close()
    app = WorkbenchApp(tmp_path / "study.db")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#export-format", Select).value = "json"
        await pilot.pause()
        path_input = app.screen.query_one("#export-path", Input)
        assert path_input.value.endswith("study-report.json")
        out = tmp_path / "out.json"
        path_input.value = str(out)
        await pilot.click("#export-run")
        await workers_done(app)
        await pilot.pause()
        assert out.exists()
        assert json.loads(out.read_text())["totals"]["failed"]["n"] == 4
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)
