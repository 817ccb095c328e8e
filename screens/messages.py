"""Messages that cross screens: what the database workers post back to the UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from domain.models import AttemptSummary, MigrationSummary, Study


@dataclass
class StudyLoaded(Message):
    """The study record and its totals, read when the study screen opens."""

    study: Study | None
    """None when the database holds no study record yet (nothing imported)."""
    migrations: int
    """How many migrations the study holds (the table only loads pages of them)."""
    totals: dict[str, int] | None = None
    """`storage.queries.study_totals`: attempts, failed, silent, over-claims, interventions."""


@dataclass
class MigrationsPage(Message):
    """One keyset page of the study's migrations."""

    after: str | None
    """The slug this page follows; None for the first page."""
    rows: list[MigrationSummary]
    complete: bool
    """True when there is nothing after this page."""


@dataclass
class AttemptsPage(Message):
    """One keyset page of a migration's attempts."""

    migration_id: int
    after: int | None
    """The sequence number this page follows; None for the first page."""
    rows: list[AttemptSummary]
    complete: bool


@dataclass
class LoadFailed(Message):
    """A worker could not read the database; `problem` is one line, already cleaned."""

    problem: str


@dataclass
class AttemptShown(Message):
    """A screen moved to another attempt (`[`, `]`, `n`, `p`, `s`): posted to the app, which
    moves the migration screen's cursor there, so `escape` comes back to it."""

    migration_id: int
    attempt_id: int
