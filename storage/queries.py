"""Reads that return domain objects. Lists page by key (`after`), never by OFFSET.

The reads typed `Reader` take a plain sqlite3 connection too (storage.fastread): the CLI lists
without importing sqlite-utils.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Union

# The effort, verdict and assist types load with the reads that return them (issue 19); an
# attempt's records and the study's are created on first use (domain.models): the migration list
# reads none of them.
if TYPE_CHECKING:
    from sqlite_utils import Database

    from domain.assist import ClaimExtraction, ClaimReview, CostTotal, ExpectedLevel, LlmCall
    from domain.attempts import Attempt, AttemptSummary, Evidence, Failure
    from domain.effort import BudgetChange, Decision, EffortInputs, Intervention, ReviewSession, Standing
    from domain.study import Study
    from domain.verdicts import MetricPoint, Verdict, Verification
from domain.models import (
    Budgets,
    DecisionKind,
    FailureCause,
    Migration,
    MigrationSummary,
    Outcome,
)
from storage.converters import attempt_from_row, migration_from_row, point_value, study_from_row
from storage.counted import COUNTED_ROOT, NOT_REFERENCE, counted_levels, failure_run_of

Reader = Union["Database", sqlite3.Connection]
"""A study connection to read from: sqlite-utils' or the standard module's."""

EFFECTIVE_VERDICTS = """
effective AS NOT MATERIALIZED (
    SELECT v.attempt_id, v.level,
           COALESCE((SELECT o.outcome FROM verdict_override o WHERE o.verdict_id = v.id
                     ORDER BY o.id DESC LIMIT 1), v.outcome) AS outcome
    FROM verdict v WHERE v.superseded_by IS NULL
)"""
"""A human override, the latest one, replaces the automated outcome in every count. Only current
verdicts count: a re-verification supersedes the old ones, which stay in history."""

CURRENT_INTERVENTIONS = """
current_intervention AS (
    SELECT * FROM intervention i
    WHERE NOT EXISTS (SELECT 1 FROM intervention c WHERE c.corrects = i.id)
)"""
"""An intervention that a later record corrects no longer counts; the correction does."""

# The effective expected level (docs/assist.md, docs/report.md): the reviewer's latest claim review
# (a correction, or the acceptance of a model extraction, whose level it copies) if any, else the
# importer's rule-based level; a model extraction nobody accepted never counts. `expected_level_of`
# is its only definition: the verifier (through `effective_expected_level`), the screens and the
# reports read it here. The level and over-claim rules themselves live in domain/ladder.py;
# `over_claim_of` restates them in SQL for one attempt row (a correlated subquery: a screen
# reading one attempt reads only its rows) and `attempt_stats` for many at once (one grouped pass
# over the effective verdicts: study-wide counts).


def expected_level_of(a: str) -> str:
    """SQL: the effective expected level of the attempt row `a`."""
    return f"""(CASE WHEN EXISTS (SELECT 1 FROM claim_review c WHERE c.attempt_id = {a}.id)
        THEN (SELECT c.expected_level FROM claim_review c WHERE c.attempt_id = {a}.id ORDER BY c.id DESC LIMIT 1)
        ELSE {a}.expected_level END)"""


def expected_source_of(a: str) -> str:
    """SQL: where that level came from: `reviewer`, `model` (an accepted extraction), `rule`, NULL."""
    return f"""(CASE WHEN EXISTS (SELECT 1 FROM claim_review c WHERE c.attempt_id = {a}.id)
        THEN (SELECT CASE c.action WHEN 'accept' THEN 'model' ELSE 'reviewer' END FROM claim_review c
              WHERE c.attempt_id = {a}.id ORDER BY c.id DESC LIMIT 1)
        WHEN {a}.expected_level IS NOT NULL THEN 'rule' END)"""


def verified_of(a: str) -> str:
    """SQL: the attempt has current verdicts."""
    return f"EXISTS (SELECT 1 FROM verdict v WHERE v.attempt_id = {a}.id AND v.superseded_by IS NULL)"


PASS_MASK = "SUM(CASE WHEN e.outcome = 'pass' AND e.level BETWEEN 1 AND 5 THEN 1 << (e.level - 1) END)"
"""SQL aggregate over `effective e` rows: bit L-1 set when level L passes."""
FAIL_MASK = "SUM(CASE WHEN e.outcome = 'fail' AND e.level BETWEEN 1 AND 5 THEN 1 << (e.level - 1) END)"
"""SQL aggregate over `effective e` rows: bit L-1 set when level L fails."""


def over_claim_from(x: str, level: str, fails: str) -> str:
    """SQL: domain.ladder.over_claim for a verified attempt, from its expected level `x`, its level
    and its FAIL_MASK: 0 when it reached `x`, 1 when a level up to `x` fails, else NULL (unknown)."""
    return (f"CASE WHEN {x} IS NULL THEN NULL WHEN {level} >= {x} THEN 0"
            f" WHEN {fails} & ((1 << {x}) - 1) != 0 THEN 1 END")


def level_from_mask(mask: str) -> str:
    """SQL: the highest L whose levels 1 to L all pass, from a PASS_MASK value (0 when level 1 fails)."""
    return (f"CASE WHEN {mask} & 1 = 0 THEN 0 WHEN {mask} & 3 != 3 THEN 1 WHEN {mask} & 7 != 7 THEN 2"
            f" WHEN {mask} & 15 != 15 THEN 3 WHEN {mask} & 31 != 31 THEN 4 ELSE 5 END")


def level_of(a: str) -> str:
    """SQL (needs EFFECTIVE_VERDICTS): the level of the attempt row `a`, one correlated pass over its
    effective verdicts (for filters on a page of rows; `attempt_stats` counts a whole study)."""
    return (f"(SELECT {level_from_mask('m.mask')} FROM (SELECT COALESCE({PASS_MASK}, 0) AS mask"
            f" FROM effective e WHERE e.attempt_id = {a}.id) m)")


def over_claim_of(a: str) -> str:
    """SQL (needs EFFECTIVE_VERDICTS): 1 when the attempt's effective expected level is above its
    level, 0 when not, NULL when it is not verified or has no expected level."""
    # expected > level, i.e. not every level from 1 to the expected one passes (one range scan)
    return f"""(SELECT CASE WHEN q.x IS NULL OR NOT {verified_of(a)} THEN NULL
        ELSE (SELECT {over_claim_from("q.x", level_from_mask("COALESCE(m.mask, 0)"), "COALESCE(m.fails, 0)")}
              FROM (SELECT {PASS_MASK} AS mask, {FAIL_MASK} AS fails FROM effective e
                    WHERE e.attempt_id = {a}.id) m) END
        FROM (SELECT {expected_level_of(a)} AS x) q)"""


EFFECTIVE_EXPECTED = f"""
effective_expected AS (
    SELECT a.id AS attempt_id, {expected_level_of("a")} AS expected_level,
           {expected_source_of("a")} AS source
    FROM attempt a
)"""
"""A CTE with one row per attempt: (attempt_id, expected_level, source)."""


def attempt_stats(where: str | None = None) -> str:
    """SQL (needs EFFECTIVE_VERDICTS): CTEs ending in `attempt_stat`, one row per counted agent
    attempt `a` matching `where` (SQL over `a`; None: every one) with (id, migration_id,
    verified, level, failed, silent, over_claim).

    A re-run is not another attempt: its verdicts count for the attempt it re-ran, level by level
    (storage.counted: overrides first, then the latest run that passed or failed). `level` is
    the highest L whose levels 1 to L all pass (0 when level 1 does not), from a bit mask of the
    passing levels; `failed` when a counted outcome fails (an override counts as in the report),
    `silent` when it also raised no error (the silent flag of the run that failed the lowest
    level, else its exit 0); `over_claim` is `over_claim_of`'s, against the attempt's own
    expected level. One grouped pass over the verdicts: per-attempt correlated subqueries cost
    seconds on a study of 15,000 attempts (issue 19)."""
    own = "" if where is None else f"WHERE e.attempt_id IN (SELECT a.id FROM attempt a WHERE {where})"
    return f"""{counted_levels(where, automated=False)},
