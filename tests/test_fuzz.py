"""Hypothesis fuzzing of every importer and parser: no crash, and a bad input is a clear error.

"Clear error" means the parser's own error type with a message naming what is wrong
(WorkbenchError / BadRecord / BadCommit / ValueError, as each parser documents); anything else
escaping (KeyError, TypeError, AttributeError, ...) is a bug. Claude Code transcripts are fuzzed
in tests/test_import_fuzz.py (mutated real sessions) and here with generated events.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.errors import WorkbenchError
from storage.database import open_study
from storage.logs import MAX_LINE_BYTES, LogReader, store_log_bytes
from workbench import probe
from workbench.bundle import BadRecord, import_bundle, parse_attempt, parse_metrics, parse_migration, parse_study
from workbench.importers import git_history
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import compile_patterns
from workbench.verify.settings import apply_assignment, parse_assignment

FAST = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

# ----------------------------------------------------------------------------- values

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
WEIRD = st.sampled_from([None, True, 0, -1, 1, 5, 2**63, 1.5, float("nan"), float("inf"), "", "x", "0",
                         "\x00", "é", [], ["a"], [1], {}, {"kind": "tpu", "count": "4"}])


def toml_value(value) -> str | None:
    """A TOML rendering of value, or None where TOML has none (null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        parts = [toml_value(v) for v in value]
        return "[" + ", ".join(p for p in parts if p is not None) + "]"
    if isinstance(value, dict):
        parts = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items() if toml_value(v) is not None]
        return "{" + ", ".join(parts) + "}"
    raise TypeError(value)


def toml_text(table: dict) -> str:
    lines = []
    for key, value in table.items():
        text = toml_value(value)
        if text is not None:
            lines.append(f"{json.dumps(key)} = {text}")
    return "\n".join(lines) + "\n"


@st.composite
def mutated_table(draw, base: dict) -> dict:
    """base with some keys dropped or replaced, at any depth, by odd values."""
    out = {}
    for key, value in base.items():
        action = draw(st.sampled_from(["keep", "keep", "keep", "drop", "weird", "json"]))
        if action == "keep":
            out[key] = draw(mutated_table(value)) if isinstance(value, dict) else value
        elif action == "weird":
            out[key] = draw(WEIRD)
        elif action == "json":
            out[key] = draw(JSON)
    if draw(st.booleans()):
        out[draw(st.text(min_size=1, max_size=6))] = draw(WEIRD)
    return out


