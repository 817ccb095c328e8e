"""The command palette (`ctrl+p`): open a migration by slug, go back, help."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from workbench.untrusted import clean

if TYPE_CHECKING:
    from screens.app import WorkbenchApp


class WorkbenchCommands(Provider):
    """Commands from what the app has already loaded: `discover()` reads no database."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app: WorkbenchApp = self.app  # type: ignore[assignment]
        commands: list[tuple[str, Callable[[], object], str]] = []
        if len(app.screen_stack) > 1:
            commands.append(("Go back", app.action_back, "Back to the previous screen"))
        commands.append(("Help", app.action_help, "The keys that work on this screen"))
        for summary in app.loaded_migrations():
            m = summary.migration
            commands.append(
                (f"Open migration {clean(m.slug)}", partial(app.open_migration, m.slug),
                 clean(m.title))
            )
        return commands

    async def discover(self) -> Hits:
        for text, command, help_text in self._commands():
            # Content, not str: the palette parses a str prompt or help as markup.
            yield DiscoveryHit(Content(text), command, text=text, help=Content(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, command, help_text in self._commands():
            score, offsets = matcher.fuzzy_search.match(query, text)
            if score > 0:
                display = Content(text)
                for offset in offsets:
                    display = display.stylize(matcher.match_style, offset, offset + 1)
                yield Hit(score, display, command, text=text, help=Content(help_text))
