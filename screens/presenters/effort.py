"""The effort panel's text: where a migration stands against its budgets, the suggestion, the
latest decision, review time and the latest interventions; and the ledger's entries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from domain import effort
from domain.effort import Intervention
from domain.models import DecisionKind
from domain.text import plural
from screens.presenters.palette import tone
from screens.text import text
from storage.ledger import LedgerEntry


@dataclass(frozen=True)
class PanelData:
    """What the effort panel reads in one go (storage.queries)."""

    standing: effort.Standing
    interventions: list[Intervention]
    corrected: dict[int, int]
    decision: Any
    review: dict[str, float]
    hidden: bool = False
    """The reviewer judges an attempt of this migration blind: no level, suggestion or notes
    (workbench.blind.migrations_seen_by's rule)."""


PANEL_INTERVENTIONS = 10
"""The latest interventions the panel lists (it scrolls); the ledger screen lists them all."""


def render_panel(data: PanelData, attempt_id: int | None) -> Text:
    s = data.standing
    out = Text()
    out.append("Budget ", style="bold")
    parts = []
    for lim in s.limits:
        style = tone("bold $text-error") if lim.exhausted else (tone("$text-warning") if lim.near else "")
        parts.append(Text(effort.describe_limit(lim), style=style))
    out.append_text(Text(" · ").join(parts))
    out.append(f" · staff cost ${s.staff_dollars:,.2f}")
    if s.unpriced_runs:
        out.append(f" · {plural(s.unpriced_runs, 'run')} unpriced", style="dim")
    out.append("\n")
    if data.hidden or s.hidden:
        out.append("Level, suggestion and notes hidden while you judge blind\n", style="dim italic")
    else:
        _standing_line(out, s)
    if data.decision is not None:
        d = data.decision
        out.append("Decision ", style="bold")
        out.append(f"{d.kind.value} by ")
        out.append_text(text(d.reviewer))
        out.append(f" {d.at[:16]}")
        if d.suggested is not None and d.suggested is not d.kind and not data.hidden:
            out.append(f" (against {d.suggested.value})", style=tone("$text-warning"))
        if d.reason and not data.hidden:
            out.append(": ")
            out.append_text(text(d.reason))
        out.append("\n")
    if data.review:
        out.append("Review ", style="bold")
        out.append_text(Text(", ").join(text(f"{name} {sec / 60:.0f} min") for name, sec in data.review.items()))
        out.append("\n")
    scope = "this attempt" if attempt_id is not None else "this migration"
    current = [i for i in data.interventions if i.id not in data.corrected]
    out.append(f"Interventions on {scope}: {len(current)}", style="bold")
    if current:
        out.append(f", {sum(i.minutes for i in current):g} min")
    for i in reversed(data.interventions[-PANEL_INTERVENTIONS:]):
        out.append("\n")
        line = f"  #{i.id} {i.kind} {i.minutes:g} min by {i.reviewer} {i.at[:16]}"
        if i.corrects is not None:
            line += f" (corrects #{i.corrects})"
        if i.id in data.corrected:
            out.append_text(text(line + f" (corrected by #{data.corrected[i.id]})", "dim strike"))
        else:
            out.append_text(text(line))
        if i.note and not data.hidden:
            out.append(": ")
            out.append_text(text(i.note[:80]))
    out.append("\nL opens the ledger: every intervention, decision, override and budget change, "
               "each note whole", style="dim")
    return out


def _standing_line(out: Text, s: effort.Standing) -> None:
    """The highest level against the one required, and what the stopping rules suggest."""
    best = "none verified" if s.highest_level is None else f"L{s.highest_level}"
    out.append(f"Level {best}, L{s.acceptance_level} required · status {s.status} · suggests ")
    out.append(s.suggestion.value.upper(),
               style={DecisionKind.ACCEPT: tone("bold $text-success"), DecisionKind.STOP: tone("bold $text-error")}.get(s.suggestion, "bold"))
    out.append(f" ({'; '.join(s.reasons)})\n", style="dim")


def standing_text(standing: effort.Standing) -> Text:
    """The budget lines and the suggestion, for the decision form and the effort panel."""
    out = Text()
    for lim in standing.limits:
        style = tone("bold $text-error") if lim.exhausted else (tone("$text-warning") if lim.near else "")
        out.append(effort.describe_limit(lim), style=style)
        out.append("\n")
    if standing.unpriced_runs:
        out.append(f"({plural(standing.unpriced_runs, 'run')} without a price or times are not in compute)\n",
                   style="dim")
    out.append(f"staff cost ${standing.staff_dollars:,.2f}\n")
    if standing.hidden:  # domain.blind.Sight.standing
        out.append(f"L{standing.acceptance_level} required · best level and the rules' suggestion hidden"
                   " while you judge blind; say why you decide\n", style="dim italic")
        return out
    best = "none verified" if standing.highest_level is None else f"L{standing.highest_level}"
    out.append(f"best level {best} · L{standing.acceptance_level} required\n")
    style = {DecisionKind.ACCEPT: tone("bold $text-success"), DecisionKind.STOP: tone("bold $text-error")}.get(standing.suggestion, "bold")
    out.append("The rules suggest: ")
    out.append(standing.suggestion.value.upper(), style=style)
    out.append("\n")
    for reason in standing.reasons:
        out.append(f"  · {reason}\n", style="dim")
    return out


KIND_STYLE = {"intervention": "bold", "decision": "bold $text-primary", "override": "bold $text-warning",
              "budget": "bold $text-secondary"}
"""How each kind of ledger entry is marked."""


def _budget_figures(detail: dict) -> str:
    parts = []
    for name, label, unit in (("compute_dollars", "compute", "$"), ("staff_hours", "staff", "h"),
                              ("attempts", "attempts", ""), ("calendar_days", "days", "d")):
        value = detail.get(name)
        shown = "no limit" if value is None else (f"${value:g}" if unit == "$" else f"{value:g}{unit}")
        parts.append(f"{label} {shown}")
    parts.append(f"accept L{detail.get('acceptance_level')}")
    return " · ".join(parts)


def ledger_entry(entry: LedgerEntry, *, with_slug: bool = False) -> Text:
    """One ledger entry: a line saying what, who, when and on which attempt, then its note whole
    (the list wraps it); a corrected intervention is struck through and names its correction."""
    out = Text()
    out.append(entry.at[:16].replace("T", " "), style="dim")
    out.append("  ")
    out.append(f"{entry.kind} #{entry.id}", style=tone(KIND_STYLE.get(entry.kind, "bold")))
    out.append("  ")
    if entry.kind == "override":
        out.append(f"L{entry.detail.get('level')} {entry.detail.get('automated')} → ")
        out.append_text(text(entry.label, "bold"))
    elif entry.kind == "budget":
        out.append(_budget_figures(entry.detail))
    else:
        out.append_text(text(entry.label, "bold"))
    if entry.minutes is not None:
        out.append(f" {entry.minutes:g} min")
    suggested = entry.detail.get("suggested")
    if entry.kind == "decision" and suggested and suggested != entry.label:
        out.append_text(text(f" (against {suggested})", tone("$text-warning")))
    if with_slug:
        out.append_text(text(f" on {entry.slug}"))
    if entry.seq is not None:
        out.append(f" {'' if with_slug else 'on '}#{entry.seq}")
    out.append(" by ")
    out.append_text(text(entry.reviewer))
    if entry.kind == "override" and not entry.detail.get("counts", True):
        out.append(" (no longer counts)", style="dim")  # a later override, or the verifier's outcome changed
    if entry.corrects is not None:
        out.append(f" (corrects #{entry.corrects})", style="dim")
    if entry.corrected_by is not None:
        out.stylize("strike dim")
        out.append(f" (corrected by #{entry.corrected_by})", style="dim")
    if entry.note:
        out.append("\n")
        out.append_text(text(entry.note, keep_newlines=True))
    return out


def ledger_counts_line(counts: dict[str, int]) -> Text:
    """How many of each kind the ledger holds (unfiltered)."""
    return Text(" · ".join(f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in counts.items()), style="dim")
