"""`make test-quick` (README): the torch_xla and browser tests are left out, with the reason, and
only when asked; `make test` (what CI runs) still runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_probe.py::test_same_losses_with_and_without_the_probe_and_per_step_values",
         "tests/test_report_html.py::test_html_report_renders_in_headless_chromium"]


def _pytest(**env: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *TESTS],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    return done.stdout


def test_quick_leaves_out_the_torch_xla_and_browser_tests_with_the_reason():
    quick = _pytest(WORKBENCH_TESTS="quick")
    assert "2 skipped" in quick  # the browser test may say it has no Chromium first
    assert "test_probe.py: make test-quick leaves out the torch_xla and browser tests" in quick


def test_quick_is_a_make_target_and_the_full_run_is_untouched():
    made = subprocess.run(["make", "-n", "test-quick"], capture_output=True, text=True, cwd=ROOT)
    assert made.returncode == 0 and "WORKBENCH_TESTS=quick" in made.stdout
    full = subprocess.run(["make", "-n", "test"], capture_output=True, text=True, cwd=ROOT)
    assert "WORKBENCH_TESTS" not in full.stdout
