"""Domain objects to Rich `Text` for table cells and detail panes.

Every string that came from a bundle (titles, claims, commands, notes) goes through
`domain.text`, so it is shown literally: never parsed as markup, never able to
reach the terminal as a control sequence.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.text import Text

from domain.costs import parse_time
from domain.models import (
    LADDER,
    AttemptSource,
    AttemptStatus,
    Direction,
    Migration,
    MigrationStatus,
    MigrationSummary,
    Outcome,
)
from domain.text import clean, plural
from screens.presenters.palette import tone
from screens.text import text

if TYPE_CHECKING:
    from rich.console import Group

    from domain.attempts import Run
    from domain.judgements import HumanJudgement
    from domain.models import AttemptSummary
    from storage.review import LadderCounts

NONE = "–"
HIDDEN = "hidden until you judge (J)"
"""In place of the claim, expected level, outcomes and cause of an attempt judged blind."""
"""Shown where there is no value (an en dash, so it is not read as a minus sign)."""

MARKS = {
    Outcome.PASS: ("✓", "$text-success"),
    Outcome.FAIL: ("✗", "bold $text-error"),
    Outcome.UNKNOWN: ("?", "$text-warning"),
    None: ("·", "dim"),
}
"""One mark per ladder level: pass, fail, unknown, and no verdict yet (styles name theme
variables: `tone` gives the current theme's colours)."""

MIGRATION_STATUS = {
    MigrationStatus.IN_PROGRESS: ("in progress", ""),
    MigrationStatus.ACCEPTED: ("accepted", "$text-success"),
    MigrationStatus.STOPPED: ("stopped", "dim"),
}

SOURCE = {
    AttemptSource.REFERENCE: ("ref", "bold $text-primary"),
    AttemptSource.AGENT: ("agent", ""),
    AttemptSource.RERUN: ("re-run", "$text-secondary"),
}


def number(value: int, *, alarm: str = "") -> Text:
    """A right-aligned count; zero is dimmed, a non-zero count takes `alarm`'s style."""
    if not value:
        return Text("0", style="dim", justify="right")
    return Text(str(value), style=tone(alarm), justify="right")


def level(value: int | None) -> Text:
    if value is None:
        return Text(NONE, style="dim", justify="center")
    style = tone("$text-success") if value >= 4 else tone("$text-error") if value == 0 else ""
    return Text(f"L{value}", style=style, justify="center")


def migration_status(status: MigrationStatus) -> Text:
    word, style = MIGRATION_STATUS.get(status, (str(status), ""))
    return Text(word, style=tone(style))


def migration_row(summary: MigrationSummary) -> tuple[Text, ...]:
    m = summary.migration
    return (
        text(m.slug, "bold"),
        migration_status(m.status),
        text(m.target.describe()),
        number(summary.attempts),
        Text() if summary.hidden else number(summary.failed, alarm="$text-error"),
        Text() if summary.hidden else number(summary.silent_failures, alarm="bold $text-error"),
        number(summary.interventions, alarm="$text-warning"),
        Text("hidden", style="dim italic") if summary.hidden else level(summary.highest_level),
        money(summary.cost_dollars),
    )


def money(value: float | None) -> Text:
    if value is None:
        return Text(NONE, style="dim", justify="right")
    if value >= 100:
        return Text(f"${value:,.0f}", justify="right")
    return Text(f"${value:.2f}" if value >= 0.01 else f"${value:.4f}", justify="right")


def ladder_counts(counts: LadderCounts) -> Text:
    """Agent attempts per highest level verified, and how many are not verified yet."""
    out = Text()
    for value in range(6):
        n = counts.levels.get(value, 0)
        out.append(f"L{value} ", style="dim")
        out.append(str(n), style=f"bold {level(value).style}".strip() if n else "dim")
        out.append(" ")
    out.append("· ", style="dim")
    out.append(f"{counts.unverified} unverified",
               style=tone("bold $text-warning") if counts.unverified else "dim")
    return out


def study_totals(totals: dict[str, int], counts: LadderCounts | None = None) -> Text:
    """The study's counts as the paper reports them; with the ladder counts, failures are out of
    the attempts judged (verified or with a failure), never "failed 0/n" before verification."""
    failed, silent = totals["failed"], totals["silent"]
    out = Text()
    if counts is not None:
        out.append_text(ladder_counts(counts))
        out.append("\n")
    out.append("failed ", style="dim")
    if counts is None:
        out.append(f"{failed}/{totals['attempts']}", style="bold")
    elif counts.judged:
        out.append(f"{failed}/{counts.judged}", style="bold")
    else:
        out.append("– (nothing verified)", style="dim")
    out.append(" · silent ", style="dim")
    out.append(f"{silent}", style=tone("bold $text-error") if silent else "bold")
    out.append(f" ({silent * 100 // failed if failed else 0}%)")
    out.append(" · over-claims ", style="dim")
    out.append(f"{totals['over_claims']}", style=tone("bold $text-warning") if totals["over_claims"] else "bold")
    out.append(" · interventions ", style="dim")
    per = totals["interventions"] / totals["migrations"] if totals["migrations"] else 0
    out.append(f"{per:.1f}", style="bold")
    out.append("/migration", style="dim")
    return out


FRESH = "reverse bold"
"""How a list marks a row that newly became a silent failure or an over-claim while shown."""


def news_of(old: AttemptSummary | None, new: AttemptSummary) -> str:
    """What a re-read row newly says that a reviewer must see ("" when nothing): a silent
    failure or an over-claim that was not there before (or a new attempt that has one). A row
    revealed by the reviewer's own judgement is not news: it was only hidden."""
    if old is not None and old.hidden:
        return ""
    said = []
    was_silent = old is not None and old.failure is not None and old.failure.silent
    if new.failure is not None and new.failure.silent and not was_silent:
        said.append(f"new silent failure ({clean(str(new.failure.cause))})")
    if new.over_claim and not (old is not None and old.over_claim):
        said.append("new over-claim")
    return ", ".join(said)


NEWS_TOASTS = 5
"""Toasts for one refresh's news at most: more are said in one, since a study verified whole
would otherwise stack a toast per migration."""


def news_toasts(news: list[tuple[str, str]], rows: str) -> list[str]:
    """(row name, its news) as toasts: one each, or one for all of them when there are more than
    NEWS_TOASTS (`rows` names what they are: "migrations", "attempts"); the list marks them all."""
    if len(news) <= NEWS_TOASTS:
        return [f"{name}: {said}" for name, said in news]
    first = ", ".join(name for name, _ in news[:NEWS_TOASTS])
    return [f"{len(news)} {rows} with a new silent failure or over-claim, marked in the list: {first}, …"]


def migration_news(old: MigrationSummary | None, new: MigrationSummary) -> str:
    """As `news_of`, for a study row: its silent failures or over-claims went up."""
    if old is not None and old.hidden:
        return ""
    said = []
    if new.silent_failures > (old.silent_failures if old else 0):
        said.append("new silent failure")
    if new.over_claims > (old.over_claims if old else 0):
        said.append("new over-claim")
    return ", ".join(said)


def filter_line(described: str, shown: int, complete: bool) -> Text:
    """The header's note of the `/` filter: what it is and how many rows meet it so far."""
    out = Text("filter ", style="dim")
    out.append_text(text(described, "bold"))
    out.append(f" · {shown}{'' if complete else '+'} shown (escape in / clears)", style="dim")
    return out


def goal(m: Migration) -> str:
    sign = "≥" if m.goal.direction is Direction.MAX else "≤"
    slack = f" ± {m.goal.tolerance:g}" if m.goal.tolerance else ""
    value = "the reference run's" if math.isnan(m.goal.reference) else f"{m.goal.reference:g}"
    return f"{m.goal.metric} {sign} {value}{slack}"


def migration_detail(summary: MigrationSummary) -> Text:
    """The study screen's lines about the highlighted migration: title, goal, acceptance."""
    m = summary.migration
    out = Text()
    out.append_text(text(m.slug, "bold"))
    out.append("  ")
    out.append_text(text(m.title))
    out.append("\ngoal ", style="dim")
    out.append_text(text(goal(m)))
    out.append(" · accept at ", style="dim")
    out.append(f"L{m.acceptance_level} {LADDER.get(m.acceptance_level, '')}")
    return out


def migration_title(m: Migration) -> Text:
    """The slug and the title: one line on the migration screen (cut with an ellipsis; `t`
    shows it whole), whole on the ledger screen."""
    out = text(m.slug, "bold")
    out.append("  ")
    out.append_text(text(m.title))
    return out


def migration_header(m: Migration, counts: LadderCounts | None = None) -> Text:
    """The migration screen's heading under the title: status, target, goal and acceptance,
    then (once read) the attempts per highest level."""
    out = Text()
    out.append_text(migration_status(m.status))
    out.append(" · ", style="dim")
    out.append_text(text(f"{m.target.describe()} {m.target.runtime}"))
    out.append(" · ", style="dim")
    out.append_text(text(goal(m)))
    out.append(" · accept ", style="dim")
    out.append(f"L{m.acceptance_level}")
    if counts is not None:
        out.append("\n")
        out.append_text(ladder_counts(counts))
        out.append(" · failed ", style="dim")
        out.append(f"{counts.failed}/{counts.judged}" if counts.judged else "–", style="bold")
    return out


def hidden() -> Text:
    return Text(HIDDEN, style="dim italic")


def ladder(summary: AttemptSummary) -> Text:
    if summary.hidden:
        return Text("hidden", style="dim italic")
    out = Text()
    for outcome in summary.ladder:
        mark, style = MARKS.get(outcome, MARKS[None])
        out.append(mark, style=tone(style))
    return out


def attempt_status(summary: AttemptSummary) -> Text:
    a = summary.attempt
    if a.status is AttemptStatus.OK:
        word, style = "ok", tone("$text-success")
    elif a.status is AttemptStatus.NONZERO_EXIT:
        word, style = "exit", tone("$text-error")
    else:
        word, style = str(a.status).replace("_", " "), tone("$text-warning")
    if a.exit_code is not None and not (a.status is AttemptStatus.OK and a.exit_code == 0):
        word = f"{word} {a.exit_code}"
    return Text(word, style=style)


def failure(summary: AttemptSummary) -> Text:
    f = summary.failure
    if f is None:
        return Text(NONE, style="dim")
    out = text(str(f.cause), tone("$text-error"))
    if f.silent:
        out.append(" silent", style=tone("bold $text-error reverse"))
    return out


def source(summary: AttemptSummary) -> Text:
    word, style = SOURCE.get(summary.attempt.source, (str(summary.attempt.source), ""))
    return Text(word, style=tone(style))


def runs_mark(summary: AttemptSummary) -> Text:
    """` 3 runs` for an attempt with re-runs (its ladder is then the counted one); else nothing."""
    return Text(f" {summary.runs} runs", style=tone("$text-secondary")) if summary.runs > 1 else Text()


def attempt_row(summary: AttemptSummary) -> tuple[Text, ...]:
    """The attempt table's cells; the command whole, drawn cut with `…` to its column's width."""
    a = summary.attempt
    command = text(a.command.display())
    command.no_wrap, command.overflow = True, "ellipsis"
    return (
        Text(str(a.seq), justify="right"),
        source(summary) + runs_mark(summary),
        attempt_status(summary),
        ladder(summary),
        Text() if summary.hidden else failure(summary),
        over_claim(summary),
        number(summary.interventions, alarm="$text-warning"),
        Text() if summary.hidden else level(a.expected_level),
        text(a.commit[:7], "dim"),
        command,
    )


def duration(started: str | None, ended: str | None) -> str:
    start, end = parse_time(started), parse_time(ended)
    if start is None or end is None:
        return ""
    try:
        seconds = int((end - start).total_seconds())
    except TypeError:  # one has a time zone, the other not
        return ""
    if seconds < 0:
        return ""
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def stamp(value: str | None) -> str:
    """A stored timestamp as shown: `2026-11-01 10:00:00.123`. Imports write UTC as `Z` and the
    app's own records (a re-run's times) as `+00:00`: either is dropped, so the two read alike side
    by side; another offset stays, as stored."""
    shown = clean(value or "?").replace("T", " ")
    return shown.removesuffix("Z").removesuffix("+00:00")


def when(started: str | None, ended: str | None) -> str:
    """`2026-11-01 10:00:00 → 10:00:30 (30 s)`: the end's date only when it differs."""
    if not started and not ended:
        return NONE
    start, end = stamp(started), stamp(ended)
    if start[:10] == end[:10] and len(end) > 11:
        end = end[11:]
    took = duration(started, ended)
    return f"{start} → {end}" + (f" ({took})" if took else "")


def attempt_detail(summary: AttemptSummary) -> Text:
    """The highlighted attempt: command, times, hardware, failure and the agent's claim."""
    a = summary.attempt
    out = Text()
    out.append(f"#{a.seq} ", style="bold")
    out.append_text(source(summary))
    out.append(" · ")
    out.append_text(attempt_status(summary))
    if a.exit_code_source:
        out.append_text(text(f" (exit code from {a.exit_code_source})", "dim"))
    if summary.runs > 1:
        out.append(f" · {summary.runs} runs, counted as one (R on its screen lists them)", style="dim")
    out.append(" · commit ", style="dim")
    out.append_text(text(a.commit[:12]))
    out.append("\n$ ", style="dim")
    out.append_text(text(a.command.display()))
    if a.command.cwd not in ("", "."):
        out.append("  in ", style="dim")
        out.append_text(text(a.command.cwd))
    out.append("\n")
    out.append_text(text(when(a.started_at, a.ended_at)))
    out.append(" · ran on ", style="dim")
    out.append_text(text(a.observed_hardware.describe() if a.observed_hardware else "?"))
    if a.intended_hardware:
        out.append(" (meant ", style="dim")
        out.append_text(text(a.intended_hardware.describe()))
        out.append(")", style="dim")
    if summary.hidden:
        out.append("\nclaim, verdicts and cause ", style="dim")
        out.append_text(hidden())
        return out
    if summary.failure is not None:
        out.append("\nfailure ", style="dim")
        out.append_text(failure(summary))
        if summary.failure.note:
            out.append(" ")
            out.append_text(text(summary.failure.note))
    out.append("\nclaim ", style="dim")
    if a.expected_level is not None:
        out.append(f"(expects L{a.expected_level} {LADDER.get(a.expected_level, '')}) ")
    if a.claim:
        out.append_text(text(a.claim))
    else:
        out.append(NONE, style="dim")
    return out


def over_claim(summary: AttemptSummary) -> Text:
    """`over` where the agent expected more than was verified; blank otherwise."""
    if summary.over_claim:
        return Text("over", style=tone("bold $text-warning"))
    return Text("")


def attempt_heading(m: Migration, summary: AttemptSummary, rerun_of: int | None = None) -> Text:
    """The attempt screen's first lines: migration, attempt (a re-run: `re-run of #1`, the seq of
    the attempt it re-ran, once its runs are read), status, ladder, flags."""
    a = summary.attempt
    out = text(m.slug, "bold")
    out.append(f"  #{a.seq} ", style="bold")
    out.append_text(source(summary))
    if rerun_of is not None:
        out.append(f" of #{rerun_of}", style=tone("$text-secondary"))
    out.append_text(runs_mark(summary))
    out.append(" · ")
    out.append_text(attempt_status(summary))
    out.append(" · ")
    if summary.hidden:
        out.append("judging blind: claim, verdicts and cause are hidden until you judge (J)",
                   style=tone("italic $text-warning"))
    out.append_text(Text() if summary.hidden else ladder(summary))
    out.append(f" L{summary.highest_level}" if any(summary.ladder) else "", style="bold")
    if summary.failure is not None:
        out.append(" · ")
        out.append_text(failure(summary))
    if summary.over_claim:
        out.append(" · ")
        out.append_text(over_claim(summary))
    if summary.interventions:
        out.append(f" · {plural(summary.interventions, 'intervention')}",
                   style=tone("$text-warning"))
    return out


def _grid():
    """Two columns: a dim label, and a value that wraps under itself, not under the label."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True, min_width=9)
    grid.add_column(ratio=1)
    return grid


def _where(a) -> Text:
    where = Text()
    where.append_text(text(a.observed_hardware.describe() if a.observed_hardware else "?"))
    if a.intended_hardware:
        where.append(" (meant ", style="dim")
        where.append_text(text(a.intended_hardware.describe()))
        where.append(")", style="dim")
    return where


def _run_fields(summary: AttemptSummary, subject: str) -> list[tuple[str, Text]]:
    """Command, directory, commit, when, where, status and the claimed level."""
    a = summary.attempt
    rows = [("command", text(a.command.display()))]
    if a.command.cwd not in ("", "."):
        rows.append(("in", text(a.command.cwd)))
    commit = Text()
    commit.append_text(text(a.commit[:12]))
    if subject:
        commit.append("  ")
        commit.append_text(text(subject, "italic"))
    rows += [("commit", commit), ("when", text(when(a.started_at, a.ended_at))), ("where", _where(a))]
    status = Text()
    status.append_text(attempt_status(summary))
    if a.exit_code_source:
        status.append_text(text(f" (exit code from {a.exit_code_source})", "dim"))
    rows.append(("status", status))
    if summary.hidden:
        rows.append(("claim", hidden()))
    elif a.expected_level is not None:
        rows.append(("claim", Text(f"expects L{a.expected_level} {LADDER.get(a.expected_level, '')}",
                                   style="bold")))
    else:
        rows.append(("claim", Text("names no level", style="dim")))
    return rows


def _verified_fields(summary: AttemptSummary, verification) -> list[tuple[str, Text]]:
    """The verified level beside the ladder, and what verifying cost."""
    if summary.hidden:
        return [("verified", hidden())]
    if verification is None and summary.attempt.source is AttemptSource.REFERENCE:
        return [("verified", Text("the reference: the agent's attempts are judged against it", style="dim"))]
    if verification is None and not any(summary.ladder):
        return [("verified", Text("not verified yet", style="dim"))]
    # the level and over-claim its row and the counts give (overrides, and its re-runs where it has
    # any, included); the verifier's own on this run beside them where it differs
    lvl = summary.highest_level
    verified = Text()
    verified.append_text(level(lvl))
    verified.append(f" {LADDER.get(lvl, 'nothing')}  ")
    verified.append_text(ladder(summary))
    if summary.over_claim:
        verified.append("  over-claim", style=tone("bold $text-warning"))
    if verification is None:  # its re-runs are
        verified.append("  (from its re-runs: this run is not verified)", style="dim")
        return [("verified", verified)]
    if verification.highest_level != lvl:
        verified.append(f"  (the verifier on this run: L{verification.highest_level})", style="dim")
    extras = []
    if verification.wall_seconds is not None:
        extras.append(f"{verification.wall_seconds:.1f} s")
    if verification.time_ratio is not None:
        extras.append(f"time x{verification.time_ratio:.2f}")
    if verification.cost_dollars is not None:
        extras.append(f"${verification.cost_dollars:.4f}")
    if verification.cost_ratio is not None:
        extras.append(f"cost x{verification.cost_ratio:.2f}")
    return [("verified", verified)] + ([("cost", Text(" · ".join(extras)))] if extras else [])


def _failure_value(summary: AttemptSummary) -> Text:
    """The failure's cause, note and evidence."""
    f = summary.failure
    assert f is not None
    value = Text()
    value.append_text(failure(summary))
    if f.note:
        value.append("\n")
        value.append_text(text(f.note))
    for evidence in f.evidence:
        value.append("\n→ ", style="dim")
        value.append_text(text(f"{evidence.kind} {evidence.ref}", "bold"))
        value.append(" ")
        value.append_text(text(evidence.text))
    return value


DIFFERS = "≠"
"""Marks where a reviewer's judgement differs from the verifier or the claim, in the reveal."""


def reveal(judgement: HumanJudgement, summary: AttemptSummary) -> Group:
    """The reviewer's judgement beside the verifier's outcomes and the agent's expected level,
    level by level, with ≠ where they differ: what the attempt screen shows once judged."""
    from rich.console import Group
    from rich.table import Table

    from domain import blind  # two dataclasses to create: not at launch

    rows = blind.reveal(judgement, summary)
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style="dim")
    for name in ("level", "you", "verifier", "agent expected"):
        table.add_column(name)
    for row in rows:
        verifier = Text(row.verifier.value if row.verifier else NONE)
        if row.differs_from_verifier:
            verifier.append(f" {DIFFERS}", style=tone("bold $text-warning"))
        claimed = Text("pass" if row.claimed else NONE, style="" if row.claimed else "dim")
        if row.differs_from_claim:
            claimed.append(f" {DIFFERS}", style=tone("bold $text-warning"))
        table.add_row(f"L{row.level} {LADDER.get(row.level, '')}", row.judged.value, verifier, claimed)
    differ = sum(r.differs_from_verifier for r in rows)
    head = Text(f"\nYour judgement #{judgement.id}{' (given blind)' if judgement.blind else ''}: ", style="bold")
    head.append(f"differs from the verifier at {plural(differ, 'level')}" if differ
                else "agrees with the verifier at every level it judged", style=tone("$text-warning") if differ else "")
    out = Text()
    cause = summary.failure.cause if summary.failure else None
    if judgement.cause is not None or cause is not None:
        out.append("cause: you ", style="dim")
        out.append(str(judgement.cause) if judgement.cause else NONE)
        out.append(" · verifier ", style="dim")
        out.append(str(cause) if cause else NONE)
        if judgement.cause is not cause and judgement.cause is not None and cause is not None:
            out.append(f" {DIFFERS}", style=tone("bold $text-warning"))
        out.append("\n")
    if judgement.note:
        out.append("your note: ", style="dim")
        out.append_text(text(judgement.note))
    return Group(head, table, out)


