"""The report's tables, the same for every format: Markdown, HTML, LaTeX and CSV render these.

Their cells are workbench/report/cells.py's `V`s, so a number reads the same in every format.
"""

from __future__ import annotations

import functools

from workbench.report.cells import Table, V, interval, n, num, pct, s, yes
from workbench.report.final import RULE_TEXT, WHY_NONE
from workbench.report.model import MigrationReport, Rate, StudyReport
from workbench.report.stats import RESAMPLES


def rate_text(rate: Rate) -> str:
    if rate.percent is None:
        return f"{rate.part.n} of {rate.whole.n}"
    return f"{rate.part.n} of {rate.whole.n} ({rate.percent:.1f}%)"


def totals_table(report: StudyReport) -> Table:
    t = report.totals
    rows: list[list[V]] = []

    def rate(label: str, r: Rate) -> None:
        rows.append([s(label), n(r.part.n), n(r.whole.n), pct(r.percent), interval(r.interval, 1, "%")])

    def plain(label: str, value: V, ci: V | None = None) -> None:
        rows.append([s(label), value, V(None, ""), V(None, ""), ci or V(None, "")])

    plain("Migrations", n(t.migrations.n))
    rate("Projects meeting the goal (level 4)", t.goal_met)
    rate("Projects meeting the goal, verifier alone", t.goal_met_automated)
    plain("Interventions", n(t.interventions.n))
    plain("Interventions per migration (mean)", num(t.interventions_per_migration))
    plain("Attempts", n(t.attempts.n))
    rate("Attempts verified", Rate(t.verified, t.attempts))
    rate("Attempts failed", t.failed)
    rate("Attempts failed, verifier alone", t.failed_automated)
    rate("Failures that raised no error (silent)", t.silent)
    rate("Failures that raised no error, verifier alone", t.silent_automated)
    rate("Attempts stating an expected level", t.stated_expectation)
    rate("Attempts below the agent's expected level (over-claims)", t.over_claims)
    rate("Over-claims, verifier alone", t.over_claims_automated)
    plain("Re-runs (not counted as attempts)", n(t.reruns.n))
    rate("Re-runs that confirmed their attempt's level", Rate(t.reruns_confirming, t.reruns))
    rate("Re-runs that changed it", Rate(t.reruns_changing, t.reruns))
    rate("Attempts with a level decided by a re-run", Rate(t.decided_by_reruns, t.verified))
    rate("Migrations with a final run", Rate(t.with_final_run, t.migrations))
    for why, count in t.without_final_run.items():
        if count.n:
            rate(f"Migrations without a final run: {WHY_NONE[why]}", Rate(count, t.migrations))
    plain("Time ratio of final runs, median", num(t.time_ratios.median), interval(t.time_ratios.interval, 2))
    plain("Time ratio of final runs, min", num(t.time_ratios.low))
    plain("Time ratio of final runs, max", num(t.time_ratios.high))
    plain("Cost ratio of final runs, median", num(t.cost_ratios.median), interval(t.cost_ratios.interval, 2))
    plain("Cost ratio of final runs, min", num(t.cost_ratios.low))
    plain("Cost ratio of final runs, max", num(t.cost_ratios.high))
    rate("Migrations that ended faster", t.faster)
    rate("Migrations that ended cheaper", t.cheaper)
    rate("Migrations that ended faster and cheaper", t.faster_and_cheaper)
    plain("Intervention minutes", num(t.intervention_minutes, 1))
    plain("Review hours", num(t.review_seconds / 3600.0))
    plain("Staff hours", num(t.staff_hours))
    plain("Staff cost ($)", num(t.staff_cost))
    plain("Wall hours of attempts and re-runs", num(t.wall_hours))
    plain("Chip-hours of attempts and re-runs", num(t.chip_hours))
    plain("Compute cost ($)", num(t.compute.dollars))
    rate("Attempts and re-runs without times (no wall time, no cost)", Rate(t.untimed, t.runs))
    rate("Attempts and re-runs on an unpriced accelerator (no cost)", Rate(t.unpriced, t.runs))
    plain("LLM cost ($)", num(t.llm.dollars))
    plain("Total cost ($)", num(t.total_cost))
    return Table("totals", "Study totals", ["Measure", "Value", "Of", "%", "95% interval"], rows,
                 numeric=(1, 2, 3, 4), wrap=(0,),
                 note="Rates as docs/report.md defines them; \"verifier alone\" ignores reviewers' overrides."
                      " Intervals: Wilson score for rates, a seeded percentile bootstrap"
                      f" ({RESAMPLES} resamples) for medians.")


