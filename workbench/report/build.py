"""Counting: raw rows in, a `StudyReport` out. docs/report.md defines every count made here.

Nothing here trusts a stored count: attempts, verdicts (with their overrides), failures,
interventions, decisions and review sessions are read as rows and counted in one pass.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from operator import attrgetter
from typing import Any

import orjson

from domain.errors import WorkbenchError
from domain.ladder import LEVELS, effective_outcome, highest_level, over_claim
from storage.report import ATTEMPT_COLUMNS, ladder_of
from storage.sqlite import Database
from workbench.report.agreement import agreement_of, reviewers_of, scrubbed
from workbench.report.final import ACCEPTED, RULES, WHY_NONE, final_run, is_smoke
from workbench.report.model import (
    AttemptFacts,
    AttemptGroup,
    BudgetChangeRow,
    Count,
    DecisionRow,
    GoalValues,
    InterventionRow,
    KindTotal,
    MigrationReport,
    Money,
    OverrideRow,
    Rate,
    ReviewRow,
    Spread,
    StudyReport,
    Totals,
)
from workbench.report.scrub import Scrub
from workbench.report.stats import bootstrap_median

GOAL_LEVEL = 4
"""The ladder level that means the project's goal is met."""

LOSS_METRIC = "loss"

(ID, MIGRATION_ID, SEQ, SOURCE, ARGV, CWD, ENV, STATUS, EXIT_CODE, STARTED_AT, ENDED_AT, EXPECTED_LEVEL,
 EXPECTED_SOURCE, CLAIM, INTENDED_KIND, INTENDED_COUNT, OBSERVED_KIND, OBSERVED_COUNT, RERUN_OF, VERIFICATION_ID,
 WALL_SECONDS, COST_DOLLARS, TIME_RATIO, COST_RATIO, FAILURE_ID, FAILURE_CAUSE, FAILURE_SILENT, FAILURE_NOTE,
 VERDICT_CODE, LAST_STEP, GOAL_VALUE, MEMBERS, MEMBER_SEQS) = map(ATTEMPT_COLUMNS.index, (
    "id", "migration_id", "seq", "source", "argv", "cwd", "env", "status", "exit_code", "started_at", "ended_at",
    "expected_level", "expected_source", "claim", "intended_kind", "intended_count", "observed_kind",
    "observed_count", "rerun_of", "verification_id", "wall_seconds", "cost_dollars", "time_ratio", "cost_ratio",
    "failure_id", "failure_cause", "failure_silent", "failure_note", "verdict_code", "last_step", "goal_value",
    "members", "member_seqs"))
"""Where each column sits in an attempt row (a tuple of storage.report.ATTEMPT_COLUMNS), found by
its name: a column gone from there fails this import."""


