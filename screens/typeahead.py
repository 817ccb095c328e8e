"""Keys typed ahead land in the box a key opened (over SSH, keys arrive together).

Textual hands each key to the widget focused when the app reads it, and `Widget.focus()` takes
effect only after the keys already read: `/bow` sent at once opened an empty filter, and the
`e` of a filter word opened the export dialog. A key that opens a text box is therefore a
priority binding, run in the app's own key loop before it reads the next key, and it focuses the
box at once. While a text box has focus the binding steps aside, so the key is typed.
"""

from __future__ import annotations

from textual.actions import SkipAction
from textual.dom import DOMNode
from textual.widget import Widget
from textual.widgets import Input, TextArea


def step_aside_while_typing(node: DOMNode) -> None:
    """Let the key through to the text box that has focus (raises SkipAction)."""
    if isinstance(node.app.focused, Input | TextArea):
        raise SkipAction()


def focus_now(widget: Widget) -> None:
    """Focus `widget` before the app reads the next key (`focus()` waits for the keys read)."""
    widget.screen.set_focus(widget)
