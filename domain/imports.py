"""What an import brought in: one report for the bundle, git and Claude Code importers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ImportReport:
    """Records new, changed and already there; problems (not everything came in) and warnings."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)
    """Records that were skipped or are wrong: the import did not bring everything in."""
    warnings: list[str] = field(default_factory=list)
    """Imported in full but worth a word (a log that is not UTF-8, stored as bytes)."""

    @property
    def imported(self) -> int:
        """Records now in the database from this import, new or not."""
        return self.inserted + self.updated + self.unchanged

    def count(self, what: str) -> None:
        if what == "insert":
            self.inserted += 1
        elif what == "update":
            self.updated += 1
        else:
            self.unchanged += 1