def outcomes_table(report: StudyReport) -> Table:
    rows = [
        [s(m.slug), n(m.attempts.n), n(m.failed.n), n(m.silent.n), n(m.over_claims.n),
         n(m.judged_expectation.n), n(m.highest_level), yes(m.goal_met if m.highest_level is not None else None),
         n(m.final_seq), num(m.time_ratio), num(m.cost_ratio)]
        for m in report.migrations
    ]
    return Table("outcomes", "Outcomes per migration",
                 ["Migration", "Attempts", "Failed", "Silent", "Over-claims", "Expectations", "Highest level",
                  "Goal met", "Final run", "Time ratio", "Cost ratio"], rows, numeric=(1, 2, 3, 4, 5, 6, 8, 9, 10),
                 note="Expectations: verified attempts whose agent named an expected level. Final run: the"
                      f" seq of {RULE_TEXT[report.final_rule]}; ratios are its own against the reference run.")


def sig(value: float | None) -> V:
    """A measured value, to six significant digits (metrics span 1e-4 to 1e4)."""
    return V(value, "–" if value is None else f"{value:.6g}")


def goals_table(report: StudyReport) -> Table:
    rows = []
    for m in report.migrations:
        g = m.goal
        if g is None:
            continue
        rows.append([s(m.slug), s(g.metric), s(g.direction), sig(g.reference), sig(g.tolerance), n(m.final_seq),
                     sig(g.final_value), n(g.best_seq), sig(g.best_value)])
    return Table("goals", "Goal per migration",
                 ["Migration", "Metric", "Better", "Reference", "Tolerance", "Final run", "Final value",
                  "Best verified", "Best value"], rows, numeric=(3, 4, 5, 6, 7, 8),
                 note="Values at the last step of each run's goal-metric series (what level 4 judges). Final run"
                      " and best verified: attempt seq; the JSON has their ids.")


def verifier_table(report: StudyReport) -> Table:
    overrides: dict[int, int] = {}
    for o in report.overrides:
        if o.effective:
            overrides[o.migration_id] = overrides.get(o.migration_id, 0) + 1
    rows = [
        [s(m.slug), n(m.failed_automated.n), n(m.silent_automated.n), n(m.over_claims_automated.n),
         n(m.highest_level_automated),
         yes(m.goal_met_automated if m.highest_level_automated is not None else None),
         n(overrides.get(m.id, 0))]
        for m in report.migrations
    ]
    return Table("verifier_alone", "Outcomes per migration, verifier alone (before overrides)",
                 ["Migration", "Failed", "Silent", "Over-claims", "Highest level", "Goal met", "Overrides"],
                 rows, numeric=(1, 2, 3, 4, 6))


def effort_table(report: StudyReport) -> Table:
    rows = [
        [s(m.slug), n(m.interventions.n), num(m.intervention_minutes, 1), num(m.review_seconds / 3600.0),
         num(m.staff_hours), num(m.staff_cost), num(m.wall_hours), num(m.chip_hours), num(m.compute.dollars),
         num(m.llm.dollars), num(m.total_cost)]
        for m in report.migrations
    ]
    return Table("effort_and_cost", "Human effort and cost per migration",
                 ["Migration", "Interventions", "Minutes", "Review h", "Staff h", "Staff $", "Wall h",
                  "Chip-h", "Compute $", "LLM $", "Total $"], rows, numeric=tuple(range(1, 11)),
                 note=f"Staff time at ${report.staff_hourly_rate:,.2f} an hour. LLM cost: {report.llm_source}.")


