"""Builders for Claude Code transcripts shaped like the real ones (tests/data/claude-code)."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SESSION = "5e55a0b1-7c1d-4a8e-9d3f-2b6c0e4f8a11"
CWD = "/home/agent/projects/mlp"


@dataclass
class Transcript:
    """Appends user/assistant lines with tool_use/tool_result pairs; times advance a minute a call."""

    cwd: str = CWD
    session: str = SESSION
    start: datetime.datetime = datetime.datetime(2026, 11, 2, 10, 0, tzinfo=datetime.UTC)
    lines: list[dict[str, Any]] = field(default_factory=list)
    clock: int = 0
    ids: int = 0
    agent: str | None = None

    def at(self, minutes: float | None = None) -> str:
        if minutes is not None:
            self.clock = int(minutes * 60)
        else:
            self.clock += 60
        stamp = self.start + datetime.timedelta(seconds=self.clock)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _envelope(self, kind: str, stamp: str) -> dict[str, Any]:
        line = {
            "parentUuid": None, "isSidechain": self.agent is not None, "userType": "external",
            "cwd": self.cwd, "sessionId": self.session, "version": "2.1.39", "gitBranch": "main",
            "type": kind, "uuid": f"u-{len(self.lines)}", "timestamp": stamp,
        }
        if self.agent:
            line["agentId"] = self.agent
        return line

    def call(self, name: str, tool_input: dict[str, Any], *, minutes: float | None = None) -> str:
        self.ids += 1
        call_id = f"toolu_{self.agent or 'main'}_{self.ids:04d}"
        line = self._envelope("assistant", self.at(minutes))
        line["message"] = {
            "model": "claude-opus-4-6", "id": f"msg_{self.ids}", "type": "message", "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}],
        }
        self.lines.append(line)
        return call_id

    def result(self, call_id: str, content: Any, *, is_error: bool = False, extra: Any = None,
               seconds: int = 20) -> None:
        self.clock += seconds
        line = self._envelope("user", self.at(self.clock / 60))
        line["message"] = {"role": "user", "content": [
            {"tool_use_id": call_id, "type": "tool_result", "content": content, "is_error": is_error}
        ]}
        if extra is not None:
            line["toolUseResult"] = extra
        self.lines.append(line)

    def say(self, text: str) -> None:
        line = self._envelope("assistant", self.at())
        line["message"] = {"role": "assistant", "type": "message", "id": f"msg_t{len(self.lines)}",
                           "content": [{"type": "text", "text": text}]}
        self.lines.append(line)

    def bash(self, command: str, output: str, *, exit_code: int = 0, minutes: float | None = None,
             seconds: int = 20) -> str:
        call_id = self.call("Bash", {"command": command, "description": "run"}, minutes=minutes)
        if exit_code:
            self.result(call_id, f"Exit code {exit_code}\n{output}", is_error=True,
                        extra=f"Error: Exit code {exit_code}\n{output}", seconds=seconds)
        else:
            self.result(call_id, output, extra={"stdout": output, "stderr": "", "interrupted": False,
                                                "isImage": False, "noOutputExpected": False}, seconds=seconds)
        return call_id

    def edit(self, path: str, old: str, new: str, *, minutes: float | None = None) -> str:
        full = f"{self.cwd}/{path}"
        call_id = self.call("Edit", {"file_path": full, "old_string": old, "new_string": new,
                                     "replace_all": False}, minutes=minutes)
        self.result(call_id, f"The file {full} has been updated successfully.",
                    extra={"filePath": full, "oldString": old, "newString": new, "structuredPatch": [
                        {"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1,
                         "lines": [f"-{old}", f"+{new}"]}]}, seconds=1)
        return call_id

    def write(self, path: str, content: str) -> str:
        full = f"{self.cwd}/{path}"
        call_id = self.call("Write", {"file_path": full, "content": content})
        self.result(call_id, f"File created successfully at: {full}",
                    extra={"type": "create", "filePath": full, "content": content, "structuredPatch": []}, seconds=1)
        return call_id

    def read(self, path: str, text: str) -> str:
        call_id = self.call("Read", {"file_path": f"{self.cwd}/{path}"})
        self.result(call_id, text, seconds=1)
        return call_id

    def dump(self, path: Path, *, upto: int | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        chosen = self.lines if upto is None else self.lines[:upto]
        path.write_text("".join(json.dumps(line) + "\n" for line in chosen))
        return path
