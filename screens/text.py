"""Untrusted text as Rich `Text`: cleaned (domain.text.clean), then never parsed as markup.

Every widget that shows a log, diff, transcript, commit message or name gets its value from here.
"""

from __future__ import annotations

import re

from rich.text import Text

from domain.text import clean


def text(value: str, style: str = "", *, keep_newlines: bool = False) -> Text:
    return Text(clean(value, keep_newlines=keep_newlines), style=style)


_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour code; every other escape (a title change, a screen clear, a cursor move) is shown."""


def ansi_text(value: str) -> Text:
    """Keeps the colours of ANSI SGR codes, shows every other escape literally (`␛]0;x␇`)."""
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