def kinds_table(report: StudyReport) -> Table:
    rows = [[s(m.slug), s(k.kind), n(k.interventions.n), num(k.minutes, 1)]
            for m in report.migrations for k in m.by_kind]
    return Table("interventions_by_kind", "Interventions by kind",
                 ["Migration", "Kind", "Count", "Minutes"], rows, numeric=(2, 3), wrap=(1,))


def _at(text: str) -> V:
    return s(text[:16].replace("T", " "))


def decisions_table(report: StudyReport) -> Table:
    rows = [[s(m.slug), n(d.id), s(d.kind), s(d.reason), s(d.suggested or "–"), s(d.reviewer), _at(d.at)]
            for m in report.migrations for d in m.decisions]
    return Table("decisions", "Decisions and their reasons",
                 ["Migration", "Id", "Decision", "Reason", "Rules suggested", "Reviewer", "At"], rows,
                 numeric=(1,), wrap=(3, 5),
                 note="Rules suggested: what the stopping rules suggested at that moment (docs/effort.md).")


def budget_changes_table(report: StudyReport) -> Table:
    rows = [[s(m.slug), n(b.id), num(b.compute_dollars), num(b.staff_hours, 1), n(b.attempts),
             num(b.calendar_days, 1), n(b.acceptance_level), s(b.reason), s(b.reviewer), _at(b.at)]
            for m in report.migrations for b in m.budget_changes]
    return Table("budget_changes", "Budget changes",
                 ["Migration", "Id", "Compute $", "Staff hours", "Attempts", "Days", "Accept at level", "Reason",
                  "Reviewer", "At"], rows, numeric=(1, 2, 3, 4, 5, 6), wrap=(7, 8),
                 note="The latest change of a migration is in force; a dash: no budget.")


def overrides_table(report: StudyReport) -> Table:
    slugs = {m.id: m.slug for m in report.migrations}
    rows = [[s(slugs.get(o.migration_id, "")), n(o.seq), n(o.level), s(o.automated), s(o.outcome),
             yes(o.effective), s(o.reviewer), s(o.justification)]
            for o in report.overrides]
    return Table("overrides", "Verdict overrides",
                 ["Migration", "Attempt", "Level", "Verifier", "Override", "Counts", "Reviewer", "Justification"],
                 rows, numeric=(1, 2), wrap=(6, 7),
                 note="Counts: the latest override of its verdict, the one every count uses; no where a later"
                      " override replaced it, or a re-verification changed the verifier's outcome under it"
                      " (Verifier: its outcome then).")


FORMULA = ("=", "+", "@", "\t", "\r")


def csv_text(value: str | None) -> str | None:
    """A text cell as the CSV writes it: a leading `=`, `+`, `@`, tab or return quoted with `'`, so a
    spreadsheet does not run it as a formula (workbench/report/csvzip.py's `value`)."""
    return "'" + value if value is not None and value.startswith(FORMULA) else value


def _flag(value: bool) -> str | bool:
    return ("yes" if value else "no") if type(value) is bool else value


