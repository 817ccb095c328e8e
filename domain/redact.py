"""Secrets out: API keys, tokens and private keys are replaced before text is stored, exported or sent.

The one `redact`: every importer, report export and assist request goes through it. Patterns
cover the key formats of Anthropic, OpenAI, Hugging Face, GitHub, GitLab, Slack, Google and AWS,
bearer tokens, PEM private keys, and assignments to variables whose names say they hold a
secret. A replacement names the kind of secret, never any of its characters.

Every pattern is linear on long lines (tests/test_redact.py runs them on megabyte lines); for
speed, only lines holding a trigger fragment go through them.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, str]] = [
    ("anthropic", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("huggingface", r"hf_[A-Za-z0-9]{30,}"),
    ("github", r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})"),
    ("gitlab", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("slack", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("google", r"AIza[0-9A-Za-z_-]{35}"),
    ("google-oauth", r"ya29\.[0-9A-Za-z_-]{20,}"),
    ("aws-key-id", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("bearer", r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"),
]
_SECRET_NAME = r"(?=[A-Za-z0-9_]*?(?:API_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|ACCESS_KEY))[A-Za-z0-9_]++"
"""A whole word holding a secret-sounding part: found by one look through the word, then the word
taken whole and never given back (a word of many `token`s is read once, not once per `token`)."""
_ASSIGNMENT = re.compile(
    rf"(?P<name>\b{_SECRET_NAME})(?P<sep>\s*[=:]\s*|\"\s*:\s*\")(?P<quote>['\"]?)(?P<value>[^\s'\",;]{{8,}})",
    re.IGNORECASE,
)
_KEYS = re.compile("|".join(f"(?P<{kind.replace('-', '_')}>{pattern})" for kind, pattern in _PATTERNS))
_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z]{1,20} ){0,4}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END (?:[A-Z]{1,20} ){0,4}PRIVATE KEY-----")

_TRIGGER = re.compile(
    r"sk-|hf_|gh[pousr]_|github_pat_|aiza|ya29\.|akia|asia|bearer|key|secret|token|passw|xox[abprs]-|glpat-"
)
"""Lower-case fragments every secret shape above contains: lines without one are left alone."""
_FRAGMENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("k", ("sk-", "akia", "key", "token")),
    ("f", ("hf_",)),
    ("_", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("z", ("aiza",)),
    ("y", ("ya29.",)),
    ("i", ("asia",)),
    ("b", ("bearer",)),
    ("c", ("secret",)),
    ("w", ("passw",)),
    ("x", ("xox",)),
    ("-", ("glpat-",)),
)
"""`_TRIGGER`'s fragments, each under one of its letters: a text without the letter (one memchr
pass) holds none of them, so clean output is passed over at C speed without the regex. "xox"
stands for the five Slack prefixes (one pass over a long log, not five, when it holds an x):
where it starts, the regex looks for the whole fragment."""


def _first_trigger(lower: str) -> int:
    """Where the first `_TRIGGER` fragment starts in the lower-cased text, or -1."""
    first = -1
    for letter, fragments in _FRAGMENTS:
        seen = lower.find(letter)  # a fragment holding the letter ends past its first one
        if seen == -1:
            continue
        for fragment in fragments:
            start = max(0, seen - fragment.index(letter))
            at = lower.find(fragment, start, first + len(fragment) - 1 if first != -1 else len(lower))
            if at != -1:
                first = at
    return first


def _key(match: re.Match[str]) -> str:
    kind = match.lastgroup or "secret"
    return f"[REDACTED:{kind.replace('_', '-')}]"


def _assignment(match: re.Match[str]) -> str:
    if match.group("value").startswith("[REDACTED"):
        return match.group()
    return f"{match.group('name')}{match.group('sep')}{match.group('quote')}[REDACTED:secret]"


def _redact_line(text: str) -> str:
    return _ASSIGNMENT.sub(_assignment, _KEYS.sub(_key, text))


def _private_keys(text: str) -> str:
    """PEM private key blocks replaced; a block cut off before its END line is replaced to the end."""
    out: list[str] = []
    pos = 0
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        end = _PEM_END.search(text, begin.end())
        out += [text[pos : begin.start()], "[REDACTED:private-key]"]
        pos = len(text) if end is None else end.end()
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> str:
    """`text` with every secret it recognises replaced by `[REDACTED:<kind>]`.

    For speed on large logs, only the lines holding a trigger fragment (`_TRIGGER`, searched in
    the lower-cased text) go through the full patterns; private key blocks span lines and are
    searched for in the whole text.
    """
    if not text:
        return text
    if "PRIVATE KEY-----" in text:
        text = _private_keys(text)
    lower = text.lower()
    if len(lower) != len(text):  # a few characters change length when lower-cased
        return _redact_line(text)
    first = _first_trigger(lower)
    if first == -1:
        return text
    out: list[str] = []
    pos = 0
    while (hit := _TRIGGER.search(lower, first if not out else pos)) is not None:
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        end = len(text) if end == -1 else end
        out.append(text[pos:start])
        out.append(_redact_line(text[start:end]))
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)
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
