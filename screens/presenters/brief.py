"""The AI brief and the model-extracted claim as text: every string from the model or the log
made safe (never markup)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from screens.presenters.palette import tone
from screens.text import text


def render_brief(brief: Any) -> Text:
    """A brief with every string from the model or the log made safe (never markup)."""
    out = Text()
    out.append_text(text(brief.explanation))
    out.append("\n\nSuspected cause: ", style="bold")
    out.append_text(text(brief.suspected_cause or "none (no failure seen)"))
    for number, line in brief.cause_lines:
        out.append(f"\n  {number:>6}│ ", style="dim")
        out.append_text(text(line))
    if brief.ignored_lines:
        out.append(f"\n  (cited lines it was not shown, dropped: {', '.join(map(str, brief.ignored_lines))})",
                   style="dim")
    out.append("\n\nNext step: ", style="bold")
    out.append_text(text(brief.next_step))
    cost = ("stored answer, no new cost" if brief.cached else
            "cost not counted: no price for this model" if brief.cost_usd is None else f"${brief.cost_usd:.4f}")
    out.append("\n\n")
    out.append_text(text(f"{brief.model} · {cost}", "dim"))
    return out


def render_claim(extraction: Any | None, effective: Any) -> Text:
    out = Text("\nThe agent's claim: ", style="bold")
    level = "no level" if effective.level is None else f"L{effective.level}"
    source = {"reviewer": "your correction", "model": "the model's reading, accepted",
              "rule": "read by the importer's rules", None: "neither the rules nor a model read it"}[effective.source]
    out.append(f"{level}, as reports count it ({source}).")
    if extraction is None:
        out.append("\nNo model has read this claim (`workbench assist claims` asks one, for claims the"
                   " rules could not read).\nPress 0-5 to set the level yourself (0: the agent expected"
                   " none).", style="dim")
        return out
    found = "" if extraction.quote_found or not extraction.sentence else " (sentence not found in the claim)"
    out.append("\nRead by ")
    out.append_text(text(f"{extraction.model}: "))
    out.append("no level" if extraction.expected_level is None else f"L{extraction.expected_level}")
    out.append(", success claimed" if extraction.success_claimed else ", no success claimed")
    if extraction.sentence:
        out.append(": “")
        out.append_text(text(extraction.sentence))
        out.append("”")
    out.append(found, style=tone("$text-warning"))
    out.append("\na accepts this reading · 0-5 set the level yourself (0: the agent expected none)", style="dim")
    return out
