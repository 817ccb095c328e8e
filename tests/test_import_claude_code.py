"""Claude Code transcript import: the shared real samples, bad input, re-import."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from domain.errors import WorkbenchError
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.importers.claude_code import ClaudeCodeImporter
from workbench.importers.rules import WorkloadRule

SAMPLES = Path(__file__).parent / "data" / "claude-code"


@pytest.fixture
def study(bundle, tmp_path: Path):
    """A study database holding migration `mlp-xla` (three commits, the first is the base)."""
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0])])
    db = open_study(tmp_path / "s.db", create=True)
    assert not import_bundle(db, bundle.root, "ana").problems
    yield db
    db.close()


def run(study, *paths: Path, all_bash: bool = True, repo: Path | None = None):
    importer = ClaudeCodeImporter(study, "mlp-xla", "ana", rule=WorkloadRule(all_bash=all_bash), repo=repo)
    return importer.run(list(paths))


def rows(study, sql: str, params=()) -> list[dict]:
    return list(study.db.query(sql, list(params)))


def agent_attempts(study) -> dict[str, dict]:
    return {r["external_id"]: r for r in rows(study, "SELECT * FROM attempt WHERE external_id IS NOT NULL")}


def test_samples_give_the_right_statuses_and_exit_codes(study) -> None:
    report = run(study, SAMPLES / "session-main.jsonl", SAMPLES / "session-extra.jsonl")
    assert report.inserted == 5 and not report.problems
    got = agent_attempts(study)
    status = {k: (r["status"], r["exit_code"], r["exit_code_source"]) for k, r in got.items()}
    assert status["toolu_01UwLnYYWGBvukzh1QE6JpfM"] == ("ok", 0, "transcript")
    assert status["toolu_01Uxds48rLmddUyyYGidT1Ey"] == ("nonzero_exit", 1, "transcript")
    # Backgrounded, then TaskOutput reports exitCode 0.
    assert status["toolu_01RWqtJ4Z3D4BpJnag9W86Ky"] == ("ok", 0, "task_output")
    # The benign grep: no error, a returnCodeInterpretation, and no number.
    assert status["toolu_01P8XMPNE2FEcLLusfwLPXaB"] == ("ok", None, None)
    assert got["toolu_01P8XMPNE2FEcLLusfwLPXaB"]["result_note"] == "No matches found"
    # The sub-agent's Bash call is linked to the Task call that started it.
    sub = got["toolu_01Pza94zUw2yk8DUn58F7Tbo"]
    assert sub["agent_id"] == "a2898e3"
    task = rows(study, "SELECT * FROM attempt_tool_call WHERE name = 'Task'")
    assert [(t["tool_use_id"], t["spawned_agent_id"]) for t in task] == [("toolu_017pLRuPHYTX5t99EnLyV53m", "a2898e3")]
    # The failed call's output is its log; the edit and the write are kept.
    from storage.logs import LogReader

    log = LogReader(study.db, got["toolu_01Uxds48rLmddUyyYGidT1Ey"]["log_id"])
    assert "The following paths are ignored" in "\n".join(log.lines(0, 5))
    edits = rows(study, "SELECT tool, file_path, patch FROM attempt_edit ORDER BY attempt_id, ord")
    assert [(e["tool"], e["file_path"]) for e in edits] == [
        ("Edit", "lib/spotter_web/live/transcript_computers.ex"),
        ("Write", "lib/spotter_web/live/transcript_computers.ex"),
    ]
    assert edits[0]["patch"].startswith("--- a/lib/")


def test_the_default_rule_finds_no_workload_in_the_samples(study) -> None:
    report = run(study, SAMPLES / "session-main.jsonl", all_bash=False)
    assert report.imported == 0
    assert report.files[0].tool_calls == 4  # three Bash calls and the Task; edits are counted apart


def test_reimport_changes_nothing(study) -> None:
    run(study, SAMPLES / "session-main.jsonl", SAMPLES / "session-extra.jsonl")
    audit = study.db.execute("SELECT count(*) FROM audit").fetchone()[0]
    again = run(study, SAMPLES / "session-main.jsonl", SAMPLES / "session-extra.jsonl")
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 5)
    assert study.db.execute("SELECT count(*) FROM audit").fetchone()[0] == audit


def test_subagent_files_are_found_in_both_layouts(study, tmp_path: Path) -> None:
    lines = (SAMPLES / "session-main.jsonl").read_text().splitlines()
    main = [l for l in lines if '"isSidechain":true' not in l]
    side = [l for l in lines if '"isSidechain":true' in l]
    for layout in ("subagents", "flat"):
        project = tmp_path / layout
        project.mkdir()
        (project / "4d5611e5.jsonl").write_text("\n".join(main) + "\n")
        folder = project / "4d5611e5" / "subagents" if layout == "subagents" else project
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "agent-a2898e3.jsonl").write_text("\n".join(side) + "\n")
    report = run(study, tmp_path / "subagents")
    assert [f.agent_id for f in report.files] == [None, "a2898e3"]
    assert agent_attempts(study)["toolu_01Pza94zUw2yk8DUn58F7Tbo"]["agent_id"] == "a2898e3"
    report = run(study, tmp_path / "flat")
    assert [f.agent_id for f in report.files] == [None, "a2898e3"] and report.unchanged == 3


def test_a_missing_subagent_file_is_reported(study, tmp_path: Path) -> None:
    lines = (SAMPLES / "session-main.jsonl").read_text().splitlines()
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(l for l in lines if '"isSidechain":true' not in l) + "\n")
    report = run(study, path)
    assert report.inserted == 2
    assert any("sub-agent a2898e3: its transcript is missing" in p for p in report.files[0].problems)


def test_bad_lines_are_counted_and_never_fatal(study, tmp_path: Path) -> None:
    good = (SAMPLES / "session-main.jsonl").read_bytes().splitlines(keepends=True)
    junk = [b"{not json\n", b"[1, 2]\n", b'{"type": "user", "x": "\\ud800"}\n', b"\x00\xff\xfe binary\n",
            b'{"type": "brand-new-kind"}\n']
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(good[:3] + junk + good[3:]) + b'{"type": "assistant", "trunc')
    report = run(study, path)
    file = report.files[0]
    assert file.bad_lines == 5 and file.first_bad.startswith("line 4: not valid JSON")
    assert file.unknown_types == {"brand-new-kind": 1}
    assert report.inserted == 3
    summary = file.summary()
    assert "5 bad lines skipped (first at line 4" in summary and "unknown type" in summary


def test_a_file_that_is_not_a_transcript(study, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("hello\nworld\n")
    report = run(study, path)
    assert report.imported == 0 and "2 bad lines" in report.files[0].summary()
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"foo": 1}) + "\n")
    assert "unknown type" in run(study, empty).files[0].summary()


def test_a_background_run_takes_its_exit_code_from_the_task_notification(study, tmp_path: Path) -> None:
    from import_helpers import Transcript

    t = Transcript()
    call = t.call("Bash", {"command": "python train.py", "run_in_background": True})
    t.result(call, "Command running in background with ID: b77. Output is being written to: /tmp/x",
             extra={"stdout": "", "stderr": "", "interrupted": False, "backgroundTaskId": "b77"})
    t.say("Started the training in the background.")
    t.lines.append({"type": "queue-operation", "operation": "enqueue", "timestamp": t.at(),
                    "sessionId": t.session, "content": "<task-notification>\n<task-id>b77</task-id>\n"
                    "<status>failed</status>\n<summary>Background command \"train\" failed (exit code 2)</summary>"})
    t.bash("python other.py", "fine")
    report = run(study, t.dump(tmp_path / "bg.jsonl"), all_bash=False)
    assert report.inserted == 2
    got = agent_attempts(study)[call]
    assert (got["status"], got["exit_code"], got["exit_code_source"]) == ("nonzero_exit", 2, "task_notification")


@pytest.mark.parametrize("kind", ["new", "fetched"])
def test_a_repository_with_no_commit_is_said_in_one_line(study, bundle, tmp_path: Path, kind: str) -> None:
    """`git init` and nothing more, or the project's objects fetched into it with HEAD on no
    commit: git's usage line ('git <command> [<revision>...] -- [<file>...]') used to be the message."""
    repo = tmp_path / "no-commit"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    if kind == "fetched":  # the base commit is there; HEAD still names none
        subprocess.run(["git", "-C", str(repo), "fetch", "-q", str(bundle.root / "migrations" / "mlp-xla" / "repo")],
                       check=True)
    with pytest.raises(WorkbenchError) as caught:
        run(study, SAMPLES / "session-main.jsonl", repo=repo)
    assert str(caught.value) == (f"{repo}: the repository has no commit (its HEAD names none):"
                                 " point --repo at the one the agent worked in")