attempt_mask AS (
    SELECT a.id, a.migration_id, a.expected_level,
           COALESCE(r.attempt_id, g.attempt_id) IS NOT NULL AS verified,
           COALESCE(r.mask, g.mask, 0) AS mask, COALESCE(r.fails, g.fails, 0) AS fails,
           CASE WHEN r.attempt_id IS NOT NULL THEN r.fail_run ELSE a.id END AS fail_run
    FROM attempt a LEFT JOIN (
        SELECT e.attempt_id, {PASS_MASK} AS mask, {FAIL_MASK} AS fails
        FROM effective e {own}
        GROUP BY e.attempt_id) g ON g.attempt_id = a.id
    LEFT JOIN (
        SELECT e.attempt_id, {PASS_MASK} AS mask, {FAIL_MASK} AS fails,
               MIN(CASE WHEN e.outcome = 'fail' THEN e.level * {1 << 40} + e.run_id END) % {1 << 40} AS fail_run
        FROM counted_level e GROUP BY e.attempt_id) r ON r.attempt_id = a.id
    WHERE {COUNTED_ROOT} AND ({where or 1})
),
attempt_stat AS (
    SELECT s.id, s.migration_id, s.verified, s.level, s.failed,
           s.failed AND COALESCE((SELECT f.silent FROM failure f WHERE f.attempt_id = s.fail_run
                                  AND f.superseded_by IS NULL),
                                 (SELECT r.exit_code = 0 FROM attempt r WHERE r.id = s.fail_run)) AS silent,
           CASE WHEN NOT s.verified THEN NULL ELSE {over_claim_from("s.x", "s.level", "s.fails")} END AS over_claim
    FROM (SELECT a.id, a.migration_id, a.verified, a.fails, a.fail_run, a.fails != 0 AS failed,
                 {expected_level_of("a")} AS x, {level_from_mask("a.mask")} AS level
          FROM attempt_mask a) s
)"""


def hidden_of(a: str, r: str = ":r") -> str:
    """SQL true while reviewer `r` must not see attempt id `a`'s claim, expected level, verdicts,
    causes and others' judgements (docs/judgements.md): not a reference run (the yardstick, never
    judged), blind (the study's mode, or a blind assignment of it to them) and not yet judged by
    them. A re-run follows the attempt it re-ran (its verdicts count as that attempt's,
    storage.counted): hidden while that attempt is, shown once it is judged. The one rule."""
    return (f"EXISTS (SELECT 1 FROM attempt x WHERE x.id = COALESCE((SELECT y.rerun_of FROM attempt y"
            f" WHERE y.id = {a}), {a}) AND x.{NOT_REFERENCE}"
            f" AND (COALESCE((SELECT blind FROM blind_mode ORDER BY id DESC LIMIT 1), 0)"
            f" OR EXISTS (SELECT 1 FROM assignment s WHERE s.attempt_id = x.id AND s.reviewer = {r} AND s.blind))"
            f" AND NOT EXISTS (SELECT 1 FROM judgement j WHERE j.attempt_id = x.id AND j.reviewer = {r}))")


def migration_hidden_of(m: str, r: str = ":r") -> str:
    """SQL true while migration id `m` holds an attempt reviewer `r` is blind to (`hidden_of`):
    its verdict counts, notes and records would tell what the attempt screen hides."""
    return f"EXISTS (SELECT 1 FROM attempt h WHERE h.migration_id = {m} AND {hidden_of('h.id', r)})"


def hidden_attempts(db: Reader, reviewer: str, attempt_ids: list[int]) -> set[int]:
    """The attempts among these that `reviewer` is blind to (`hidden_of`); a plain read."""
    rows = db.execute(f"SELECT a.value FROM json_each(:ids) a WHERE {hidden_of('a.value')}",
                      {"ids": json.dumps(list(attempt_ids)), "r": reviewer})
    return {row[0] for row in rows}


def hidden_migrations(db: Reader, reviewer: str) -> set[int]:
    """The migrations holding an attempt `reviewer` is blind to (`hidden_of`): their verdict
    counts would tell what the attempt screen hides."""
    rows = db.execute(f"SELECT m.id FROM migration m WHERE {migration_hidden_of('m.id')}", {"r": reviewer})
    return {row[0] for row in rows}


def _rows(db: Reader, sql: str, params: list[Any] | dict[str, Any]) -> list[dict[str, Any]]:
    """Rows as dicts, a repeated column name suffixed `_2`, `_3` as sqlite-utils' `query` does."""
    cursor = db.execute(sql, params)
    names = [column[0] for column in cursor.description]
    keys: list[str] = []
    taken = set(names)
    for name in names:
        key, n = name, 2
        while key in keys or (key != name and key in taken):
            key, n = f"{name}_{n}", n + 1
        taken.add(key)
        keys.append(key)
    return [dict(zip(keys, row)) for row in cursor]


def get_study(db: Reader) -> Study | None:
    rows = _rows(db, "SELECT * FROM study WHERE id = 1", [])
    return study_from_row(rows[0]) if rows else None


def get_migration(db: Reader, slug: str) -> Migration | None:
    rows = _rows(db, "SELECT * FROM migration WHERE slug = ?", [slug])
    return migration_from_row(rows[0]) if rows else None


def count_migrations(db: Reader) -> int:
    return db.execute("SELECT count(*) FROM migration").fetchone()[0]


def migration_summaries(
    db: Reader, *, after: str | None = None, limit: int = 200
) -> list[MigrationSummary]:
    """Migrations ordered by slug, `limit` at a time after the slug `after`."""
    in_page = "a.migration_id IN (SELECT id FROM page)"
    sql = f"""
    WITH page AS (SELECT * FROM migration WHERE (:after IS NULL OR slug > :after)
                  ORDER BY slug LIMIT :limit),
    {EFFECTIVE_VERDICTS}, {attempt_stats(in_page)}, {CURRENT_INTERVENTIONS},
    by_attempts AS (
        SELECT migration_id, count(*) AS n_attempts, MAX(CASE WHEN verified THEN level END) AS highest,
               SUM(over_claim) AS n_over_claims
        FROM attempt_stat GROUP BY migration_id),
    by_failures AS (
        SELECT migration_id, SUM(failed) AS n_failed, SUM(silent) AS n_silent
        FROM attempt_stat GROUP BY migration_id),
    by_interventions AS (
        SELECT migration_id, count(*) AS n FROM current_intervention
        WHERE migration_id IN (SELECT id FROM page) GROUP BY migration_id),
    by_cost AS (
        SELECT a.migration_id, SUM(v.cost_dollars) AS dollars
        FROM verification v JOIN attempt a ON a.id = v.attempt_id
        WHERE {in_page} AND v.superseded_by IS NULL GROUP BY a.migration_id)
    SELECT m.*, COALESCE(s.n_attempts, 0) AS n_attempts, COALESCE(f.n_failed, 0) AS n_failed,
        COALESCE(f.n_silent, 0) AS n_silent, COALESCE(i.n, 0) AS n_interventions,
        s.highest AS highest_level, COALESCE(s.n_over_claims, 0) AS n_over_claims,
        c.dollars AS cost_dollars
    FROM page m
    LEFT JOIN by_attempts s ON s.migration_id = m.id
    LEFT JOIN by_failures f ON f.migration_id = m.id
    LEFT JOIN by_interventions i ON i.migration_id = m.id
    LEFT JOIN by_cost c ON c.migration_id = m.id
    ORDER BY m.slug
    """
    return [
        MigrationSummary(
            migration=migration_from_row(row),
            attempts=row["n_attempts"],
            failed=row["n_failed"],
            silent_failures=row["n_silent"],
            interventions=row["n_interventions"],
            highest_level=row["highest_level"],
            over_claims=row["n_over_claims"],
            cost_dollars=row["cost_dollars"],
        )
        for row in _rows(db, sql, {"after": after, "limit": limit})
    ]


def attempt_summaries(
    db: Reader, migration_id: int, *, after: int | None = None, limit: int = 200, folded: bool = True,
    through: int | None = None,
) -> list[AttemptSummary]:
    """A migration's attempts by sequence number, the reference runs first. `folded`: a re-run is
    a run of the attempt it re-ran, not a row of its own; an attempt with re-runs of its commit
    shows its counted ladder and over-claim (storage.counted), how many runs it has, and the
    failure of the run that decided its lowest failing level (none when no level fails), as the
    counts and the report take it. `through`: no seq past it (a filter reads its rows one by
    one: each reads its own re-runs, not those of every attempt after it)."""
    with_reruns = ("a.migration_id = :migration AND (:after IS NULL OR a.seq > :after)"
                   " AND (:through IS NULL OR a.seq <= :through)")
    sql = f"""
    WITH {EFFECTIVE_VERDICTS}, {CURRENT_INTERVENTIONS}, {counted_levels(with_reruns)}
    SELECT a.*,
        (SELECT json_group_object(e.level, e.outcome) FROM effective e
            WHERE e.attempt_id = a.id) AS ladder,
        (SELECT count(*) FROM counted_run r WHERE r.attempt_id = a.id) AS n_runs,
        (SELECT json_group_object(c.level, c.outcome) FROM counted_level c
            WHERE c.attempt_id = a.id) AS counted_ladder,
        {expected_level_of("a")} AS counted_expected,
        f.id AS failure_id, f.attempt_id AS failure_attempt, f.cause AS failure_cause,
        f.silent AS failure_silent, f.note AS failure_note, f.evidence AS failure_evidence,
        (SELECT count(*) FROM current_intervention i WHERE i.attempt_id = a.id)
            AS n_interventions,
        CASE WHEN a.source = 'reference' THEN NULL ELSE {over_claim_of("a")} END AS over_claim
    FROM attempt a LEFT JOIN failure f ON f.superseded_by IS NULL AND f.attempt_id = {failure_run_of("a")}
    WHERE {with_reruns} AND (NOT :folded OR a.rerun_of IS NULL)
    ORDER BY a.seq LIMIT :limit
    """
    from domain.attempts import AttemptSummary, Failure
    from domain.ladder import over_claim

    out = []
    params = {"migration": migration_id, "after": after, "limit": limit, "folded": folded, "through": through}
    for row in _rows(db, sql, params):
        runs = max(1, row["n_runs"] or 0)
        levels = json.loads((row["counted_ladder"] if runs > 1 else row["ladder"]) or "{}")
        claimed = row["over_claim"]
        if runs > 1:
            claimed = over_claim(row["counted_expected"], {int(k): v for k, v in levels.items()},
                                 verified=bool(levels))
        failure = None
        if row["failure_id"] is not None:
            failure = Failure(
                id=row["failure_id"],
                attempt_id=row["failure_attempt"],
                cause=FailureCause(row["failure_cause"]),
                silent=bool(row["failure_silent"]),
                note=row["failure_note"] or "",
                evidence=_evidence(row["failure_evidence"]),
            )
        out.append(
            AttemptSummary(
                attempt=attempt_from_row(row),
                ladder=tuple(
                    Outcome(levels[str(n)]) if str(n) in levels else None for n in range(1, 6)
                ),
                failure=failure,
                interventions=row["n_interventions"],
                over_claim=None if claimed is None else bool(claimed),
                runs=runs,
            )
        )
    return out


def next_seq(db: Reader, migration_id: int) -> int:
    """The sequence number of the migration's next attempt (imported, re-run or reference): one past
    its last, 1 for its first."""
    return db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM attempt WHERE migration_id = ?",
                      [migration_id]).fetchone()[0]


