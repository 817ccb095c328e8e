"""Import agent attempts from Claude Code session transcripts (docs/claude-code-import.md).

A transcript is read one line at a time, never whole. Every Bash call the workload rule
accepts becomes an attempt; the other tool calls and the edits made since the previous attempt
are kept beside it; the assistant's words after it are its claim. Each attempt (its row, log,
edits and tool calls) is written whole or not at all (a savepoint), keyed by the Bash call's
tool_use id, so a re-import changes nothing and a resumed session adds only what is new. Attempts
are committed in small groups (BATCH_*): a crash loses at most the last group, never half of an
attempt, and the next import adds it.

Bad lines, unknown record types and calls without results are counted per file and reported;
they never stop an import.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from domain.errors import WorkbenchError
from domain.imports import ImportReport
from domain.models import Attempt, AttemptSource, AttemptStatus, Command
from domain.redact import redact
from domain.text import plural
from domain.transcript import Edit, ToolCall
from storage import imports, queries, records
from storage.converters import attempt_to_row
from storage.database import StudyDatabase
from storage.logs import store_log_bytes
from storage.queries import get_migration
from workbench.importers.rules import (
    WorkloadRule,
    bash_writes,
    command_parts,
    expected_level,
    first_program,
)

KNOWN_TYPES = {
    "user", "assistant", "system", "summary", "progress", "file-history-snapshot",
    "queue-operation", "attachment", "custom-title", "tag", "result",
}
"""Record types understood or knowingly ignored; any other type is counted as unknown."""
CLAIM_MAX = 20_000
"""Characters of claim kept per attempt (the rest is cut with a note)."""
CONTEXT_TEXT_MAX = 4_000
"""Characters of a context tool call's input and result kept."""
TASK_TOOLS = {"Task", "Agent"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit"}
OUTPUT_TOOLS = {"TaskOutput", "BashOutput"}
BATCH_ATTEMPTS = 64
BATCH_BYTES = 16 << 20
BATCH_SECONDS = 0.5
"""A group of written attempts is committed when it reaches any of these (and at the end)."""
WORKLOAD_CACHE = 4096
"""Distinct Bash commands whose workload verdict is kept; past that the cache starts over."""

T = TypeVar("T")

_EXIT = re.compile(r"^(?:Error: )?Exit code (-?\d+)")
_BACKGROUND = re.compile(r"running in background with ID: (\w+)")
_AGENT_ID = re.compile(r"agentId: (\w+)")
_TASK_ID = re.compile(r"<task-id>\s*(\w+)\s*</task-id>")
_NOTIFIED_EXIT = re.compile(r"\(exit code (-?\d+)\)|<exit[-_]code>\s*(-?\d+)\s*</exit[-_]code>")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SPILLED = re.compile(r"(?:tool-results/)([\w.\-]+)")


@dataclass
class FileReport:
    """What one transcript file gave, for the summary line."""

    path: Path
    session_id: str | None = None
    agent_id: str | None = None
    lines: int = 0
    records: int = 0
    bad_lines: int = 0
    first_bad: str = ""
    unknown_types: Counter[str] = field(default_factory=Counter)
    attempts_new: int = 0
    attempts_updated: int = 0
    attempts_unchanged: int = 0
    attempts_failed: int = 0
    tool_calls: int = 0
    no_result: int = 0
    other_bash: Counter[str] = field(default_factory=Counter)
    """Bash calls the workload rule did not count, by program: what an empty import explains with."""
    problems: list[str] = field(default_factory=list)

    def bad(self, line: int, why: str) -> None:
        self.bad_lines += 1
        if not self.first_bad:
            self.first_bad = f"line {line}: {why}"

    @property
    def attempts(self) -> int:
        return self.attempts_new + self.attempts_updated + self.attempts_unchanged

    def summary(self) -> str:
        who = f"sub-agent {self.agent_id}" if self.agent_id else f"session {self.session_id or '?'}"
        parts = [
            f"{who} ({self.path.name}): {plural(self.attempts, 'attempt')}: {self.attempts_new} new,"
            f" {self.attempts_updated} updated, {self.attempts_unchanged} unchanged;"
            f" {plural(self.tool_calls, 'other tool call')}"
        ]
        if self.records == 0 and self.bad_lines == 0:
            parts.append("not a Claude Code transcript (no records)")
        if self.bad_lines:
            parts.append(f"{plural(self.bad_lines, 'bad line')} skipped (first at {self.first_bad})")
        if self.unknown_types:
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.unknown_types.items()))
            parts.append(f"{plural(sum(self.unknown_types.values()), 'record')} of unknown type ({kinds})")
        if self.no_result:
            parts.append(f"{plural(self.no_result, 'call')} without a result")
        if self.attempts_failed:
            parts.append(f"{plural(self.attempts_failed, 'attempt')} not written")
        return "; ".join(parts)