def build_report(db: Database, slugs: list[str] | tuple[str, ...] | None = None, *,
                 pseudonymise: bool = False, final: str = ACCEPTED, attempt_texts: bool = True,
                 charts: bool = True, per_attempt: bool = True) -> StudyReport:
    """The report (`_build_report`), the cycle collector paused while it is built (`gc_paused`)."""
    with gc_paused():
        return _build_report(db, slugs, pseudonymise=pseudonymise, final=final, attempt_texts=attempt_texts,
                             charts=charts, per_attempt=per_attempt)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cycle collector paused, as it was after: a report makes an object or more per attempt, none
    in a cycle, and the collections their numbers set off walked every one of them again and again
    (~0.3 s of CPU in building a report of 150,000 attempts, ~0.6 s in rendering its JSON; issue 39).
    Process-wide, for the seconds it takes. After it, what it made joins the oldest generation
    unexamined (freezing and unfreezing moves every tracked object there): else the first collection
    walked all of it at once (~50 ms after a report of 150,000 attempts). Garbage in cycles made
    meanwhile waits for the next full collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _build_report(db: Database, slugs: list[str] | tuple[str, ...] | None, *, pseudonymise: bool, final: str,
                  attempt_texts: bool, charts: bool, per_attempt: bool) -> StudyReport:
    """The report over the whole study, or over the migrations named by `slugs`; `final` names
    the final-run rule (workbench.report.final); `attempt_texts` False leaves each attempt's
    command, claim and failure note empty, its status '' and its expected level's source and
    failure's cause None: what only the attempt rows show (for the formats that show none of them:
    workbench.report.ATTEMPT_TEXT_FORMATS); `charts` False reads no loss series nor a group's seqs
    (only html draws them: workbench.report.CHART_FORMATS; ~0.2 s of CPU at 150,000 attempts); `per_attempt` False counts
    groups of attempts that every count reads alike (storage.report.report_attempt_groups), for the
    formats that show no attempt's row (not workbench.report.PER_ATTEMPT_FORMATS): the same counts,
    its attempt facts `AttemptGroup`s. It needs `attempt_texts` False and the `accepted` final-run
    rule (the last passing run is an attempt's own)."""
    from storage import queries, runs
    from storage import report as report_reads

    if final not in RULES:
        raise WorkbenchError(f"unknown final-run rule {final!r} (known: {', '.join(RULES)})")
    if not per_attempt and (attempt_texts or final != ACCEPTED):
        raise ValueError("a report counted in groups of attempts has no attempt texts and the accepted final run")

    study = queries.get_study(db)
    if study is None:
        raise WorkbenchError("the database holds no study yet: import a bundle first")
    migrations = _select_migrations(db, slugs)
    ids = [m.id for m in migrations]
    human = report_reads.report_human_rows(db, ids)
    override_rows = report_reads.report_override_rows(db, ids)
    agreement = agreement_of(db, ids)
    scrub = _scrub_for(study.reviewers, human, override_rows, pseudonymise, reviewers_of(agreement))
    current = [row for row in override_rows if row["current_id"] is not None]  # on a current verdict
    latest = {row["verdict_id"]: row["id"] for row in current}  # oldest first: the last one counts
    overrides = [_override_row(r, latest, scrub) for r in override_rows]
    texts = _attempt_texts(scrub) if attempt_texts else lambda row: ("", "", "")
    counted = runs.counted_ladders(db, ids)
    facts_by_migration, reference_of, reference_runs, compute = _attempts(
        _attempt_rows(db, ids, counted, current, human["decision"], texts=attempt_texts, per_attempt=per_attempt,
                      seqs=charts),
        migrations, study.prices, current, texts, counted, per_attempt)
    interventions, decisions, budget_changes, sessions = _human_records(human, scrub)
    llm_rows, llm_source = _llm_calls(db, ids)
    by_migration = _by_migration(interventions, decisions, budget_changes, sessions, llm_rows)
    goal_first = functools.partial(report_reads.report_goal_first, db)
    reports = [
        _migration_report(m, facts_by_migration.get(m.id, []), reference_of.get(m.id), by_migration,
                          study.staff_hourly_rate, scrub, final, reference_runs.get(m.id, (None, None)), goal_first,
                          compute.get(m.id, ComputeSums()))
        for m in migrations
    ]
    if charts:
        _add_loss_curves(db, reports)
    _add_explanations(db, reports, scrub)
    return StudyReport(
        slug=scrub.text(study.slug),
        title=scrub.text(study.title),
        staff_hourly_rate=study.staff_hourly_rate,
        prices=dict(study.prices),
        migrations=reports,
        totals=_totals(reports),
        interventions=interventions,
        overrides=overrides,
        review_sessions=sessions,
        llm_source=llm_source,
        llm_calls=[(r["id"], r["migration_id"], float(r["cost_usd"] or 0.0)) for r in llm_rows],
        pseudonymised=pseudonymise,
        final_rule=final,
        selected=tuple(sorted(set(slugs or ()))),
        agreement=scrubbed(agreement, scrub),
        attempt_texts=attempt_texts,
        charts=charts,
        per_attempt=per_attempt,
    )


def _attempt_rows(db: Database, ids: list[int], counted, current, decision_rows, *, texts: bool,
                  per_attempt: bool, seqs: bool) -> list[tuple[Any, ...]]:
    """The rows the report counts: one per attempt, or (`per_attempt` False) one per group of alike
    attempts, where what sets an attempt apart from its like (its re-runs, overrides, a decision
    naming it) makes it a group of its own."""
    from storage import report as report_reads

    if per_attempt:
        return report_reads.report_attempt_rows(db, ids, texts=texts)
    singles = {*counted, *(row["attempt_id"] for row in current),
               *(row["attempt_id"] for row in decision_rows if row["attempt_id"] is not None)}
    return report_reads.report_attempt_groups(db, ids, sorted(singles), seqs=seqs)


def _llm_calls(db: Database, ids: list[int]) -> tuple[list[dict[str, Any]], str]:
    """The migrations' model calls, and where their cost comes from (a line every format shows)."""
    from storage import report as report_reads

    rows = report_reads.report_llm_rows(db, ids)
    if rows is None:
        return [], "no `llm_call` table in this database: LLM cost reported as 0"
    return rows, f"the `llm_call` table ({len(rows)} calls)"


def _select_migrations(db: Database, slugs: list[str] | tuple[str, ...] | None) -> list[Any]:
    from storage.report import report_migrations

    migrations = report_migrations(db)
    if not slugs:
        return migrations
    by_slug = {m.slug: m for m in migrations}
    missing = [s for s in slugs if s not in by_slug]
    if missing:
        raise WorkbenchError(f"no migration {missing[0]!r}")
    return [by_slug[s] for s in sorted(set(slugs))]


def _scrub_for(reviewers: Any, human: dict[str, list[dict[str, Any]]], override_rows: list[dict[str, Any]],
               pseudonymise: bool, judging: list[str] | None = None) -> Scrub:
    """Names in a fixed order: the study's list, then first appearance in each table."""
    scrub = Scrub(pseudonymise)
    if pseudonymise:
        for name in reviewers:
            scrub.add_reviewer(name)
        for table in ("intervention", "decision", "review_session", "budget_change"):
            for row in human[table]:
                scrub.add_reviewer(row["reviewer"])
        for row in override_rows:
            scrub.add_reviewer(row["reviewer"])
        for name in judging or ():
            scrub.add_reviewer(name)
    return scrub


