"""The app's keys, handed on one at a time (over SSH, keys arrive together).

Textual forwards each key to the widget focused when the app reads it, and runs a key's binding
later, once the key has bubbled back up to the app; what the binding does (a row selected, a
screen pushed, a page read) happens later still. So keys read together all went to the screen
that was there before the first of them was handled: `enter enter` on the study opened the
migration twice, the second closing the first while it was being built (a crash); `j enter 3`
lost the `3` to the list under the attempt screen.

The gate forwards a key only once the key before it is handled: it has gone up its path (the
widget it was given to, each parent, the screen, the app), what it set off has gone the same way
(a `RowSelected` to the screen), a screen it opened is built and focused, and a list it opened or
filtered has its first page. The key after it then reaches the screen that exists by then.

Characters typed together into a text box go in as one insert (`typeahead.TypesText`): a long
note typed without bracketed paste (each character its own key) took time and memory growing
with the square of its length, key by key.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual import events
from textual.app import ScreenStackError

from screens.typeahead import TypesText

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode

KEY_WAIT_S = 10.0
"""The longest a key waits for the one before it (a slow disk, a stuck handler): after that it
goes on regardless. 3 s was passed on a 2-core machine at load 12 (a migration's first page not
read yet), and the `enter` behind it reached an empty list."""
POLL_S = 0.01
"""How often a key waiting for a list's first page looks again."""
SETTLE_PASSES = 8
"""At most this many passes over the focused widget's path while the screen or focus keeps changing."""


class KeyGate:
    """Holds the app's keys while one is in flight and hands them on in order (module doc)."""

    def __init__(self, app: App, forward: Callable[[events.Key], Awaitable[None]]) -> None:
        self.app = app
        self.forward = forward
        """Textual's own handling of a key read by the app (priority bindings, then the focused widget)."""
        self.waiting: deque[events.Key] = deque()
        self.task: asyncio.Task | None = None

    async def arrive(self, key: events.Key) -> None:
        """A key read by the app (in the app's turn): handed on at once if no key is in flight,
        else it waits its turn."""
        if self.task is not None and not self.task.done():
            self.waiting.append(key)
            return
        if self._first_page_pending():  # the app just started: its list has not shown a page yet
            self.waiting.append(key)
            self.task = asyncio.create_task(self._drain(None, None))
            return
        went_to = self.app.focused or self.app.screen  # where Textual forwards it
        await self.forward(key)
        self.task = asyncio.create_task(self._drain(key, went_to))

    def _first_page_pending(self) -> bool:
        """The screen's list has not shown its first page (`reading_first_page`, true from the
        screen's making: a key that came before its read began was lost to the empty list)."""
        try:
            return bool(getattr(self.app.screen, "reading_first_page", False))
        except ScreenStackError:  # no screen yet
            return True

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _drain(self, key: events.Key | None, went_to: DOMNode | None) -> None:
        """Follow the key handed on (None: none was, the first page is awaited), then hand on the
        waiting ones, each once the one before is done."""
        await self._within(self._follow(key, went_to) if key is not None and went_to is not None else asyncio.sleep(0))
        while self.waiting:
            if not self.app.is_running:  # closing: what is left goes nowhere
                self.waiting.clear()
                return
            focused = self.app.focused
            typed = self._typed_run(focused) if isinstance(focused, TypesText) else []
            if typed:
                await self._within(self._in_app(self._type, focused, typed))
            else:
                await self._within(self._handle(self.waiting.popleft()))

    async def _within(self, step: Awaitable[None]) -> None:
        """`step`, then what it set off (`_settle`), KEY_WAIT_S at most: after that the next key
        goes on."""
        try:
            async with asyncio.timeout(KEY_WAIT_S):
                await step
                await self._settle()
        except TimeoutError:
            pass

    def _typed_run(self, box: TypesText) -> list[events.Key]:
        """The keys at the head of the queue that `box` would type one by one, taken off it."""
        priority = {key for _, bindings in self.app.screen._binding_chain
                    for key, found in bindings.key_to_bindings.items() if any(b.priority for b in found)}
        typed = []
        while self.waiting:
            key = self.waiting[0]
            if key.key in priority or not box.types(key):  # a priority key (`/`) goes on its own
                break
            typed.append(self.waiting.popleft())
        return typed

    def _type(self, box: TypesText, typed: list[events.Key]) -> None:
        """In the app's turn: the characters into `box`, still focused (else they go back, to be
        handed on one by one)."""
        if self.app.focused is box:
            box.type_text("".join(box.typed_character(key) for key in typed))
        else:
            self.waiting.extendleft(reversed(typed))

    async def _in_app(self, callback: Callable[..., object], *args: object) -> None:
        """Run `callback` in the app's own turn (as the key would have been), and wait for it."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                result = callback(*args)
                if asyncio.iscoroutine(result):
                    await result
            finally:
                if not done.done():
                    done.set_result(None)

        if self.app.call_later(run):
            await done

    async def _handle(self, key: events.Key) -> None:
        """Textual's handling of `key` in the app's turn, then its way up."""
        went_to: list[DOMNode] = []

        async def forward() -> None:
            went_to.append(self.app.focused or self.app.screen)
            await self.forward(key)

        await self._in_app(forward)
        if went_to:
            await self._follow(key, went_to[0])

    async def _follow(self, key: events.Key, went_to: DOMNode) -> None:
        """A key Textual forwarded (not run as a priority binding): up its path, from the widget
        it went to, to the app."""
        if key.is_forwarded:
            await self._walk(went_to.ancestors_with_self)

    async def _walk(self, path: list[DOMNode]) -> None:
        """Wait until each node of `path` in turn has handled what was queued to it: a message
        going up the path is handled by the time the walk is done."""
        loop = asyncio.get_running_loop()
        for node in path:
            reached: asyncio.Future[None] = loop.create_future()
            if not node.call_later(lambda f=reached: f.done() or f.set_result(None)):
                continue  # closed
            while not reached.done():  # a node removed meanwhile (a screen popped) drops its queue
                await asyncio.wait([reached], timeout=POLL_S * 5)
                if node is not self.app and not node.is_attached:
                    break

    async def _settle(self) -> None:
        """Wait for what the key set off: messages up the focused path, a new screen built and
        focused, a list's first page read."""
        for _ in range(SETTLE_PASSES):
            before = (self.app.screen, self.app.focused)
            start = self.app.focused or self.app.screen
            await self._walk(start.ancestors_with_self)
            if (self.app.screen, self.app.focused) == before:
                break
        while getattr(self.app.screen, "reading_first_page", False):
            await asyncio.sleep(POLL_S)
