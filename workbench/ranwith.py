"""An attempt's environment beside its migration's reference run: the packages that differ."""

from __future__ import annotations

from dataclasses import dataclass

from domain.environment import PackageChange, RanWith, differences
from domain.models import Attempt
from storage.queries import probe_reports, reference_attempt_id
from storage.sqlite import Database
from workbench import probe


@dataclass(frozen=True, slots=True)
class Comparison:
    """What an attempt ran with, what the reference ran with, and the differences."""

    run: RanWith
    reference: RanWith | None
    changes: list[PackageChange]

    def as_json(self) -> dict:
        return {"run": _json(self.run), "reference": _json(self.reference) if self.reference else None,
                "changes": [{"name": c.name, "kind": c.kind, "reference": c.reference, "run": c.run,
                             "imported": c.imported} for c in self.changes]}


def _json(r: RanWith) -> dict:
    return {"python": r.python, "runtime": r.runtime, "runtime_version": r.runtime_version,
            "launcher": r.launcher, "device_count": r.device_count, "packages": len(r.packages)}


def reference_of(db: Database, migration_id: int) -> tuple[int | None, RanWith | None]:
    """The migration's reference run's id and what it ran with (None where it recorded nothing)."""
    ref_id = reference_attempt_id(db, migration_id)
    return ref_id, probe.ran_with(probe_reports(db, ref_id)) if ref_id is not None else None


def compare(db: Database, attempt: Attempt,
            reference: tuple[int | None, RanWith | None] | None = None) -> Comparison | None:
    """The attempt's environment against its reference's (`reference_of`, read here unless a list
    of one migration's attempts passes it once); None when its run recorded none (an imported
    attempt, a run before probe version 2)."""
    mine = probe.ran_with(probe_reports(db, attempt.id))
    if mine is None:
        return None
    ref_id, theirs = reference if reference is not None else reference_of(db, attempt.migration_id)
    if ref_id == attempt.id:
        theirs = None
    return Comparison(mine, theirs, differences(theirs, mine) if theirs is not None else [])
