"""Keys typed ahead land in the box a key opened (over SSH, keys arrive together).

Textual hands each key to the widget focused when the app reads it, and `Widget.focus()` takes
effect only after the keys already read: `/bow` sent at once opened an empty filter, and the
`e` of a filter word opened the export dialog. A key that opens a text box is therefore a
priority binding, run in the app's own key loop before it reads the next key, and it focuses the
box at once. While a text box has focus the binding steps aside, so the key is typed.

In a text box, Textual types a character in the box's own turn but runs the box's bound keys
(backspace, arrows, ctrl+u, enter) later, once the key has bubbled up to the app: `mlx`, backspace,
` l` sent at once gave `mlx l` less its last character. The app's `Input` and `TextArea` run
their own bound keys in their turn, in order with the characters (Textual issue #6605).
"""

from __future__ import annotations

from textual import events
from textual import widgets as textual
from textual.actions import SkipAction
from textual.app import App
from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.widget import Widget


def step_aside_while_typing(node: DOMNode) -> None:
    """Let the key through to the text box that has focus (raises SkipAction)."""
    if isinstance(node.app.focused, textual.Input | textual.TextArea):
        raise SkipAction()


def focus_now(widget: Widget) -> None:
    """Focus `widget` before the app reads the next key (`focus()` waits for the keys read)."""
    widget.screen.set_focus(widget)


class KeysInOrder:
    """For a text box: its own bound keys run in its turn, in order with the characters typed.
    (A plain mixin: a Widget base before the box's would hide the box's styles.)"""

    _bindings: BindingsMap
    app: App

    async def _on_key(self, event: events.Key) -> None:
        """Before the box's own `_on_key` (Textual calls each class's in turn until one prevents
        the default): a bound key runs here, and the key goes no further."""
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()
                return


class Input(KeysInOrder, textual.Input):
    """The app's one-line text box (use it, not Textual's: see KeysInOrder)."""


class TextArea(KeysInOrder, textual.TextArea):
    """The app's text area (use it, not Textual's: see KeysInOrder)."""
