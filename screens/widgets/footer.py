"""Textual's footer, recomposed once for a burst of binding changes (issue 19).

Textual's `Footer` recomposes, removing and mounting every key again, for each time the screen
says its bindings changed, and a screen says so two or three times in a row as it mounts and
focuses its first widget: on the study screen that was three recomposes before the first page
showed, a fifth of the CPU time from process start to the first paint. This one queues at most
one recompose at a time; it reads the bindings when it runs, so the keys shown are the same.

It composes the keys again only when what it shows changes: most binding changes are the focus
moving between widgets whose keys the footer does not show, or the screen's own focus leaving it
for a screen pushed on top and coming back (a recompose of a screen no one sees is put off until
it shows again). Opening a migration recomposed three footers, the one left behind included;
each key it mounts is styled again when its `compact` is bound, about 4 ms a key (profiled), so
they are made with the footer's `compact` already.

Keys that do not fit the width are hidden whole, and a `…` stands for them, not cut mid-label at
the edge: the screen's own keys come first (`FOOTER_FIRST`), and `?` and the palette list them all.
The fit places the keys itself, as the screen's layout will (Textual's `arrange`), as soon as they
are composed: waiting for the screen to lay them out cost a new screen two more frames before its
footer settled (issue 39). Fitting keys by the regions of a layout not done yet had left `t▏` or
`n Next fai▏` cut under the palette's key.

The keys are composed after the refresh that follows the screen's first focus, as Textual's footer
does: composed at once (before that refresh), a pushed screen refreshed before its first layout,
and the file screen's scroll to its line was cut to the top in one run in two.
"""

from __future__ import annotations

from textual import events
from textual._arrange import arrange
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.geometry import Region, Size
from textual.screen import Screen
from textual.widgets import Footer as TextualFooter
from textual.widgets._footer import FooterKey, FooterLabel


class Footer(TextualFooter):
    """`textual.widgets.Footer` that coalesces the recomposes its binding changes ask for."""

    _recompose_queued = False
    """A recompose is asked for and has not started yet: a further change needs no other one."""

    _fit_pending = False
    """The keys were composed again and are not fitted yet: the next layout of the screen fits them."""

    _composed: tuple[object, ...] | None = None
    """What the keys shown were composed from (`_shown`), and at which width."""

    _put_off = False
    """Bindings changed while the screen was out of sight: looked at again when it shows."""

    def on_mount(self) -> None:
        self.screen.screen_layout_refresh_signal.subscribe(self, self._laid_out)
        self.app.screen_change_signal.subscribe(self, self._screen_changed)

    def on_unmount(self) -> None:
        self.screen.screen_layout_refresh_signal.unsubscribe(self)
        self.app.screen_change_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen) -> None:
        if screen is self.screen and not screen.is_current:
            self._put_off = True  # nobody sees this footer: its screen's focus left with the screen
            return
        if self._recompose_queued and screen is self.screen:
            return  # the queued recompose has not read the bindings yet: it shows this change too
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._recompose_queued = True
            self.call_after_refresh(self.recompose)

    def _screen_changed(self, screen: Screen) -> None:
        if self._put_off and self.screen.is_current:
            self._put_off = False
            self.bindings_changed(self.screen)

    def _shown(self) -> tuple[object, ...]:
        """What the keys are composed from: each binding shown (and the palette's) as the footer
        draws it, and the width they are fitted to."""
        if not self._bindings_ready:
            return ()
        palette = self.app.COMMAND_PALETTE_BINDING
        return (self._width(), *((binding.key, binding.key_display, binding.description, binding.action,
                                    binding.group, enabled, tooltip)
                                   for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items()
                                   if binding.show or key == palette))

    async def recompose(self) -> None:
        self._recompose_queued = False  # before compose reads the bindings: later changes queue again
        shown = self._shown()
        if shown == self._composed:
            return  # the same keys at the same width
        self._composed = shown
        self._fit_pending = False  # a layout while the keys are swapped has nothing to fit
        await super().recompose()
        self._fit_pending = not self._fit()  # placed already, or at the screen's next layout

    def compose(self) -> ComposeResult:
        writes = self._write_keys()
        for node in super().compose():
            if isinstance(node, FooterKey) and node.key in writes and not node.has_class("-command-palette"):
                continue  # a read-only study: nothing it records can be
            if isinstance(node, FooterKey) and not node.has_class("-command-palette"):
                node.set_reactive(FooterKey.compact, self.compact)  # bound to it: the bind changes nothing
            if isinstance(node, FooterKey):  # the class its `compact` watcher would set once mounted,
                node.set_class(node.compact, "-compact")  # restyling the palette's key a frame later
            yield node
        more = FooterLabel("…", id="footer-more")
        more.display = False
        yield more

    def _write_keys(self) -> set[str]:
        """The keys shown that record something (the app's `WRITE_KEYS`), where the study is read-only."""
        if not getattr(self.app, "read_only", None):
            return set()
        ids = getattr(self.app, "WRITE_KEYS", frozenset())
        return {key for key, (_, binding, _, _) in self.screen.active_bindings.items() if binding.id in ids}

    def _width(self) -> int:
        """The footer's width; before its first layout, the screen's (it spans the bottom row)."""
        return self.size.width or self.screen.size.width or self.app.size.width

    def _laid_out(self, screen: Screen) -> None:
        """The screen placed its widgets: fit keys composed since the last fit, once each is placed."""
        if self._fit_pending and self._fit():
            self._fit_pending = False

    def _fit(self) -> bool:
        """Hide the keys that run past the palette's key (or the edge), and show `…` for them;
        False while a key is not mounted yet (its size unknown)."""
        try:
            more = self.query_one("#footer-more")
        except NoMatches:
            return False
        palette = [child for child in self.children if child.has_class("-command-palette")]
        keys = [child for child in self.children if child is not more and child not in palette]
        if not self.is_attached or not all(child.is_mounted for child in (*keys, *palette)):
            return False
        width = self._width()
        placed = self._placed(width)  # as composed: every key shown, no `…`
        edge = min([width, *(placed[child].x for child in palette if child in placed)])
        if all(placed[key].right <= edge for key in keys if key in placed):
            return True  # all fit: no `…`, and no room kept for one
        edge -= 1 + more.styles.gutter.width + more.styles.margin.width  # the `…`, not placed while hidden
        over = False
        for key in keys:
            over = over or key not in placed or placed[key].right > edge
            key.display = not over
        more.display = True
        return True

    def _placed(self, width: int) -> dict[object, Region]:
        """Where the screen's layout will put each shown key in the footer (its own coordinates),
        placed now rather than read from a layout to come."""
        arrangement = arrange(self, list(self.children), Size(width, 1), self.app.size)
        return {placement.widget: placement.region for placement in arrangement.placements}

    def on_resize(self, event: events.Resize) -> None:
        """Another width holds other keys: show them all again, then hide what does not fit."""
        if not self._recompose_queued:
            self._recompose_queued = True
            self.call_after_refresh(self.recompose)