def metric_series(db: Database, attempt_id: int, name: str) -> list[MetricPoint]:
    from domain.verdicts import MetricPoint

    return [
        MetricPoint(name, step, point_value(value))
        for step, value in db.execute(
            "SELECT step, value FROM metric_point WHERE attempt_id = ? AND name = ? ORDER BY step",
            [attempt_id, name],
        ).fetchall()
    ]


def interventions(db: Database, migration_id: int) -> list[Intervention]:
    """Every intervention record, corrected ones included, oldest first: the full history."""
    from domain.effort import Intervention

    return [
        Intervention(
            id=row["id"],
            migration_id=row["migration_id"],
            kind=row["kind"],
            minutes=row["minutes"],
            note=row["note"] or "",
            reviewer=row["reviewer"],
            at=row["at"],
            attempt_id=row["attempt_id"],
            corrects=row["corrects"],
        )
        for row in _rows(
            db, "SELECT * FROM intervention WHERE migration_id = ? ORDER BY id", [migration_id]
        )
    ]


def iter_migration_summaries(db: Reader, page: int = 500) -> Iterator[MigrationSummary]:
    """Every migration, a page at a time."""
    after = None
    while batch := migration_summaries(db, after=after, limit=page):
        yield from batch
        after = batch[-1].migration.slug


