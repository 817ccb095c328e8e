"""The command palette (`ctrl+p`): every key's action on this screen, a jump to any migration
by slug and to any attempt by `slug #seq`, go back, help."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from domain.text import clean

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
        seen = set()
        for active in self.screen.active_bindings.values():
            binding = active.binding
            if binding.id is None or binding.id in seen or binding.id in ("app.help_f1",):
                continue
            seen.add(binding.id)
            label = f"{binding.description} ({app.get_key_display(binding)})"
            commands.append((label, partial(app.run_action_on, active.node, binding.action),
                             binding.tooltip or ""))
        if len(app.screen_stack) > 1:  # on the study screen its Q and A bindings are listed above
            from screens.agreement import AgreementScreen
            from screens.queue import QueueScreen

            if not isinstance(self.screen, QueueScreen):
                commands.append(("My queue", app.open_queue, "The attempts dealt to you, with counts of done and left"))
            if not isinstance(self.screen, AgreementScreen):
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
        app: WorkbenchApp = self.app  # type: ignore[assignment]
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
        for text, command, help_text in self._commands() + self._attempts(query):
            score, offsets = matcher.fuzzy_search.match(query, text)
            if score > 0:
                display = Content(text)
                for offset in offsets:
                    display = display.stylize(matcher.match_style, offset, offset + 1)
                yield Hit(score, display, command, text=text, help=Content(help_text))