@st.composite
def lightly_mutated(draw, base: dict) -> dict:
    """base with at most two top-level keys dropped or given odd values: mostly valid records."""
    out = dict(base)
    for key in draw(st.lists(st.sampled_from(sorted(base)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del out[key]
        else:
            out[key] = draw(WEIRD | JSON)
    return out


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    """data with a few bytes replaced, inserted or cut; sometimes truncated."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(buf)))
        token = draw(st.sampled_from([b'"', b"=", b"[", b"]", b"{", b"\n", b"\xff", b"#", b"1e999", b"\x00", b""]))
        if draw(st.booleans()) and i < len(buf):
            buf[i:i + 1] = token
        else:
            buf[i:i] = token
    data = bytes(buf)
    return data[: draw(st.integers(0, len(data)))] if draw(st.integers(0, 4)) == 0 else data


# ----------------------------------------------------------------------------- bundle files

STUDY = {"format": 1, "study": {"slug": "s", "title": "T", "staff_hourly_rate": 90.0, "reviewers": ["ana"]},
         "prices": {"tpu-v5e": 1.2}, "interventions": {"kinds": ["pairing"], "describe": {"pairing": "x"}}}
MIGRATION = {"title": "m", "repo": "repo", "base_commit": "abc", "status": "in_progress", "acceptance_level": 4,
             "target": {"accelerator": "tpu-v5e", "chips": 4, "runtime": "torch_xla"},
             "goal": {"metric": "acc", "reference": 0.9, "direction": "max", "tolerance": 0.01},
             "budgets": {"compute_dollars": 5.0, "staff_hours": 2, "attempts": 3, "calendar_days": 1}}
ATTEMPT = {"seq": 1, "source": "agent", "commit": "abc", "status": "ok", "exit_code": 0, "exit_code_source": "process",
           "command": {"argv": ["python", "train.py"], "cwd": ".", "env": {"PJRT_DEVICE": "TPU"}},
           "started_at": "2026-11-01T10:00:00Z", "ended_at": None, "expected_level": 3, "claim": "works",
           "intended_hardware": {"kind": "tpu-v5e", "count": 4}, "observed_hardware": None,
           "log": "logs/1.log", "metrics": "metrics/1.jsonl", "rerun_of": None}


def _toml_file(tmp_path_factory, draw_text: str | bytes) -> Path:
    path = tmp_path_factory.mktemp("toml") / "file.toml"
    path.write_bytes(draw_text if isinstance(draw_text, bytes) else draw_text.encode())
    return path


@FAST
@given(table=mutated_table(STUDY), raw=st.booleans(), data=st.data())
def test_study_toml(tmp_path_factory, table, raw, data) -> None:
    text = toml_text(table).encode()
    if raw:
        text = data.draw(byte_mutation(toml_text(STUDY).encode()))
    path = _toml_file(tmp_path_factory, text)
    try:
        parse_study(path)
    except WorkbenchError as exc:
        assert str(exc).startswith(f"{path}: ")


@FAST
@given(table=mutated_table(MIGRATION), raw=st.booleans(), data=st.data())
def test_migration_toml(tmp_path_factory, table, raw, data) -> None:
    text = toml_text(table).encode()
    if raw:
        text = data.draw(byte_mutation(toml_text(MIGRATION).encode()))
    path = _toml_file(tmp_path_factory, text)
    try:
        parse_migration(path, data.draw(st.sampled_from(["mlp", "Bad Slug", "a" * 200, ""])))
    except WorkbenchError as exc:
        assert str(exc).startswith(f"{path}: ")


@FAST
@given(record=mutated_table(ATTEMPT) | JSON)
def test_attempt_records(record) -> None:
    try:
        parse_attempt(record, 1)
    except BadRecord as exc:
        assert str(exc)


VALID_POINT = st.fixed_dictionaries({"name": st.sampled_from(["loss", "grad_norm", "eval_accuracy"]),
                                     "step": st.integers(0, 50), "value": st.floats(-10, 10)})
POINT = st.fixed_dictionaries({"name": st.sampled_from(["loss", "acc"]) | WEIRD,
                               "step": st.integers(-2, 10**6) | WEIRD, "value": st.floats() | WEIRD})


@FAST
@given(lines=st.lists(POINT.map(lambda p: json.dumps(p).encode()) | JSON.map(lambda v: json.dumps(v).encode())
                      | st.binary(max_size=30), max_size=8))
def test_metric_series_files(tmp_path_factory, lines) -> None:
    path = tmp_path_factory.mktemp("metrics") / "m.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        points = parse_metrics(path)
    except BadRecord as exc:
        assert str(exc).startswith(f"{path}:")
    else:
        assert all(isinstance(n, str) and isinstance(s, int) and s >= 0 and isinstance(v, float) for n, s, v in points)


@pytest.fixture(scope="module")
def bundle_template(tmp_path_factory):
    """A bundle with one migration (three commits) and a study database holding it."""
    from tests.conftest import BundleBuilder

    root = tmp_path_factory.mktemp("fuzz-bundle")
    builder = BundleBuilder(root / "bundle")
    builder.write_study()
    folder, shas = builder.add_migration("mlp-xla")
    builder.write_attempts(folder, [builder.attempt(0, shas[0])])
    template = root / "template.db"
    study = open_study(template, create=True)
    assert import_bundle(study, builder.root, "ana").problems == []
    study.close()
    return builder, folder, shas, template


LOG_PIECES = st.sampled_from([
    b"step 3/40 loss 0.41 grad_norm 1.2\n", b"Step: 7, loss=nan\n", b"{'loss': 0.69, 'epoch': 0.1}\n",
    b'{"step": 2, "loss": 1e999}\n', b"Traceback (most recent call last):\n", b'  File "x.py", line 1\n',
    b"RuntimeError: boom\n", b"Killed\n", b"RESOURCE_EXHAUSTED: out of memory\n", b"Metric: CompileTime\n",
    b"  TotalSamples: 12\n", b"Counter: UncachedCompile\n", b"  Value: 7\n", b"Counter: aten::nonzero\n",
    b"Compilation Analysis: Compilation Cause\n", b"pt-xla-profiler: TransferFromDeviceTime too frequent\n",
    b'workbench-probe {"device_kind": "TPU v5e", "devices_used": 4}\n', b"workbench-probe {bad json\n",
    b"workbench-probe []\n", b"{devices=[4,1]0,1,2,3}\n", b"devices=[]\n", b"eval_accuracy 0.93\n",
    b"\r", b"\xff\xfe", b"\x00", b"x" * 5000, b"\n", b"Epoch 0:  50%|###  | 16/32 [00:01<00:00, 12.3it/s, loss=0.693]\n",
    # lines that made backtracking patterns quadratic or worse (issue 20), and step forms without a total
    b"a1" * 2000, b"eval_" + b"1" * 3000 + b"x", b"Epoch 1 " * 300, b"|x| 1/2 [" + b"it/s" * 500, b"torch_xla" * 300,
    b"step 2/9 loss " + b"A" * 3000, b"Step: 5, loss=0.1\n", b"Training for step 0/100\n",
    # values with no step before any step line, per epoch (issue 38)
    b"Train Epoch: 2 [0/60 (0%)]\tLoss: 0.3\n", b"epoch=4\n", b"EPOCH [5/9] eval_loss 0.2\n", b"{\"acc\": 0.5}\n",
])
LOGS = st.lists(LOG_PIECES | st.binary(max_size=40), max_size=40).map(b"".join)


@SLOW
@given(lines=st.lists(lightly_mutated(ATTEMPT).map(json.dumps) | mutated_table(ATTEMPT).map(json.dumps)
                      | JSON.map(json.dumps) | st.text(max_size=30),
                      min_size=1, max_size=6),
       log=LOGS, metrics=st.lists(VALID_POINT.map(json.dumps), max_size=5) | st.lists(POINT.map(json.dumps), max_size=5))
def test_bundle_import_of_fuzzed_attempts_never_crashes_or_half_writes(bundle_template, tmp_path_factory,
                                                                        lines, log, metrics) -> None:
    """Whole bundle imports and verification: odd records are reported by file and line."""
    from tests.test_faults import assert_intact
    from workbench.verify import verify_study

    builder, folder, shas, template = bundle_template
    work = tmp_path_factory.mktemp("import")
    db = work / "s.db"
    db.write_bytes(template.read_bytes())
    fixed = []
    for n, line in enumerate(lines):  # make some records point at real commits, logs and metrics
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and n % 2 == 0:
            record.update(seq=n + 1, commit=shas[n % 3], log=f"logs/f{n}.log", metrics=f"metrics/f{n}.jsonl")
            (folder / f"logs/f{n}.log").write_bytes(log)
            (folder / f"metrics/f{n}.jsonl").write_text("\n".join(metrics))
            line = json.dumps(record)
        fixed.append(line)
    (folder / "attempts.jsonl").write_text("\n".join(fixed) + "\n")
    study = open_study(db)
    try:
        report = import_bundle(study, builder.root, "ana")
        for problem in report.problems:
            assert problem.startswith(str(folder)), problem
        verify_study(study.db, "ana")
    finally:
        study.close()
    assert_intact(db)


# ----------------------------------------------------------------------------- logs

def _facts(chunks) -> str:
    scanner = LogScanner(compile_patterns(), extract_metrics=True)
    for chunk in chunks:
        scanner.feed(chunk)
    facts = scanner.finish()
    out = dict(vars(facts))
    out["points"] = sorted((name, sorted(steps.items())) for name, steps in facts.points.items())
    return repr(out)  # repr: nan == nan; points compared regardless of the order they were found in


@FAST
@given(log=LOGS, cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_log_scanner_on_any_bytes_and_any_chunking(log, cuts) -> None:
    """No crash on any bytes; the facts do not depend on where the chunks were cut."""
    whole = _facts([log])
    bounds = sorted({min(c, len(log)) for c in cuts} | {0, len(log)})
    pieces = [log[a:b] for a, b in zip(bounds, bounds[1:])]
    assert _facts(pieces) == whole
    assert f"'size': {len(log)}," in whole


@FAST
@given(log=LOGS, cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_planned_step_count_is_the_same_without_metric_extraction(log, cuts) -> None:
    """A log over the extraction limit is scanned without extraction: its planned step count (level
    1's yardstick) is the one extraction finds, for any chunking (issue 19)."""
    bounds = sorted({min(c, len(log)) for c in cuts} | {0, len(log)})
    scanner = LogScanner(compile_patterns(), extract_metrics=False)
    for a, b in zip(bounds, bounds[1:]):
        scanner.feed(log[a:b])
    extracting = LogScanner(compile_patterns(), extract_metrics=True)
    extracting.feed(log)
    assert scanner.finish().total_steps == extracting.finish().total_steps


@FAST
@given(log=LOGS | st.binary(max_size=3000), start=st.integers(0, 60), count=st.integers(0, 60))
def test_stored_logs_read_back_line_by_line(tmp_path_factory, log, start, count) -> None:
    db = tmp_path_factory.mktemp("logs") / "s.db"
    study = open_study(db, create=True)
    try:
        with study.db.atomic():
            log_id = store_log_bytes(study.db, log)
        reader = LogReader(study.db, log_id)
        lines = log.split(b"\n") if log else []
        if log.endswith(b"\n"):
            lines.pop()
        assert reader.line_count == (len(lines) if log else 0)
        want = []
        for line in lines[start:start + count]:
            text = line[:MAX_LINE_BYTES].rstrip(b"\r") if len(line) > MAX_LINE_BYTES else line.rstrip(b"\r")
            want.append(text)
        got = reader.raw_lines(start, count)
        assert [g.split(" … [".encode())[0] if len(g) >= MAX_LINE_BYTES else g for g in got] == want
        reader.lines(start, count)
        reader.tail(count)
    finally:
        study.close()


# ----------------------------------------------------------------------------- probe files

@FAST
@given(files=st.lists(JSON.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=40)
                      | mutated_table({"probe_version": 1, "rank": 0, "pid": 7, "steps": 3, "device_kind": "TPU v5e",
                                       "devices_used": 4, "loss": {"1": 0.5}, "grad_norm": {"1": 1.0},
                                       "step_time": {"1": 0.01}, "idle": False}).map(lambda v: json.dumps(v).encode()),
                      max_size=4))
def test_probe_report_files(tmp_path_factory, files) -> None:
    folder = tmp_path_factory.mktemp("probe")
    for n, data in enumerate(files):
        (folder / f"probe-{n}.json").write_bytes(data)
    reports = probe.read_reports(folder)
    main = probe.main_report(reports)
    if main is not None:
        for name, points in probe.series(main).items():
            assert all(isinstance(s, int) and isinstance(v, float) for s, v in points.items())
    if hasattr(probe, "facts_of_reports"):
        probe.facts_of_reports(reports)


# ----------------------------------------------------------------------------- git history, settings

@FAST
@given(message=st.text(max_size=200) | st.lists(
    st.sampled_from(["Attempt-Command: python train.py", "Attempt-Status: ok", "Attempt-Status: ???",
                     "Attempt-Exit-Code: x", "Attempt-Expected-Level: 9", "attempt-seq: -1", "", "body text"]),
    max_size=8).map("\n".join), metrics=st.binary(max_size=200) | st.lists(POINT.map(json.dumps), max_size=4)
    .map(lambda ls: "\n".join(ls).encode()))
def test_git_commit_messages_and_metrics(message, metrics) -> None:
    body, trailers = git_history.parse_message(message)
    assert isinstance(body, str) and all(isinstance(v, str) for v in trailers.values())
    for key in trailers:
        try:
            git_history._int(trailers, key)
        except git_history.BadCommit as exc:
            assert str(exc)
    try:
        git_history.parse_metrics(metrics, "x")
    except git_history.BadCommit as exc:
        assert str(exc).startswith("x:")


@FAST
@given(text=st.text(max_size=40) | st.sampled_from(["metrics.loss.rtol=0.05", "patterns=[1]", "a.b.c=1",
                                                     "default_patterns=false", "metrics=3", "metrics.x.y=[]"]))
def test_verify_setting_assignments(text) -> None:
    try:
        key, value = parse_assignment(text)
        apply_assignment({}, key, value)
    except ValueError as exc:
        assert str(exc)


# ----------------------------------------------------------------------------- Claude Code, generated events

TOOL_INPUT = st.fixed_dictionaries({}, optional={"command": st.text(max_size=30) | WEIRD,
                                                 "file_path": st.text(max_size=10) | WEIRD,
                                                 "old_string": WEIRD, "new_string": WEIRD,
                                                 "run_in_background": WEIRD, "content": WEIRD})
EVENT = st.fixed_dictionaries({"type": st.sampled_from(["user", "assistant", "system", "summary"]) | WEIRD}, optional={
    "timestamp": st.sampled_from(["2026-11-01T10:00:00Z", "yesterday", ""]) | WEIRD,
    "sessionId": WEIRD, "cwd": WEIRD, "uuid": st.text(max_size=5),
    "message": st.fixed_dictionaries({}, optional={
        "role": WEIRD,
        "content": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["tool_use", "tool_result", "text"]) | WEIRD},
                                                  optional={"id": st.sampled_from(["t1", "t2"]) | WEIRD,
                                                            "tool_use_id": st.sampled_from(["t1", "t2"]) | WEIRD,
                                                            "name": st.sampled_from(["Bash", "Edit", "Write"]) | WEIRD,
                                                            "input": TOOL_INPUT | WEIRD, "text": WEIRD,
                                                            "content": st.text(max_size=30) | WEIRD,
                                                            "is_error": WEIRD}), max_size=3) | WEIRD}) | WEIRD,
    "toolUseResult": st.fixed_dictionaries({}, optional={"stdout": WEIRD, "stderr": WEIRD, "interrupted": WEIRD,
                                                         "returnCodeInterpretation": WEIRD}) | WEIRD,
})


@SLOW
@given(events=st.lists(EVENT, max_size=12), all_bash=st.booleans())
def test_claude_code_transcripts_of_generated_events(bundle_template, tmp_path_factory, events, all_bash) -> None:
    from workbench.importers.claude_code import ClaudeCodeImporter
    from workbench.importers.rules import WorkloadRule

    _, _, _, template = bundle_template
    work = tmp_path_factory.mktemp("cc")
    db = work / "s.db"
    db.write_bytes(template.read_bytes())
    path = work / "t.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    study = open_study(db)
    try:
        report = ClaudeCodeImporter(study, "mlp-xla", "ana", rule=WorkloadRule(all_bash=all_bash)).run([path])
        for file in report.files:
            file.summary()
    finally:
        study.close()