def iter_attempt_summaries(db: Reader, migration_id: int, page: int = 500, *,
                           folded: bool = True) -> Iterator[AttemptSummary]:
    """Every attempt of a migration, a page at a time (`folded`: as `attempt_summaries`)."""
    after = None
    while batch := attempt_summaries(db, migration_id, after=after, limit=page, folded=folded):
        yield from batch
        after = batch[-1].attempt.seq


def _evidence(text: str | None) -> tuple[Evidence, ...]:
    from domain.attempts import Evidence

    return tuple(Evidence(e["kind"], e["ref"], e.get("text", "")) for e in json.loads(text or "[]"))


def verify_settings(db: Database, migration_id: int) -> dict[str, Any]:
    """A migration's verify overrides: the latest `verify_setting` record, else none."""
    row = db.execute(
        "SELECT settings FROM verify_setting WHERE migration_id = ? ORDER BY id DESC LIMIT 1", [migration_id]
    ).fetchone()
    return json.loads(row[0]) if row else {}


def extracted_runs(db: Database, migration_id: int, run_claim: str) -> list[tuple[int, int, int, str]]:
    """(attempt id, log id, seq, source) of the migration's runs whose series the workbench read
    from their logs itself: re-runs a job made and references it ran (exit code from the process,
    the claim it writes starting with `run_claim`); not imported attempts or references from
    files, whose series came with them."""
    return [(int(r[0]), int(r[1]), int(r[2]), str(r[3])) for r in db.execute(
        "SELECT id, log_id, seq, source FROM attempt WHERE migration_id = ? AND log_id IS NOT NULL AND"
        " ((source = 'rerun' AND id IN (SELECT result_attempt_id FROM job WHERE migration_id = ?))"
        " OR (source = 'reference' AND exit_code_source = 'process' AND substr(claim, 1, ?) = ?)) ORDER BY seq",
        [migration_id, migration_id, len(run_claim), run_claim]).fetchall()]


def reference_attempt_id(db: Database, migration_id: int) -> int | None:
    """The id of the migration's reference run (its latest `reference` attempt), if any; on the
    plain connection of a read-only command too."""
    row = db.execute("SELECT id FROM attempt WHERE migration_id = ? AND source = 'reference'"
                     " ORDER BY seq DESC LIMIT 1", [migration_id]).fetchone()
    return int(row[0]) if row else None


def probe_reports(db: Database, attempt_id: int) -> list[dict[str, Any]]:
    """The probe reports stored with an attempt (`probe_report`, a re-run's), one per process."""
    return [json.loads(r[0]) for r in db.execute(
        "SELECT data FROM probe_report WHERE attempt_id = ? ORDER BY id", [attempt_id]).fetchall()]


def traced(db: Database, attempt_ids: list[int]) -> dict[int, int]:
    """attempt id -> the highest probe version among the probe reports stored with it or with a
    re-run of it (version 2 holds the training trace; 0: a report without one); attempts with no
    report at all are left out."""
    rows = db.execute(
        "SELECT a.id, MAX(COALESCE(json_extract(p.data, '$.probe_version'), 0)) FROM attempt a"
        " JOIN probe_report p ON p.attempt_id = a.id OR p.attempt_id IN (SELECT r.id FROM attempt r WHERE r.rerun_of = a.id)"
        " WHERE a.id IN (SELECT value FROM json_each(?)) GROUP BY a.id", [json.dumps(attempt_ids)]).fetchall()
    return {int(aid): int(version) if isinstance(version, (int, float)) else 0 for aid, version in rows}


