"""The reads the review screens need beyond `storage.queries`: named, and returning plain values
or domain objects, so no SQL lives in `screens/`."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage.counted import NOT_REFERENCE
from storage.fastread import connect_readonly

if TYPE_CHECKING:  # the study screen reads on a plain sqlite3 connection, without sqlite-utils (issue 19)
    from domain.models import AttemptSummary, MigrationSummary
    from storage.queries import Reader
    from storage.sqlite import Database

ATTEMPT_CHOICES = 2000
"""At most this many attempts are offered in a form's attempt list."""


@dataclass(frozen=True, slots=True)
class AttemptChoice:
    """One attempt as a form lists it: enough to label it, nothing to load."""

    id: int
    seq: int
    source: str
    status: str

    @property
    def label(self) -> str:
        return f"#{self.seq} {self.source} {self.status}"


def attempt_choices(db: Database, migration_id: int, *, limit: int = ATTEMPT_CHOICES) -> list[AttemptChoice]:
    """The migration's attempts in order, for the intervention form's attempt list."""
    rows = db.execute(
        "SELECT id, seq, source, status FROM attempt WHERE migration_id = ? ORDER BY seq LIMIT ?",
        [migration_id, limit]).fetchall()
    return [AttemptChoice(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]


def metric_names(db: Database, attempt_ids: list[int]) -> set[str]:
    """Every metric recorded for any of `attempt_ids` (the curves pane offers these)."""
    if not attempt_ids:
        return set()
    marks = ",".join("?" * len(attempt_ids))
    return {str(r[0]) for r in db.execute(
        f"SELECT DISTINCT name FROM metric_last WHERE attempt_id IN ({marks})", attempt_ids).fetchall()}


class ChangeWatcher:
    """Says when another connection (another reviewer, a script, this app's own workers) has
    committed to the study since the last poll: SQLite's `data_version` on one connection of
    its own, kept open between polls (the number is per connection)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._last: int | None = None
        self._lock = threading.Lock()

    def changed(self) -> bool:
        with self._lock:
            if self._conn is None:
                # read-only: never creates the file (a missing database is the screens' message),
                # and reads a study that cannot be written
                self._conn = connect_readonly(self.path)
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            changed = self._last is not None and version != self._last
            self._last = version
            return changed

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@dataclass(frozen=True, slots=True)
class LadderCounts:
    """Agent attempts by highest level reached (verified ones only), and the rest: so a header
    never reads "failed 0/5" while nothing has been verified."""

    levels: dict[int, int]
    """Highest level (0..5) to the number of verified attempts that reached it and no more."""
    unverified: int
    failed: int
    """Attempts with a current failure record."""
    judged: int
    """Attempts verified or with a failure record: what `failed` is out of."""

    @property
    def attempts(self) -> int:
        return sum(self.levels.values()) + self.unverified


def ladder_counts(db: Reader, migration_id: int | None = None) -> LadderCounts:
    """The ladder counts of one migration, or of the whole study when `migration_id` is None
    (one grouped pass over the agent attempts)."""
    from storage.queries import EFFECTIVE_VERDICTS, attempt_stats

    where = None if migration_id is None else "a.migration_id = :m"
    rows = db.execute(f"""
        WITH {EFFECTIVE_VERDICTS}, {attempt_stats(where)}
        SELECT CASE WHEN l.verified THEN l.level END AS level, count(*),
               SUM(l.failed) AS failed  -- an effective fail: overrides count, as in the report
        FROM attempt_stat l
        GROUP BY 1""", {"m": migration_id}).fetchall()
    levels = {int(r[0]): int(r[1]) for r in rows if r[0] is not None}
    unverified = sum(int(r[1]) for r in rows if r[0] is None)
    failed = sum(int(r[2] or 0) for r in rows)
    failed_unverified = sum(int(r[2] or 0) for r in rows if r[0] is None)
    return LadderCounts(levels, unverified, failed, sum(levels.values()) + failed_unverified)


def verify_targets(db: Database, slug: str | None = None, seq: int | None = None) -> list[tuple[str, int]]:
    """(migration slug, seq) of the agent attempts a verify run covers: the study's, one
    migration's, or one attempt's; the app verifies them one by one to show progress."""
    return [(str(r[0]), int(r[1])) for r in db.execute(
        "SELECT m.slug, a.seq FROM attempt a JOIN migration m ON m.id = a.migration_id"
        f" WHERE a.{NOT_REFERENCE} AND (:slug IS NULL OR m.slug = :slug)"
        " AND (:seq IS NULL OR a.seq = :seq) ORDER BY m.slug, a.seq",
        {"slug": slug, "seq": seq}).fetchall()]


# --------------------------------------------------------------------------- list filters
FILTER_KEYS = ("status", "level", "cause", "silent", "overclaim", "source", "reviewer")
"""The `key:value` terms a list filter takes (docs in the help screen); other words are free text."""
_KEY_ALIASES = {"over-claim": "overclaim", "over": "overclaim", "lvl": "level"}
_YES, _NO = {"yes", "y", "true", "1"}, {"no", "n", "false", "0"}


@dataclass(frozen=True, slots=True)
class ListFilter:
    """What `/` typed on a list: free words (all must appear) and `key:value` terms (all hold)."""

    words: tuple[str, ...] = ()
    terms: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.words or self.terms)

    def describe(self) -> str:
        return " ".join([*self.words, *(f"{k}:{v}" for k, v in self.terms)])


def parse_filter(raw: str, keys: tuple[str, ...] = FILTER_KEYS) -> ListFilter:
    """`raw` as a filter taking the `key:value` terms `keys` (the attempt and migration lists'
    by default); a bad term raises ValueError with one line to show."""
    words: list[str] = []
    terms: list[tuple[str, str]] = []
    for token in raw.split():
        key, sep, value = token.partition(":")
        if not sep:
            words.append(token.lower())
            continue
        key = _KEY_ALIASES.get(key.lower(), key.lower())
        if key not in keys or not value:
            raise ValueError(f"{token!r}: filter terms are key:value with key one of {', '.join(keys)}")
        value = value.lower()
        if key in ("silent", "overclaim") and value not in _YES | _NO:
            raise ValueError(f"{token!r}: {key} takes yes or no")
        if key == "level" and _level_bounds(value) is None:
            raise ValueError(f"{token!r}: level takes 0 to 5, >=N, <=N or none")
        if key == "attempt" and not value.lstrip("#").isdigit():
            raise ValueError(f"{token!r}: attempt takes an attempt's number (attempt:3)")
        terms.append((key, value))
    return ListFilter(tuple(words), tuple(terms))


def _level_bounds(value: str) -> tuple[int, int] | None:
    """`N`, `>=N`, `<=N`, `>N`, `<N` as an inclusive range; (-1, -1) for `none` (unverified)."""
    if value in ("none", "unverified"):
        return (-1, -1)
    for op, lo, hi in ((">=", 0, 0), ("<=", 0, 0), (">", 1, 0), ("<", 0, -1), ("", 0, 0)):
        if value.startswith(op) and value[len(op):].isdigit() and 0 <= int(value[len(op):]) <= 5:
            n = int(value[len(op):])
            return {">=": (n, 5), "<=": (0, n), ">": (n + lo, 5), "<": (0, n + hi), "": (n, n)}[op]
    return None


COUNTED_KEYS = ("level", "overclaim", "silent", "cause")
"""The terms on an attempt's verdicts and failure: judged on its counted values, as its list row
shows them (storage.counted); the others hold when any of its runs meets them."""


def _attempt_term(key: str, value: str, a: str) -> tuple[str, list[Any]]:
    """SQL (needs EFFECTIVE_VERDICTS) true when the run row `a`, on its own, meets `key:value`."""
    from storage.queries import level_of, over_claim_of, verified_of

    current = f"FROM failure f WHERE f.attempt_id = {a}.id AND f.superseded_by IS NULL"
    if key == "status":
        return f"{a}.status LIKE ? || '%'", [value]
    if key == "source":
        return f"{a}.source LIKE ? || '%'", [value]
    if key == "cause":
        return f"EXISTS (SELECT 1 {current} AND f.cause LIKE ? || '%')", [value]
    if key == "silent":
        return f"{'' if value in _YES else 'NOT '}EXISTS (SELECT 1 {current} AND f.silent)", []
    if key == "overclaim":
        return f"COALESCE({over_claim_of(a)}, 0) = ?", [1 if value in _YES else 0]
    if key == "reviewer":
        return (f"(EXISTS (SELECT 1 FROM verification v WHERE v.attempt_id = {a}.id AND v.reviewer = ?"
                f" AND v.superseded_by IS NULL) OR EXISTS (SELECT 1 FROM intervention i"
                f" WHERE i.attempt_id = {a}.id AND i.reviewer = ?))", [value, value])
    lo, hi = _level_bounds(value) or (-1, -1)
    if lo < 0:
        return f"NOT {verified_of(a)}", []
    return f"({verified_of(a)} AND {level_of(a)} BETWEEN ? AND ?)", [lo, hi]


def _counted_term(key: str, value: str) -> tuple[str, list[Any]]:
    """SQL (needs EFFECTIVE_VERDICTS and `attempt_stats`' CTEs) true when the list row of attempt
    `a` meets `key:value` (one of COUNTED_KEYS): `s`, its `attempt_stat` row, holds the counted
    level and over-claim of an attempt with re-runs (NULL for the others: their own verdicts
    count, as before); silent and cause read the failure the row shows (`failure_run_of`)."""
    from storage.counted import failure_run_of

    if key in ("silent", "cause"):
        shown = f"FROM failure f WHERE f.attempt_id = {failure_run_of('a')} AND f.superseded_by IS NULL"
        if key == "cause":
            return f"EXISTS (SELECT 1 {shown} AND f.cause LIKE ? || '%')", [value]
        return f"{'' if value in _YES else 'NOT '}EXISTS (SELECT 1 {shown} AND f.silent)", []
    own, params = _attempt_term(key, value, "a")
    if key == "overclaim":
        return f"(CASE WHEN s.id IS NULL THEN {own} ELSE COALESCE(s.over_claim, 0) = ? END)", [*params, *params]
    lo, hi = _level_bounds(value) or (-1, -1)
    if lo < 0:
        return f"(CASE WHEN s.id IS NULL THEN {own} ELSE NOT s.verified END)", params
    return f"(CASE WHEN s.id IS NULL THEN {own} ELSE s.verified AND s.level BETWEEN ? AND ? END)", [*params, lo, hi]


def _text_term(word: str, columns: list[str]) -> tuple[str, list[Any]]:
    """Any of `columns` holds `word` (instr: linear, no pattern syntax in the word)."""
    return "(" + " OR ".join(f"instr(lower(COALESCE({c}, '')), ?) > 0" for c in columns) + ")", [word] * len(columns)


def _where(parts: list[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    sql = " AND ".join(p for p, _ in parts) or "1"
    return sql, [v for _, values in parts for v in values]


def filtered_attempt_seqs(db: Database, migration_id: int, f: ListFilter, *, after: int | None,
                          limit: int, blind_to: str | None = None) -> list[int]:
    """The seqs of the migration's attempts that meet `f`, a keyset page at a time; never those
    reviewer `blind_to` judges blind (whether one matched would tell its claim or verdicts). A
    re-run is a run of the attempt it re-ran, not a row of the list: the terms on verdicts and
    failures (COUNTED_KEYS) judge the attempt by its counted values, what its row shows; the
    others hold when any of its runs meets them all (`source:rerun` finds the attempts that
    were re-run)."""
    from storage.queries import EFFECTIVE_VERDICTS, attempt_stats, hidden_of

    runs = [_text_term(w, ["r.argv", "r.claim", "r.commit_sha"]) for w in f.words]
    runs += [_attempt_term(k, v, "r") for k, v in f.terms if k not in COUNTED_KEYS]
    parts = [_counted_term(k, v) for k, v in f.terms if k in COUNTED_KEYS]
    if runs:
        sql, params = _where(runs)
        parts.append((f"EXISTS (SELECT 1 FROM attempt r WHERE (r.id = a.id OR r.rerun_of = a.id) AND {sql})", params))
    if blind_to is not None:  # a re-run is hidden exactly while its attempt is
        parts.append((f"NOT ({hidden_of('a.id', '?')})", [blind_to, blind_to]))
    where, params = _where(parts)
    # the counted values of the page's attempts with re-runs (a few: from the re-runs, by index)
    m, seq = int(migration_id), -1 if after is None else int(after)
    scope = (f"a.migration_id = {m} AND a.seq > {seq}"
             f" AND a.id IN (SELECT q.rerun_of FROM attempt q WHERE q.rerun_of > 0 AND q.migration_id = {m})")
    sql = (f"WITH {EFFECTIVE_VERDICTS}, {attempt_stats(scope)} SELECT a.seq FROM attempt a"
           " LEFT JOIN attempt_stat s ON s.id = a.id"
           f" WHERE a.migration_id = ? AND +a.rerun_of IS NULL AND a.seq > ? AND {where} ORDER BY a.seq LIMIT ?")
    return [int(r[0]) for r in db.execute(sql, [m, seq, *params, limit]).fetchall()]


def _migration_term(key: str, value: str) -> tuple[str, list[Any]]:
    """SQL true when the migration row `m` meets `key:value`, as its row counts: level on the
    highest counted level of its attempts, silent and over-claim on their counts (`cm`, its
    `attempt_stat` sums), cause on the failures its attempts' rows show; the others through any
    of its agent attempts and re-runs."""
    from storage.counted import COUNTED_ROOT, failure_run_of

    if key == "status":
        return "m.status LIKE ? || '%'", [value]
    if key == "level":
        lo, hi = _level_bounds(value) or (-1, -1)
        return ("cm.highest IS NULL", []) if lo < 0 else ("cm.highest BETWEEN ? AND ?", [lo, hi])
    if key in ("silent", "overclaim"):
        count = "cm.silent" if key == "silent" else "cm.over_claims"
        return f"COALESCE({count}, 0) {'>' if value in _YES else '='} 0", []
    if key == "cause":
        return (f"EXISTS (SELECT 1 FROM attempt a WHERE a.migration_id = m.id AND {COUNTED_ROOT} AND EXISTS"
                f" (SELECT 1 FROM failure f WHERE f.attempt_id = {failure_run_of('a')}"
                " AND f.superseded_by IS NULL AND f.cause LIKE ? || '%'))", [value])
    sql, params = _attempt_term(key, value, "a")
    if key == "reviewer":
        sql = f"({sql} OR EXISTS (SELECT 1 FROM decision d WHERE d.migration_id = m.id AND d.reviewer = ?))"
        params = [*params, value]
    return f"EXISTS (SELECT 1 FROM attempt a WHERE a.migration_id = m.id AND a.{NOT_REFERENCE} AND {sql})", params


def _matching_slugs(db: Reader, where: str, params: list[Any], *, after: str | None, chunk: int,
                    counted: bool) -> tuple[list[tuple[str, bool]], bool]:
    """The next `chunk` migrations after `after`, each with whether it meets `where`, and whether
    there are more. `counted`: the terms read the chunk's counted attempts (`cm`), one grouped
    pass over that chunk alone, as `migration_summaries` reads a page."""
    from storage.queries import EFFECTIVE_VERDICTS, attempt_stats

    stats = "" if not counted else f""", {attempt_stats("a.migration_id IN (SELECT id FROM chunk)")},
    counted_migration AS (
        SELECT migration_id, MAX(CASE WHEN verified THEN level END) AS highest, SUM(silent) AS silent,
               SUM(over_claim) AS over_claims
        FROM attempt_stat GROUP BY migration_id)"""
    join = " LEFT JOIN counted_migration cm ON cm.migration_id = m.id" if counted else ""
    rows = db.execute(
        "WITH chunk AS (SELECT * FROM migration WHERE (? IS NULL OR slug > ?) ORDER BY slug LIMIT ?),"
        f" {EFFECTIVE_VERDICTS}{stats} SELECT m.slug, {where} FROM chunk m{join} ORDER BY m.slug",
        [after, after, chunk, *params]).fetchall()
    return [(str(r[0]), bool(r[1])) for r in rows], len(rows) == chunk


def filtered_migrations(db: Reader, f: ListFilter, *, after: str | None, limit: int,
                        blind_to: str | None = None) -> list[MigrationSummary]:
    """The migrations that meet `f`, by slug, a keyset page at a time, summed up as the
    unfiltered list shows them (and filtered as counted there: re-runs are runs of their
    attempts). A filter on verdicts leaves out those holding an attempt reviewer `blind_to`
    judges blind (whether one matched would tell that attempt's verdicts). Read `limit`
    migrations at a time until `limit` match: never the whole study's counts for one page."""
    from storage.queries import migration_hidden_of, migration_summaries

    parts = [_text_term(w, ["m.slug", "m.title"]) for w in f.words]
    parts += [_migration_term(k, v) for k, v in f.terms]
    if blind_to is not None and any(k != "status" for k, _ in f.terms):
        parts.append((f"NOT {migration_hidden_of('m.id', '?')}", [blind_to, blind_to]))
    where, params = _where(parts)
    counted = any(k in COUNTED_KEYS for k, _ in f.terms)
    slugs: list[str] = []
    more = True
    while more and len(slugs) < limit:
        rows, more = _matching_slugs(db, where, params, after=after, chunk=max(limit, 1), counted=counted)
        slugs += [slug for slug, ok in rows if ok]
        after = rows[-1][0] if rows else after
    out = []
    for slug in slugs[:limit]:
        before = db.execute("SELECT max(slug) FROM migration WHERE slug < ?", [slug]).fetchone()[0]
        out += migration_summaries(db, after=before, limit=1)
    return out


def filtered_attempts(db: Database, migration_id: int, f: ListFilter, *, after: int | None,
                      limit: int, blind_to: str | None = None) -> list[AttemptSummary]:
    """The migration's attempts that meet `f`, as `queries.attempt_summaries` gives them."""
    from storage.queries import attempt_summaries

    out = []
    for seq in filtered_attempt_seqs(db, migration_id, f, after=after, limit=limit, blind_to=blind_to):
        out += attempt_summaries(db, migration_id, after=seq - 1, limit=1, through=seq)
    return out
