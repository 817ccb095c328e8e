"""Colours by meaning, taken from the app's Textual theme, so every theme (light, dark, high
contrast) colours pass, fail and warnings its own way.

Presenters write Rich styles with theme variables, as in tcss: `tone("bold $text-error")`. The
app calls `use(app.get_css_variables())` at start and whenever the theme changes; until then (a
presenter used outside the app) the ANSI colours below stand in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from textual.color import Color, ColorParseError

FALLBACK = {
    "text-success": "green",
    "text-error": "red",
    "text-warning": "yellow",
    "text-primary": "cyan",
    "text-secondary": "magenta",
}
"""The variables presenters use, with what stands in for them before a theme is read."""

_colours = dict(FALLBACK)
_VARIABLE = re.compile(r"\$([a-z][a-z-]*)")
"""A theme variable in a style; applied only to our own style strings, never to untrusted text."""


def use(variables: Mapping[str, str]) -> None:
    """Take the theme's colours for the variables in `FALLBACK` (a value that is not a plain
    colour, such as `auto 60%`, keeps the fallback)."""
    for name, fallback in FALLBACK.items():
        try:
            _colours[name] = Color.parse(variables[name]).hex6
        except (KeyError, ColorParseError):
            _colours[name] = fallback


def tone(spec: str) -> str:
    """A Rich style with its theme variables replaced by the current theme's colours."""
    return _VARIABLE.sub(lambda m: _colours.get(m.group(1), "default"), spec)
