"""Where the reviewer stands among a migration's attempts, as data: the migration screen keeps an
`AttemptCursor` up to date and hands it to the screens it opens, which step through it without
holding the migration screen; they say where they moved with `AttemptShown` (screens/messages.py).

A list that is not the migration's (the ledger) reads the attempt's migration with
`attempt_in_migration` and hands out that migration's cursor, so `escape` comes back to the list.

The queue screen hands out a `QueueCursor` instead: `[`/`]` then step through the reviewer's
queue, across migrations, and the diff's default and the reference are the stepped-to
attempt's own migration's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from domain.models import AttemptSource, AttemptSummary, Migration

if TYPE_CHECKING:
    from storage.sqlite import Database


@dataclass
class AttemptCursor:
    """The loaded attempts in the migration screen's order (reference runs first), and the one
    marked with `c` for a comparison. The migration screen refreshes `rows` as pages load."""

    rows: list[AttemptSummary] = field(default_factory=list)
    marked: int | None = None
    """The attempt id marked for a comparison, if any."""
    NO_MORE: ClassVar[str] = "No more attempts that way"
    """What `[`/`]` say past either end (as `n`/`p` say "No more failures that way")."""

    def index(self, attempt_id: int) -> int:
        return next((n for n, s in enumerate(self.rows) if s.attempt.id == attempt_id), -1)

    def get(self, attempt_id: int | None) -> AttemptSummary | None:
        return next((s for s in self.rows if s.attempt.id == attempt_id), None)

    def step(self, attempt_id: int, step: int) -> AttemptSummary | None:
        """The attempt `step` rows away (None past either end, or when `attempt_id` is gone)."""
        here = self.index(attempt_id)
        there = here + step
        return self.rows[there] if here >= 0 and 0 <= there < len(self.rows) else None

    def failure(self, attempt_id: int, step: int, *, silent: bool = False) -> AttemptSummary | None:
        """The next failed (or silently failed) attempt in the direction of `step`. A row blinded
        for the reviewer has no failure, so a jump never tells them the verifier failed it."""
        index = self.index(attempt_id) + step
        while 0 <= index < len(self.rows):
            found = self.rows[index].failure
            if found is not None and (found.silent or not silent):
                return self.rows[index]
            index += step
        return None

    def previous_commit(self, attempt_id: int, rerun_of: int | None = None) -> tuple[int, str] | None:
        """(seq, commit) the diff compares with by default: for a re-run (`rerun_of`: it is not a
        row of the list, but a run of that attempt), the attempt it re-ran; else the agent attempt
        before this one (re-runs are not steps of the agent)."""
        here = self.get(attempt_id)
        rerun_of = here.attempt.rerun_of if here is not None else rerun_of
        if rerun_of is not None:
            ran = self.get(rerun_of)
            return None if ran is None else (ran.attempt.seq, ran.attempt.commit)
        rows = [s for s in self.rows if s.attempt.source not in (AttemptSource.REFERENCE, AttemptSource.RERUN)
                or s.attempt.id == attempt_id]
        for before, summary in zip(rows, rows[1:]):
            if summary.attempt.id == attempt_id:
                return before.attempt.seq, before.attempt.commit
        return None

    def reference(self) -> AttemptSummary | None:
        return next((s for s in self.rows if s.attempt.source is AttemptSource.REFERENCE), None)

    def compare_partner(self, attempt_id: int) -> AttemptSummary | None:
        """The marked attempt, else the one before this one."""
        if self.marked is not None and self.marked != attempt_id:
            return self.get(self.marked)
        index = self.index(attempt_id)
        return self.rows[index - 1] if index > 0 else None

    def migration_of(self, summary: AttemptSummary) -> Migration | None:
        """The migration of an attempt stepped to, when it may differ from the screen's (None:
        every row is the screen's migration's)."""
        return None


@dataclass
class QueueCursor(AttemptCursor):
    """A reviewer's queue (screens/queue.py) in its order, across migrations: each row comes with
    its migration, its migration's reference run and the commit before it, read with the page."""

    migrations: dict[int, Migration] = field(default_factory=dict)
    references: dict[int, AttemptSummary | None] = field(default_factory=dict)
    """Migration id -> its reference run's summary."""
    previous: dict[int, tuple[int, str] | None] = field(default_factory=dict)
    """Attempt id -> (seq, commit) of the agent attempt before it in its migration."""
    done: set[int] = field(default_factory=set)
    """Attempt ids the reviewer has judged."""
    current: int | None = None
    """The attempt shown last (set by the queue screen and by each step)."""
    NO_MORE: ClassVar[str] = "No more attempts in your queue that way"

    def _at(self, summary: AttemptSummary | None) -> AttemptSummary | None:
        if summary is not None:
            self.current = summary.attempt.id
        return summary

    def step(self, attempt_id: int, step: int) -> AttemptSummary | None:
        return self._at(AttemptCursor.step(self, attempt_id, step))

    def failure(self, attempt_id: int, step: int, *, silent: bool = False) -> AttemptSummary | None:
        return self._at(AttemptCursor.failure(self, attempt_id, step, silent=silent))

    def next_left(self, attempt_id: int | None, *, here_too: bool = False) -> AttemptSummary | None:
        """The next attempt not judged yet after this one (or from it on, `here_too`), wrapping
        round to the first."""
        start = max(self.index(attempt_id) + (0 if here_too else 1), 0) if attempt_id is not None else 0
        order = self.rows[start:] + self.rows[:start]
        return self._at(next((s for s in order if s.attempt.id not in self.done
                              and (here_too or s.attempt.id != attempt_id)), None))

    def previous_commit(self, attempt_id: int, rerun_of: int | None = None) -> tuple[int, str] | None:
        return self.previous.get(attempt_id)

    def reference(self) -> AttemptSummary | None:
        here = self.get(self.current)
        return None if here is None else self.references.get(here.attempt.migration_id)

    def compare_partner(self, attempt_id: int) -> AttemptSummary | None:
        """The marked attempt, else the queue's previous one when it is of the same migration."""
        here = self.get(attempt_id)
        partner = AttemptCursor.compare_partner(self, attempt_id)
        if here is None or partner is None or partner.attempt.migration_id != here.attempt.migration_id:
            return None
        return partner

    def migration_of(self, summary: AttemptSummary) -> Migration | None:
        return self.migrations.get(summary.attempt.migration_id)


def attempt_in_migration(db: Database, reviewer: str, attempt_id: int,
                         ) -> tuple[Migration, AttemptSummary, AttemptCursor] | None:
    """An attempt to open from a list that is not its migration's (the ledger): its migration,
    its row and a cursor over the migration's attempts in the migration screen's order (reference
    runs first), as `reviewer` may see them, for `[`/`]`, the diff's default and `c`. None when
    the attempt is gone."""
    from storage import queries
    from workbench.blind import as_seen_by

    found = queries.attempt_summary(db, attempt_id)
    migration = None if found is None else queries.migration_by_id(db, found.attempt.migration_id)
    if migration is None:
        return None
    rows = as_seen_by(db, reviewer, list(queries.iter_attempt_summaries(db, migration.id)))
    rows.sort(key=lambda s: s.attempt.source is not AttemptSource.REFERENCE)
    cursor = AttemptCursor(rows)
    summary = cursor.get(attempt_id)
    if summary is None and found is not None and found.attempt.rerun_of is not None:  # a run of a listed attempt
        summary = as_seen_by(db, reviewer, [found])[0]
    return None if summary is None else (migration, summary, cursor)
