"""Reads for workbench/report (the chosen migrations, their attempts, overrides, human records,
model calls and series): the report holds no SQL of its own. The counted ladders, re-runs
folded into the attempts they re-ran, are storage.runs.counted_ladders."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from domain.models import Migration, Outcome
from storage.converters import migration_from_row, point_value
from storage.queries import _rows, expected_level_of, expected_source_of
from storage.sqlite import Database


def report_migrations(db: Database) -> list[Migration]:
    """Every migration of the study, by slug."""
    return [migration_from_row(r) for r in db.query("SELECT * FROM migration ORDER BY slug")]


# --------------------------------------------------------------------------- report reads
# Raw rows for workbench/report: one query per table over the chosen migrations, never counts;
# the report counts them itself (docs/report.md defines every count).

_IN_MIGRATIONS = "IN (SELECT value FROM json_each(:migrations))"


_OUTCOME_CODES = {outcome.value: code for code, outcome in enumerate(Outcome, start=1)}
"""Two bits per level in an attempt's verdict code (storage.schema.VERDICT_CODE): 0 no verdict, else
the outcome."""


@functools.cache
def ladder_of(code: int | None) -> tuple[str | None, ...]:
    """The automated outcomes of levels 1 to 5 (None: no current verdict) from a verdict code."""
    names = {code: name for name, code in _OUTCOME_CODES.items()}
    return tuple(names.get(((code or 0) >> (2 * (level - 1))) & 3) for level in range(1, 6))


ATTEMPT_COLUMNS = (
    "id", "migration_id", "seq", "source", "argv", "cwd", "env", "status", "exit_code", "started_at", "ended_at",
    "expected_level", "expected_source", "claim", "intended_kind", "intended_count", "observed_kind",
    "observed_count", "rerun_of", "verification_id", "wall_seconds", "cost_dollars", "time_ratio", "cost_ratio",
    "failure_id", "failure_cause", "failure_silent", "failure_note", "verdict_code", "last_step", "goal_value",
    "members", "member_seqs",
)
"""The columns of `report_attempt_rows`' and `report_attempt_groups`' tuples, in order: `members` the
ids of the attempts a group's row stands for and `member_seqs` their seqs, in the same order (JSON
arrays; NULL in a row of one attempt)."""

IN_FIXED_UNITS = "CAST({} * 1048576 + 0.5 AS INTEGER)"
"""SQL: a value in units of 2**-20, as workbench.report.build.fixed makes it: summed exactly."""

LAST_STEP = "(SELECT MAX(l.step) FROM metric_last l WHERE l.attempt_id = {a}.id)"
"""SQL: the highest step of any of the attempt `a`'s metric series (schema m021's `metric_last`)."""
GOAL_JOIN = "LEFT JOIN metric_last g ON g.attempt_id = a.id AND g.name = m.goal_metric"
"""SQL: `g.value` the attempt `a`'s value of its migration `m`'s goal metric at that series' last
step (a join: a correlated subquery per attempt was 0.07 s more at 150,000 attempts)."""


_ALONE = ("a.source = 'reference' OR a.rerun_of IS NOT NULL OR v.wall_seconds IS NULL OR v.cost_dollars IS NULL"
          " OR a.id IN (SELECT attempt_id FROM claim_review) OR a.id IN (SELECT value FROM json_each(:singles))")
"""SQL: the attempt `a` (its current verification `v`) stands alone in `report_attempt_groups`: a
reference, a re-run, a run without the verifier's wall time and cost (priced from its own times), one
whose expected level a reviewer set (`expected_level_of`: a group reads the attempt's own), or one of
the report's `singles`."""


def report_attempt_rows(db: Database, migration_ids: list[int], *, texts: bool = True,
                        only: list[int] | None = None) -> list[tuple[Any, ...]]:
    """Every attempt of the migrations (references too), with its current verification and
    failure (NULL when it has none), by migration and seq: tuples of `ATTEMPT_COLUMNS` (a dict per
    row was ~0.3 s of CPU at 150,000 attempts). `expected_level` is the effective one
    (`expected_level_of`), `expected_source` where it came from; `verdict_code` its stored verdict
    code (storage.schema.VERDICT_CODE, kept by m019's triggers: `ladder_of` gives the automated
    outcomes of its current verdicts, levels 1 to 5; overrides are `report_override_rows`);
    `last_step` the highest step of any of its metric series; `goal_value` its value of the
    migration's goal metric at that series' last step (the value the verifier's level 4 judges).
    `started_at` and `ended_at` are read only where the report prices the run from them: a
    reference run, or a run without the verifier's wall time and cost (else NULL: two strings
    per attempt, ~0.1 s at 150,000 attempts).

    One row per attempt, every part an indexed lookup (the last step and goal value: `metric_last`):
    a row per verdict and a grouped pass over every metric point cost most of a report on 15,000
    attempts (issue 19). `texts` False reads NULL for argv, cwd, env, claim, failure_note,
    expected_source and failure_cause, and '' for status: what only a report's attempt rows show (a
    report that shows none of them: reading them was ~0.3 s of CPU at 150,000 attempts). With
    `only`, only the attempts of those ids."""
    argv, claim, note = ("a.argv, a.cwd, a.env", "a.claim", "f.note") if texts else ("NULL AS argv, NULL AS cwd,"
                                                                                    " NULL AS env", "NULL", "NULL")
    status, source, cause = (("a.status", expected_source_of("a"), "f.cause") if texts else ("''", "NULL", "NULL"))
    timed = "a.source = 'reference' OR v.wall_seconds IS NULL OR v.cost_dollars IS NULL"  # v.id NULL: both are
    sql = f"""
    SELECT a.id, a.migration_id, a.seq, a.source, {argv}, {status} AS status, a.exit_code,
           CASE WHEN {timed} THEN a.started_at END, CASE WHEN {timed} THEN a.ended_at END,
           {expected_level_of("a")} AS expected_level,
           {source} AS expected_source, {claim} AS claim,
           a.intended_kind, a.intended_count, a.observed_kind, a.observed_count, a.rerun_of,
           v.id AS verification_id, v.wall_seconds, v.cost_dollars, v.time_ratio, v.cost_ratio,
           f.id AS failure_id, {cause} AS failure_cause, f.silent AS failure_silent,
           {note} AS failure_note,
           a.verdict_code, {LAST_STEP.format(a="a")} AS last_step, g.value AS goal_value,
           NULL AS members, NULL AS member_seqs
    FROM attempt a
    JOIN migration m ON m.id = a.migration_id {GOAL_JOIN}
    LEFT JOIN verification v ON v.attempt_id = a.id AND v.superseded_by IS NULL
    LEFT JOIN failure f ON f.attempt_id = a.id AND f.superseded_by IS NULL
    WHERE a.migration_id {_IN_MIGRATIONS} {"" if only is None else "AND a.id IN (SELECT value FROM json_each(:only))"}
    ORDER BY a.migration_id, a.seq
    """
    return db.execute(sql, {"migrations": json.dumps(migration_ids), "only": json.dumps(only)}).fetchall()


def report_attempt_groups(db: Database, migration_ids: list[int], singles: list[int], *,
                          seqs: bool) -> list[tuple[Any, ...]]:
    """`report_attempt_rows` without texts for a report that shows no attempt's row (md, latex, html),
    a row for each group of a migration's attempts that every count reads alike, made in one pass of
    SQLite's where a tuple per attempt was most of such a report (issue 39: 150,000 attempts made
    ~17,000 groups). A group's attempts share source, verdict code, expected level, the silent flag
    of their failure or having none (`attempt.own_failure_silent`), exit code, the intended kind and chip
    count and the observed chip count, and each has a current verification with its wall time and
    cost: idx_attempt_report's columns in its order (schema m022), so SQLite groups them as it reads
    the index, with no sort. Its row stands for them: `members` their ids (with `seqs`,
    `member_seqs` theirs), `id` and `seq` the earliest's, `wall_seconds` and `cost_dollars` their
    sums in units of 2**-20 (`IN_FIXED_UNITS`: exact in any order), `goal_value` the best of their
    values in the goal's direction (`report_goal_first` says whose), `source`, `exit_code`, the
    verification id one of theirs, and what one run alone says (ratios, last step, times, its
    failure's id) NULL. An attempt that stands alone (`_ALONE`: with `singles`, the report's attempts
    with re-runs, overrides or a decision naming them) is its own row of `report_attempt_rows`. Rows
    by migration and earliest seq, so a reference run (seq 0) comes first."""
    best = "MAX(CASE WHEN m.goal_direction = 'min' THEN -g.value ELSE g.value END)"  # one aggregate, twice
    columns = {
        "id": "MIN((a.seq << 32) | a.id) & 4294967295",  # the earliest attempt's (ids and seqs under 2**32)
        "migration_id": "a.migration_id", "seq": "MIN(a.seq)", "source": "a.source", "argv": "NULL",
        "cwd": "NULL", "env": "NULL", "status": "''", "exit_code": "a.exit_code", "started_at": "NULL",
        "ended_at": "NULL", "expected_level": "a.expected_level",
        "expected_source": "NULL", "claim": "NULL",
        "intended_kind": "a.intended_kind", "intended_count": "a.intended_count", "observed_kind": "NULL",
        "observed_count": "a.observed_count", "rerun_of": "NULL", "verification_id": "v.id",
        "wall_seconds": f"SUM({IN_FIXED_UNITS.format('v.wall_seconds')})",
        "cost_dollars": f"SUM({IN_FIXED_UNITS.format('v.cost_dollars')})", "time_ratio": "NULL",
        "cost_ratio": "NULL", "failure_id": "NULL", "failure_cause": "NULL", "failure_silent": "a.own_failure_silent",
        "failure_note": "NULL", "verdict_code": "a.verdict_code", "last_step": "NULL",
        "goal_value": f"CASE WHEN m.goal_direction = 'min' THEN -{best} ELSE {best} END",
        "members": "json_group_array(a.id)",  # in one order with member_seqs: one pass
        "member_seqs": "json_group_array(a.seq)" if seqs else "NULL",
    }
    if tuple(columns) != ATTEMPT_COLUMNS:
        raise AssertionError("report_attempt_groups' columns are not ATTEMPT_COLUMNS")
    params = {"migrations": json.dumps(migration_ids), "singles": json.dumps(singles)}
    # INDEXED BY: the planner prefers the (migration, seq) index, and then sorts every attempt to group them
    joins = """FROM attempt a INDEXED BY idx_attempt_report JOIN migration m ON m.id = a.migration_id
    LEFT JOIN verification v ON v.attempt_id = a.id AND v.superseded_by IS NULL"""
    groups = db.execute(f"""
    SELECT {", ".join(columns.values())} {joins} {GOAL_JOIN}
    WHERE a.migration_id {_IN_MIGRATIONS} AND NOT ({_ALONE})
    GROUP BY a.migration_id, a.source, a.verdict_code, a.expected_level, a.own_failure_silent, a.exit_code,
             a.intended_kind, a.intended_count, a.observed_count""", params).fetchall()
    alone = [row[0] for row in db.execute(f"SELECT a.id {joins} WHERE a.migration_id {_IN_MIGRATIONS} AND ({_ALONE})",
                                          params)]  # each its own group: read as it is
    return sorted(groups + report_attempt_rows(db, migration_ids, texts=False, only=alone),
                  key=itemgetter(ATTEMPT_COLUMNS.index("migration_id"), ATTEMPT_COLUMNS.index("seq")))


def report_goal_first(db: Database, migration_id: int, attempt_ids: Sequence[int], value: float) -> tuple[int, int]:
    """(id, seq) of the earliest of the migration's attempts among `attempt_ids` (members of groups of
    `report_attempt_groups`) whose goal value is `value`: its attempts in seq order by
    idx_attempt_report, up to the first (a wide attempt row read per id was ~4 us of it)."""
    row = db.execute(f"""
        SELECT a.id, a.seq FROM attempt a JOIN migration m ON m.id = a.migration_id {GOAL_JOIN}
        WHERE a.migration_id = :migration AND a.id IN (SELECT value FROM json_each(:ids)) AND g.value = :value
        ORDER BY a.seq LIMIT 1""", {"migration": migration_id, "ids": json.dumps(list(attempt_ids)),
                                    "value": value}).fetchone()
    if row is None:
        raise LookupError(f"no attempt among {len(attempt_ids)} has the goal value {value!r}")
    return row[0], row[1]


def report_override_rows(db: Database, migration_ids: list[int]) -> list[dict[str, Any]]:
    """Every override a reviewer made on the migrations' attempts, oldest first, once each: a
    re-verification's copy (storage.records.carry_overrides) stands for the act it carries, an act
    left behind on a superseded verdict (the verifier's outcome changed under it) is read too.
    `current_id` is the act's override on a current verdict (itself or its copy; None: left
    behind), `verdict_id`, `level` and `automated` that verdict's (else the superseded one's).
    Read from the overrides (CROSS JOIN keeps that order): a few hundred human records, where the
    planner chose to go through every verdict of every attempt (0.2 s at 150,000 attempts)."""
    sql = f"""
    SELECT o.id, cur.id AS current_id, v.id AS verdict_id, o.outcome, o.justification, o.reviewer, o.at,
           v.attempt_id, v.level, v.outcome AS automated, a.migration_id, a.seq
    FROM verdict_override o
    LEFT JOIN verdict_override cur ON cur.id = (
        SELECT c.id FROM verdict_override c CROSS JOIN verdict cv ON cv.id = c.verdict_id
        WHERE (c.id = o.id OR c.carried_from = o.id) AND cv.superseded_by IS NULL)
    CROSS JOIN verdict v ON v.id = COALESCE(cur.verdict_id, o.verdict_id)
    CROSS JOIN attempt a ON a.id = v.attempt_id
    WHERE o.carried_from IS NULL AND a.migration_id {_IN_MIGRATIONS}
    ORDER BY o.id
    """
    return _rows(db, sql, {"migrations": json.dumps(migration_ids)})


def report_human_rows(db: Database, migration_ids: list[int]) -> dict[str, list[dict[str, Any]]]:
    """The migrations' interventions (corrected ones too, with `corrected_by`), decisions,
    review sessions and budget changes, oldest first."""
    params = {"migrations": json.dumps(migration_ids)}
    return {
        "intervention": _rows(db, f"""
            SELECT i.*, (SELECT MIN(c.id) FROM intervention c WHERE c.corrects = i.id) AS corrected_by
            FROM intervention i WHERE i.migration_id {_IN_MIGRATIONS} ORDER BY i.id""", params),
        "decision": _rows(db, f"SELECT * FROM decision WHERE migration_id {_IN_MIGRATIONS} ORDER BY id",
                          params),
        "review_session": _rows(db, f"SELECT * FROM review_session WHERE migration_id {_IN_MIGRATIONS}"
                                    " ORDER BY id", params),
        "budget_change": _rows(db, f"SELECT * FROM budget_change WHERE migration_id {_IN_MIGRATIONS}"
                                   " ORDER BY id", params),
    }


def report_llm_rows(db: Database, migration_ids: list[int]) -> list[dict[str, Any]] | None:
    """Model calls (`llm_call`: id, migration_id, cost_usd) of the migrations; None when the
    database has no such table."""
    if "llm_call" not in db.table_names():
        return None
    return _rows(db, f"SELECT id, migration_id, cost_usd FROM llm_call WHERE migration_id {_IN_MIGRATIONS}"
                     " ORDER BY id", {"migrations": json.dumps(migration_ids)})


def report_series(db: Database, attempt_ids: list[int], name: str) -> dict[int, list[tuple[int, float]]]:
    """One metric's series for each of the attempts: attempt id -> [(step, value)] by step."""
    out: dict[int, list[tuple[int, float]]] = {}
    for attempt_id, step, value in db.execute(
        "SELECT attempt_id, step, value FROM metric_point WHERE name = ?"
        " AND attempt_id IN (SELECT value FROM json_each(?)) ORDER BY attempt_id, step",
        [name, json.dumps(attempt_ids)],
    ).fetchall():
        out.setdefault(attempt_id, []).append((step, point_value(value)))
    return out