def attempts_table(report: StudyReport) -> Table:
    """One row per attempt and re-run, its cells as the CSV writes them (`raw_rows`: None is an
    empty cell, a flag `yes`/`no`, a text kept from running as a formula), made here in one pass:
    a cell at a time through csvzip's `value` was ~0.8 s of CPU at 150,000 attempts (issue 39)."""
    rows = []
    text = functools.cache(csv_text)  # the few distinct sources, statuses, causes and commands
    for m in report.migrations:
        slug = text(m.slug)
        for a in m.attempt_facts:
            reruns = a.levels_from_reruns
            rows.append([
                slug, a.id, a.seq, text(a.source), text(a.status), a.exit_code, a.expected_level,
                text(a.expected_source), a.level, a.level_automated,
                _flag(a.failed), _flag(a.silent), _flag(a.over_claim), _flag(a.failed_automated),
                _flag(a.silent_automated), _flag(a.over_claim_automated),
                text(a.cause), a.wall_seconds, a.chip_hours, a.cost_dollars, a.time_ratio, a.cost_ratio,
                a.last_step, _flag(a.smoke), a.goal_value, a.rerun_of,
                ";".join(f"{level}:{rerun}" for level, rerun in reruns) if reruns else "",
                text(a.command), "'" + claim if (claim := a.claim).startswith(FORMULA) else claim,
                "'" + note if (note := a.failure_note).startswith(FORMULA) else note,
            ])
    return Table("attempts", "Attempts",
                 ["migration", "attempt_id", "seq", "source", "status", "exit_code", "expected_level",
                  "expected_source", "level",
                  "level_verifier", "failed", "silent", "over_claim", "failed_verifier", "silent_verifier",
                  "over_claim_verifier", "cause", "wall_seconds", "chip_hours", "cost_dollars", "time_ratio",
                  "cost_ratio", "last_step", "smoke", "goal_value", "rerun_of", "levels_from_reruns", "command",
                  "claim", "failure_note"],
                 raw_rows=rows)


def intervention_records_table(report: StudyReport) -> Table:
    slugs = {m.id: m.slug for m in report.migrations}
    rows = [[s(slugs.get(i.migration_id, "")), n(i.id), n(i.attempt_id), s(i.kind), num(i.minutes, 1),
             n(i.corrects), n(i.corrected_by), yes(i.current), s(i.reviewer), s(i.at), s(i.note)]
            for i in report.interventions]
    return Table("interventions", "Intervention records",
                 ["migration", "intervention_id", "attempt_id", "kind", "minutes", "corrects", "corrected_by",
                  "counts", "reviewer", "at", "note"], rows)


def review_table(report: StudyReport) -> Table:
    slugs = {m.id: m.slug for m in report.migrations}
    rows = [[s(slugs.get(r.migration_id, "")), n(r.id), s(r.reviewer), s(r.started_at), num(r.active_seconds, 1)]
            for r in report.review_sessions]
    return Table("review_sessions", "Review sessions",
                 ["migration", "review_session_id", "reviewer", "started_at", "active_seconds"], rows)


def document_tables(report: StudyReport) -> list[Table]:
    """The tables of a document (Markdown, HTML, LaTeX)."""
    tables = [totals_table(report), outcomes_table(report), goals_table(report), verifier_table(report),
              effort_table(report), kinds_table(report), decisions_table(report)]
    if any(m.budget_changes for m in report.migrations):
        tables.append(budget_changes_table(report))
    if report.overrides:
        tables.append(overrides_table(report))
    from workbench.report.agreement import agreement_tables

    return tables + agreement_tables(report.agreement)


def all_tables(report: StudyReport) -> list[Table]:
    """Every table, record-level ones included (CSV)."""
    from workbench.report.agreement import agreement_tables

    return [totals_table(report), outcomes_table(report), goals_table(report), verifier_table(report),
            effort_table(report),
            kinds_table(report), decisions_table(report), budget_changes_table(report), overrides_table(report),
            attempts_table(report),
            intervention_records_table(report), review_table(report), *agreement_tables(report.agreement)]


def title_lines(report: StudyReport) -> list[str]:
    lines = [f"Study: {report.title} ({report.slug})"]
    if report.selected:
        lines.append("Migrations: " + ", ".join(report.selected))
    lines.append(f"Final run: {RULE_TEXT[report.final_rule]}.")
    if report.pseudonymised:
        lines.append("Reviewer names are pseudonymised.")
    return lines


def migration_line(m: MigrationReport) -> str:
    final = (f"final run: seq {m.final_seq}" if m.final_seq is not None
             else f"no final run ({WHY_NONE.get(m.final_why_none or '', 'none')})")
    return f"{m.slug}: {m.title}, {m.target}, {m.status}; {final}"
