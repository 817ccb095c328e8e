"""`workbench watch` as a subprocess while a transcript grows in steps, a half line included."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

from tests.conftest import make_repo
from tests.import_helpers import Transcript
from tests.test_cli import workbench
from tests.test_setup import reference_files
from tests.watch_helpers import watching


def query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db, timeout=10)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def wait_for(db: Path, sql: str, expected: list[tuple], limit: float = 20.0) -> float:
    """Seconds until the query gives `expected`; fails after `limit`."""
    start = time.monotonic()
    while True:
        got = query(db, sql)
        if got == expected:
            return time.monotonic() - start
        assert time.monotonic() - start < limit, got
        time.sleep(0.05)


VERIFIED = ("SELECT a.seq, a.status, a.exit_code, v.highest_level IS NOT NULL FROM attempt a"
            " LEFT JOIN verification v ON v.attempt_id = a.id AND v.superseded_by IS NULL"
            " WHERE a.source = 'agent' ORDER BY a.seq")


def append(path: Path, lines: list[dict], *, cut: int | None = None) -> None:
    """Append whole lines, or with `cut` only the first `cut` bytes of them (a half-written line)."""
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with path.open("ab") as fh:
        fh.write(text if cut is None else text[:cut])


def test_watch_follows_a_growing_session(tmp_path: Path) -> None:
    repo, db, config = tmp_path / "project", tmp_path / "s.db", tmp_path / "claude"
    make_repo(repo, [{"train.py": "print('train')\n"}])
    log, metrics = reference_files(tmp_path)
    for args in (("init", str(db), "--title", "Live"),
                 ("migration", "add", str(db), "mlp", "--repo", str(repo), "--base", "HEAD", "--target", "cpu:4", "--goal",
                  "eval_accuracy", "--direction", "max", "--reference-value", "0.9", "--command", "python train.py"),
                 ("reference", str(db), "mlp", "--log", str(log), "--metrics", str(metrics))):
        assert workbench(*args).returncode == 0, args
    t = Transcript(cwd=str(repo.resolve()))
    t.bash("python train.py", "step 1 loss 0.9\nstep 2 loss 0.5\nstep 2 eval_accuracy 0.91\n")
    t.say("It runs successfully.")
    t.bash("python train.py --fast", "Traceback (most recent call last):\nRuntimeError: boom", exit_code=1)
    running = t.call("Bash", {"command": "python train.py --steps 9"})
    folder = config / "projects" / "".join(c if c.isalnum() else "-" for c in str(repo.resolve()))
    folder.mkdir(parents=True)
    session = folder / f"{t.session}.jsonl"
    session.write_text("")
    watch = watching(db, "mlp", repo, {**os.environ, "CLAUDE_CONFIG_DIR": str(config), "WORKBENCH_REVIEWER": "ana"},
                     "--for", "120")
    try:
        time.sleep(1.0)  # let it start
        append(session, t.lines[:3])
        wait_for(db, VERIFIED, [(1, "ok", 0, 1)])
        half = len(json.dumps(t.lines[4])) // 2
        append(session, t.lines[3:5], cut=len(json.dumps(t.lines[3])) + 1 + half)
        # the call's line is whole: an attempt without a result yet; its result's half line waits
        wait_for(db, VERIFIED, [(1, "ok", 0, 1), (2, "no_result", None, 0)])
        time.sleep(1.0)  # several rounds: the half line is neither read nor counted as bad
        assert query(db, VERIFIED) == [(1, "ok", 0, 1), (2, "no_result", None, 0)]
        with session.open("ab") as fh:
            fh.write((json.dumps(t.lines[4]) + "\n").encode()[half:])
        wait_for(db, VERIFIED, [(1, "ok", 0, 1), (2, "nonzero_exit", 1, 1)])
        append(session, t.lines[5:6])  # a call whose result has not come yet: no verdict
        wait_for(db, VERIFIED, [(1, "ok", 0, 1), (2, "nonzero_exit", 1, 1), (3, "no_result", None, 0)])
        t.result(running, "step 1 loss 0.9\n", extra={"stdout": "step 1 loss 0.9\n", "stderr": ""})
        append(session, t.lines[6:])
        wait_for(db, VERIFIED, [(1, "ok", 0, 1), (2, "nonzero_exit", 1, 1), (3, "ok", 0, 1)])
        resumed = Transcript(cwd=str(repo.resolve()), session="22222222-2222-3333-4444-555555555555")
        resumed.ids = 100
        resumed.bash("python train.py --resume", "step 1 loss 0.9\n")
        resumed.dump(folder / f"{resumed.session}.jsonl")  # a new session (a restart) is picked up
        wait_for(db, VERIFIED, [(1, "ok", 0, 1), (2, "nonzero_exit", 1, 1), (3, "ok", 0, 1), (4, "ok", 0, 1)])
    finally:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT external_id) FROM attempt WHERE source = 'agent'") == [(4, 4)]
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT attempt_id) FROM verification WHERE superseded_by IS NULL"
                     " AND attempt_id IN (SELECT id FROM attempt WHERE source = 'agent')") == [(4, 4)]
    lines = out.splitlines()
    assert lines[0].startswith("attempt 1: ok (exit 0): level")
    assert lines[1].startswith("attempt 2: nonzero_exit (exit 1): level 0, crash")
    assert lines[2].startswith("attempt 3: ok (exit 0)") and lines[3].startswith("attempt 4: ok (exit 0)")
    assert len(lines) == 4


def test_watch_refuses_bad_input_and_stops_by_itself(tmp_path: Path) -> None:
    from tests.test_cli import fails_cleanly

    repo, db = tmp_path / "project", tmp_path / "s.db"
    make_repo(repo, [{"train.py": "print('train')\n"}])
    assert workbench("init", str(db), "--title", "Live").returncode == 0
    fails_cleanly(workbench("watch", str(db), "nope", "--project", str(repo)), "no migration 'nope'",
                  "workbench migration add")
    assert workbench("migration", "add", str(db), "m", "--repo", str(repo), "--base", "HEAD", "--target", "cpu", "--goal", "acc",
                     "--direction", "max", "--reference-value", "1").returncode == 0
    fails_cleanly(workbench("watch", str(db), "m", "--project", str(tmp_path / "missing")), "--project",
                  "no such folder")
    fails_cleanly(workbench("watch", str(tmp_path / "none.db"), "m", "--project", str(repo)), "no such study")
    quiet = workbench("watch", str(db), "m", "--project", str(repo), "--for", "0.5",
                      env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stderr
