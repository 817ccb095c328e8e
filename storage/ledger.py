"""The effort ledger: every human record of a migration (or of the whole study) in one list,
newest first: interventions, decisions, verdict overrides and budget changes, a keyset page at a
time, filtered in SQL (docs/effort.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage.review import ListFilter, parse_filter

if TYPE_CHECKING:  # the effort panel's presenter loads this module with the app (issue 19)
    from storage.sqlite import Database

LEDGER_KINDS = ("intervention", "decision", "override", "budget")
"""What a ledger entry can be; `kind:` in the filter matches these or the record's own kind
(an intervention's kind, a decision, an override's new outcome)."""
LEDGER_KEYS = ("kind", "reviewer", "attempt")
"""The `key:value` terms the ledger's filter takes; other words match the note, kind and reviewer."""
LEDGER_HELP = (
    "Filter (/): words match the note, the kind or the reviewer; kind:intervention, kind:decision, "
    "kind:override, kind:budget (or an intervention's kind, kind:fix_code), reviewer:ana, attempt:3 "
    "narrow further. Enter applies, escape clears."
)

NO_FILTER = ListFilter()

Key = tuple[str, str, int]
"""Where an entry sorts: (at, kind, id); pages go on from the last one shown."""


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One human record as the ledger shows it."""

    kind: str
    """One of LEDGER_KINDS."""
    id: int
    at: str
    reviewer: str
    label: str
    """The intervention's kind, the decision (accept, stop, continue), the override's new outcome,
    or `budget`."""
    note: str
    """The note, reason or justification, whole (untrusted text)."""
    slug: str
    seq: int | None
    """The attempt it concerns, if any."""
    attempt_id: int | None
    """That attempt's id (`enter` in the ledger opens it)."""
    minutes: float | None
    corrects: int | None
    corrected_by: int | None
    detail: dict[str, Any]
    """Kind-specific figures: a decision's `suggested`; an override's `level` and `automated`
    outcome; a budget change's budgets and `acceptance_level`."""

    @property
    def key(self) -> Key:
        return (self.at, self.kind, self.id)


_ENTRIES = """
entry AS (
    SELECT 'intervention' AS kind, i.id, i.at, i.reviewer, i.kind AS label, COALESCE(i.note, '') AS note,
           i.migration_id, i.attempt_id, i.minutes, i.corrects,
           (SELECT MIN(c.id) FROM intervention c WHERE c.corrects = i.id) AS corrected_by,
           '{}' AS detail
    FROM intervention i WHERE :m IS NULL OR i.migration_id = :m
    UNION ALL
    SELECT 'decision', d.id, d.at, d.reviewer, d.kind, COALESCE(d.reason, ''), d.migration_id,
           d.attempt_id, NULL, NULL, NULL, json_object('suggested', d.suggested)
    FROM decision d WHERE :m IS NULL OR d.migration_id = :m
    UNION ALL
    SELECT 'override', o.id, o.at, o.reviewer, o.outcome, o.justification, a.migration_id, a.id,
           NULL, NULL, NULL, json_object('level', v.level, 'automated', v.outcome, 'counts', EXISTS (
               -- it, or its copy on a re-verified level (storage.records.carry_overrides), is the
               -- latest override of a current verdict: else a later override or re-verification ended it
               SELECT 1 FROM verdict_override c JOIN verdict cv ON cv.id = c.verdict_id AND cv.superseded_by IS NULL
               WHERE (c.id = o.id OR c.carried_from = o.id)
                 AND c.id = (SELECT MAX(x.id) FROM verdict_override x WHERE x.verdict_id = cv.id)))
    FROM verdict_override o JOIN verdict v ON v.id = o.verdict_id JOIN attempt a ON a.id = v.attempt_id
    WHERE (:m IS NULL OR a.migration_id = :m) AND o.carried_from IS NULL  -- a re-verification's copy: no new act
    UNION ALL
    SELECT 'budget', b.id, b.at, b.reviewer, 'budget', COALESCE(b.reason, ''), b.migration_id, NULL,
           NULL, NULL, NULL,
           json_object('compute_dollars', b.compute_dollars, 'staff_hours', b.staff_hours,
                       'attempts', b.attempts, 'calendar_days', b.calendar_days,
                       'acceptance_level', b.acceptance_level)
    FROM budget_change b WHERE :m IS NULL OR b.migration_id = :m
)"""


