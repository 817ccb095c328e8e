"""The attempt brief (AI assist, docs/assist.md): advisory, and labelled so on every line.

Opening it gathers what would be sent (diff, log excerpt, verdicts; redacted) in a worker. A
stored answer to that exact request is shown at once, at no cost; otherwise the screen says what
would be sent where and waits for `enter` (a call costs money). Without a key it says so plainly.
Below the brief: the model-extracted claim, if any, which the reviewer accepts (`a`) or corrects
(`0`-`5`, 0 for "no level"); those records are the only thing this screen writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from domain.models import Attempt, Migration
from screens.messages import BriefAnswered, BriefPrepared, ClaimLoaded
from screens.presenters.brief import render_brief, render_claim
from screens.presenters.palette import tone
from screens.text import text


class BriefScreen(ModalScreen[None]):
    """`BriefScreen(migration, attempt)`: pushed with `b` from the attempt screen."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close", id="brief.close", tooltip="Close the brief"),
        Binding("enter", "send", "Ask", id="brief.send",
                tooltip="Send the attempt's diff, log excerpt and verdicts to the model (costs money)"),
        Binding("a", "accept", "Accept claim", id="brief.accept_claim",
                tooltip="Accept the model-extracted claim: its level counts in reports"),
        *(Binding(str(n), f"correct({n})", f"Claim L{n}" if n else "No level", show=False,
                  id=f"brief.correct_{n}",
                  tooltip=f"Correct the claim: the agent expected {'no level' if n == 0 else f'L{n}'}")
          for n in range(6)),
    ]

    def __init__(self, migration: Migration, attempt: Attempt, *, db_path: Path | None = None) -> None:
        super().__init__(id="brief")
        self.migration = migration
        self.attempt = attempt
        self.db_path = db_path
        self.ready_to_send = False
        self.sending = False
        self.extraction: Any | None = None

    @property
    def path(self) -> Path:
        return self.db_path or self.app.db_path  # type: ignore[attr-defined]

    def compose(self) -> ComposeResult:
        with Vertical(id="brief-box") as box:
            box.border_title = f"Brief: {self.migration.slug} #{self.attempt.seq} (advisory)"
            box.border_subtitle = "escape closes"
            with VerticalScroll():
                yield Static(Text("Advisory: written by a model; it changes no verdict, cause or count.",
                                  style=tone("bold $text-warning")), id="brief-label")
                yield Static(Text("Gathering the diff, the log excerpt and the verdicts…", style="dim"),
                             id="brief-body")
                yield Static(Text(""), id="brief-claim")

    def on_mount(self) -> None:
        self.prepare(self.path)
        self.load_claim(self.path)

    # --- workers (each opens the study in its own thread) ----------------------------------------
    def _assistant(self):
        from workbench import config
        from workbench.assist.client import Assistant, Settings

        return Assistant(Settings.from_env(), reviewer=config.reviewer())

    @work(thread=True, exclusive=True, exit_on_error=False, group="brief")
    def prepare(self, path: Path) -> None:
        from screens.data import describe_error, reading
        from workbench.assist import brief as briefs

        try:
            assistant = self._assistant()
            with reading(path) as db:
                inputs = briefs.gather(db, self.migration, self.attempt)
                request = briefs.brief_request(assistant, inputs)
                brief = None
                if assistant.cached(db, request) is not None:
                    brief = briefs.ask(db, assistant, self.migration, self.attempt, inputs)
        except Exception as exc:  # noqa: BLE001 - shown on the screen, never a crash
            self.post_message(BriefPrepared(None, "", 0, False, describe_error(exc)))
            return
        self.post_message(BriefPrepared(brief, assistant.settings.model, len(request.dry_run()),
                                        assistant.available))

    @work(thread=True, exclusive=True, exit_on_error=False, group="brief")
    def ask(self, path: Path) -> None:
        from screens.data import describe_error, reading
        from workbench.assist import brief as briefs

        try:
            with reading(path) as db:
                brief = briefs.ask(db, self._assistant(), self.migration, self.attempt)
        except Exception as exc:  # noqa: BLE001 - AssistError and friends: one plain line
            self.post_message(BriefAnswered(None, describe_error(exc)))
            return
        self.post_message(BriefAnswered(brief))

    @work(thread=True, exclusive=True, exit_on_error=False, group="brief-claim")
    def load_claim(self, path: Path, review: tuple[str, int | None] | None = None) -> None:
        from screens.data import describe_error, reading
        from storage import queries, records
        from workbench import config

        try:
            with reading(path) as db:
                extractions = queries.claim_extractions(db, self.attempt.id)
                latest = extractions[-1] if extractions else None
                if review is not None:
                    action, level = review
                    records.add_claim_review(db, attempt_id=self.attempt.id, action=action,
                                             reviewer=config.reviewer(),
                                             extraction_id=latest.id if action == "accept" and latest else None,
                                             expected_level=level)
                effective = queries.effective_expected_level(db, self.attempt.id)
                reviews = len(queries.claim_reviews(db, self.attempt.id))
        except Exception as exc:  # noqa: BLE001
            self.app.call_from_thread(self.notify, describe_error(exc), severity="error", markup=False)
            return
        self.post_message(ClaimLoaded(latest, effective, reviews))

    # --- showing -----------------------------------------------------------------------------------
    def on_brief_prepared(self, message: BriefPrepared) -> None:
        body = self.query_one("#brief-body", Static)
        if message.problem:
            body.update(text(message.problem, tone("$text-error")))
        elif message.brief is not None:
            body.update(render_brief(message.brief))
        elif not message.available:
            from workbench.assist.client import NO_KEY

            body.update(text(NO_KEY, tone("$text-warning")))
        else:
            self.ready_to_send = True
            out = Text("No brief for this attempt yet.\n\n")
            out.append(text(f"enter sends this attempt's diff (trimmed), log excerpt, verdicts and claim,"
                            f" redacted, to {message.model} (about {message.characters:,} characters);"
                            f" the answer is stored, so asking again costs nothing. `workbench assist brief"
                            f" --dry-run` prints exactly what is sent."))
            body.update(out)

    def on_brief_answered(self, message: BriefAnswered) -> None:
        self.sending = False
        body = self.query_one("#brief-body", Static)
        if message.brief is None:
            body.update(text(message.problem, tone("$text-error")))
            return
        self.ready_to_send = False
        body.update(render_brief(message.brief))

    def on_claim_loaded(self, message: ClaimLoaded) -> None:
        self.extraction = message.extraction
        self.query_one("#brief-claim", Static).update(render_claim(message.extraction, message.effective))

    # --- actions ------------------------------------------------------------------------------------
    def action_send(self) -> None:
        if not self.ready_to_send or self.sending:
            return
        self.sending = True
        self.query_one("#brief-body", Static).update(Text("Asking the model…", style="dim"))
        self.ask(self.path)

    def action_accept(self) -> None:
        if self.extraction is None:
            self.notify("No model-extracted claim to accept (workbench assist claims makes them)",
                        severity="warning", markup=False)
            return
        self.load_claim(self.path, ("accept", None))

    def action_correct(self, level: int) -> None:
        self.load_claim(self.path, ("correct", level or None))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
