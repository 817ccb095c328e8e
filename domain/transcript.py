"""What a Claude Code transcript holds besides attempts: the agent's edits and its other tool
calls, kept as an attempt's context.

Kept apart from domain/models.py, which the CLI's lists load at every start (issue 19).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Edit:
    """A change the agent made to a file before an attempt (Edit, Write, MultiEdit or Bash)."""

    tool: str
    file_path: str
    """Relative to the session's working directory when inside it, else as the agent wrote it."""
    old_text: str | None = None
    """Edit/MultiEdit: the replaced text; None for Write (whole file) and Bash."""
    new_text: str | None = None
    """Edit/MultiEdit: the replacement; Write: the whole new content; None for Bash."""
    replace_all: bool = False
    patch: str = ""
    """A unified-diff rendering when the transcript has one; for Bash, the command."""
    tool_use_id: str = ""
    at: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call kept as an attempt's context: what the agent did besides running the workload."""

    tool_use_id: str
    name: str
    input: str
    """The call's input as JSON, secrets redacted."""
    result: str = ""
    """The result's text, secrets redacted, cut to a few kilobytes."""
    is_error: bool = False
    called_at: str | None = None
    result_at: str | None = None
    agent_id: str | None = None
    """The sub-agent that made the call; None for the main session."""
    spawned_agent_id: str | None = None
    """For a Task/Agent call: the sub-agent it started."""
