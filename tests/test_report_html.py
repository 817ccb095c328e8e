"""The HTML report in a real browser: headless Chromium renders it; the screenshot's size and
the rendered page's text are checked. Skips (with the reason) where Chromium is not installed,
except in CI, where .ci/run installs it."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from test_report import build_study

from workbench.report import build_report, render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="headless Chromium is not installed (apt-get install -y chromium); .ci/run installs it",
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "CI must have Chromium: .ci/run installs it"
    profile = tmp_path / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_html_report_renders_in_headless_chromium(tmp_path):
    study, _ = build_study(tmp_path / "study.db")
    try:
        page = tmp_path / "report.html"
        page.write_bytes(render(build_report(study.db), "html"))
    finally:
        study.close()
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    assert shot.exists(), "Chromium wrote no screenshot"
    assert png_size(shot) == (1200, 1600)
    assert shot.stat().st_size > 30_000  # tables, cards and charts, not a blank page
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert "Migration study report: Report study" in dom
    assert "Attempts failed" in dom and "66.7%" in dom and "4 of 6 (66.7%)" in dom
    assert dom.count("<svg") == 5  # three ladder charts, loss curves for alpha and beta
    assert "alpha: highest verified level per attempt" in dom
    assert "<script" not in dom and not re.search(r"(src|href)=[\"']?(https?:|//)", dom)  # nothing fetched
