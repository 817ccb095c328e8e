"""The one place untrusted text (logs, diffs, transcripts, commit messages, names) is made safe.

`clean` replaces every control character with a visible stand-in, so nothing from a log can
move the cursor, retitle the terminal or clear the screen; `text` and `ansi_text` wrap the
result in a Rich `Text`, which Textual renders literally (never as markup).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

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


def text(value: str, style: str = "", *, keep_newlines: bool = False) -> Text:
    from rich.text import Text

    return Text(clean(value, keep_newlines=keep_newlines), style=style)


_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour code; every other escape (a title change, a screen clear, a cursor move) is shown."""


def ansi_text(value: str) -> Text:
    """Keeps the colours of ANSI SGR codes, shows every other escape literally (`␛]0;x␇`)."""
    from rich.text import Text

    # Rich's decoder would drop the other sequences (and BEL, and what precedes a CR) silently:
    # make everything but the colour codes visible first.
    parts = []
    position = 0
    for match in _SGR.finditer(value):
        parts += [clean(value[position : match.start()]), match.group()]
        position = match.end()
    parts.append(clean(value[position:]))
    coloured = Text.from_ansi("".join(parts))
    # Replacements are one character for one, so the colour spans stay where they were.
    safe = Text(clean(coloured.plain), style=coloured.style, end="")
    for span in coloured.spans:
        safe.stylize(span.style, span.start, span.end)
    return safe
