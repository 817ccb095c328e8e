"""Reads of an agent attempt's runs (storage.counted says what counts): the counted ladders the
report reads, an attempt's runs for its screen, how many runs each attempt has."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from domain.kinds import AttemptSource, AttemptStatus, Outcome
from storage.counted import COUNTED_RERUN, COUNTED_ROOT, counted_levels
from storage.queries import Reader, _rows

if TYPE_CHECKING:
    from domain.attempts import Run


def counted_ladders(db: Reader, migration_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Counted attempt id, for those with re-runs of their commit (the others count their own
    verdicts) -> {"effective": outcomes of levels 1-5, "automated": the same without
    overrides (None: no verdict on any run), "decided": ((level, re-run id), ...) of the effective
    outcomes a re-run gave where the attempt's own run says otherwise (or nothing), "runs": how
    many runs it has}, for the migrations' attempts."""
    return _counted_ladders(db, "a.migration_id IN (SELECT value FROM json_each(:scope))", json.dumps(list(migration_ids)))


def decided_by_other_runs(db: Reader, run_id: int) -> tuple[int | None, tuple[tuple[int, Outcome, int], ...]]:
    """(seq of the agent attempt that run `run_id` is counted with, None when it is that attempt;
    (level, counted outcome, seq of the run that gave it) for each level of that attempt's counted
    ladder that another run decided where `run_id`'s own verdicts say otherwise or nothing): what
    a run's screen adds to its own verdicts, so an attempt's reads as its row and the counts do and
    a re-run's says what its attempt counts. Nothing for a reference run, an attempt without
    counted re-runs, or a re-run no count reads (another commit, `workbench explain`'s)."""
    root = root_of(db, run_id)
    sql = f"""WITH {counted_levels("a.id = :root", automated=False)}
    SELECT 'level', level, outcome, run_id FROM counted_level
    UNION ALL SELECT 'own', level, outcome, NULL FROM run_level WHERE run_id = :run
    UNION ALL SELECT 'run', seq, NULL, run_id FROM counted_run"""
    counted, own, seqs = [], {}, {}
    for tag, level, outcome, by in db.execute(sql, {"root": root, "run": run_id}):
        if tag == "level":
            counted.append((level, outcome, by))
        elif tag == "own":
            own[level] = outcome
        else:
            seqs[by] = level
    if run_id not in seqs:
        return None, ()
    decided = tuple((level, Outcome(outcome), int(seqs[by])) for level, outcome, by in sorted(counted)
                    if 1 <= level <= 5 and by != run_id and outcome != own.get(level))
    return (None if root == run_id else int(seqs[root])), decided


def _counted_ladders(db: Reader, where: str, scope: Any) -> dict[int, dict[str, Any]]:
    """`counted_ladders` of the counted attempts `a` meeting `where` (SQL binding `:scope`)."""
    # flat rows, tagged: correlated reads of the grouped CTEs would scan them once per attempt
    sql = f"""WITH {counted_levels(where)}
    SELECT 'level', attempt_id, level, outcome, run_id, automated FROM counted_level
    UNION ALL SELECT 'own', attempt_id, level, outcome, run_id, NULL FROM run_level WHERE run_id = attempt_id
    UNION ALL SELECT 'runs', attempt_id, count(*), NULL, NULL, NULL FROM counted_run GROUP BY attempt_id"""
    levels: dict[int, list[tuple[int, str, int, str]]] = {}
    own: dict[tuple[int, int], str] = {}
    counts: dict[int, int] = {}
    for tag, attempt_id, level, outcome, run_id, auto in db.execute(sql, {"scope": scope}):
        if tag == "level":
            levels.setdefault(attempt_id, []).append((level, outcome, run_id, auto))
        elif tag == "own":
            own[(attempt_id, level)] = outcome
        else:
            counts[attempt_id] = level
    out: dict[int, dict[str, Any]] = {}
    for attempt_id, runs in counts.items():
        effective: list[str | None] = [None] * 5
        automated: list[str | None] = [None] * 5
        decided = []
        for level, outcome, run_id, auto in sorted(levels.get(attempt_id, [])):
            if 1 <= level <= 5:
                effective[level - 1], automated[level - 1] = outcome, auto
                if run_id != attempt_id and outcome != own.get((attempt_id, level)):
                    decided.append((level, run_id))
        out[attempt_id] = {"effective": tuple(effective), "automated": tuple(automated),
                           "decided": tuple(decided), "runs": runs}
    return out


