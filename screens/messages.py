"""Every message the screens and widgets post: what the database and git workers send back to
the UI thread, and what one widget or screen tells another. Dataclasses; the high-rate ones
(cursor moves, scrolls) define `can_replace`, so a held key leaves one pending, not hundreds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message
from textual.widget import Widget

from domain.models import MigrationSummary

if TYPE_CHECKING:
    from pathlib import Path

    from domain.assist import ClaimExtraction, ExpectedLevel
    from domain.attempts import Run
    from domain.blind import AttemptView
    from domain.models import AttemptSummary, Study
    from screens.presenters.curves import Curves
    from workbench.assist.brief import Brief
    from workbench.ranwith import Comparison


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


@dataclass
class AttemptFacts(Message):
    """What the attempt screen's overview and verdicts panes show beside the summary row."""

    attempt_id: int
    view: AttemptView
    """The attempt as this reviewer may see it now: blinded, without verdicts, while they judge
    it blind; else its verification and verdicts beside their judgement."""
    subject: str
    """The commit's subject line ("" when the repository is not at hand)."""
    environment: Comparison | None = None
    """What the run ran with beside the reference (workbench.ranwith.Comparison), when recorded."""
    explanation: dict | None = None
    """`workbench explain`'s stored result for the attempt (storage.explanations), when there is one."""
    runs: tuple[Run, ...] = ()
    """The runs of the agent attempt this is a run of (itself and its re-runs), as this reviewer
    may see them (workbench.blind.runs_seen_by); shown under the overview when there are several."""


@dataclass
class CompareFacts(Message):
    """Both sides of a comparison, as strings (screens.presenters.compare.facts)."""

    left: dict[str, str]
    right: dict[str, str]


@dataclass
class CurvesLoaded(Message):
    curves: Curves


@dataclass
class DiffLoaded(Message):
    key: tuple[str, str]
    """(old, new) commits: a late answer for another pair is dropped."""
    diff: object | None
    problem: str = ""


@dataclass
class FileWanted(Message):
    """`o` on a diff line: the app shows that file whole, at that commit and line."""

    repo: str
    commit: str
    path: str
    line: int = 1


@dataclass
class FileLoaded(Message):
    lines: list[str]
    problem: str = ""


@dataclass
class EvidenceLogLineWanted(Message):
    """`l` on a verdict's evidence: the attempt screen shows the log line it names."""

    option_id: str


@dataclass
class CursorMoved(Message):
    """A line view's cursor moved (many a second while a key is held)."""

    view: Widget
    line: int

    @property
    def control(self) -> Widget:
        return self.view

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CursorMoved) and message.view is self.view


@dataclass
class DiffScrolled(Message):
    """The diff view scrolled (the wheel, a page key or a jump): the file list follows."""

    view: Widget

    @property
    def control(self) -> Widget:
        return self.view

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DiffScrolled) and message.view is self.view


@dataclass
class BriefPrepared(Message):
    """The brief's request is built: a stored answer, or what sending would cost."""

    brief: Brief | None
    model: str
    characters: int
    available: bool
    """Whether a key is set (without one, nothing can be sent)."""
    problem: str = ""


@dataclass
class BriefAnswered(Message):
    brief: Brief | None
    problem: str = ""


@dataclass
class ClaimLoaded(Message):
    """The latest model-extracted claim of an attempt, the claim the reports count, and how
    many reviews it has had."""

    extraction: ClaimExtraction | None
    effective: ExpectedLevel
    reviews: int


@dataclass
class ReportWritten(Message):
    path: Path
    size: int
    """Bytes written."""


@dataclass
class ReportFailed(Message):
    problem: str


@dataclass
class FilterApplied(Message):
    """A list's `/` filter line asks for this filter ("" for none)."""

    bar: Widget
    value: str
    live: bool = False
    """Asked while typing: the list follows, the focus stays in the line, a bad term is not said."""

    @property
    def control(self) -> Widget:
        """The filter line, so `@on(FilterApplied, "#study-filter")` picks its list's."""
        return self.bar