def _override_row(r: dict[str, Any], latest: dict[int, int], scrub: Scrub) -> OverrideRow:
    return OverrideRow(
        id=r["id"], verdict_id=r["verdict_id"], attempt_id=r["attempt_id"], migration_id=r["migration_id"],
        seq=r["seq"], level=r["level"], automated=r["automated"], outcome=r["outcome"],
        justification=scrub.text(r["justification"]), reviewer=scrub.reviewer(r["reviewer"]),
        at=r["at"], effective=latest.get(r["verdict_id"]) == r["id"],
    )


def _attempts(rows, migrations, prices, override_rows, texts, counted, per_attempt: bool):
    """Each migration's attempt facts, its reference run's id and (wall, cost), its ComputeSums. Rows
    come by migration and seq, so a migration's reference run (seq 0) comes before its attempts. `counted` is
    storage.runs.counted_ladders: an agent attempt's outcomes over its runs, as every count reads them.
    Rows of groups (`per_attempt` False) make `AttemptGroup`s."""
    from domain.costs import chip_cost, price_of

    facts_by_migration: dict[int, list[AttemptFacts]] = defaultdict(list)
    compute: dict[int, ComputeSums] = defaultdict(ComputeSums)
    reference_of: dict[int, int] = {}
    reference_runs: dict[int, tuple[float | None, float | None]] = {}
    reference_last: dict[int, int | None] = {}  # the last step of the reference run reference_of names
    verdicts, decided = _verdicts(rows, override_rows, counted)
    failures = {row[ID]: row for row in rows} if decided else {}  # a run's failure record, or its exit code
    costs = (chip_cost, functools.cache(lambda kind: price_of(prices, kind)))  # a few kinds
    migration_by_id = {m.id: m for m in migrations}
    for row in rows:
        migration_id = row[MIGRATION_ID]
        if row[SOURCE] == "reference":
            reference_of[migration_id] = row[ID]  # rows come by seq: the last one wins
            reference_last[migration_id] = row[LAST_STEP]
            # its wall and cost as level 5 prices them: its observed kind and count, else intended, else 1
            reference_runs[migration_id] = chip_cost(
                row[STARTED_AT], row[ENDED_AT], prices, row[OBSERVED_KIND] or row[INTENDED_KIND],
                row[OBSERVED_COUNT] or row[INTENDED_COUNT] or 1)
            continue
        last, ref_last = row[LAST_STEP], reference_last.get(migration_id)
        runs = decided.get(row[ID], ())
        measures = (last, is_smoke(last, ref_last), row[GOAL_VALUE], row[RERUN_OF], runs,
                    _failure_row(row, verdicts[1], decided, failures) if runs else row)
        group = () if per_attempt else (((row[ID],), (row[SEQ],)) if row[MEMBERS] is None else (
            tuple(orjson.loads(row[MEMBERS])), tuple(orjson.loads(row[MEMBER_SEQS] or "[]"))))
        facts_by_migration[migration_id].append(_attempt_facts(
            row, migration_by_id[migration_id], prices, verdicts, texts, costs, measures, group, compute[migration_id]))
    return facts_by_migration, reference_of, reference_runs, compute


