"""Judgements, queues, blind mode, agreement and adjudication (issue 17, docs/judgements.md).

Studies are real: a bundle imported into a real SQLite file, verified through the real writer;
the CLI runs as a subprocess; two reviewers' processes write to one file at once.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import BundleBuilder

from domain.models import Outcome
from storage.database import open_study

P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN
ROOT = Path(__file__).resolve().parent.parent


def workbench(*args: str, reviewer: str = "ana") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT)})


def fails_cleanly(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def _verify(db, attempt_id: int, outcomes: tuple[Outcome, ...]) -> None:
    from storage.records import record_verification
    from workbench.verify.ladder import Judgement, LevelResult

    levels = [LevelResult(n, o, "test") for n, o in enumerate(outcomes, start=1)]
    judgement = Judgement(levels=levels, highest_level=0, cause=None, cause_evidence=[], cause_note="",
                          silent=False, over_claim=None, raised_error=False)
    record_verification(db, attempt_id=attempt_id, reference_attempt_id=None, verifier="test",
                        verifier_version="1", inputs_hash="h", inputs={}, settings={}, judgement=judgement,
                        reviewer="ana")


VERIFIER_L1 = {1: P, 2: P, 3: F, 4: P}
"""The verifier's level 1 per attempt seq; levels 2 to 5 are unknown."""


@pytest.fixture
def study_path(bundle: BundleBuilder, tmp_path: Path) -> Path:
    """A reference run, four agent attempts (expected level 2), a re-run: verified, none judged."""
    from workbench.bundle import import_bundle

    folder, shas = bundle.add_migration("mlp-xla")
    records = [bundle.attempt(0, shas[0])] + [bundle.attempt(s, shas[s % 3]) for s in range(1, 5)]
    bundle.write_attempts(folder, records + [bundle.attempt(5, shas[2], source="rerun", rerun_of=2)])
    path = tmp_path / "study.db"
    study = open_study(path, create=True)
    try:
        assert import_bundle(study, bundle.root, "ana").problems == []
        for seq, first in VERIFIER_L1.items():
            attempt_id = study.db.execute("SELECT id FROM attempt WHERE seq = ?", [seq]).fetchone()[0]
            _verify(study.db, attempt_id, (first, U, U, U, U))
    finally:
        study.close()
    return path


# --------------------------------------------------------------------------- judgements


def test_a_judgement_is_recorded_superseded_with_history_and_audited(study_path: Path) -> None:
    first = workbench("judge", str(study_path), "mlp-xla", "1", "--levels", "pass,fail,unknown,unknown,unknown",
                      "--cause", "numerical_mismatch", "--note", "loss drifts")
    assert first.returncode == 0, first.stderr
    assert "judgement 1 recorded" in first.stdout and "differs" in first.stdout  # level 2: fail, the verifier unknown
    again = workbench("judge", str(study_path), "mlp-xla", "1", "--levels", "pass,pass,unknown,unknown,unknown")
    assert again.returncode == 0, again.stderr
    from storage.judgements import current_judgements, judgement_history

    study = open_study(study_path)
    try:
        db = study.db
        attempt_id = db.execute("SELECT id FROM attempt WHERE seq = 1").fetchone()[0]
        history = judgement_history(db, attempt_id)
        assert [j.id for j in history] == [1, 2] and history[1].supersedes == 1
        assert history[0].cause is not None and history[0].cause.value == "numerical_mismatch"
        assert history[0].note == "loss drifts" and history[0].levels == (P, F, U, U, U)
        assert [j.id for j in current_judgements(db)] == [2]
        actions = db.execute("SELECT action, entity_id FROM audit WHERE entity = 'judgement' ORDER BY id").fetchall()
        assert actions == [("insert", 1), ("insert", 2), ("supersede", 1)]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("UPDATE judgement SET level1 = 'fail' WHERE id = 1")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("DELETE FROM judgement WHERE id = 1")
    finally:
        study.close()


@pytest.mark.parametrize(("args", "expected"), [
    (["--levels", "pass,pass"], "give 5 outcomes"),
    (["--levels", "pass,pass,maybe,pass,pass"], "'maybe' is not pass"),
    (["--levels", "pass,fail,unknown,unknown,unknown", "--cause", "gremlins"], "failure taxonomy"),
    (["--levels", "pass,pass,pass,pass,pass", "--cause", "crash"], "no level fails"),
    (["--levels", "pass,pass,pass,pass,pass", "--note", "  "], "--note is empty"),
])
def test_bad_judgement_input_is_one_line_and_exit_2(study_path: Path, args: list[str], expected: str) -> None:
    fails_cleanly(workbench("judge", str(study_path), "mlp-xla", "1", *args), expected)


def test_a_missing_attempt_is_one_line(study_path: Path) -> None:
    fails_cleanly(workbench("judge", str(study_path), "mlp-xla", "9", "--levels", "pass,pass,pass,pass,pass"),
                  "no attempt #9")


WRITER = textwrap.dedent("""
    import sys
    from storage.database import open_study
    from workbench.judging import record_judgement
    reviewer, path = sys.argv[1], sys.argv[2]
    study = open_study(path)
    for round_ in range(6):
        for seq in (1, 2, 3, 4):
            levels = "pass,pass,unknown,unknown," + ("pass" if round_ % 2 else "fail")
            record_judgement(study.db, "mlp-xla", seq, levels=levels, cause=None, note=f"{reviewer} {round_}",
                             reviewer=reviewer)
    study.close()
""")


def test_two_reviewer_processes_writing_at_once_lose_no_judgement(study_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, name, str(study_path)], env=env,
                              stderr=subprocess.PIPE, text=True) for name in ("ana", "ben")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    study = open_study(study_path)
    try:
        db = study.db
        assert db.execute("SELECT count(*) FROM judgement").fetchone()[0] == 48
        for name in ("ana", "ben"):
            notes = [r[0] for r in db.execute("SELECT note FROM judgement WHERE reviewer = ? ORDER BY id", [name])]
            assert sorted(notes) == sorted(f"{name} {r}" for r in range(6) for _ in range(4))
        # every history is one unbroken chain: one current record per (attempt, reviewer)
        current = db.execute("SELECT attempt_id, reviewer, count(*) FROM judgement j WHERE NOT EXISTS"
                             " (SELECT 1 FROM judgement l WHERE l.supersedes = j.id) GROUP BY 1, 2").fetchall()
        assert len(current) == 8 and {c[2] for c in current} == {1}
        assert db.execute("SELECT count(*) FROM audit WHERE entity = 'judgement' AND action = 'insert'"
                          ).fetchone()[0] == 48
    finally:
        study.close()