@dataclass
class TranscriptReport(ImportReport):
    """The importers' shared counts (of attempts), and each transcript's own report."""

    files: list[FileReport] = field(default_factory=list)

    def tally(self) -> None:
        """The attempt counts from the transcripts' reports, once their last group is committed."""
        self.inserted = sum(f.attempts_new for f in self.files)
        self.updated = sum(f.attempts_updated for f in self.files)
        self.unchanged = sum(f.attempts_unchanged for f in self.files)

    def why_none(self, rule: WorkloadRule) -> str:
        """Why no attempt came in, and what to pass to count some: one line."""
        other: Counter[str] = Counter()
        for f in self.files:
            other.update(f.other_bash)
        calls = sum(other.values())
        if not calls:
            return "0 attempts: no Bash call in the transcripts, so nothing ran a workload"
        top = ", ".join(f"{name} x{n}" for name, n in other.most_common(5))
        return (f"0 attempts: {plural(calls, 'Bash call')} ({top}), none matched the workload rule ({rule.describe()});"
                " --all-bash counts every call, --workload REGEX sets the rule")


# ---------------------------------------------------------------- finding transcripts


def _is_auxiliary(path: Path) -> bool:
    return path.name.startswith("agent-") or "subagents" in path.parts or "tool-results" in path.parts


