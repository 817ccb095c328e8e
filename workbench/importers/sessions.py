"""Find a project's Claude Code sessions in the projects folder, sub-agents included.

Claude Code keeps a project's transcripts in `<config>/projects/<encoded cwd>/`, where the
config folder is `$CLAUDE_CONFIG_DIR` or `~/.claude` and the encoding turns every character
other than a letter or digit into `-` (older CLIs only `/`, `.`, `\\` and `:`). The encoding
loses information, so a session is only taken when its own `cwd` is the project or inside it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from workbench.importers.claude_code import FileReport, read_records
from workbench.importers.rules import WorkloadRule


def projects_dir() -> Path:
    """Where Claude Code keeps its projects' transcripts."""
    config = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(config).expanduser() if config else Path.home() / ".claude") / "projects"


def encoded_names(project: Path) -> list[str]:
    """The folder names Claude Code versions give the project, newest encoding first."""
    text = str(project)
    names = [re.sub(r"[^A-Za-z0-9]", "-", text), re.sub(r"[/.\\:]", "-", text)]
    return list(dict.fromkeys(names))


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session transcript as the listing shows it, before import."""

    path: Path
    session_id: str | None
    started_at: str | None
    cwd: str | None
    size: int
    """Bytes of the session's file and its sub-agents' files."""
    attempts: int
    """Bash calls the workload rule counts, in the session and its sub-agents."""
    subagents: int


def _subagent_files(session: Path, flat: dict[str, list[Path]]) -> list[Path]:
    """`<session>/subagents/agent-*.jsonl`, and the older flat `agent-*.jsonl` naming this session."""
    nested = session.with_suffix("") / "subagents"
    found = sorted(nested.glob("agent-*.jsonl")) if nested.is_dir() else []
    return found + flat.get(session.stem, [])


def _flat_agents(folder: Path) -> dict[str, list[Path]]:
    """Older CLIs' sub-agent files beside the sessions, by the parent session id they carry."""
    out: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("agent-*.jsonl")):
        for record in read_records(path, FileReport(path)):
            if isinstance(record.get("sessionId"), str):
                out.setdefault(record["sessionId"], []).append(path)
                break
    return out


def _scan(path: Path, rule: WorkloadRule, seen: set[str]) -> tuple[str | None, str | None, str | None]:
    """Counts the file's attempt calls into `seen`; returns its first session id, time and cwd."""
    first: dict[str, str] = {}
    for record in read_records(path, FileReport(path)):
        for key in ("sessionId", "timestamp", "cwd"):
            if key not in first and isinstance(record.get(key), str):
                first[key] = record[key]
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if record.get("type") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_use" or block.get("name") != "Bash":
                continue
            command = block.get("input", {}).get("command") if isinstance(block.get("input"), dict) else None
            if isinstance(command, str) and isinstance(block.get("id"), str) and rule.matches(command):
                seen.add(block["id"])
    return first.get("sessionId"), first.get("timestamp"), first.get("cwd")


def _inside(cwd: str | None, project: Path) -> bool:
    if cwd is None:
        return True
    root = str(project).rstrip("/")
    return cwd == root or cwd.startswith(root + "/")


def describe(session: Path, rule: WorkloadRule, project: Path | None = None,
             flat: dict[str, list[Path]] | None = None) -> SessionInfo | None:
    """The session's listing line; None when its cwd shows it belongs to another project."""
    seen: set[str] = set()
    session_id, started, cwd = _scan(session, rule, seen)
    if project is not None and not _inside(cwd, project):
        return None
    agents = _subagent_files(session, flat or {})
    size = session.stat().st_size
    for agent in agents:
        _scan(agent, rule, seen)
        size += agent.stat().st_size
    return SessionInfo(session, session_id, started, cwd, size, len(seen), len(agents))


def project_folders(project: Path) -> list[Path]:
    """The project's folders under the projects folder (one per encoding found)."""
    folders = (projects_dir() / name for name in encoded_names(project))
    return [folder for folder in folders if folder.is_dir()]


def find_sessions(project: Path, rule: WorkloadRule | None = None) -> list[SessionInfo]:
    """The project's sessions, oldest first (sub-agent files are counted with their session)."""
    project = project.expanduser().resolve()
    infos: list[SessionInfo | None] = []
    for folder in project_folders(project):
        flat = _flat_agents(folder)
        sessions = sorted(p for p in folder.glob("*.jsonl") if p.is_file() and not p.name.startswith("agent-"))
        infos.extend(describe(path, rule or WorkloadRule(), project, flat) for path in sessions)
    kept = [info for info in infos if info is not None]
    return sorted(kept, key=lambda info: (info.started_at or "", str(info.path)))
