"""The command palette (`ctrl+p`): every key's action on this screen, a jump to any migration
by slug and to any attempt by `slug #seq`, go back, help."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from domain.text import clean

if TYPE_CHECKING:
    from domain.models import MigrationSummary


class PaletteApp(Protocol):
    """What the palette asks of the app (screens.app.WorkbenchApp), named here so that this module
    needs nothing above it."""

    attempt_names: list[tuple[str, int, int, str]]
    screen_stack: Any

    def get_key_display(self, binding: Any) -> str: ...
    def run_action_on(self, node: Any, action: str) -> None: ...
    def action_back(self) -> None: ...
    def action_help(self) -> None: ...
    def open_queue(self) -> None: ...
    def open_agreement(self) -> None: ...
    def loaded_migrations(self) -> list[MigrationSummary]: ...
    def open_migration(self, slug: str) -> None: ...
    def open_attempt(self, slug: str, attempt_id: int) -> None: ...


class WorkbenchCommands(Provider):
    """Commands from what the app has already loaded: `discover()` reads no database."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        """Each key's action on this screen once, named as the footer and help name it, with its
        first key (`?` not also F1, `N` not also `+`); then back, help, my queue and the agreement
        where no key of this screen does them already."""
        app: PaletteApp = self.app  # type: ignore[assignment]
        commands: list[tuple[str, Callable[[], object], str]] = []
        listed = set()  # (node, action) of the keys listed: one entry per action, however many keys
        names, actions, keys = set(), set(), set()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if binding.id is None or (active.node, binding.action) in listed or binding.description in names:
                continue  # (escape and q both go back: one "Back", with the key listed first)
            listed.add((active.node, binding.action))
            names.add(binding.description)
            actions.add(binding.action.rpartition(".")[2])
            keys.add(key)
            label = f"{binding.description} ({app.get_key_display(binding)})"
            commands.append((label, partial(app.run_action_on, active.node, binding.action),
                             binding.tooltip or ""))
        pushed = self.screen is not app.screen_stack[0]  # (the stack holds the palette too)
        if pushed and "escape" not in keys:
            commands.append(("Back", app.action_back, "Back to the previous screen"))
        if "help" not in actions:
            commands.append(("Help", app.action_help, "The keys that work on this screen"))
        if pushed:
            from screens.agreement import AgreementScreen
            from screens.queue import QueueScreen

            if "My queue" not in names and not isinstance(self.screen, QueueScreen):
                commands.append(("My queue", app.open_queue, "The attempts dealt to you, with counts of done and left"))
            if "Agreement" not in names and not isinstance(self.screen, AgreementScreen):
                commands.append(("Agreement", app.open_agreement,
                                 "Reviewer agreement per level and the disagreements to adjudicate"))
        for summary in app.loaded_migrations():
            m = summary.migration
            commands.append(
                (f"Open migration {clean(m.slug)}", partial(app.open_migration, m.slug),
                 clean(m.title))
            )
        return commands

    def _attempts(self, query: str) -> list[tuple[str, Callable[[], object], str]]:
        """Attempts whose `slug #seq` holds the query's words: cheap even for 15,000."""
        app: PaletteApp = self.app  # type: ignore[assignment]
        words = query.lower().replace("#", " ").split()
        if not words:
            return []
        out = []
        for slug, seq, attempt_id, source in app.attempt_names:
            name = f"{slug} #{seq}"
            low = name.lower()
            if all(w in low for w in words):
                out.append((f"Open attempt {clean(name)}", partial(app.open_attempt, slug, attempt_id),
                            clean(source)))
                if len(out) >= 200:
                    break
        return out

    async def discover(self) -> Hits:
        for text, command, help_text in self._commands():
            # Content, not str: the palette parses a str prompt or help as markup.
            yield DiscoveryHit(Content(text), command, text=text, help=Content(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        words = _words(query)
        for text, command, help_text in self._commands() + self._attempts(query):
            score, offsets = matcher.fuzzy_search.match(query, text)
            if score > 0:
                display = Content(text)
                for offset in offsets:
                    display = display.stylize(matcher.match_style, offset, offset + 1)
                yield Hit(score, display, command, text=text, help=Content(help_text))
            elif words and words <= _words(help_text):
                # what it does, in the user's word: `report` finds Export, whose help says so
                yield Hit(HELP_SCORE, Content(text), command, text=text, help=Content(help_text))


HELP_SCORE = 1.0
"""A hit on a command's help text, below any on its name (the fuzzy matcher scores those 3 and up)."""


def _words(text: str) -> set[str]:
    """The words of three letters or more, lower-cased: a query matches a help text by whole words,
    so that `q` or `new` does not find every command whose help has a q or says `newest`."""
    return {w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if len(w) >= 3}