def _verification(row: dict[str, Any]) -> Verification:
    from domain.verdicts import Verification

    return Verification(
        id=row["id"],
        attempt_id=row["attempt_id"],
        verifier=row["verifier"],
        verifier_version=row["verifier_version"],
        inputs_hash=row["inputs_hash"],
        at=row["at"],
        highest_level=row["highest_level"],
        cause=FailureCause(row["cause"]) if row["cause"] else None,
        silent=bool(row["silent"]),
        over_claim=None if row["over_claim"] is None else bool(row["over_claim"]),
        reference_attempt_id=row["reference_attempt_id"],
        wall_seconds=row["wall_seconds"],
        cost_dollars=row["cost_dollars"],
        time_ratio=row["time_ratio"],
        cost_ratio=row["cost_ratio"],
        current=row["superseded_by"] is None,
    )


def current_verifier_versions(db: Database, verifier: str) -> set[str]:
    """The versions of `verifier` that made the study's current verdicts (those not superseded);
    on the plain read-only connection of a command that only reads, too."""
    return {str(r[0]) for r in db.execute(
        "SELECT DISTINCT verifier_version FROM verification WHERE superseded_by IS NULL AND verifier = ?",
        [verifier]).fetchall()}


def current_verification(db: Database, attempt_id: int) -> Verification | None:
    return current_verifications(db, [attempt_id]).get(attempt_id)


_VERIFICATION_COLUMNS = ("id, attempt_id, verifier, verifier_version, inputs_hash, at, highest_level, cause, silent,"
                         " over_claim, reference_attempt_id, wall_seconds, cost_dollars, time_ratio, cost_ratio,"
                         " superseded_by")
"""What `Verification` holds: not the hashed inputs and settings (about 2 KB of JSON a row)."""


def current_verifications(db: Database, attempt_ids: list[int]) -> dict[int, Verification]:
    """attempt id -> its current verification, for many attempts in one read."""
    rows = _rows(db, f"SELECT {_VERIFICATION_COLUMNS} FROM verification"
                 " WHERE attempt_id IN (SELECT value FROM json_each(?)) AND superseded_by IS NULL", [json.dumps(attempt_ids)])
    return {row["attempt_id"]: _verification(row) for row in rows}


def verifications(db: Database, attempt_id: int) -> list[Verification]:
    """Every verification of an attempt, oldest first: the history."""
    return [_verification(r) for r in _rows(
        db, f"SELECT {_VERIFICATION_COLUMNS} FROM verification WHERE attempt_id = ? ORDER BY id", [attempt_id]
    )]


def verdicts(db: Database, attempt_id: int, *, verification_id: int | None = None) -> list[Verdict]:
    """An attempt's current verdicts by level (or those of one verification), with overrides."""
    if verification_id is None:
        return current_verdicts(db, [attempt_id]).get(attempt_id, [])
    return _verdicts(db, _rows(db, "SELECT * FROM verdict WHERE verification_id = ? ORDER BY level", [verification_id]))


def current_verdicts(db: Database, attempt_ids: list[int], *, evidence: bool = True) -> dict[int, list[Verdict]]:
    """attempt id -> its current verdicts by level, with overrides, for many attempts in one read.
    Without `evidence`, their evidence is left empty: a table of outcomes (`workbench verify`)
    need not decode six JSON lists an attempt."""
    out: dict[int, list[Verdict]] = {}
    rows = _rows(db, "SELECT * FROM verdict WHERE attempt_id IN (SELECT value FROM json_each(?))"
                 " AND superseded_by IS NULL ORDER BY attempt_id, level", [json.dumps(attempt_ids)])
    for verdict in _verdicts(db, rows, evidence):
        out.setdefault(verdict.attempt_id, []).append(verdict)
    return out


def overrides_left_behind(db: Reader, since: str) -> list[dict[str, Any]]:
    """Overrides that stopped counting when a verification made at or after `since` superseded the
    verdict they judged: the verifier's outcome at that level changed, so the override was not
    carried onto the new verdict (storage.records.carry_overrides), and it differs from the new
    outcome (attempt_id, slug, seq, level, outcome, reviewer, was: the old automated outcome, now:
    the new)."""
    return _rows(db, """
        SELECT a.id AS attempt_id, m.slug, a.seq, old.level, o.outcome, o.reviewer, old.outcome AS was,
               new.outcome AS now
        FROM verdict_override o
        CROSS JOIN verdict old ON old.id = o.verdict_id AND old.superseded_by IS NOT NULL
        CROSS JOIN verification nv ON nv.id = old.superseded_by AND nv.at >= :since
        CROSS JOIN verdict new ON new.attempt_id = old.attempt_id AND new.level = old.level
                                AND new.superseded_by IS NULL  -- its current one, by idx_verdict_current
        JOIN attempt a ON a.id = old.attempt_id JOIN migration m ON m.id = a.migration_id
        WHERE o.id = (SELECT MAX(x.id) FROM verdict_override x WHERE x.verdict_id = old.id)
          AND new.outcome != old.outcome AND o.outcome != new.outcome
        ORDER BY m.slug, a.seq, old.level""", {"since": since})


def _verdicts(db: Database, rows: list[dict[str, Any]], evidence: bool = True) -> list[Verdict]:
    """Verdict rows as Verdicts, their overrides read in one query."""
    from domain.verdicts import Verdict, VerdictOverride

    overrides: dict[int, list[VerdictOverride]] = {}
    if rows:
        for o in _rows(db, "SELECT * FROM verdict_override WHERE verdict_id IN (SELECT value FROM json_each(?))"
                       " ORDER BY id", [json.dumps([row["id"] for row in rows])]):
            overrides.setdefault(o["verdict_id"], []).append(
                VerdictOverride(o["id"], o["verdict_id"], Outcome(o["outcome"]), o["justification"], o["reviewer"], o["at"]))
    return [Verdict(
        id=row["id"],
        attempt_id=row["attempt_id"],
        level=row["level"],
        outcome=Outcome(row["outcome"]),
        reason=row["reason"] or "",
        evidence=_evidence(row["evidence"]) if evidence else (),
        verifier=row["verifier"],
        verifier_version=row["verifier_version"],
        overrides=tuple(overrides.get(row["id"], ())),
        verification_id=row["verification_id"],
    ) for row in rows]


