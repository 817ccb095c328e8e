"""Secrets out: API keys and tokens are replaced before text is stored, exported or sent.

Patterns cover the key formats of Anthropic, OpenAI, Hugging Face, GitHub, Google and AWS,
bearer tokens, and assignments to variables whose names say they hold a secret. A
replacement names the kind of secret, never any of its characters.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, str]] = [
    ("anthropic", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("huggingface", r"hf_[A-Za-z0-9]{30,}"),
    ("github", r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})"),
    ("google", r"AIza[0-9A-Za-z_-]{35}"),
    ("google-oauth", r"ya29\.[0-9A-Za-z_-]{20,}"),
    ("aws-key-id", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("bearer", r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"),
]
_SECRET_NAME = r"[A-Za-z0-9_]*(?:API_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|ACCESS_KEY)[A-Za-z0-9_]*"
_ASSIGNMENT = re.compile(
    rf"(?P<name>\b{_SECRET_NAME})(?P<sep>\s*[=:]\s*|\"\s*:\s*\")(?P<quote>['\"]?)(?P<value>[^\s'\",;]{{8,}})",
    re.IGNORECASE,
)
_KEYS = re.compile("|".join(f"(?P<{kind.replace('-', '_')}>{pattern})" for kind, pattern in _PATTERNS))


def _key(match: re.Match[str]) -> str:
    kind = match.lastgroup or "secret"
    return f"[REDACTED:{kind.replace('_', '-')}]"


def _assignment(match: re.Match[str]) -> str:
    if match.group("value").startswith("[REDACTED"):
        return match.group()
    return f"{match.group('name')}{match.group('sep')}{match.group('quote')}[REDACTED:secret]"


def redact(text: str) -> str:
    """`text` with every secret it recognises replaced by `[REDACTED:<kind>]`."""
    return _ASSIGNMENT.sub(_assignment, _KEYS.sub(_key, text))


def redact_bytes(data: bytes) -> bytes:
    """The same on bytes, leaving bytes that are not UTF-8 untouched."""
    text = data.decode("utf-8", errors="surrogateescape")
    return redact(text).encode("utf-8", errors="surrogateescape")


_SECRET_NAME_ONLY = re.compile(rf"^{_SECRET_NAME}$", re.IGNORECASE)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An environment whose secret-named variables and key-shaped values are replaced."""
    return {
        name: "[REDACTED:secret]" if _SECRET_NAME_ONLY.match(name) and value else redact(value)
        for name, value in env.items()
    }
