"""Mutated and truncated transcripts: the importer never crashes and never half-writes."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from import_helpers import Transcript

from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.importers.claude_code import ClaudeCodeImporter
from workbench.importers.rules import WorkloadRule

SAMPLES = Path(__file__).parent / "data" / "claude-code"


def base_lines() -> list[bytes]:
    t = Transcript()
    t.edit("train.py", "a", "b", minutes=0)
    t.bash("python train.py", "Traceback\nRuntimeError: boom", exit_code=1)
    t.say("It crashes. Let me fix it.")
    t.write("train.py", "print('ok')\n")
    t.bash("python train.py", "ok")
    t.say("The script runs successfully now.")
    own = [json.dumps(line).encode() + b"\n" for line in t.lines]
    real = (SAMPLES / "session-extra.jsonl").read_bytes().splitlines(keepends=True)
    return own + real


LINES = base_lines()
JUNK = st.sampled_from([
    b"", b"\n", b"{", b"[]\n", b"null\n", b'"text"\n', b"\xff\xfe\x00junk\n", b'{"type": 5}\n',
    b'{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": 7}]}}\n',
    b'{"type": "assistant", "message": {"content": "just text"}}\n',
    b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "x", "name": "Bash", "input": {"command": 3}}]}}\n',
    b'{"type": "user", "text": "\\ud800"}\n', b'{"type": "assistant", "toolUseResult": {"task": []}}\n',
])


@st.composite
def mutated(draw) -> bytes:
    lines = list(LINES)
    for _ in range(draw(st.integers(0, 6))):
        action = draw(st.sampled_from(["drop", "junk", "flip", "swap", "dup"]))
        i = draw(st.integers(0, len(lines) - 1))
        if action == "drop" and len(lines) > 1:
            del lines[i]
        elif action == "junk":
            lines.insert(i, draw(JUNK))
        elif action == "flip" and lines[i]:
            line = bytearray(lines[i])
            j = draw(st.integers(0, len(line) - 1))
            line[j] = draw(st.integers(0, 255))
            lines[i] = bytes(line)
        elif action == "swap":
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
    data = b"".join(lines)
    return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


def test_mutated_transcripts_never_crash_or_half_write(tmp_path_factory, bundle) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    root = tmp_path_factory.mktemp("fuzz")
    template = root / "template.db"
    study = open_study(template, create=True)
    import_bundle(study, bundle.root, "ana")
    study.close()
    counter = iter(range(10_000))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=mutated(), all_bash=st.booleans())
    def check(data: bytes, all_bash: bool) -> None:
        n = next(counter)
        db = root / f"{n}.db"
        db.write_bytes(template.read_bytes())
        path = root / f"{n}.jsonl"
        path.write_bytes(data)
        study = open_study(db)
        try:
            for _ in range(2):
                report = ClaudeCodeImporter(study, "mlp-xla", "ana", rule=WorkloadRule(all_bash=all_bash)).run([path])
                for file in report.files:
                    file.summary()
            # Never half-written: every imported attempt has its argv and, when answered, its log;
            # edits and tool calls belong to attempts that exist.
            for row in study.db.query("SELECT * FROM attempt WHERE external_id IS NOT NULL"):
                assert json.loads(row["argv"])
                if row["status"] in ("ok", "nonzero_exit", "interrupted", "blocked", "backgrounded"):
                    assert row["log_id"] is not None
            orphans = study.db.execute(
                "SELECT count(*) FROM attempt_edit WHERE attempt_id NOT IN (SELECT id FROM attempt)"
            ).fetchone()[0]
            orphans += study.db.execute(
                "SELECT count(*) FROM attempt_tool_call WHERE attempt_id NOT IN (SELECT id FROM attempt)"
            ).fetchone()[0]
            assert orphans == 0
            assert report.unchanged == report.imported  # the second import changed nothing
        finally:
            study.close()
            for p in root.glob(f"{n}.*"):
                p.unlink()

    check()


def test_an_attempt_that_fails_to_write_leaves_nothing(tmp_path: Path, bundle, monkeypatch) -> None:
    bundle.add_migration("mlp-xla")
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, bundle.root, "ana")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(LINES))
    importer = ClaudeCodeImporter(study, "mlp-xla", "ana")

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    from storage import imports

    monkeypatch.setattr(imports, "replace_attempt_rows", boom)  # the attempt's child rows: after its row and log
    counts = lambda: [study.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("attempt", "log", "audit")]
    before = counts()
    report = importer.run([path])
    assert report.imported == 0 and report.files[0].attempts_failed == 2
    assert "not written (RuntimeError: disk full)" in report.files[0].problems[0]
    assert counts() == before
    study.close()
