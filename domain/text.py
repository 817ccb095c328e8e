"""The one place untrusted text (logs, diffs, transcripts, commit messages, names) is cleaned.

`clean` replaces every control character with a visible stand-in, so nothing from a log can
move the cursor, retitle the terminal or clear the screen. screens/text.py wraps the result in
Rich `Text` for the app; exports and the CLI print it as it is.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures": ␛ for ESC, ␀ for NUL
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def clean(value: str, *, keep_newlines: bool = False, tab: str = "    ") -> str:
    """`value` with control characters made visible; tabs expanded; newlines kept if asked."""
    value = value.replace("\t", tab)
    if keep_newlines:
        return "\n".join(_CONTROL.sub(_visible, line) for line in value.split("\n"))
    return _CONTROL.sub(_visible, value)


NOTE_MAX = 10_000
"""The most characters a note, reason or justification holds, typed in the app's one-line box or
given on the command line: ten thousand is pages of prose, far past any note, and keeps each
redraw of the box's line cheap."""


def note_limit(over: int, cap: int = NOTE_MAX, *, refused: bool = False) -> str:
    """What a text `over` characters past its cap is told, the app's box and the CLI alike:
    `holds at most 10,000 characters: 5 characters were left out` (the box keeps what fits), or
    with `refused`, `...: 5 characters too many; nothing was recorded` (the CLI cuts nothing)."""
    if refused:
        many = "1 character" if over == 1 else f"{over:,} characters"
        return f"holds at most {cap:,} characters: {many} too many; nothing was recorded"
    what = "1 character was" if over == 1 else f"{over:,} characters were"
    return f"holds at most {cap:,} characters: {what} left out"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`n` and the noun, in the plural unless `n` is 1: `1 judgement`, `0 attempts`, `6 attempts`;
    `many` where adding an s is wrong (`plural(2, "was", "were")`)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"
