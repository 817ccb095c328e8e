"""The attempt screen's `E`: confirm, then `workbench explain` in a worker (docs/explain.md)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from domain.models import Attempt, Migration

MAX_RUNS = 6
MINUTES = 30.0


def explanation_text(explanation: dict) -> Text:
    """One stored explanation as the verdicts pane shows it: the sentence, then each run."""
    out = Text()
    by = explanation.get("explained_by")
    out.append(f"Explained by {by}: " if by else "Not explained: ", style="bold")
    sentence = explanation.get("sentence", "")
    out.append(sentence.removeprefix("not explained: "))
    for f in explanation.get("factors", []):
        env = f.get("environment") or {}
        if env.get("path"):
            pins = ", ".join(f"{k} {v}" for k, v in sorted((env.get("pins") or {}).items()))
            out.append(f"\n  {f['factor']}: environment with {pins}"
                       + (" (from the cache)" if env.get("cached") else f" (built in {env.get('seconds')} s)"), style="dim")
        for r in f.get("runs", []):
            out.append(f"\n  {f['factor']}: job {r['job']} -> attempt {r['seq']}, {r['chips']} device(s) at "
                       f"{str(r['commit'])[:12]}: level 2 {r['level2']}"
                       + (f", {r['sigmas']:.1f}σ" if r.get("sigmas") is not None else ""), style="dim")
    return out


class ExplainConfirm(ModalScreen[bool]):
    """What explain will run, before it runs: the attempt's recorded command, in controlled re-runs."""

    BINDINGS = [
        Binding("y", "dismiss(True)", "Run", id="explain.run", tooltip="Start the controlled re-runs"),
        Binding("escape,n", "dismiss(False)", "Cancel", id="explain.cancel", tooltip="Run nothing"),
    ]

    def __init__(self, migration: Migration, attempt: Attempt) -> None:
        super().__init__()
        self.migration, self.attempt = migration, attempt

    def compose(self) -> ComposeResult:
        import shlex

        with Vertical(id="explain-confirm"):
            yield Static(Text.assemble(
                (f"Explain {self.migration.slug} #{self.attempt.seq}\n\n", "bold"),
                "Runs this attempt's recorded command in controlled re-runs on this machine (local "
                f"backend), at most {MAX_RUNS} runs and {MINUTES:g} minutes: with the reference's package "
                "versions, on 1 device and on the intended count, on plain torch, then at earlier commits "
                "(bisection). Each run is a job.\n\n",
                ("command  ", "dim"), shlex.join(self.attempt.command.argv), "\n\n",
                ("y", "bold"), " run   ", ("escape", "bold"), " cancel"))