def ran_with(comparison) -> Text:
    """The run's runtime and interpreter, and the packages that differ from the reference's, the
    imported ones first (workbench.ranwith.Comparison)."""
    out = text(comparison.run.describe() or "recorded")
    if comparison.reference is None:
        out.append("  no reference environment to compare", style="dim")
        return out
    changes = comparison.changes
    if not changes:
        out.append("  same packages as the reference", style="dim")
        return out
    imported = sum(c.imported for c in changes)
    out.append(f"\n{plural(len(changes), 'package')} differ from the reference ({imported} imported): ",
               style=tone("$text-warning") if imported else "dim")
    out.append_text(text(", ".join(c.describe() for c in changes[:8]) + (" …" if len(changes) > 8 else "")))
    return out


def attempt_overview(summary: AttemptSummary, verification, subject: str, judgement: HumanJudgement | None = None,
                     environment=None):
    """Command, where and when, status and the exit code's source, claim beside verified level,
    failure cause and the evidence behind it; once the reviewer has judged, their judgement beside
    it all (`reveal`). Labelled fields wrap under their value, not under the label."""
    from rich.console import Group

    a = summary.attempt
    grid = _grid()
    for name, value in _run_fields(summary, subject) + _verified_fields(summary, verification):
        grid.add_row(Text(name), value)
    if environment is not None:
        grid.add_row(Text("ran with"), ran_with(environment))
    parts: list = [grid]
    if judgement is not None and not summary.hidden:
        parts.append(reveal(judgement, summary))
    if a.claim:
        said = Text("\nThe record says:\n" if a.source is AttemptSource.REFERENCE
                    else "\nThe agent said:\n", style="dim")
        said.append_text(text(a.claim, keep_newlines=True))
        parts.append(said)
    if summary.failure is not None:
        cause = _grid()
        cause.add_row(Text("failure"), _failure_value(summary))
        parts += [Text(""), cause]
    return Group(*parts)


RUN_COLUMNS = (("#", "seq"), ("Src", "source"), ("Status", "status"), ("L1-5", "ladder"), ("Started", "started"),
               ("", "note"))
"""The attempt screen's runs table: each run of the attempt, its own outcomes."""


def run_row(run: Run, shown_id: int) -> tuple[Text, ...]:
    """One run's cells; `shown_id` is the run on screen."""
    marks = Text("hidden", style="dim italic") if run.hidden else Text()
    for outcome in () if run.hidden else run.ladder:
        mark, style = MARKS.get(outcome, MARKS[None])
        marks.append(mark, style=tone(style))
    word, style = SOURCE.get(run.source, (str(run.source), ""))
    note = "on screen" if run.id == shown_id else ("" if run.counted else "other commit: not counted")
    return (Text(str(run.seq), justify="right"), Text(word, style=tone(style)),
            text(str(run.status).replace("_", " ")), marks,
            text(stamp(run.started_at) if run.started_at else NONE, "dim"), Text(note, style="dim"))