def parse_ledger_filter(raw: str) -> ListFilter:
    """`raw` as a ledger filter; a bad term raises ValueError with one line to show."""
    return parse_filter(raw, keys=LEDGER_KEYS)


def _where(f: ListFilter) -> tuple[str, dict[str, Any]]:
    """SQL true for the entries `e` (with attempt `a`) that meet `f`. Comparisons, never a pattern:
    linear, and nothing the reviewer types is syntax."""
    parts: list[str] = []
    params: dict[str, Any] = {}
    for n, word in enumerate(f.words):
        parts.append(f"(instr(lower(e.note), :w{n}) > 0 OR instr(lower(e.label), :w{n}) > 0"
                     f" OR instr(lower(e.reviewer), :w{n}) > 0 OR e.kind = :w{n})")
        params[f"w{n}"] = word
    for n, (key, value) in enumerate(f.terms):
        name = f"t{n}"
        if key == "kind":
            parts.append(f"(e.kind = :{name} OR substr(lower(e.label), 1, length(:{name})) = :{name})")
        elif key == "reviewer":
            parts.append(f"lower(e.reviewer) = :{name}")
        else:
            parts.append(f"a.seq = :{name}")
        params[name] = int(value.lstrip("#")) if key == "attempt" else value
    return " AND ".join(parts) or "1", params


def _blind(blind_to: str | None) -> str:
    """SQL true for an entry `e` reviewer :r may see: none of a migration holding an attempt they
    judge blind (its notes, overrides and decisions would tell that attempt's verdicts)."""
    from storage.queries import migration_hidden_of

    return "1" if blind_to is None else f"NOT {migration_hidden_of('e.migration_id')}"


def ledger_page(db: Database, migration_id: int | None, f: ListFilter = NO_FILTER, *,
                before: Key | None = None, down_to: Key | None = None,
                limit: int | None = 100, blind_to: str | None = None) -> list[LedgerEntry]:
    """The newest `limit` entries (all when None) of the migration (the study when None) that
    meet `f`: older than `before`, and no older than `down_to`, when given; none that reviewer
    `blind_to` may not see (`_blind`)."""
    where, params = _where(f)
    sql = f"""
    WITH {_ENTRIES}
    SELECT e.kind, e.id, e.at, e.reviewer, e.label, e.note, m.slug, a.seq, e.minutes, e.corrects,
           e.corrected_by, e.detail, e.attempt_id
    FROM entry e JOIN migration m ON m.id = e.migration_id LEFT JOIN attempt a ON a.id = e.attempt_id
    WHERE (:b_at IS NULL OR (e.at, e.kind, e.id) < (:b_at, :b_kind, :b_id))
      AND (:d_at IS NULL OR (e.at, e.kind, e.id) >= (:d_at, :d_kind, :d_id))
      AND {where} AND {_blind(blind_to)}
    ORDER BY e.at DESC, e.kind DESC, e.id DESC
    LIMIT :limit"""
    b_at, b_kind, b_id = before if before is not None else (None, None, None)
    d_at, d_kind, d_id = down_to if down_to is not None else (None, None, None)
    rows = db.execute(sql, {"m": migration_id, "b_at": b_at, "b_kind": b_kind, "b_id": b_id, "d_at": d_at,
                            "d_kind": d_kind, "d_id": d_id, "limit": -1 if limit is None else limit,
                            "r": blind_to, **params}).fetchall()
    return [LedgerEntry(kind=r[0], id=int(r[1]), at=str(r[2]), reviewer=str(r[3]), label=str(r[4]),
                        note=str(r[5]), slug=str(r[6]), seq=r[7], minutes=r[8], corrects=r[9],
                        corrected_by=r[10], detail=json.loads(r[11] or "{}"), attempt_id=r[12])
            for r in rows]


def ledger_counts(db: Database, migration_id: int | None, blind_to: str | None = None) -> dict[str, int]:
    """How many entries of each kind the migration (the study when None) has, unfiltered (of
    those reviewer `blind_to` may see)."""
    sql = f"WITH {_ENTRIES} SELECT kind, count(*) FROM entry e WHERE {_blind(blind_to)} GROUP BY kind"
    found = {str(r[0]): int(r[1]) for r in db.execute(sql, {"m": migration_id, "r": blind_to}).fetchall()}
    return {kind: found.get(kind, 0) for kind in LEDGER_KINDS}
