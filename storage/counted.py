"""An agent attempt's runs: the attempt itself and its re-runs, counted as one (issue 38).

A re-run (source `rerun`, `rerun_of` naming the agent attempt it re-ran: a re-run of a re-run
names the original, schema m018) is another run of the same attempt, not another attempt. Every
count reads `counted_levels`: one row per agent attempt and level, whose outcome is the
attempt's current evidence over its runs (domain.ladder.counted_outcome states the rule in
Python; tests/test_runs.py checks both agree):

- a reviewer's override of that level on any of its runs, the latest one, wins;
- else the latest verified run (by seq) that passed or failed the level decides it;
- else it stays unknown (the latest run's).

Only re-runs of the attempt's own commit count, and none that `workbench explain` made: its runs
change one factor on purpose (1 device, the reference's libraries or device, another commit), so
what they show is the experiment's, not this attempt's verdict.
"""

from __future__ import annotations

NOT_REFERENCE = "source != 'reference'"
"""SQL on an attempt row (unqualified): not a reference run. Every count of agent attempts says so."""

COUNTED_ROOT = f"a.{NOT_REFERENCE} AND +a.rerun_of IS NULL"
"""SQL on attempt row `a`: a counted attempt, i.e. not a reference run and not a re-run of one. (The
unary `+` keeps the planner off idx_attempt_rerun_of for it: nearly every row matches, and a
walk of that index reads the table in index order, twice as slow as a scan.)"""

COUNTED_RERUN = (f"r.rerun_of = a.id AND r.commit_sha = a.commit_sha AND r.{NOT_REFERENCE} AND NOT EXISTS "
                 "(SELECT 1 FROM job j WHERE j.result_attempt_id = r.id AND json_extract(j.options, '$.explain') IS NOT NULL)")
"""SQL joining re-run `r` to its counted attempt `a`: a run of the attempt's own commit, not one of
explain's (its jobs carry `options.explain`)."""

_KEY = 1 << 40
"""Orders a level's candidates: overrides (by id) above definite outcomes (by the run's seq)
above unknown ones; seq and override ids stay far below it."""


def counted_levels(where: str | None = None, *, automated: bool = True) -> str:
    """SQL: CTEs ending in `counted_level`: one row per level with a current verdict on any run of
    each counted agent attempt `a` that has re-runs of its commit and matches `where` (SQL over
    `a`; None: every one): (attempt_id, level, outcome, run_id, automated, automated_run_id).
    `outcome` follows the rule above (overrides included); `automated` the same rule without
    overrides (NULL when `automated` is False: the counts need only the effective one); `run_id`
    is the run that decided it. Before it: `counted_run` (attempt_id, run_id, seq), those
    attempts' runs, each itself first. An attempt without re-runs counts its own verdicts: the
    callers read those as before (one grouped pass, issue 19), this only the few re-run ones."""
    # from the few re-runs to their attempts (idx_attempt_rerun_of), not from every attempt
    scope = (f"a.id IN (SELECT q.rerun_of FROM attempt q WHERE q.rerun_of > 0 AND q.{NOT_REFERENCE})"
             f" AND ({COUNTED_ROOT}) AND ({where or 1})")
    last = """counted_level AS (
    SELECT e.attempt_id, e.level, e.outcome, e.run_id, u.automated, u.automated_run_id
    FROM counted_effective e JOIN counted_automated u ON u.attempt_id = e.attempt_id AND u.level = e.level
)""" if automated else """counted_level AS (
    SELECT attempt_id, level, outcome, run_id, NULL AS automated, NULL AS automated_run_id FROM counted_effective
)"""
    return f"""
counted_run AS (
    SELECT a.id AS attempt_id, a.id AS run_id, a.seq FROM attempt a WHERE {scope}
    UNION ALL
    SELECT a.id, r.id, r.seq FROM attempt a
    JOIN attempt r ON {COUNTED_RERUN}
    WHERE {scope}
),
run_level AS (
    SELECT c.attempt_id, c.run_id, c.seq, v.level, v.outcome AS automated, o.id AS override_id,
           COALESCE(o.outcome, v.outcome) AS outcome
    FROM counted_run c JOIN verdict v ON v.attempt_id = c.run_id AND v.superseded_by IS NULL
    LEFT JOIN verdict_override o ON o.id = (SELECT MAX(x.id) FROM verdict_override x WHERE x.verdict_id = v.id)
),
counted_effective AS (
    SELECT attempt_id, level, outcome, run_id,
           MAX(CASE WHEN override_id IS NOT NULL THEN {2 * _KEY} + override_id
                    WHEN outcome IN ('pass', 'fail') THEN {_KEY} + seq ELSE seq END) AS k
    FROM run_level GROUP BY attempt_id, level
),
counted_automated AS (
    SELECT attempt_id, level, automated, run_id AS automated_run_id,
           MAX(CASE WHEN automated IN ('pass', 'fail') THEN {_KEY} + seq ELSE seq END) AS k
    FROM run_level GROUP BY attempt_id, level
),
{last}"""


def failure_run_of(a: str) -> str:
    """SQL (needs `counted_levels`' CTEs): the run whose failure the list row of attempt row `a`
    shows, so the list, its filters and the counts name the same one: for an attempt with re-runs,
    the run that decided its lowest failing level (NULL when no level fails); else its own."""
    return (f"CASE WHEN EXISTS (SELECT 1 FROM counted_run r WHERE r.attempt_id = {a}.id)"
            f" THEN (SELECT c.run_id FROM counted_level c WHERE c.attempt_id = {a}.id AND c.outcome = 'fail'"
            f" ORDER BY c.level LIMIT 1) ELSE {a}.id END")
