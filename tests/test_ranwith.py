"""What each run ran with, from its own interpreter: the packages that differ from the reference's
(issue 36), shown by `workbench attempts --json` and the attempt screen."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from domain.environment import RanWith, differences
from tests.rerun_helpers import attempt, study_with_script
from tests.test_probe import BY_HAND, _run, torch_python  # noqa: F401  (fixture)
from workbench import probe


def test_differences_are_added_removed_and_changed_imported_first():
    ref = RanWith(packages={"torch": "2.9.0", "numpy": "2.1", "rich": "13"}, imported=frozenset({"torch"}))
    run = RanWith(packages={"torch": "2.13.0", "numpy": "2.1", "torch-xla": "2.9.0"},
                  imported=frozenset({"torch", "torch-xla"}))
    assert [c.describe() for c in differences(ref, run)] == [
        "torch 2.9.0 → 2.13.0 (imported)", "+torch-xla 2.9.0 (imported)", "-rich 13"]


@pytest.fixture(scope="module")
def two_torches(torch_python, tmp_path_factory):  # noqa: F811
    """The same program probed under torch 2.9 (the torch_xla venv) and this venv's torch."""
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("two")
    out = {}
    for name, python in (("reference", torch_python), ("attempt", sys.executable)):
        done, reports = _run(python, BY_HAND, tmp / name, True)
        assert done.returncode == 0, done.stderr
        out[name] = reports
    return out


def test_each_run_records_its_own_interpreter_and_packages(two_torches):
    ref, mine = (probe.ran_with(two_torches[k]) for k in ("reference", "attempt"))
    assert ref.packages["torch"] != mine.packages["torch"] and "torch" in ref.imported and "torch" in mine.imported
    assert ref.runtime == mine.runtime == "torch" and ref.launcher == "python"
    torch_change = next(c for c in differences(ref, mine) if c.name == "torch")
    assert torch_change.kind == "changed" and torch_change.imported
    assert "torch-xla" in ref.packages and not any(c.name == "torch-xla" and c.imported
                                                   for c in differences(ref, mine))


def test_attempts_json_and_the_attempt_screen_show_the_differences(two_torches, tmp_path):
    study = study_with_script(tmp_path)
    for seq, name in ((0, "reference"), (1, "attempt")):
        a = attempt(study, "toy", seq)
        for report in two_torches[name]:
            study.db.execute("INSERT INTO probe_report (attempt_id, file, rank, data) VALUES (?, ?, ?, ?)",
                             [a.id, report["_file"], report.get("rank"), json.dumps(report)])
    study.db.conn.commit()
    done = subprocess.run([sys.executable, "-m", "cli", "attempts", str(study.path), "toy", "--json"],
                          capture_output=True, text=True, check=True)
    rows = {r["seq"]: r["ran_with"] for r in json.loads(done.stdout)}
    changes = {c["name"]: c for c in rows[1]["changes"]}
    assert changes["torch"]["kind"] == "changed" and changes["torch"]["imported"]
    assert rows[1]["reference"]["runtime"] == "torch" and rows[0]["changes"] == []

    from screens.presenters.render import ran_with
    from workbench.ranwith import compare

    shown = ran_with(compare(study.db, attempt(study, "toy", 1))).plain
    assert "differ from the reference" in shown and "torch " + changes["torch"]["reference"] in shown
