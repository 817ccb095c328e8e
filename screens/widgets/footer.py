"""Textual's footer, recomposed once for a burst of binding changes (issue 19).

Textual's `Footer` recomposes, removing and mounting every key again, for each time the screen
says its bindings changed, and a screen says so two or three times in a row as it mounts and
focuses its first widget: on the study screen that was three recomposes before the first page
showed, a fifth of the CPU time from process start to the first paint. This one queues at most
one recompose at a time; it reads the bindings when it runs, so the keys shown are the same.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """`textual.widgets.Footer` that coalesces the recomposes its binding changes ask for."""

    _recompose_queued = False
    """A recompose is asked for and has not started yet: a further change needs no other one."""

    def bindings_changed(self, screen: Screen) -> None:
        if self._recompose_queued and screen is self.screen:
            return  # the queued recompose has not read the bindings yet: it shows this change too
        super().bindings_changed(screen)  # queues a recompose where it applies (as below)
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._recompose_queued = True

    async def recompose(self) -> None:
        self._recompose_queued = False  # before compose reads the bindings: later changes queue again
        await super().recompose()
