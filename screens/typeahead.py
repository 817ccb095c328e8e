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

Characters typed together (a note typed without bracketed paste) go in as one insert
(`type_text`, from screens/keygate.py), and a one-line box holds at most NOTE_MAX characters.
"""

from __future__ import annotations

from textual import events
from textual import widgets as textual
from textual.actions import SkipAction
from textual.app import App
from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.timer import Timer
from textual.widget import Widget

from domain.text import NOTE_MAX, note_limit

FULL_QUIET_S = 0.5
"""A full box says how much it left out once keys have stopped coming for this long (one toast
for a burst, however it was cut up)."""


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


class TypesText(KeysInOrder):
    """A text box the key gate hands characters typed together to as one insert (keygate.py):
    typed one by one, each redrew and re-checked the whole text (a 60 KB note took minutes)."""

    def types(self, key: events.Key) -> bool:
        """`key` would be typed here, not run as one of the box's keys."""
        return key.is_printable and key.key not in self._bindings.key_to_bindings

    def typed_character(self, key: events.Key) -> str:
        return key.character or ""

    def type_text(self, text: str) -> None:
        """Insert `text` as if its characters had been typed one by one."""
        raise NotImplementedError


class Input(TypesText, textual.Input):
    """The app's one-line text box (use it, not Textual's: see KeysInOrder), NOTE_MAX at most."""

    def __init__(self, *args, max_length: int = NOTE_MAX, **kwargs) -> None:
        super().__init__(*args, max_length=max_length, **kwargs)
        self._left_out = 0
        self._full_timer: Timer | None = None

    def type_text(self, text: str) -> None:
        if self.restrict or self.type != "text":  # checked character by character, as typed
            for character in text:
                start, end = sorted(self.selection)
                self.replace(character, start, end)
            return
        start, end = sorted(self.selection)
        room = len(text) if not self.max_length else max(0, self.max_length - len(self.value) + end - start)
        if text[:room]:
            self.replace(text[:room], start, end)
        if room < len(text):
            self._say_full(len(text) - room)

    def _on_paste(self, event: events.Paste) -> None:
        """A paste past NOTE_MAX keeps what fits (Textual's refuses the whole of it)."""
        event.stop()
        event.prevent_default()
        if event.text:
            self.type_text(event.text.splitlines()[0])

    def restricted(self) -> None:
        if self.max_length and len(self.value) >= self.max_length:
            self._say_full(1)
        else:
            super().restricted()

    def _say_full(self, left_out: int) -> None:
        self._left_out += left_out
        if self._full_timer is not None:
            self._full_timer.stop()
        self._full_timer = self.set_timer(FULL_QUIET_S, self._tell_full)

    def _tell_full(self) -> None:
        self.app.notify(f"This box {note_limit(self._left_out, self.max_length)}", severity="warning", markup=False)
        self._left_out, self._full_timer = 0, None


class TextArea(TypesText, textual.TextArea):
    """The app's text area (use it, not Textual's: see KeysInOrder)."""

    def types(self, key: events.Key) -> bool:
        return not self.read_only and (super().types(key) or key.key == "enter"
                                       and "enter" not in self._bindings.key_to_bindings)

    def typed_character(self, key: events.Key) -> str:
        return "\n" if key.key == "enter" else super().typed_character(key)

    def type_text(self, text: str) -> None:
        if not self.read_only:
            self._replace_via_keyboard(text, *self.selection)