def current_failure(db: Database, attempt_id: int) -> Failure | None:
    return current_failures(db, [attempt_id]).get(attempt_id)


def current_failures(db: Database, attempt_ids: list[int]) -> dict[int, Failure]:
    """attempt id -> its current failure (none: absent), for many attempts in one read."""
    from domain.attempts import Failure

    rows = _rows(db, "SELECT * FROM failure WHERE attempt_id IN (SELECT value FROM json_each(?))"
                 " AND superseded_by IS NULL", [json.dumps(attempt_ids)])
    return {row["attempt_id"]: Failure(row["id"], row["attempt_id"], FailureCause(row["cause"]), bool(row["silent"]),
                                       row["note"] or "", _evidence(row["evidence"])) for row in rows}


def study_totals(db: Reader) -> dict[str, int]:
    """The study's counts as the paper reports them: agent attempts, failed ones, silent
    failures, over-claims and (current) interventions, over every migration."""
    sql = f"""
    WITH {EFFECTIVE_VERDICTS}, {CURRENT_INTERVENTIONS}, {attempt_stats()}
    SELECT (SELECT count(*) FROM migration) AS migrations, s.attempts, f.failed, f.silent,
           s.over_claims, (SELECT count(*) FROM current_intervention) AS interventions
    FROM (SELECT count(*) AS attempts, COALESCE(SUM(over_claim), 0) AS over_claims FROM attempt_stat) s,
         (SELECT COALESCE(SUM(failed), 0) AS failed, COALESCE(SUM(silent), 0) AS silent FROM attempt_stat) f
    """
    return dict(_rows(db, sql, [])[0])


def attempt_summary(db: Database, attempt_id: int) -> AttemptSummary | None:
    """One attempt's summary row, as `attempt_summaries` gives it."""
    row = db.execute("SELECT migration_id, seq FROM attempt WHERE id = ?", [attempt_id]).fetchone()
    if row is None:
        return None
    rows = attempt_summaries(db, row[0], after=row[1] - 1, limit=1, folded=False)
    return rows[0] if rows and rows[0].attempt.id == attempt_id else None


def attempt_names(db: Reader, *, limit: int = 100_000) -> list[tuple[str, int, int, str]]:
    """(migration slug, seq, attempt id, source) of every attempt, for the palette's jump."""
    return [tuple(r) for r in db.execute(
        "SELECT m.slug, a.seq, a.id, a.source FROM attempt a JOIN migration m ON m.id = a.migration_id"
        " ORDER BY m.slug, a.seq LIMIT ?", [limit]).fetchall()]


# --------------------------------------------------------------------------- human effort
# docs/effort.md: budgets (the latest budget_change wins over the bundle's), the figures the
# stopping rules read, and the human records per migration and per attempt.


def study_intervention_kinds(db: Database) -> dict[str, str]:
    """The study's own intervention kinds (from study.toml); the built-in ones are not included."""
    row = db.execute("SELECT intervention_kinds FROM study WHERE id = 1").fetchone()
    return json.loads(row[0]) if row and row[0] else {}


def _budget_change(row: dict[str, Any]) -> BudgetChange:
    from domain.effort import BudgetChange

    return BudgetChange(
        id=row["id"],
        migration_id=row["migration_id"],
        budgets=Budgets(row["compute_dollars"], row["staff_hours"], row["attempts"], row["calendar_days"]),
        acceptance_level=row["acceptance_level"],
        reason=row["reason"] or "",
        reviewer=row["reviewer"],
        at=row["at"],
    )


def budget_changes(db: Database, migration_id: int) -> list[BudgetChange]:
    """Every budget edit of a migration, oldest first."""
    return [_budget_change(r) for r in _rows(
        db, "SELECT * FROM budget_change WHERE migration_id = ? ORDER BY id", [migration_id])]


def effective_budgets(db: Database, migration: Migration) -> tuple[Budgets, int]:
    """The budgets and acceptance level in force: the latest edit, else the bundle's."""
    rows = _rows(db, "SELECT * FROM budget_change WHERE migration_id = ? ORDER BY id DESC LIMIT 1",
                 [migration.id])
    if rows:
        change = _budget_change(rows[0])
        return change.budgets, change.acceptance_level
    return migration.budgets, migration.acceptance_level


def migration_by_id(db: Database, migration_id: int) -> Migration | None:
    rows = _rows(db, "SELECT * FROM migration WHERE id = ?", [migration_id])
    return migration_from_row(rows[0]) if rows else None


def find_attempt(db: Database, slug: str, seq: int) -> tuple[Migration, Attempt]:
    """The migration `slug` and its attempt `seq`; a WorkbenchError naming what is missing."""
    from domain.errors import WorkbenchError

    migration = get_migration(db, slug)
    if migration is None:
        raise WorkbenchError(f"no migration {slug!r}")
    rows = _rows(db, "SELECT * FROM attempt WHERE migration_id = ? AND seq = ?", [migration.id, seq])
    if not rows:
        raise WorkbenchError(f"{slug}: no attempt #{seq}")
    return migration, attempt_from_row(rows[0])


def attempt_id_by_seq(db: Database, migration_id: int, seq: int) -> int | None:
    row = db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [migration_id, seq]).fetchone()
    return row[0] if row else None