def discover(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Session transcripts under the given files and folders; sub-agent files are found later."""
    found: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            sessions = sorted(p for p in path.rglob("*.jsonl") if p.is_file() and not _is_auxiliary(p.relative_to(path)))
            if not sessions:
                problems.append(f"{path}: no session transcripts (*.jsonl) in this folder")
            found.extend(sessions)
        else:
            problems.append(f"{path}: no such file or folder")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique, problems


def subagent_files(session_path: Path, agent_id: str) -> list[Path]:
    """The sub-agent's transcript: `<session>/subagents/agent-<id>.jsonl` or the flat older layout."""
    name = f"agent-{agent_id}.jsonl"
    candidates = [session_path.with_suffix("") / "subagents" / name, session_path.parent / name]
    return [p for p in candidates if p.is_file()]


# ---------------------------------------------------------------- reading lines


_BIG = 9.2e18
"""Below -2**63 or above 2**64 - 1 orjson reads an integer as a float; json.loads keeps it exact."""


def _inexact(value: Any) -> bool:
    """Whether an orjson result holds a float that may be such an integer (re-read with json)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and (item >= _BIG or item <= -_BIG):
            return True
    return False


def _parse(raw: bytes) -> tuple[Any, bool]:
    """(the line's JSON value, whether it may hold a lone surrogate). orjson parses about three
    times faster than json.loads and refuses what it would read differently (NaN, Infinity, lone
    surrogates, a byte order mark, invalid UTF-8): those lines, every bad one (so the message is
    json's) and those with huge integers go to json.loads, which raises as it always did."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw), True
    if _inexact(value):
        return json.loads(raw), False
    return value, False


def parse_line(raw: bytes, number: int, report: FileReport) -> dict[str, Any] | None:
    """One line's JSON object, or None for a blank line and a bad one (counted in the report)."""
    if raw.isspace():  # bytes.strip's whitespace, without copying the line
        return None
    try:
        record, unchecked = _parse(raw)
    except UnicodeDecodeError:
        report.bad(number, "not valid UTF-8")
        return None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc)).removesuffix(" at")
        col = getattr(exc, "colno", None)
        truncated = not raw.endswith(b"\n")
        report.bad(number, f"{'truncated, ' if truncated else ''}not valid JSON ({msg}{f', column {col}' if col else ''})")
        return None
    except RecursionError:
        report.bad(number, "JSON nested too deeply")
        return None
    if not isinstance(record, dict):
        report.bad(number, f"JSON {type(record).__name__}, not an object")
        return None
    if unchecked and _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            report.bad(number, "lone surrogate in a string")
            return None
    report.records += 1
    return record


def read_records(path: Path, report: FileReport, progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """The file's JSON objects, one per line; every other line is counted as bad, never raised."""
    pending_progress = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            report.lines = number
            if progress is not None:
                pending_progress += len(raw)
                if pending_progress >= 1 << 20:
                    progress(pending_progress)
                    pending_progress = 0
            record = parse_line(raw, number, report)
            if record is not None:
                yield record
    if progress is not None and pending_progress:
        progress(pending_progress)


def _text(content: Any) -> str:
    """A tool_result's or message's content as text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def _blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    if isinstance(content, str) and record.get("type") == "assistant":
        return [{"type": "text", "text": content}]
    return []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more characters]"


def _redact_cut(text: str) -> str:
    """Cut to CONTEXT_TEXT_MAX, redacting with a margin so a secret across the cut is still caught."""
    if len(text) <= CONTEXT_TEXT_MAX:
        return redact(text)
    return _cut(redact(text[: CONTEXT_TEXT_MAX + 512]), CONTEXT_TEXT_MAX)


# ---------------------------------------------------------------- the state of a session


@dataclass
class PendingEdit:
    edit: Edit
    failed: bool = False


@dataclass
class PendingCall:
    tool_use_id: str
    name: str
    input: dict[str, Any]
    called_at: str | None
    agent_id: str | None
    result: str = ""
    is_error: bool = False
    result_at: str | None = None
    spawned_agent_id: str | None = None
    answered: bool = False

    def to_model(self) -> ToolCall:
        return ToolCall(
            tool_use_id=self.tool_use_id,
            name=self.name,
            input=_redact_cut(json.dumps(self.input, ensure_ascii=False, sort_keys=True)),
            result=_redact_cut(self.result),
            is_error=self.is_error,
            called_at=self.called_at,
            result_at=self.result_at,
            agent_id=self.agent_id,
            spawned_agent_id=self.spawned_agent_id,
        )


@dataclass
class PendingAttempt:
    tool_use_id: str
    seq: int
    command: str
    cwd: str
    session_id: str | None
    agent_id: str | None
    started_at: str | None
    report: FileReport
    edits: list[Edit]
    calls: list[PendingCall]
    commit: str = ""
    commit_basis: str | None = None
    ended_at: str | None = None
    status: AttemptStatus = AttemptStatus.NO_RESULT
    exit_code: int | None = None
    exit_code_source: str | None = None
    result_note: str | None = None
    output: list[str] = field(default_factory=list)
    claim: list[str] = field(default_factory=list)
    claim_chars: int = 0
    answered: bool = False
    claim_closed: bool = False
    background_id: str | None = None

    def add_claim(self, text: str) -> None:
        if self.claim_chars < CLAIM_MAX and text.strip():
            self.claim.append(text.strip())
            self.claim_chars += len(text)

    @property
    def ready(self) -> bool:
        return self.answered and self.claim_closed and self.background_id is None


class SessionImporter:
    """Reads one session (its transcript and its sub-agents') into one migration."""

    def __init__(self, owner: ClaudeCodeImporter, path: Path) -> None:
        self.owner = owner
        self.path = path
        self.calls: dict[str, PendingCall | PendingAttempt | PendingEdit | list[PendingEdit]] = {}
        self.call_names: dict[str, str] = {}
        self.seen: set[str] = set()
        self.edits: list[PendingEdit] = []
        self.context: list[PendingCall] = []
        self.open_by_thread: dict[str | None, PendingAttempt] = {}
        self.waiting: list[PendingAttempt] = []
        self.background: dict[str, PendingAttempt] = {}
        self.agents_seen: set[str] = set()
        self.agents_linked: dict[str, str] = {}
        self.session_id: str | None = None
        self.cwd: str | None = None

    # -- driving

    def run(self) -> list[FileReport]:
        main = FileReport(self.path)
        reports = [main]
        self._read(self.path, main, reports)
        self._finish(reports)
        return reports

    def feed(self, records: Iterator[dict[str, Any]], report: FileReport, reports: list[FileReport]) -> None:
        """More of the session's records, read on from where the last call stopped (`workbench watch`):
        calls keep waiting for their results across calls."""
        for record in records:
            self._record(record, report, reports)
        if report.session_id is None:
            report.session_id = self.session_id

    def snapshot(self) -> None:
        """Write the attempts still waiting (for a result, the end of a claim or a background exit) as
        they stand, and keep them waiting: the rows are those an import of the file so far gives,
        since `_finish` changes nothing that is written."""
        for attempt in self.waiting:
            self.owner.write(attempt)

    def _read(self, path: Path, report: FileReport, reports: list[FileReport], agent_hint: str | None = None) -> None:
        try:
            for record in read_records(path, report, self.owner.progress):
                self._record(record, report, reports)
        except OSError as exc:
            report.problems.append(f"{path}: cannot read ({exc.strerror})")
        if report.session_id is None:
            report.session_id = self.session_id
        if agent_hint:
            report.agent_id = agent_hint

    def _finish(self, reports: list[FileReport]) -> None:
        for thread in list(self.open_by_thread):
            self._close_claim(thread)
        for attempt in list(self.background.values()):
            attempt.background_id = None
        for attempt in self.waiting:
            if not attempt.answered:
                attempt.report.no_result += 1
            attempt.answered = attempt.claim_closed = True
        self._flush(force=True)
        for call_id, pending in self.calls.items():
            if isinstance(pending, PendingCall) and not pending.answered:
                reports[0].no_result += 1
        trailing = len(self.context)
        if trailing and self.owner.verbose:
            reports[0].problems.append(f"{plural(trailing, 'tool call')} after the last attempt {'is' if trailing == 1 else 'are'} left for a later import")

    # -- records

    def _record(self, record: dict[str, Any], report: FileReport, reports: list[FileReport]) -> None:
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in KNOWN_TYPES:
            report.unknown_types[str(kind)[:40] if kind is not None else "(none)"] += 1
            return
        if self.session_id is None:
            self.session_id = _str(record.get("sessionId"))
        if report.session_id is None:
            report.session_id = _str(record.get("sessionId"))
        if self.cwd is None and isinstance(record.get("cwd"), str):
            self.cwd = record["cwd"]
        thread = _str(record.get("agentId")) if record.get("isSidechain") else None
        if thread:
            self.agents_seen.add(thread)
        stamp = _str(record.get("timestamp"))
        if kind == "assistant":
            for block in _blocks(record):
                btype = block.get("type")
                if btype == "tool_use":
                    self._tool_use(block, stamp, thread, record, report)
                elif btype == "text" and isinstance(block.get("text"), str):
                    attempt = self.open_by_thread.get(thread)
                    if attempt is not None:
                        attempt.add_claim(block["text"])
        elif kind == "user":
            extra = record.get("toolUseResult")
            for block in _blocks(record):
                if block.get("type") == "tool_result":
                    self._tool_result(block, extra, stamp, report, reports)
        elif kind == "queue-operation":
            self._notification(_text(record.get("content")))
        elif kind == "progress":
            data = record.get("data")
            if isinstance(data, dict) and data.get("type") == "agent_progress":
                agent, parent = _str(data.get("agentId")), _str(record.get("parentToolUseID"))
                if agent and parent:
                    self._link_agent(parent, agent)

    def _tool_use(self, block: dict[str, Any], stamp: str | None, thread: str | None,
                  record: dict[str, Any], report: FileReport) -> None:
        call_id = _str(block.get("id"))
        name = _str(block.get("name")) or "?"
        tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
        if not call_id or call_id in self.seen:
            return
        self.seen.add(call_id)
        self.call_names[call_id] = name
        cwd = _str(record.get("cwd")) or self.cwd or ""
        if name == "Bash" and isinstance(tool_input.get("command"), str):
            command = tool_input["command"]
            if self.owner.is_workload(command):
                self._start_attempt(call_id, command, cwd, stamp, thread, report)
                return
            report.other_bash[self.owner.program_of(command)] += 1
            written = bash_writes(command)
            if written:
                pending = [
                    PendingEdit(Edit("Bash", self._relative(target, cwd), patch=redact(command), tool_use_id=call_id, at=stamp))
                    for target in written
                ]
                self.edits.extend(pending)
        elif name in EDIT_TOOLS:
            pending = self._edits(name, tool_input, call_id, stamp, cwd)
            self.edits.extend(pending)
            self.calls[call_id] = pending
            return
        call = PendingCall(call_id, name, tool_input, stamp, thread)
        self.context.append(call)
        self.calls[call_id] = call
        report.tool_calls += 1

    def _relative(self, path: str, cwd: str) -> str:
        root = (self.cwd or cwd).rstrip("/")
        if root and path.startswith(root + "/"):
            return path[len(root) + 1:]
        return path

    def _edits(self, name: str, tool_input: dict[str, Any], call_id: str, stamp: str | None, cwd: str) -> list[PendingEdit]:
        path = self._relative(_str(tool_input.get("file_path")) or "", cwd)
        if name == "Write":
            return [PendingEdit(Edit("Write", path, None, _str(tool_input.get("content")) or "", tool_use_id=call_id, at=stamp))]
        items = tool_input.get("edits") if name == "MultiEdit" else [tool_input]
        out = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                out.append(PendingEdit(Edit(
                    name, path, _str(item.get("old_string")) or "", _str(item.get("new_string")) or "",
                    bool(item.get("replace_all")), tool_use_id=call_id, at=stamp,
                )))
        return out

    def _start_attempt(self, call_id: str, command: str, cwd: str, stamp: str | None,
                       thread: str | None, report: FileReport) -> None:
        self._close_claim(thread)
        edits = [p.edit for p in self.edits if not p.failed]
        calls, self.context, self.edits = self.context, [], []
        seq = self.owner.seq_for(call_id)
        root = (self.cwd or "").rstrip("/")
        where = "." if not cwd or cwd.rstrip("/") == root else self._relative(cwd, cwd)
        attempt = PendingAttempt(call_id, seq, command, where, self.session_id, thread, stamp, report, edits, calls)
        link = self.owner.link(seq, stamp, edits)
        if link is not None:
            attempt.commit, attempt.commit_basis = link
        self.calls[call_id] = attempt
        self.open_by_thread[thread] = attempt
        self.waiting.append(attempt)

    def _close_claim(self, thread: str | None) -> None:
        attempt = self.open_by_thread.pop(thread, None)
        if attempt is not None:
            attempt.claim_closed = True
            self._flush()

    def _tool_result(self, block: dict[str, Any], extra: Any, stamp: str | None,
                     report: FileReport, reports: list[FileReport]) -> None:
        call_id = _str(block.get("tool_use_id"))
        pending = self.calls.pop(call_id, None) if call_id else None
        if pending is None:
            return
        content = _text(block.get("content"))
        is_error = block.get("is_error") is True
        if isinstance(pending, list):  # an edit tool: a failed edit changed nothing
            if is_error:
                for edit in pending:
                    edit.failed = True
            elif isinstance(extra, dict) and isinstance(extra.get("structuredPatch"), list) and len(pending) == 1:
                pending[0].edit = _with_patch(pending[0].edit, extra["structuredPatch"])
            return
        if isinstance(pending, PendingAttempt):
            self._attempt_result(pending, content, is_error, extra, stamp)
            return
        pending.answered = True
        pending.result, pending.is_error, pending.result_at = content, is_error, stamp
        if pending.name in TASK_TOOLS:
            agent = _str(extra.get("agentId")) if isinstance(extra, dict) else None
            if agent is None:
                found = _AGENT_ID.search(content)
                agent = found.group(1) if found else None
            if agent:
                pending.spawned_agent_id = agent
                self._link_agent(pending.tool_use_id, agent)
                self._read_subagent(agent, report, reports)
                self._close_claim(agent)  # the sub-agent has finished: its last claim ends here
        elif pending.name in OUTPUT_TOOLS:
            self._task_output(pending, content, extra)

    def _attempt_result(self, attempt: PendingAttempt, content: str, is_error: bool, extra: Any, stamp: str | None) -> None:
        attempt.answered = True
        attempt.ended_at = stamp
        output = content
        if isinstance(extra, dict) and isinstance(extra.get("stdout"), str):
            output = extra["stdout"]
            if isinstance(extra.get("stderr"), str) and extra["stderr"]:
                output += ("\n" if output and not output.endswith("\n") else "") + extra["stderr"]
        attempt.output.append(self._spilled(content) or output)
        exit_match = _EXIT.match(content) or (_EXIT.match(extra) if isinstance(extra, str) else None)
        background = None
        if isinstance(extra, dict):
            background = _str(extra.get("backgroundTaskId"))
        if background is None:
            found = _BACKGROUND.search(content)
            background = found.group(1) if found and not is_error else None
        if isinstance(extra, dict) and extra.get("interrupted") is True:
            attempt.status = AttemptStatus.INTERRUPTED
        elif is_error and exit_match:
            attempt.status = AttemptStatus.NONZERO_EXIT
            attempt.exit_code, attempt.exit_code_source = int(exit_match.group(1)), "transcript"
        elif is_error:
            attempt.status = AttemptStatus.BLOCKED
            attempt.result_note = _cut(content.strip(), 200)
        elif background:
            attempt.status = AttemptStatus.BACKGROUNDED
            attempt.background_id = background
            self.background[background] = attempt
        else:
            attempt.status = AttemptStatus.OK
            note = extra.get("returnCodeInterpretation") if isinstance(extra, dict) else None
            if isinstance(note, str) and note:
                attempt.result_note = note  # a benign non-zero exit: the number is not kept
            else:
                attempt.exit_code, attempt.exit_code_source = 0, "transcript"
        self._flush()

    def _spilled(self, content: str) -> str | None:
        """The full output Claude Code spilled to `<session>/tool-results/`, when it is there."""
        found = _SPILLED.search(content)
        if not found:
            return None
        candidate = self.path.with_suffix("") / "tool-results" / found.group(1)
        try:
            return candidate.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return None

    def _resolve_background(self, task_id: str, code: int | None, source: str, output: str | None) -> None:
        attempt = self.background.get(task_id)
        if attempt is None:
            return
        if code is not None:
            attempt.exit_code, attempt.exit_code_source = code, source
            attempt.status = AttemptStatus.OK if code == 0 else AttemptStatus.NONZERO_EXIT
        if output:
            attempt.output.append(output)
        if code is not None or source == "task_output":
            del self.background[task_id]
            attempt.background_id = None
            self._flush()

    def _task_output(self, call: PendingCall, content: str, extra: Any) -> None:
        task_id = _str(call.input.get("task_id")) or _str(call.input.get("bash_id")) or _str(call.input.get("shell_id"))
        if not task_id:
            return
        task = extra.get("task") if isinstance(extra, dict) and isinstance(extra.get("task"), dict) else extra
        code = output = None
        if isinstance(task, dict):
            raw = task.get("exitCode", task.get("exit_code"))
            code = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
            output = _str(task.get("output")) or _str(task.get("stdout"))
            status = _str(task.get("status"))
            if code is None and status in ("running", "pending"):
                return
        if code is None:
            found = _NOTIFIED_EXIT.search(content)
            code = int(found.group(1) or found.group(2)) if found else None
        self._resolve_background(task_id, code, "task_output", output)

    def _notification(self, content: str) -> None:
        task = _TASK_ID.search(content)
        if not task:
            return
        found = _NOTIFIED_EXIT.search(content)
        if found:
            attempt = self.background.get(task.group(1))
            if attempt is not None and attempt.exit_code_source != "task_output":
                self._resolve_background(task.group(1), int(found.group(1) or found.group(2)), "task_notification", None)

    # -- sub-agents

    def _link_agent(self, tool_use_id: str, agent_id: str) -> None:
        self.agents_linked[agent_id] = tool_use_id
        pending = self.calls.get(tool_use_id)
        if isinstance(pending, PendingCall):
            pending.spawned_agent_id = agent_id
        for call in self.context:
            if call.tool_use_id == tool_use_id:
                call.spawned_agent_id = agent_id
        self.owner.link_agent(tool_use_id, agent_id)

    def _read_subagent(self, agent_id: str, report: FileReport, reports: list[FileReport]) -> None:
        files = subagent_files(self.path, agent_id)
        if not files:
            if agent_id not in self.agents_seen:
                report.problems.append(f"sub-agent {agent_id}: its transcript is missing (looked in"
                                       f" {self.path.with_suffix('').name}/subagents/ and beside the session)")
            return
        if any(r.path == files[0] for r in reports):
            return
        sub = FileReport(files[0], session_id=self.session_id, agent_id=agent_id)
        reports.append(sub)
        self._read(files[0], sub, reports, agent_hint=agent_id)

    # -- writing

    def _flush(self, force: bool = False) -> None:
        still = []
        for attempt in self.waiting:
            if attempt.ready or force:
                self.owner.write(attempt)
            else:
                still.append(attempt)
        self.waiting = still


def _with_patch(edit: Edit, hunks: list[Any]) -> Edit:
    lines = []
    for hunk in hunks:
        if not isinstance(hunk, dict):
            continue
        lines.append(
            f"@@ -{hunk.get('oldStart')},{hunk.get('oldLines')} +{hunk.get('newStart')},{hunk.get('newLines')} @@"
        )
        lines.extend(str(line) for line in hunk.get("lines") or [] if isinstance(line, str))
    if not lines:
        return edit
    header = f"--- a/{edit.file_path}\n+++ b/{edit.file_path}\n"
    return Edit(edit.tool, edit.file_path, edit.old_text, edit.new_text, edit.replace_all,
                header + "\n".join(lines) + "\n", edit.tool_use_id, edit.at)


class ClaudeCodeImporter:
    """Imports Claude Code transcripts into one existing migration."""

    def __init__(
        self,
        study_db: StudyDatabase,
        migration: str,
        reviewer: str,
        *,
        rule: WorkloadRule | None = None,
        repo: Path | None = None,
        progress: Callable[[int], None] | None = None,
        verbose: bool = False,
    ) -> None:
        self.study_db = study_db
        self.db = study_db.db
        self.reviewer = reviewer
        self.rule = rule or WorkloadRule()
        self.progress = progress
        self.verbose = verbose
        found = get_migration(self.db, migration)
        if found is None:
            raise WorkbenchError(f"{study_db.path}: no migration {migration!r}; import its bundle first")
        self.migration = found
        self.next_seq = queries.next_seq(self.db, found.id)
        self._batch: list[tuple[FileReport, str, str]] = []
        self._batch_open = False
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._workload: dict[str, bool] = {}
        self._programs: dict[str, str] = {}
        self._parts: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {}
        self.linker = None
        if repo is not None:
            from workbench.importers.gitlink import GitLinker

            self.linker = GitLinker(repo, found.base_commit, found.slug)

    def run(self, paths: list[Path]) -> TranscriptReport:
        report = TranscriptReport()
        files, report.problems = discover(paths)
        with records.relaxed_sync(self.db):  # attempts are committed in groups
            try:
                for path in files:
                    session = SessionImporter(self, path)
                    report.files.extend(session.run())
            finally:
                self._commit()
        report.tally()
        return report

    @contextmanager
    def group(self) -> Iterator[None]:
        """One round of a long-lived importer (`workbench watch`): written in groups, committed at
        the end; sequence numbers another writer took meanwhile are not given again."""
        self.next_seq = max(self.next_seq, queries.next_seq(self.db, self.migration.id))
        with records.relaxed_sync(self.db):
            try:
                yield
            finally:
                self._commit()

    # -- groups of attempts in one transaction

    def _begin(self) -> None:
        """Open a group unless a transaction is open already (then its owner commits it)."""
        if imports.begin_group(self.db):
            self._batch_open = True
            self._batch_bytes = 0
            self._batch_started = time.monotonic()

    def _commit(self) -> None:
        if not self._batch_open:
            return
        self._batch_open = False
        batch, self._batch = self._batch, []
        try:
            imports.commit_group(self.db)
        except Exception as exc:  # noqa: BLE001 - the group is lost; it is reported, not raised
            self._lost(batch, exc)

    def _lost(self, batch: list[tuple[FileReport, str, str]], exc: Exception) -> None:
        """Attempts of a group that was rolled back after they were counted: they are not written."""
        for report, what, tool_use_id in batch:
            if what == "insert":
                report.attempts_new -= 1
            elif what == "update":
                report.attempts_updated -= 1
            else:
                report.attempts_unchanged -= 1
            report.attempts_failed += 1
            report.problems.append(f"attempt {tool_use_id}: not written ({type(exc).__name__}: {exc})")

    def is_workload(self, command: str) -> bool:
        """The workload rule's verdict, once per distinct command: agents re-run the same few
        commands, and the default rule tokenizes with shlex (a tenth of the import's time)."""
        return _once(self._workload, command, self.rule.matches)

    def program_of(self, command: str) -> str:
        """`first_program`, once per distinct command (shlex again)."""
        return _once(self._programs, command, first_program)

    def parts_of(self, command: str) -> tuple[tuple[str, ...], dict[str, str]]:
        """`command_parts`, once per distinct command; the environment is the caller's own copy."""
        argv, env = _once(self._parts, command, command_parts)
        return argv, dict(env)

    def seq_for(self, tool_use_id: str) -> int:
        known = imports.seq_of(self.db, self.migration.id, tool_use_id)
        if known is not None:
            return known
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def link(self, seq: int, started_at: str | None, edits: list[Edit]) -> tuple[str, str] | None:
        if self.linker is None:
            return None
        try:
            found = self.linker.link(seq, started_at, edits)
        except WorkbenchError:
            return None
        return found.sha, found.basis

    def link_agent(self, tool_use_id: str, agent_id: str) -> None:
        """Tool calls already written (by an earlier import) learn the sub-agent they started."""
        self._begin()
        imports.link_spawned_agent(self.db, self.migration.id, tool_use_id, agent_id)

    def write(self, pending: PendingAttempt) -> None:
        """One attempt, with its log, edits and tool calls, whole in one savepoint of the group."""
        report = pending.report
        claim = redact("\n\n".join(pending.claim))
        if pending.claim_chars > CLAIM_MAX:
            claim = _cut(claim, CLAIM_MAX)
        argv, env = self.parts_of(pending.command)
        attempt = Attempt(
            id=0,
            migration_id=self.migration.id,
            seq=pending.seq,
            source=AttemptSource.AGENT,
            commit=pending.commit,
            command=Command(argv, pending.cwd, env),
            status=pending.status,
            started_at=pending.started_at,
            ended_at=pending.ended_at,
            exit_code=pending.exit_code,
            exit_code_source=pending.exit_code_source,
            expected_level=expected_level(claim),
            claim=claim,
        )
        size = 0
        try:
            self._begin()
            with records.immediate(self.db):
                log_id = None
                if pending.answered and pending.output:
                    data = redact("\n".join(pending.output)).encode("utf-8", errors="replace")
                    size = len(data)
                    log_id = store_log_bytes(self.db, data)
                row = attempt_to_row(attempt)
                row.update(
                    log_id=log_id,
                    session_id=pending.session_id,
                    agent_id=pending.agent_id,
                    commit_basis=pending.commit_basis,
                    result_note=pending.result_note,
                )
                key = {"migration_id": self.migration.id, "external_id": pending.tool_use_id}
                del row["migration_id"]
                attempt_id, what = records.upsert_by_key(self.db, "attempt", key, row, self.reviewer, keep=("seq",))
                fresh = what == "insert"
                changed = imports.replace_attempt_rows(self.db, attempt_id, "attempt_edit",
                                                       _edit_rows(pending.edits), self.reviewer, fresh=fresh)
                changed |= imports.replace_attempt_rows(self.db, attempt_id, "attempt_tool_call",
                                                        _call_rows(pending.calls), self.reviewer, fresh=fresh)
                if changed and what == "same":
                    what = "update"
        except Exception as exc:  # noqa: BLE001 - one attempt's failure never stops the import
            if self._batch_open and not imports.in_transaction(self.db):  # the error ended the group
                self._batch_open = False
                batch, self._batch = self._batch, []
                self._lost(batch, exc)
            report.attempts_failed += 1
            report.problems.append(f"attempt {pending.tool_use_id}: not written ({type(exc).__name__}: {exc})")
            return
        if what == "insert":
            report.attempts_new += 1
        elif what == "update":
            report.attempts_updated += 1
        else:
            report.attempts_unchanged += 1
        if self._batch_open:
            self._batch.append((report, what, pending.tool_use_id))
            self._batch_bytes += size
            if (len(self._batch) >= BATCH_ATTEMPTS or self._batch_bytes >= BATCH_BYTES
                    or time.monotonic() - self._batch_started >= BATCH_SECONDS):
                self._commit()


def _once(cache: dict[str, T], command: str, read: Callable[[str], T]) -> T:
    """`read(command)`, kept in `cache`; past WORKLOAD_CACHE commands the cache starts over."""
    if command in cache:
        return cache[command]
    if len(cache) >= WORKLOAD_CACHE:
        cache.clear()
    value = cache[command] = read(command)
    return value


def _edit_rows(edits: list[Edit]) -> list[dict[str, Any]]:
    return [
        {
            "ord": n,
            "tool_use_id": e.tool_use_id,
            "tool": e.tool,
            "file_path": e.file_path,
            "old_text": redact(e.old_text) if e.old_text is not None else None,
            "new_text": redact(e.new_text) if e.new_text is not None else None,
            "replace_all": int(e.replace_all),
            "patch": redact(e.patch),
            "at": e.at,
        }
        for n, e in enumerate(edits)
    ]


def _call_rows(calls: list[PendingCall]) -> list[dict[str, Any]]:
    rows = []
    for n, call in enumerate(calls):
        model = call.to_model()
        rows.append({
            "ord": n,
            "tool_use_id": model.tool_use_id,
            "name": model.name,
            "input": model.input,
            "result": model.result,
            "is_error": int(model.is_error),
            "called_at": model.called_at,
            "result_at": model.result_at,
            "agent_id": model.agent_id,
            "spawned_agent_id": model.spawned_agent_id,
        })
    return rows
