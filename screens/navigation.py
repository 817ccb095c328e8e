"""Where the reviewer stands among a migration's attempts, as data: the migration screen keeps an
`AttemptCursor` up to date and hands it to the screens it opens, which step through it without
holding the migration screen; they say where they moved with `AttemptShown` (screens/messages.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.models import AttemptSource, AttemptSummary


@dataclass
class AttemptCursor:
    """The loaded attempts in the migration screen's order (reference runs first), and the one
    marked with `c` for a comparison. The migration screen refreshes `rows` as pages load."""

    rows: list[AttemptSummary] = field(default_factory=list)
    marked: int | None = None
    """The attempt id marked for a comparison, if any."""

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
        """The next failed (or silently failed) attempt in the direction of `step`."""
        index = self.index(attempt_id) + step
        while 0 <= index < len(self.rows):
            found = self.rows[index].failure
            if found is not None and (found.silent or not silent):
                return self.rows[index]
            index += step
        return None

    def previous_commit(self, attempt_id: int) -> tuple[int, str] | None:
        """(seq, commit) of the agent attempt before this one, for the diff's default."""
        rows = [s for s in self.rows if s.attempt.source is not AttemptSource.REFERENCE]
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