def effort_inputs(db: Database, migration_id: int) -> EffortInputs:
    """Everything the stopping rules read for one migration (see domain.effort.standing)."""
    from domain.effort import EffortInputs, RunCost, estimate_cost

    migration = migration_by_id(db, migration_id)
    if migration is None:
        raise ValueError(f"no migration #{migration_id}")
    study = get_study(db)
    budgets, level = effective_budgets(db, migration)
    runs = []
    for row in _rows(db, f"""
        SELECT a.id, a.source, a.started_at, a.ended_at, a.intended_kind, a.intended_count,
               a.observed_kind, a.observed_count, v.cost_dollars
        FROM attempt a LEFT JOIN verification v ON v.attempt_id = a.id AND v.superseded_by IS NULL
        WHERE a.migration_id = ? AND a.{NOT_REFERENCE} ORDER BY a.seq""", [migration_id]):
        dollars = row["cost_dollars"]
        if dollars is None:
            dollars = estimate_cost(
                row["started_at"], row["ended_at"],
                row["observed_kind"] or row["intended_kind"] or migration.target.accelerator,
                row["observed_count"] or row["intended_count"] or migration.target.chips,
                study.prices if study else {},
            )
        runs.append(RunCost(row["id"], row["source"], dollars, row["started_at"]))
    sql = f"""
    WITH {EFFECTIVE_VERDICTS}, {CURRENT_INTERVENTIONS}, {attempt_stats("a.migration_id = :m")}
    SELECT
        (SELECT MAX(level) FROM attempt_stat WHERE verified) AS highest,
        (SELECT count(*) FROM attempt WHERE migration_id = :m AND source = 'agent') AS agent_attempts,
        (SELECT COALESCE(SUM(minutes), 0) FROM current_intervention WHERE migration_id = :m) AS minutes,
        (SELECT COALESCE(SUM(active_seconds), 0) FROM review_session WHERE migration_id = :m) AS seconds,
        (SELECT MIN(started_at) FROM attempt WHERE migration_id = :m AND started_at IS NOT NULL) AS first_attempt,
        (SELECT MIN(t) FROM (SELECT MIN(at) AS t FROM intervention WHERE migration_id = :m
                             UNION ALL SELECT MIN(started_at) FROM review_session WHERE migration_id = :m))
            AS first_record,
        (SELECT id FROM attempt WHERE migration_id = :m AND {NOT_REFERENCE}
            ORDER BY seq DESC LIMIT 1) AS latest_attempt,
        (SELECT kind FROM decision WHERE migration_id = :m ORDER BY id DESC LIMIT 1) AS latest_decision
    """
    row = _rows(db, sql, {"m": migration_id})[0]
    return EffortInputs(
        budgets=budgets,
        acceptance_level=level,
        staff_hourly_rate=study.staff_hourly_rate if study else 0.0,
        runs=tuple(runs),
        agent_attempts=row["agent_attempts"],
        intervention_minutes=row["minutes"],
        review_seconds=row["seconds"],
        highest_level=row["highest"],
        first_at=row["first_attempt"] or row["first_record"],
        latest_attempt_id=row["latest_attempt"],
        latest_decision=row["latest_decision"],
        status=migration.status.value,
    )


def migration_standing(db: Database, migration_id: int, now: Any = None) -> Standing:
    """Where the migration stands against its budgets now, and what the rules suggest."""
    from domain.effort import standing

    return standing(effort_inputs(db, migration_id), now)


def _intervention(row: dict[str, Any]) -> Intervention:
    from domain.effort import Intervention

    return Intervention(
        id=row["id"], migration_id=row["migration_id"], kind=row["kind"], minutes=row["minutes"],
        note=row["note"] or "", reviewer=row["reviewer"], at=row["at"], attempt_id=row["attempt_id"],
        corrects=row["corrects"],
    )


def attempt_interventions(db: Database, attempt_id: int) -> list[Intervention]:
    """Every intervention record about one attempt, corrections included, oldest first."""
    return [_intervention(r) for r in _rows(
        db, "SELECT * FROM intervention WHERE attempt_id = ? ORDER BY id", [attempt_id])]


def corrected_ids(db: Database, migration_id: int) -> dict[int, int]:
    """Intervention id to the id of the record that corrects it."""
    return {r[0]: r[1] for r in db.execute(
        "SELECT corrects, id FROM intervention WHERE migration_id = ? AND corrects IS NOT NULL",
        [migration_id]).fetchall()}


def decisions(db: Database, migration_id: int) -> list[Decision]:
    """A migration's decisions, oldest first."""
    from domain.effort import Decision

    return [
        Decision(
            id=r["id"], migration_id=r["migration_id"], kind=DecisionKind(r["kind"]),
            reason=r["reason"] or "", figures=json.loads(r["figures"] or "{}"), reviewer=r["reviewer"],
            at=r["at"], suggested=DecisionKind(r["suggested"]) if r["suggested"] else None,
            attempt_id=r["attempt_id"],
        )
        for r in _rows(db, "SELECT * FROM decision WHERE migration_id = ? ORDER BY id", [migration_id])
    ]


def review_sessions(db: Database, migration_id: int) -> list[ReviewSession]:
    from domain.effort import ReviewSession

    return [
        ReviewSession(r["id"], r["reviewer"], r["migration_id"], r["started_at"], r["active_seconds"],
                      r["ended_at"])
        for r in _rows(db, "SELECT * FROM review_session WHERE migration_id = ? ORDER BY id", [migration_id])
    ]


def review_seconds_by_reviewer(db: Database, migration_id: int) -> dict[str, float]:
    return {r[0]: r[1] for r in db.execute(
        "SELECT reviewer, SUM(active_seconds) FROM review_session WHERE migration_id = ?"
        " GROUP BY reviewer ORDER BY reviewer", [migration_id]).fetchall()}


# AI assist (docs/assist.md).


def effective_expected_level(db: Database, attempt_id: int) -> ExpectedLevel:
    """The expected level reports count for an attempt (`ExpectedLevel`)."""
    from domain.assist import ExpectedLevel

    row = db.execute(
        f"WITH {EFFECTIVE_EXPECTED} SELECT expected_level, source FROM effective_expected"
        " WHERE attempt_id = ?",
        [attempt_id],
    ).fetchone()
    return ExpectedLevel(None, None) if row is None else ExpectedLevel(row[0], row[1])