def rerun_of_seqs(db: Reader, run_ids: Sequence[int]) -> dict[int, int]:
    """Re-run id -> the seq of the attempt it re-ran, for the re-runs among `run_ids` (`workbench
    verify` lists them as runs of their attempts)."""
    rows = db.execute("SELECT r.id, a.seq FROM attempt r JOIN attempt a ON a.id = r.rerun_of"
                      " WHERE r.id IN (SELECT value FROM json_each(?))", [json.dumps(list(run_ids))])
    return {int(r[0]): int(r[1]) for r in rows}


def root_of(db: Reader, attempt_id: int) -> int:
    """The counted attempt that `attempt_id` is a run of: itself, or the agent attempt it re-ran
    (following a chain stored before m018 flattened them)."""
    seen = set()
    while attempt_id not in seen:
        seen.add(attempt_id)
        row = db.execute("SELECT rerun_of FROM attempt WHERE id = ?", [attempt_id]).fetchone()
        if row is None or row[0] is None:
            break
        attempt_id = row[0]
    return attempt_id


def attempt_runs(db: Reader, attempt_id: int) -> list[Run]:
    """The runs of the counted attempt that `attempt_id` is a run of, oldest first: itself, then
    its re-runs (of any commit; `counted` False for one at another commit or made by explain, which
    no count reads), each with its own effective outcomes."""
    from domain.attempts import Run

    root = root_of(db, attempt_id)
    sql = f"""
    SELECT r.id, r.seq, r.source, r.status, r.started_at, r.commit_sha,
           r.id = :root OR EXISTS (SELECT 1 FROM attempt a WHERE a.id = :root AND {COUNTED_RERUN}) AS counted,
           (SELECT json_group_object(v.level, COALESCE((SELECT o.outcome FROM verdict_override o
                WHERE o.verdict_id = v.id ORDER BY o.id DESC LIMIT 1), v.outcome))
            FROM verdict v WHERE v.attempt_id = r.id AND v.superseded_by IS NULL) AS ladder
    FROM attempt r WHERE r.id = :root OR r.rerun_of = :root ORDER BY r.seq"""
    out = []
    for row in _rows(db, sql, {"root": root}):
        levels = json.loads(row["ladder"] or "{}")
        out.append(Run(row["id"], row["seq"], AttemptSource(row["source"]), AttemptStatus(row["status"]),
                       row["started_at"], row["commit_sha"], bool(row["counted"]),
                       tuple(Outcome(levels[str(n)]) if str(n) in levels else None for n in range(1, 6))))
    return out


def run_counts(db: Reader, migration_id: int) -> dict[int, int]:
    """Counted attempt id -> how many runs it has (itself and its re-runs of its commit), for the
    migration's attempts with at least one re-run."""
    rows = db.execute(f"""
        SELECT a.id, count(*) + 1 FROM attempt a
        JOIN attempt r ON {COUNTED_RERUN}
        WHERE a.migration_id = ? AND {COUNTED_ROOT} GROUP BY a.id""", [migration_id]).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


def counted_totals(db: Reader, migration_id: int | None = None) -> dict[str, int]:
    """Counted agent attempts (re-runs folded in), verified, failed, silent and over-claims, of one
    migration or the whole study: the figures the app's header and the report count."""
    from storage.queries import EFFECTIVE_VERDICTS, attempt_stats

    where = None if migration_id is None else "a.migration_id = :m"
    row = _rows(db, f"""WITH {EFFECTIVE_VERDICTS}, {attempt_stats(where)}
        SELECT count(*) AS attempts, COALESCE(SUM(verified), 0) AS verified, COALESCE(SUM(failed), 0) AS failed,
               COALESCE(SUM(silent), 0) AS silent, COALESCE(SUM(over_claim), 0) AS over_claims
        FROM attempt_stat""", {"m": migration_id})[0]
    return {k: int(v) for k, v in row.items()}
