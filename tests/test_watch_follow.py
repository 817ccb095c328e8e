"""Reading transcripts on from where the last look stopped gives what an import of the whole file
gives: the same attempts, exit codes, outputs, edits and tool calls, whatever the chunks."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from storage.database import open_study
from storage.logs import LogReader
from tests.import_helpers import Transcript
from workbench.bundle import import_bundle
from workbench.importers.claude_code import ClaudeCodeImporter
from workbench.importers.follow import Follower
from workbench.importers.rules import WorkloadRule

SAMPLES = Path(__file__).parent / "data" / "claude-code"
ATTEMPT = ("seq, external_id, status, exit_code, exit_code_source, claim, argv, cwd, env, result_note, commit_sha,"
           " session_id, agent_id, started_at, ended_at, expected_level, log_id IS NULL")


def make_study(bundle, path: Path):
    if not (bundle.root / "migrations" / "mlp-xla").exists():
        folder, shas = bundle.add_migration("mlp-xla")
        bundle.write_attempts(folder, [bundle.attempt(0, shas[0])])
    db = open_study(path, create=True)
    assert not import_bundle(db, bundle.root, "ana").problems
    return db


def importer(db) -> ClaudeCodeImporter:
    return ClaudeCodeImporter(db, "mlp-xla", "ana", rule=WorkloadRule(all_bash=True))


def contents(db) -> tuple[dict[str, tuple], list[str]]:
    """Everything an import writes about agent attempts, by external id and without row ids; and the
    external ids in sequence order."""
    attempts = {}
    for row in db.db.execute(f"SELECT id, log_id, {ATTEMPT} FROM attempt WHERE external_id IS NOT NULL ORDER BY seq"):
        log = "\n".join(LogReader(db.db, row[1]).lines(0, 10_000)) if row[1] is not None else None
        edits = db.db.execute("SELECT ord, tool_use_id, tool, file_path, old_text, new_text, replace_all, patch, at"
                              " FROM attempt_edit WHERE attempt_id = ? ORDER BY ord", [row[0]]).fetchall()
        calls = db.db.execute("SELECT ord, tool_use_id, name, input, result, is_error, called_at, result_at, agent_id,"
                              " spawned_agent_id FROM attempt_tool_call WHERE attempt_id = ? ORDER BY ord",
                              [row[0]]).fetchall()
        attempts[row[3]] = (tuple(row[4:]), log, edits, calls)
    return attempts, list(attempts)


def sample_project(root: Path) -> list[tuple[Path, bytes]]:
    """The real sample lines laid out as Claude Code keeps them: the sub-agent's lines in its own file."""
    lines = (SAMPLES / "session-main.jsonl").read_bytes().splitlines(keepends=True)
    main = root / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    side = b"".join(line for line in lines if b'"isSidechain":true' in line)
    agent = main.with_suffix("") / "subagents" / "agent-a2898e3.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_bytes(side)
    extra = (SAMPLES / "session-extra.jsonl").read_bytes()
    return [(main, b"".join(line for line in lines if b'"isSidechain":true' not in line)),
            (root / "extra.jsonl", extra), (root / "built.jsonl", built())]


def built() -> bytes:
    """A session with what spans lines: parallel calls, claims, edits before attempts, a call
    whose result never comes, a background run finished later, a blocked call."""
    t = Transcript(session="built-1")
    t.edit("train.py", "lr = 1", "lr = 2")
    t.bash("python train.py", "step 1 loss 0.9\neval_accuracy 0.91\n")
    t.say("Training works and reaches 0.91.")
    first = t.call("Bash", {"command": "python train.py --a"})
    second = t.call("Bash", {"command": "python train.py --b"})
    t.read("train.py", "lr = 2\n")
    t.result(second, "Exit code 2\nbad flag", is_error=True, extra="Error: Exit code 2\nbad flag")
    t.result(first, "ok a\n", extra={"stdout": "ok a\n", "stderr": "warn\n"})
    t.say("Both ran; the second failed.")
    bg = t.call("Bash", {"command": "python train.py --long", "run_in_background": True})
    t.result(bg, "Command running in background with ID: bgx1", extra={"backgroundTaskId": "bgx1"})
    out = t.call("TaskOutput", {"task_id": "bgx1"})
    t.result(out, "done", extra={"task": {"task_id": "bgx1", "exitCode": 3, "output": "late output\n"}})
    blocked = t.call("Bash", {"command": "rm -rf /"})
    t.result(blocked, "Permission denied by hook", is_error=True)
    t.bash("python eval.py", "accuracy 0.5\n")
    t.say("Done: the model is migrated and fully correct.")
    t.call("Bash", {"command": "python train.py --never"})
    return "".join(json.dumps(line) + "\n" for line in t.lines).encode()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_appended_chunks_give_what_a_whole_import_gives(bundle, tmp_path: Path, seed: int) -> None:
    whole_root, live_root = tmp_path / "whole", tmp_path / "live"
    whole_root.mkdir()
    live_root.mkdir()
    files = sample_project(whole_root)
    for path, data in files:
        path.write_bytes(data)
    whole = make_study(bundle, tmp_path / "whole.db")
    report = importer(whole).run([path for path, _ in files])
    assert report.inserted >= 12, report.files

    sample_project(live_root)
    live = make_study(bundle, tmp_path / "live.db")
    follower = Follower(importer(live))
    rng = random.Random(seed)
    targets = [(live_root / path.relative_to(whole_root), data) for path, data in files]
    written = dict.fromkeys((p for p, _ in targets), 0)
    for path in written:
        path.write_bytes(b"")
    while any(written[p] < len(d) for p, d in targets):
        path, data = rng.choice([(p, d) for p, d in targets if written[p] < len(d)])
        step = rng.choice([1, 7, 50, 300, 2000, len(data)])
        with path.open("ab") as fh:
            fh.write(data[written[path]:written[path] + step])
        written[path] = min(len(data), written[path] + step)
        follower.read([p for p, _ in targets])
    follower.read([p for p, _ in targets])
    got, got_order = contents(live)
    want, want_order = contents(whole)
    assert got == want
    # sequence numbers follow the order the calls were read in: within a file, the file's order
    for path, _ in files:
        ids = [key for key in want_order if key in path.read_text()]
        assert [key for key in got_order if key in ids] == ids
    assert all(t.offset == len(d) for t, (_, d) in zip(follower.tails.values(), targets, strict=True))
    whole.close()
    live.close()