def _llm_call(row: dict[str, Any]) -> LlmCall:
    from domain.assist import LlmCall

    return LlmCall(
        id=row["id"], at=row["at"], purpose=row["purpose"], model=row["model"],
        input_hash=row["input_hash"], input_tokens=row["input_tokens"] or 0,
        output_tokens=row["output_tokens"] or 0, cache_read_tokens=row["cache_read_tokens"] or 0,
        cache_write_tokens=row["cache_write_tokens"] or 0, cost_usd=row["cost_usd"],
        response=json.loads(row["response"]) if row["response"] else None, error=row["error"],
        migration_id=row["migration_id"], attempt_id=row["attempt_id"],
    )


def cached_llm_call(db: Database, input_hash: str) -> LlmCall | None:
    """The latest answered call with this exact input, if any: asking again costs nothing."""
    rows = _rows(db, "SELECT * FROM llm_call WHERE input_hash = ? AND error IS NULL"
                     " AND response IS NOT NULL ORDER BY id DESC LIMIT 1", [input_hash])
    return _llm_call(rows[0]) if rows else None


def latest_llm_call(db: Database, attempt_id: int, purpose: str, *, answered: bool = True) -> LlmCall | None:
    sql = "SELECT * FROM llm_call WHERE attempt_id = ? AND purpose = ?"
    if answered:
        sql += " AND error IS NULL AND response IS NOT NULL"
    rows = _rows(db, sql + " ORDER BY id DESC LIMIT 1", [attempt_id, purpose])
    return _llm_call(rows[0]) if rows else None


def llm_calls(db: Database, *, migration_id: int | None = None, after: int | None = None,
              limit: int = 500) -> list[LlmCall]:
    """Recorded calls, oldest first, `limit` at a time after the id `after`."""
    return [_llm_call(r) for r in _rows(
        db,
        "SELECT * FROM llm_call WHERE (:m IS NULL OR migration_id = :m) AND (:after IS NULL OR id > :after)"
        " ORDER BY id LIMIT :limit",
        {"m": migration_id, "after": after, "limit": limit},
    )]


def llm_cost(db: Reader, *, migration_id: int | None = None) -> CostTotal:
    """Tokens and dollars of every recorded call (cache hits record none), for the report."""
    from domain.assist import CostTotal

    where = "WHERE (:m IS NULL OR migration_id = :m)"
    row = db.execute(
        "SELECT count(*), count(error), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
        " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
        " COALESCE(SUM(cost_usd), 0.0),"
        " SUM(CASE WHEN cost_usd IS NULL AND input_tokens + output_tokens > 0 THEN 1 ELSE 0 END)"
        f" FROM llm_call {where}",
        {"m": migration_id},
    ).fetchone()
    by_purpose = dict(db.execute(
        f"SELECT purpose, COALESCE(SUM(cost_usd), 0.0) FROM llm_call {where} GROUP BY purpose ORDER BY purpose",
        {"m": migration_id},
    ).fetchall())
    return CostTotal(calls=row[0], errors=row[1], input_tokens=row[2], output_tokens=row[3],
                     cache_read_tokens=row[4], cache_write_tokens=row[5], cost_usd=row[6],
                     unpriced_calls=row[7] or 0, by_purpose=by_purpose)


def claim_extractions(db: Database, attempt_id: int) -> list[ClaimExtraction]:
    """Every model extraction of an attempt's claim, oldest first."""
    from domain.assist import ClaimExtraction

    return [
        ClaimExtraction(id=r["id"], attempt_id=r["attempt_id"], llm_call_id=r["llm_call_id"], model=r["model"],
                        expected_level=r["expected_level"], success_claimed=bool(r["success_claimed"]),
                        sentence=r["sentence"], quote_found=bool(r["quote_found"]), at=r["at"])
        for r in _rows(db, "SELECT * FROM claim_extraction WHERE attempt_id = ? ORDER BY id", [attempt_id])
    ]


def claim_reviews(db: Database, attempt_id: int) -> list[ClaimReview]:
    """Every reviewer record on an attempt's claim, oldest first; the latest counts."""
    from domain.assist import ClaimReview

    return [
        ClaimReview(id=r["id"], attempt_id=r["attempt_id"], action=r["action"],
                    expected_level=r["expected_level"], reviewer=r["reviewer"], at=r["at"],
                    extraction_id=r["extraction_id"], note=r["note"] or "")
        for r in _rows(db, "SELECT * FROM claim_review WHERE attempt_id = ? ORDER BY id", [attempt_id])
    ]


def previous_agent_commit(db: Database, migration_id: int, seq: int) -> tuple[int, str] | None:
    """(seq, commit) of what attempt `seq` is compared with: for a re-run, the attempt it re-ran;
    else the last agent attempt before it (re-runs are not steps of the agent)."""
    row = db.execute(
        "SELECT r.seq, r.commit_sha FROM attempt a JOIN attempt r ON r.id = a.rerun_of"
        " WHERE a.migration_id = ? AND a.seq = ?", [migration_id, seq]).fetchone()
    if row is None:
        row = db.execute(
            "SELECT seq, commit_sha FROM attempt WHERE migration_id = ? AND seq < ?"
            " AND source NOT IN ('reference', 'rerun') ORDER BY seq DESC LIMIT 1",
            [migration_id, seq],
        ).fetchone()
    return None if row is None else (row[0], row[1])


def claims_to_extract(db: Database, migration_id: int | None = None) -> list[tuple[Migration, Attempt]]:
    """Agent attempts with a claim but no expected level, no extraction and no reviewer record."""
    rows = _rows(
        db,
        f"""SELECT a.* FROM attempt a JOIN migration m ON m.id = a.migration_id
           WHERE a.expected_level IS NULL AND TRIM(COALESCE(a.claim, '')) != ''
             AND a.{NOT_REFERENCE} AND (:m IS NULL OR a.migration_id = :m)
             AND NOT EXISTS (SELECT 1 FROM claim_extraction e WHERE e.attempt_id = a.id)
             AND NOT EXISTS (SELECT 1 FROM claim_review r WHERE r.attempt_id = a.id)
           ORDER BY m.slug, a.seq""",
        {"m": migration_id},
    )
    ids = sorted({row["migration_id"] for row in rows})
    migrations = {m.id: m for m in (migration_by_id(db, i) for i in ids) if m is not None}
    return [(migrations[row["migration_id"]], attempt_from_row(row)) for row in rows]