def _failure_row(row: tuple[Any, ...], effective: dict[int, tuple[str | None, ...]],
                 decided: dict[int, tuple[tuple[int, int], ...]], failures: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """The row whose failure (cause, silent flag) the attempt's effective ladder rests on: the
    re-run that decided its lowest failing level, when one did (the app shows that re-run's
    failure: one source), else its own."""
    by_level = dict(decided.get(row[ID], ()))
    if not by_level:
        return row
    ladder = effective.get(row[ID], NO_VERDICTS)
    lowest = next((level for level, outcome in zip(LEVELS, ladder) if outcome == "fail"), None)
    rerun = by_level.get(lowest) if lowest is not None else None
    return failures.get(rerun, row) if rerun is not None else row


def _attempt_texts(scrub: Scrub):
    """A row -> its command line as shown, claim and failure note, each redacted. Each distinct
    command (argv, cwd and environment as stored) is decoded and quoted once: agents repeat theirs."""
    from domain.models import Command

    @functools.cache
    def command(argv: str, cwd: str | None, env: str | None) -> str:
        return scrub.text(Command(tuple(json.loads(argv)), cwd or ".", json.loads(env or "{}")).display())

    def texts(row: tuple[Any, ...]) -> tuple[str, str, str]:
        return (command(row[ARGV], row[CWD], row[ENV]), scrub.text(row[CLAIM]),
                scrub.text(row[FAILURE_NOTE]))

    return texts


def _verdicts(rows, override_rows: list[dict[str, Any]], counted: dict[int, dict[str, Any]]):
    """Automated and effective outcomes of levels 1 to 5 per attempt with a current verdict on
    any of its runs (a reviewer's latest override counts in the effective ones); an agent
    attempt's are its counted ones over its runs (storage.counted: the app's header and `verify`
    read the same SQL), a re-run's its own. And attempt id -> ((level, re-run id), ...) of the
    effective outcomes a re-run decided, for citing."""
    automated = {row[ID]: ladder for row in rows if (ladder := ladder_of(row[VERDICT_CODE])) != NO_VERDICTS}  # any
    overridden: dict[tuple[int, int], list[str]] = defaultdict(list)
    for row in override_rows:  # oldest first
        overridden[(row["attempt_id"], row["level"])].append(row["outcome"])
    effective = dict(automated)
    for (attempt_id, level), outcomes in overridden.items():
        ladder = list(effective[attempt_id])
        ladder[level - 1] = effective_outcome(automated[attempt_id][level - 1], outcomes)
        effective[attempt_id] = tuple(ladder)
    decided = {}
    for attempt_id, ladders in counted.items():
        if ladders["effective"] != NO_VERDICTS:
            effective[attempt_id], automated[attempt_id] = ladders["effective"], ladders["automated"]
        if ladders["decided"]:
            decided[attempt_id] = ladders["decided"]
    return (automated, effective), decided


def _human_records(human: dict[str, list[dict[str, Any]]], scrub: Scrub):
    interventions = [
        InterventionRow(
            id=r["id"], migration_id=r["migration_id"], attempt_id=r["attempt_id"], kind=scrub.text(r["kind"]),
            minutes=float(r["minutes"]), note=scrub.text(r["note"]), reviewer=scrub.reviewer(r["reviewer"]),
            at=r["at"], corrects=r["corrects"], corrected_by=r["corrected_by"],
        )
        for r in human["intervention"]
    ]
    decisions = [
        DecisionRow(r["id"], r["migration_id"], r["kind"], scrub.text(r["reason"]), scrub.reviewer(r["reviewer"]),
                    r["at"], r["suggested"], r.get("attempt_id"))
        for r in human["decision"]
    ]
    budget_changes = [
        BudgetChangeRow(r["id"], r["migration_id"], r["compute_dollars"], r["staff_hours"], r["attempts"],
                        r["calendar_days"], r["acceptance_level"], scrub.text(r["reason"]),
                        scrub.reviewer(r["reviewer"]), r["at"])
        for r in human["budget_change"]
    ]
    sessions = [
        ReviewRow(r["id"], r["migration_id"], scrub.reviewer(r["reviewer"]), r["started_at"],
                  float(r["active_seconds"]))
        for r in human["review_session"]
    ]
    return interventions, decisions, budget_changes, sessions


def _by_migration(interventions, decisions, budget_changes, sessions, llm_rows) -> dict[str, dict[int, list[Any]]]:
    by_migration: dict[str, dict[int, list[Any]]] = {
        name: defaultdict(list) for name in ("intervention", "decision", "budget_change", "review", "llm")
    }
    for i in interventions:
        if i.current:
            by_migration["intervention"][i.migration_id].append(i)
    for d in decisions:
        by_migration["decision"][d.migration_id].append(d)
    for b in budget_changes:
        by_migration["budget_change"][b.migration_id].append(b)
    for s in sessions:
        by_migration["review"][s.migration_id].append(s)
    for r in llm_rows:
        by_migration["llm"][r["migration_id"]].append(r)
    return by_migration



_FACT_FIELDS = (
    "id", "migration_id", "seq", "source", "command", "claim", "status", "exit_code", "expected_level",
    "expected_source", "verification_id", "level", "level_automated", "failed", "failed_automated", "silent",
    "silent_automated", "over_claim", "over_claim_automated", "passes_level1", "failure_id", "cause",
    "failure_note", "wall_seconds", "chip_hours", "cost_dollars", "time_ratio", "cost_ratio", "ladder",
    "last_step", "smoke", "goal_value", "untimed", "unpriced", "rerun_of", "levels_from_reruns",
)
"""AttemptFacts' fields in the order `_attempt_facts` passes them: positional arguments, since
matching 36 keyword arguments took ~3 µs per attempt (150,000 attempts: ~0.5 s)."""
if _FACT_FIELDS != tuple(f.name for f in dataclasses.fields(AttemptFacts)):
    raise ImportError("workbench.report.build._attempt_facts passes AttemptFacts' fields positionally:"
                      " its list (_FACT_FIELDS) no longer matches workbench.report.model.AttemptFacts")


NO_VERDICTS: tuple[str | None, ...] = (None,) * len(LEVELS)


FIXED = 1 << 20
"""Compute sums count in units of 2**-20 (about a microsecond, a micro-dollar): a whole number of
them is summed exactly in any order or grouping, so a report counted in groups of attempts gives
the figures one counted per attempt gives (a float sum in another order moved a last digit shown)."""


def fixed(value: float) -> int:
    """`value` in FIXED units, as storage.report's group sums take it (storage.report.IN_FIXED_UNITS)."""
    return int(value * FIXED + 0.5)


class ComputeSums:
    """A migration's wall time, chip-hours and cost over its runs' own measures (a re-run standing in
    for the attempt it re-ran adds nothing: it is summed as itself), each exactly in FIXED units;
    chip-hours by what they come from, as an attempt's are: its cost over its kind's price, else its
    wall time by its chips."""

    __slots__ = ("wall", "dollars", "per_price", "per_chips")

    def __init__(self) -> None:
        self.wall = self.dollars = 0
        self.per_price: dict[float, int] = defaultdict(int)  # price -> cost, FIXED
        self.per_chips: dict[int, int] = defaultdict(int)  # chips -> wall seconds, FIXED

    def add(self, wall: int | None, dollars: int | None, price: float | None, chips: int) -> None:
        """A run's (or a group's) wall seconds and cost in FIXED units."""
        if wall is not None:
            self.wall += wall
        if dollars is not None:
            self.dollars += dollars
            if price:
                self.per_price[price] += dollars
                return
        if wall is not None:
            self.per_chips[chips] += wall

    def wall_hours(self) -> float:
        return self.wall / FIXED / 3600.0

    def cost(self) -> float:
        return self.dollars / FIXED

    def chip_hours(self) -> float:
        return (sum(amount / FIXED / price for price, amount in sorted(self.per_price.items()))
                + sum(amount / FIXED / 3600.0 * chips for chips, amount in sorted(self.per_chips.items())))


@functools.cache
def _ladder_summary(outcomes: tuple[str | None, ...]) -> tuple[int, bool]:
    """(highest level, any fail) of the outcomes of levels 1 to 5; a study has a few dozen
    distinct ladders, so each is worked out once."""
    return highest_level(dict(zip(LEVELS, outcomes))), "fail" in outcomes


@functools.cache
def _judged(auto: tuple[str | None, ...], eff: tuple[str | None, ...], verified: bool, expected: int | None,
            no_error: bool) -> tuple[Any, ...]:
    """What an attempt's verdicts say of it: (level, level automated, failed, failed automated,
    silent, silent automated, over-claim, over-claim automated, passes level 1). It depends on
    these five values alone, and a study has a few hundred distinct ones: each is worked out once
    (per attempt, this was ~0.3 s of CPU at 150,000 attempts)."""
    level_auto, failed_auto = _ladder_summary(auto) if verified else (None, False)
    level_eff, failed_eff = _ladder_summary(eff) if verified else (None, False)
    return (level_eff, level_auto, failed_eff, failed_auto, failed_eff and no_error, failed_auto and no_error,
            bool(over_claim(expected, dict(zip(LEVELS, eff)), verified=verified)),  # None: not counted
            bool(over_claim(expected, dict(zip(LEVELS, auto)), verified=verified)),
            verified and eff[0] == "pass")


def _attempt_facts(row, migration, prices, verdicts, texts, costs, measured, group, compute) -> AttemptFacts:
    """An attempt's facts, its wall time and cost added to `compute`; with `group` (its members' ids
    and seqs) an AttemptGroup's, whose row of storage.report_attempt_groups (`members` set) holds its
    wall time and cost summed in FIXED units."""
    automated, effective = verdicts
    command, claim, failure_note = texts(row)
    chip_cost, price_of = costs
    attempt_id = row[ID]
    verified = row[VERIFICATION_ID] is not None or bool(measured[4])  # or a re-run of it is
    eff = effective.get(attempt_id, NO_VERDICTS)
    # "Raised no error": the verifier's silent flag on its failure; an attempt it did not fail
    # raised none when it exited 0 (a traceback or fatal line would have failed level 1). A failure's silent
    # flag is never NULL: NULL says it has none (a group of attempts knows no failure id).
    failure = measured[5]
    no_error = bool(failure[FAILURE_SILENT]) if failure[FAILURE_SILENT] is not None else failure[EXIT_CODE] == 0
    expected = row[EXPECTED_LEVEL]
    (level_eff, level_auto, failed_eff, failed_auto, silent, silent_auto, claimed_over, claimed_over_auto,
     passes_level1) = _judged(automated.get(attempt_id, NO_VERDICTS), eff, verified, expected, no_error)
    # Compute: the verifier's own figures where it stored them; else its cost function on the record.
    kind = row[INTENDED_KIND] or migration.target.accelerator
    chips = row[OBSERVED_COUNT] or row[INTENDED_COUNT] or migration.target.chips
    wall, dollars = (row[WALL_SECONDS], row[COST_DOLLARS]) if verified else (None, None)
    price = price_of(kind)
    if row[MEMBERS] is not None:  # a group's sums: in FIXED units, every member timed by the verifier
        compute.add(wall, dollars, price, chips)
        wall, dollars = wall / FIXED, dollars / FIXED
    else:
        if wall is None or dollars is None:
            computed_wall, computed = chip_cost(row[STARTED_AT], row[ENDED_AT], prices, kind, chips)
            wall = computed_wall if wall is None else wall
            dollars = computed if dollars is None else dollars
        compute.add(None if wall is None else fixed(wall), None if dollars is None else fixed(dollars), price, chips)
    if dollars is not None and price:
        chip_hours = dollars / price
    else:
        chip_hours = None if wall is None else wall / 3600.0 * chips
    return (AttemptGroup if group else AttemptFacts)(  # positionally, in _FACT_FIELDS' order (36 keywords: ~0.5 s)
        attempt_id,  # id
        row[MIGRATION_ID],  # migration_id
        row[SEQ],  # seq
        row[SOURCE],  # source
        command,  # command
        claim,  # claim
        row[STATUS],  # status
        row[EXIT_CODE],  # exit_code
        expected,  # expected_level
        row[EXPECTED_SOURCE],  # expected_source
        row[VERIFICATION_ID],  # verification_id
        level_eff,  # level
        level_auto,  # level_automated
        failed_eff,  # failed
        failed_auto,  # failed_automated
        silent,  # silent
        silent_auto,  # silent_automated
        claimed_over,  # over_claim
        claimed_over_auto,  # over_claim_automated
        passes_level1,  # passes_level1
        failure[FAILURE_ID],  # failure_id
        failure[FAILURE_CAUSE],  # cause
        failure_note,  # failure_note
        wall,  # wall_seconds
        chip_hours,  # chip_hours
        dollars,  # cost_dollars
        row[TIME_RATIO] if verified else None,  # time_ratio
        row[COST_RATIO] if verified else None,  # cost_ratio
        eff,  # ladder
        measured[0],  # last_step
        measured[1],  # smoke
        measured[2],  # goal_value
        wall is None,  # untimed
        dollars is None and price is None,  # unpriced
        measured[3],  # rerun_of
        measured[4],  # levels_from_reruns
        *group,  # members, member_seqs
    )


def _ids(items, pred=None, table: str = "attempt") -> Count:
    """The ids of the items (those `pred` holds for); an AttemptGroup's are its members'. A flag is
    passed as `attrgetter`: a C call per item, not a lambda's frame (150,000 attempts are filtered a
    dozen ways)."""
    chosen = items if pred is None else [x for x in items if pred(x)]
    if chosen and type(chosen[0]) is AttemptGroup:  # a report's facts are all groups or none
        return Count(tuple(chain.from_iterable([x.members for x in chosen])), table)
    return Count(tuple([x.id for x in chosen]), table)


RUN_MEASURES = ("wall_seconds", "chip_hours", "cost_dollars", "time_ratio", "cost_ratio", "goal_value")
"""What a re-run measures of the attempt it re-ran, where the attempt's own record has none."""


def _measured_by_reruns(facts: list[AttemptFacts], reruns: list[AttemptFacts]) -> None:
    """A re-run is another run of the same attempt: where the attempt's own record measured
    nothing (an imported commit: no log, no times), its latest verified re-run's steps, goal
    value, time and cost stand for it, as its levels do (storage.counted), so an accepted
    attempt has a final run's figures."""
    latest = {r.rerun_of: r for r in sorted(reruns, key=attrgetter("seq"))
              if r.rerun_of is not None and r.verification_id is not None}
    for a in facts:
        run = latest.get(a.id)
        if run is None:
            continue
        if a.last_step is None:
            a.last_step, a.smoke = run.last_step, run.smoke
        for name in RUN_MEASURES:
            if getattr(a, name) is None:
                setattr(a, name, getattr(run, name))


def _migration_report(m, runs: list[AttemptFacts], reference_id: int | None, by_migration, rate: float,
                      scrub: Scrub, rule: str, reference_run: tuple[float | None, float | None], goal_first,
                      compute: ComputeSums) -> MigrationReport:
    """Outcome counts over the agent's attempts; compute over its attempts and the re-runs, each run's
    own measures (`compute`). The final run's time and cost ratios are its full-run wall and cost
    over the reference run's (the paper times full runs), else the verifier's stored ratios."""
    facts = [a for a in runs if not a.is_rerun]
    reruns = [a for a in runs if a.is_rerun]
    by_id = {a.id: a for a in facts} if reruns else {}
    verified = [a for a in facts if a.verified]
    best = max(verified, key=lambda a: (a.level, -a.seq), default=None)
    best_auto = max((a.level_automated or 0 for a in verified), default=None)  # verified: never None
    priced, timed, chip_timed = (_ids(runs, lambda a: a.cost_dollars is not None),  # own measures: before
                                 _ids(runs, lambda a: a.wall_seconds is not None),  # re-runs stand in
                                 _ids(runs, lambda a: a.chip_hours is not None))
    _measured_by_reruns(facts, reruns)
    decisions = list(by_migration["decision"].get(m.id, []))
    chosen = final_run(rule, m.status.value, decisions, facts)
    final = chosen.attempt
    interventions = by_migration["intervention"].get(m.id, [])
    minutes = sum(i.minutes for i in interventions)
    sessions = by_migration["review"].get(m.id, [])
    review_seconds = sum(s.active_seconds for s in sessions)
    llm = by_migration["llm"].get(m.id, [])
    staff_hours = minutes / 60.0 + review_seconds / 3600.0
    return MigrationReport(
        id=m.id,
        slug=scrub.text(m.slug),
        title=scrub.text(m.title),
        status=m.status.value,
        target=scrub.text(m.target.describe()),
        attempts=_ids(facts),
        verified=_ids(verified),
        failed=_ids(facts, attrgetter("failed")),
        failed_automated=_ids(facts, attrgetter("failed_automated")),
        silent=_ids(facts, attrgetter("silent")),
        silent_automated=_ids(facts, attrgetter("silent_automated")),
        over_claims=_ids(facts, attrgetter("over_claim")),
        over_claims_automated=_ids(facts, attrgetter("over_claim_automated")),
        stated_expectation=_ids(facts, lambda a: a.expected_level is not None),
        judged_expectation=_ids(verified, lambda a: a.expected_level is not None),
        highest_level=best.level if best else None,
        highest_level_automated=best_auto,
        highest_attempt_id=best.id if best else None,
        goal_met=best is not None and (best.level or 0) >= GOAL_LEVEL,
        goal_met_automated=best_auto is not None and best_auto >= GOAL_LEVEL,
        interventions=_ids(interventions, table="intervention"),
        intervention_minutes=minutes,
        by_kind=_by_kind(interventions),
        review=_ids(sessions, table="review_session"),
        review_seconds=review_seconds,
        decisions=decisions,
        budget_changes=list(by_migration["budget_change"].get(m.id, [])),
        wall_hours=compute.wall_hours(),
        chip_hours=compute.chip_hours(),
        compute=Money(compute.cost(), priced),
        timed=timed,
        chip_timed=chip_timed,
        llm=Money(sum(float(r["cost_usd"] or 0.0) for r in llm),
                  Count(tuple(r["id"] for r in llm), "llm_call")),
        staff_hours=staff_hours,
        staff_cost=staff_hours * rate,
        untimed=_ids(runs, attrgetter("untimed")),
        unpriced=_ids(runs, attrgetter("unpriced")),
        runs=_ids(runs),
        reruns=_ids(reruns),
        reruns_confirming=_ids(reruns, lambda a: a.verified and _confirms(a, by_id)),
        reruns_changing=_ids(reruns, lambda a: a.verified and not _confirms(a, by_id)),
        decided_by_reruns=_ids(facts, attrgetter("levels_from_reruns")),
        final_attempt_id=final.id if final else None,
        final_seq=final.seq if final else None,
        time_ratio=_ratio(final.wall_seconds, reference_run[0], final.time_ratio) if final else None,
        cost_ratio=_ratio(final.cost_dollars, reference_run[1], final.cost_ratio) if final else None,
        reference_attempt_id=reference_id,
        goal_metric=scrub.text(m.goal.metric),
        goal=_goal_values(m.goal, scrub.text(m.goal.metric), reference_id, final, verified, goal_first),
        final_why_none=chosen.why_none,
        attempt_facts=runs,
    )


def _by_kind(interventions: list[InterventionRow]) -> list[KindTotal]:
    kinds: dict[str, list[InterventionRow]] = defaultdict(list)
    for i in interventions:
        kinds[i.kind].append(i)
    return [KindTotal(k, _ids(v, table="intervention"), sum(i.minutes for i in v)) for k, v in sorted(kinds.items())]


def _ratio(mine: float | None, reference: float | None, stored: float | None) -> float | None:
    return mine / reference if mine is not None and reference else stored


def _confirms(rerun: AttemptFacts, by_id: dict[int, AttemptFacts]) -> bool:
    """The re-run reached the level of the attempt it re-ran and decided none of its levels."""
    original = by_id.get(rerun.rerun_of)  # type: ignore[arg-type]  # a re-run names what it re-ran
    return (original is not None and rerun.level == original.level
            and all(r != rerun.id for _, r in original.levels_from_reruns))


def _goal_values(goal, metric: str, reference_id: int | None, final: AttemptFacts | None,
                 verified: list[AttemptFacts], goal_first) -> GoalValues:
    """The goal, the final run's value and the best verified value in the goal's direction (ties: the
    earliest attempt). A group's value is its best member's; which member (the earliest with that
    value: `goal_first(migration_id, ids, value)` -> (id, seq)) is read only where a group ties for the best."""
    sign = 1.0 if goal.direction.value == "max" else -1.0
    valued = [a for a in verified if a.goal_value is not None]
    best_seq = best_id = best_value = None
    if valued:
        top = max(sign * a.goal_value for a in valued)
        ties = [a for a in valued if sign * a.goal_value == top]
        best_value = ties[0].goal_value
        if all(len(getattr(a, "members", ())) < 2 for a in ties):
            best_seq, best_id = min((a.seq, a.id) for a in ties)
        else:  # one lookup among every tied attempt
            best_id, best_seq = goal_first(ties[0].migration_id,
                                          [i for a in ties for i in getattr(a, "members", ()) or (a.id,)],
                                          best_value)
    return GoalValues(
        metric=metric, direction=goal.direction.value,
        reference=None if math.isnan(goal.reference) else goal.reference, tolerance=goal.tolerance,
        reference_attempt_id=reference_id,
        final_value=final.goal_value if final else None, final_attempt_id=final.id if final else None,
        best_value=best_value, best_attempt_id=best_id, best_seq=best_seq,
    )


def _add_loss_curves(db: Database, reports: list[MigrationReport]) -> None:
    from storage import report as report_reads

    wanted = [i for r in reports for i in (r.reference_attempt_id, r.final_attempt_id) if i is not None]
    series = report_reads.report_series(db, wanted, LOSS_METRIC) if wanted else {}
    for r in reports:
        for label, attempt_id in (("reference", r.reference_attempt_id), ("final", r.final_attempt_id)):
            if attempt_id is not None and series.get(attempt_id):
                r.loss[label] = series[attempt_id]


def _add_explanations(db: Database, reports: list[MigrationReport], scrub: Scrub) -> None:
    """Each migration's attempts' current explanations (table `explanation`, newest per attempt);
    none on a study from before schema m017."""
    from storage.explanations import current_sentences

    by_id = {r.id: r for r in reports}
    rows = current_sentences(db)
    for migration_id, seq, sentence, by, commit in rows:
        if migration_id in by_id:
            by_id[migration_id].explanations.append((seq, scrub.text(sentence)))
            by_id[migration_id].explained.append({"seq": seq, "explained_by": by, "commit": commit,
                                                  "sentence": scrub.text(sentence)})


def _totals(reports: list[MigrationReport]) -> Totals:
    def union(name: str) -> Count:
        counts = [getattr(r, name) for r in reports]
        return Count(tuple(chain.from_iterable(c.ids for c in counts)), counts[0].table if counts else "attempt")

    migrations = Count(tuple(r.id for r in reports), "migration")
    with_time = [r for r in reports if r.time_ratio is not None]
    with_cost = [r for r in reports if r.cost_ratio is not None]
    with_both = [r for r in with_time if r.cost_ratio is not None]
    finals = [r for r in reports if r.final_attempt_id is not None]
    verified = union("verified")
    failed, failed_auto = union("failed"), union("failed_automated")
    attempts = union("attempts")
    intervention_minutes = sum(r.intervention_minutes for r in reports)
    review_seconds = sum(r.review_seconds for r in reports)
    return Totals(
        migrations=migrations,
        goal_met=Rate(_ids(reports, lambda r: r.goal_met, "migration"), migrations),
        goal_met_automated=Rate(_ids(reports, lambda r: r.goal_met_automated, "migration"), migrations),
        interventions=Count(tuple(i for r in reports for i in r.interventions.ids), "intervention"),
        attempts=attempts,
        verified=verified,
        failed=Rate(failed, verified),
        failed_automated=Rate(failed_auto, verified),
        silent=Rate(union("silent"), failed),
        silent_automated=Rate(union("silent_automated"), failed_auto),
        over_claims=Rate(union("over_claims"), union("judged_expectation")),
        over_claims_automated=Rate(union("over_claims_automated"), union("judged_expectation")),
        stated_expectation=Rate(union("stated_expectation"), attempts),
        time_ratios=_spread(with_time, "time_ratio"),
        cost_ratios=_spread(with_cost, "cost_ratio"),
        with_final_run=_ids(finals, table="migration"),
        without_final_run={why: _ids(reports, lambda r, w=why: r.final_why_none == w, "migration")
                           for why in WHY_NONE},
        faster=Rate(_ids(with_time, lambda r: r.faster, "migration"), _ids(with_time, table="migration")),
        cheaper=Rate(_ids(with_cost, lambda r: r.cheaper, "migration"), _ids(with_cost, table="migration")),
        faster_and_cheaper=Rate(_ids(with_both, lambda r: r.faster and r.cheaper, "migration"),
                                _ids(with_both, table="migration")),
        intervention_minutes=intervention_minutes,
        review_seconds=review_seconds,
        staff_hours=sum(r.staff_hours for r in reports),
        staff_cost=sum(r.staff_cost for r in reports),
        wall_hours=sum(r.wall_hours for r in reports),
        chip_hours=sum(r.chip_hours for r in reports),
        compute=Money(sum(r.compute.dollars for r in reports), union_money(reports, "compute")),
        llm=Money(sum(r.llm.dollars for r in reports), union_money(reports, "llm")),
        untimed=union("untimed"),
        unpriced=union("unpriced"),
        runs=union("runs"),
        reruns=union("reruns"),
        reruns_confirming=union("reruns_confirming"),
        reruns_changing=union("reruns_changing"),
        decided_by_reruns=union("decided_by_reruns"),
    )


def _spread(reports: list[MigrationReport], name: str) -> Spread:
    """The final runs' `name` ratios (reports that have one), with the median's interval."""
    values = tuple((r.final_attempt_id, getattr(r, name)) for r in reports if r.final_attempt_id is not None)
    return Spread(values, "attempt", bootstrap_median([v for _, v in values]))


def union_money(reports: list[MigrationReport], name: str) -> Count:
    counts = [getattr(r, name).sources for r in reports]
    return Count(tuple(chain.from_iterable(c.ids for c in counts)), counts[0].table if counts else "attempt")