def test_a_half_line_waits_and_a_call_waits_for_its_result(bundle, tmp_path: Path) -> None:
    db = make_study(bundle, tmp_path / "s.db")
    t = Transcript()
    call = t.call("Bash", {"command": "python train.py"})
    t.result(call, "Exit code 1\nboom", is_error=True, extra="Error: Exit code 1\nboom")
    data = "".join(json.dumps(line) + "\n" for line in t.lines).encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data[: len(json.dumps(t.lines[0])) + 30])
    follower = Follower(importer(db))
    follower.read([path])
    status = "SELECT status, exit_code FROM attempt WHERE external_id IS NOT NULL"
    assert db.db.execute(status).fetchall() == [("no_result", None)]
    tail = follower.tails[path]
    assert tail.report.bad_lines == 0 and tail.offset == len(json.dumps(t.lines[0])) + 1
    path.write_bytes(data)  # the same bytes and the rest: read on, not again
    follower.read([path])
    assert db.db.execute(status).fetchall() == [("nonzero_exit", 1)]
    assert tail.restarts == 0 and tail.report.bad_lines == 0
    db.close()


def test_a_file_cut_shorter_or_replaced_is_read_from_the_start(bundle, tmp_path: Path) -> None:
    db = make_study(bundle, tmp_path / "s.db")
    t = Transcript()
    t.bash("python train.py", "ok\n")
    t.bash("python train.py --b", "ok b\n")
    path = tmp_path / "s.jsonl"
    t.dump(path)
    follower = Follower(importer(db))
    follower.read([path])
    tail = follower.tails[path]
    count = "SELECT COUNT(*) FROM attempt WHERE external_id IS NOT NULL"
    assert db.db.execute(count).fetchone() == (2,)
    t.dump(path, upto=2)  # a restart wrote the file again, shorter
    follower.read([path])
    assert tail.restarts == 1
    other = Transcript(session="s2")
    other.ids = 50
    other.bash("python other.py", "x\n")
    other.bash("python other.py --more", "y\n")
    replacement = tmp_path / "new.jsonl"
    other.dump(replacement)
    replacement.replace(path)  # another file (inode) of the same size or longer
    follower.read([path])
    assert tail.restarts == 2
    assert db.db.execute(count).fetchone() == (4,)
    assert db.db.execute("SELECT COUNT(DISTINCT external_id) FROM attempt WHERE external_id IS NOT NULL").fetchone() == (4,)
    db.close()


def test_a_subagent_file_that_changes_after_it_was_read_means_a_fresh_read(bundle, tmp_path: Path) -> None:
    db = make_study(bundle, tmp_path / "s.db")
    files = sample_project(tmp_path)
    main, data = files[0]
    main.write_bytes(data)
    follower = Follower(importer(db))
    follower.read([main])
    tail = follower.tails[main]
    before = contents(db)
    assert tail.restarts == 0 and len(tail.reports) == 2  # the session and its sub-agent
    agent = next(iter(tail.agents))
    with agent.open("ab") as fh:  # a line the sub-agent wrote late
        fh.write(b'{"type": "system", "isSidechain": true, "agentId": "a2898e3"}\n')
    follower.read([main])
    assert tail.restarts == 1 and contents(db) == before
    follower.read([main])
    assert tail.restarts == 1  # read once more, then settled
    db.close()


def test_an_attempt_not_written_is_written_by_the_next_look(bundle, tmp_path: Path) -> None:
    db = make_study(bundle, tmp_path / "s.db")
    t = Transcript()
    t.bash("python train.py", "ok\n")
    second = t.bash("python train.py --b", "ok b\n")
    path = t.dump(tmp_path / "s.jsonl")
    db.db.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON attempt WHEN NEW.external_id = '{second}'"
                  " BEGIN SELECT RAISE(ABORT, 'refused'); END")
    follower = Follower(importer(db))
    assert follower.read([path]) == [path]  # to be looked at again, though the file will not change
    ids = "SELECT external_id FROM attempt WHERE external_id IS NOT NULL ORDER BY seq"
    assert [r[0] for r in db.db.execute(ids)] == ["toolu_main_0001"]
    db.db.execute("DROP TRIGGER refuse")
    assert follower.read([path]) == []
    assert [r[0] for r in db.db.execute(ids)] == ["toolu_main_0001", second]
    assert follower.tails[path].restarts == 1
    db.close()
