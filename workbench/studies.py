"""Make a study without a bundle: the study, its migrations and their reference runs.

Every check runs before the first write, so bad input leaves nothing half-written, and the
rows come out shaped as a bundle import makes them (docs/setup.md).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from domain.errors import WorkbenchError
from domain.models import (
    Attempt,
    AttemptSource,
    AttemptStatus,
    Budgets,
    Command,
    Direction,
    Goal,
    Hardware,
    Migration,
    MigrationStatus,
    Study,
    Target,
)
from domain.redact import redact
from storage import queries, records
from storage import setup as store
from storage.database import StudyDatabase, open_study
from workbench.bundle import SLUG, BadRecord, parse_metrics

KIND = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
"""An accelerator kind as the price table names it: `tpu-v5e`, `cpu`, `a100`."""


def parse_target(text: str, what: str = "--target") -> tuple[str, int]:
    """`KIND[:N]` (N chips, default 1), e.g. `tpu-v5e:4`."""
    kind, sep, count = text.strip().partition(":")
    if not KIND.fullmatch(kind):
        raise WorkbenchError(f"{what}: {text[:40]!r} must be KIND[:N], e.g. tpu-v5e:4"
                             " (KIND in lower-case letters, digits, '.', '_' or '-')")
    if not sep:
        return kind, 1
    if not count.isascii() or not count.isdigit() or int(count) < 1 or len(count) > 6:
        raise WorkbenchError(f"{what}: {text[:40]!r}: the number of chips must be a whole number of 1 or more")
    return kind, int(count)


def parse_price(text: str) -> tuple[str, float]:
    """`KIND=DOLLARS_PER_CHIP_HOUR`, e.g. `tpu-v5e=1.20`."""
    kind, sep, value = text.partition("=")
    if not sep or not KIND.fullmatch(kind.strip()):
        raise WorkbenchError(f"--price: {text[:40]!r} must be KIND=USD_PER_CHIP_HOUR, e.g. tpu-v5e=1.20")
    return kind.strip(), finite(value, "--price", minimum=0.0)


def finite(text: str | float, what: str, *, minimum: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise WorkbenchError(f"{what}: {str(text)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise WorkbenchError(f"{what}: must be a finite number")
    if minimum is not None and value < minimum:
        raise WorkbenchError(f"{what}: must be {minimum:g} or more")
    return value


def slug_of(text: str, what: str) -> str:
    if not SLUG.fullmatch(text) or len(text) > 100:
        raise WorkbenchError(f"{what}: {text[:40]!r} must be lower-case letters, digits, '-', '.' or '_'")
    return text


def init_study(path: Path, title: str, prices: dict[str, float], *, slug: str | None, reviewer: str,
               staff_hourly_rate: float = 0.0) -> Study:
    """A new, empty study file; an existing file is never overwritten."""
    if path.exists():
        raise WorkbenchError(f"{path}: already exists; init never overwrites a study")
    if not title.strip():
        raise WorkbenchError("--title: must not be empty")
    default = re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._") or "study"
    study = Study(slug=slug_of(slug or default, "--slug"), title=title.strip(), prices=prices,
                  staff_hourly_rate=finite(staff_hourly_rate, "--staff-rate", minimum=0.0))
    sdb = open_study(path, create=True)
    try:
        store.create_study(sdb.db, study, reviewer)
    finally:
        sdb.close()
    return study


def open_existing(path: Path) -> StudyDatabase:
    """The study database, refused when it holds no study yet."""
    sdb = open_study(path)
    if not store.has_study(sdb.db):
        sdb.close()
        raise WorkbenchError(f"{path}: holds no study; make one with `workbench init {path} --title ...`")
    return sdb


def base_commit(repo: Path, rev: str) -> tuple[Path, str]:
    """The repository's root and the full SHA of `rev`; a dirty tree or unknown revision is refused."""
    import git

    if not repo.is_dir():
        raise WorkbenchError(f"--repo: {repo}: no such folder")
    try:
        handle = git.Repo(repo, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise WorkbenchError(f"--repo: {repo}: not a git repository") from None
    try:
        if handle.bare:
            raise WorkbenchError(f"--repo: {repo}: a bare repository; give a working tree")
        if handle.is_dirty(untracked_files=False):
            raise WorkbenchError(f"--repo: {repo}: uncommitted changes; commit or stash them first,"
                                 " so the base is the code that runs")
        try:
            sha = handle.commit(rev).hexsha
        except (ValueError, git.BadName, git.GitCommandError):
            raise WorkbenchError(f"--base: {rev[:60]!r} is not a commit in {repo}") from None
        return Path(handle.working_tree_dir or repo).resolve(), sha
    finally:
        handle.close()


@dataclass(frozen=True, slots=True)
class MigrationSpec:
    """What `workbench migration add` was given, before checks."""

    slug: str
    repo: Path
    base: str | None
    """None: inferred as the commit before the agent's work (`repos.infer_base`)."""
    target: str
    runtime: str
    goal: str
    direction: str
    reference_value: float | None
    """None: taken from the reference run when it is recorded."""
    tolerance: float = 0.0
    command: str | None = None
    setup: str | None = None
    """A shell line run in each re-run's worktree (and the reference run's) before the command."""
    shell: bool = False
    """The command needs a shell (`prepare && train`, pipes, globs): it is run as `sh -c COMMAND`."""
    title: str | None = None
    metric_names: tuple[str, ...] = ()
    """`WORDS=NAME` each: the log's words read as that metric (`val loss=val_loss`)."""
    acceptance_level: int = 4
    budgets: Budgets = Budgets()


def check_budgets(budgets: Budgets) -> Budgets:
    for name in ("compute_dollars", "staff_hours", "attempts", "calendar_days"):
        value = getattr(budgets, name)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise WorkbenchError(f"--budget-{name.replace('_', '-')}: must be 0 or more")
    return budgets


def check_goal(metric: str, reference: float | None, direction: str, tolerance: float,
               names: dict[str, str] | None = None) -> Goal:
    """The goal; a reference value of None (or NaN: not set yet) is taken from the reference run.
    A metric given as the log writes it resolves through the migration's `names` (`metric_names`:
    `validation loss` is what it maps that to), else `val loss` is val_loss."""
    from workbench.verify.patterns import METRIC_NAME

    metric = (names or {}).get(metric.strip()) or "_".join(metric.split())
    if not METRIC_NAME.fullmatch(metric):
        raise WorkbenchError(f"--goal: {metric[:40]!r} is not a metric name (letters, digits, '_', '.', '/', '-')")
    value = math.nan if reference is None or math.isnan(reference) else finite(reference, "--reference-value")
    return Goal(metric, value, Direction(direction),
                finite(tolerance, "--tolerance", minimum=0.0))


def check_command(command: str | None, shell: bool = False) -> str | None:
    """The command as stored (secrets redacted); with `shell`, as `sh -c COMMAND`, so every run of
    it (reference, imported commits, re-runs) is one argv that a shell reads."""
    if command is None:
        return None
    if shell and command.strip():
        command = shlex.join(["sh", "-c", command.strip()])
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise WorkbenchError(f"--command: cannot split it into words ({exc})") from None
    if not words:
        raise WorkbenchError("--command: must not be empty")
    return redact(command)


def metric_names(given: tuple[str, ...], current: dict[str, str] | None = None) -> dict[str, str]:
    """The migration's `metric_names` with each `--metric WORDS=NAME` applied (`WORDS=` removes
    one), checked as the patterns they become."""
    from workbench.verify.patterns import name_pattern

    names = dict(current or {})
    for text in given:
        words, sep, name = text.rpartition("=")
        words, name = words.strip(), name.strip()
        if not sep or not words:
            raise WorkbenchError(f"--metric: {text[:60]!r} must be WORDS=NAME, the log's words and the metric"
                                 " they are, e.g. \"val loss=val_loss\" (WORDS= removes one)")
        if not name:
            names.pop(words, None)
            continue
        try:
            name_pattern(words, name)
        except ValueError as exc:
            raise WorkbenchError(f"--metric: {str(exc).removeprefix('metric_names: ')}") from None
        names[words] = name
    return names


def check_setup(setup: str | None) -> str | None:
    """The setup line as stored: None for none (an empty one clears it), secrets redacted."""
    if setup is None or not setup.strip():
        return None
    return redact(setup.strip())


def add_migration(sdb: StudyDatabase, spec: MigrationSpec, reviewer: str) -> tuple[Migration, str | None]:
    """Check everything, then write the migration in one audited transaction. Also why the base
    is that commit when it was inferred (None when --base named it)."""
    slug = slug_of(spec.slug, "SLUG")
    if queries.get_migration(sdb.db, slug) is not None:
        raise WorkbenchError(f"SLUG: migration {slug!r} already exists; change it with `workbench migration edit`")
    accelerator, chips = parse_target(spec.target)
    if not 1 <= spec.acceptance_level <= 5:
        raise WorkbenchError("--acceptance-level: must be from 1 to 5")
    names = metric_names(spec.metric_names)
    goal = check_goal(spec.goal, spec.reference_value, spec.direction, spec.tolerance, names)
    command = check_command(spec.command, spec.shell)
    setup = check_setup(spec.setup)
    repo, base, why = _base(spec.repo, spec.base)
    migration = Migration(
        id=0, slug=slug, title=(spec.title or slug).strip() or slug, repo=str(repo), base_commit=base,
        target=Target(accelerator, chips, spec.runtime), goal=goal, budgets=check_budgets(spec.budgets),
        status=MigrationStatus.IN_PROGRESS, acceptance_level=spec.acceptance_level,
    )
    migration_id = store.add_migration(sdb.db, migration, command, reviewer, setup=setup,
                                       verify_settings={"metric_names": names} if names else None)
    return dataclasses.replace(migration, id=migration_id), why


def _base(repo: Path, rev: str | None) -> tuple[Path, str, str | None]:
    """(root, base SHA, why when inferred): --base as given, else the commit before the agent's work."""
    from workbench.importers.sessions import find_sessions
    from workbench.repos import infer_base

    if rev:
        return (*base_commit(repo, rev), None)
    root, _ = base_commit(repo, "HEAD")
    started = next((info.started_at for info in find_sessions(root) if info.started_at), None)
    sha, why = infer_base(root, started)
    return root, sha, why


def find_migration(sdb: StudyDatabase, slug: str) -> Migration:
    found = queries.get_migration(sdb.db, slug)
    if found is None:
        raise WorkbenchError(f"{sdb.path}: no migration {slug!r}; add it with `workbench migration add`")
    return found


def edit_migration(sdb: StudyDatabase, slug: str, *, target: str | None = None, runtime: str | None = None,
                   goal: str | None = None, direction: str | None = None, reference_value: float | None = None,
                   tolerance: float | None = None, command: str | None = None, title: str | None = None,
                   setup: str | None = None, shell: bool = False, metric: tuple[str, ...] = (),
                   budgets: dict[str, float | None] | None = None, reviewer: str) -> list[str]:
    """Change what was given, audited; budgets go through the budget history the effort rules read.
    Returns the names of the columns that changed."""
    migration = find_migration(sdb, slug)
    changes: dict[str, object] = {}
    if target is not None:
        changes["accelerator"], changes["chips"] = parse_target(target)
    if runtime is not None:
        changes["runtime"] = runtime
    if title is not None and title.strip():
        changes["title"] = title.strip()
    if command is not None:
        changes["command"] = check_command(command, shell)
    elif shell:
        raise WorkbenchError("--shell: give the --command it applies to")
    if setup is not None:
        changes["setup"] = check_setup(setup)
    settings = queries.verify_settings(sdb.db, migration.id)
    names = metric_names(metric, settings.get("metric_names"))
    old = migration.goal
    new_goal = check_goal(goal or old.metric, old.reference if reference_value is None else reference_value,
                          direction or old.direction.value, old.tolerance if tolerance is None else tolerance,
                          names if goal else None)  # a goal kept is a name already, not the log's words
    changes.update(goal_metric=new_goal.metric,
                   goal_reference=None if math.isnan(new_goal.reference) else new_goal.reference,
                   goal_direction=new_goal.direction.value, goal_tolerance=new_goal.tolerance)
    new_budgets = _merged_budgets(sdb, migration, budgets or {})
    names_changed = names != (settings.get("metric_names") or {}) and records.add_verify_settings(
        sdb.db, migration_id=migration.id, settings={**settings, "metric_names": names}, source="migration edit",
        reviewer=reviewer) is not None
    changed = store.update_migration(sdb.db, migration.id, changes, reviewer) + ["metric_names"] * names_changed
    if new_budgets is not None:
        level, budget = new_budgets
        records.add_budget_change(
            sdb.db, migration_id=migration.id, compute_dollars=budget.compute_dollars,
            staff_hours=budget.staff_hours, attempts=budget.attempts, calendar_days=budget.calendar_days,
            acceptance_level=level, reason="workbench migration edit", reviewer=reviewer)
        changed.append("budgets")
    return changed


def _merged_budgets(sdb: StudyDatabase, migration: Migration,
                    given: dict[str, float | None]) -> tuple[int, Budgets] | None:
    """The budgets in force with the given ones replaced; None when nothing would change."""
    current, level = queries.effective_budgets(sdb.db, migration)
    updates = {k: v for k, v in given.items() if v is not None}
    if not updates:
        return None
    new_level = int(updates.pop("acceptance_level", level))
    if not 1 <= new_level <= 5:
        raise WorkbenchError("--acceptance-level: must be from 1 to 5")
    if "attempts" in updates:
        updates["attempts"] = int(updates["attempts"])
    budget = check_budgets(dataclasses.replace(current, **updates))
    if budget == current and new_level == level:
        return None
    return new_level, budget


def _iso(seconds: float) -> str:
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reference_points(sdb: StudyDatabase, migration: Migration, log: Path,
                     metrics: Path | None) -> list[tuple[str, int, float]]:
    """The reference's metric series (from the metrics file, else none stored: the verifier reads
    the log), after checking that the goal's metric is in it."""
    goal = migration.goal.metric
    if metrics is not None:
        try:
            points = parse_metrics(metrics)
        except BadRecord as exc:
            raise WorkbenchError(f"--metrics: {exc}") from None
        if not any(name == goal for name, _, _ in points):
            raise WorkbenchError(f"--metrics: {metrics}: the goal metric {goal!r} is not in the reference's metrics")
        return points
    from workbench.verify.logscan import file_chunks, scan_chunks
    from workbench.verify.patterns import migration_patterns

    facts = scan_chunks(file_chunks(log), patterns=migration_patterns(queries.verify_settings(sdb.db, migration.id)))
    if not facts.has_metric(goal):
        raise WorkbenchError(f"--log: {log}: the goal metric {goal!r} is not in the reference's log"
                             " (give --metrics FILE, or a pattern with `workbench verify --set patterns=...`)")
    return []


def record_references(sdb: StudyDatabase, slug: str, *, logs: Sequence[Path], metrics: Sequence[Path | None],
                      walls: Sequence[float | None], hardware: str | None, command: str | None,
                      reviewer: str) -> list[Attempt]:
    """The migration's reference run from files: an attempt with source `reference` at the base
    commit for each log. Several logs are replicates (the reference run with other seeds): the Nth
    is recorded with `WORKBENCH_SEED=N`, the last is the reference. Every log is checked before
    anything is recorded."""
    from domain.noise import SEED

    migration = find_migration(sdb, slug)
    if not logs or len(metrics) != len(logs) or len(walls) != len(logs):
        raise WorkbenchError("--metrics and --wall: give none, or one for each --log, in its order")
    observed = Hardware(*parse_target(hardware, "--hardware")) if hardware else None
    text = check_command(command) or store.migration_command(sdb.db, migration.id)
    if not text:
        raise WorkbenchError("--command: the migration has no command; give the reference's command here")
    checked = []
    for n, (log, series, wall) in enumerate(zip(logs, metrics, walls, strict=True), 1):
        try:
            with log.open("rb") as fh:
                fh.read(1)
            ended = log.stat().st_mtime
        except OSError as exc:
            raise WorkbenchError(f"--log: {log}: cannot read ({exc.strerror or exc})") from None
        if wall is not None:
            finite(wall, "--wall", minimum=0.0)
        env = {SEED: str(n)} if len(logs) > 1 else {}
        attempt = Attempt(
            id=0, migration_id=migration.id, seq=0, source=AttemptSource.REFERENCE, commit=migration.base_commit,
            command=Command(tuple(shlex.split(text)), ".", env), status=AttemptStatus.OK,
            started_at=_iso(ended - wall) if wall is not None else None,
            ended_at=_iso(ended) if wall is not None else None,
            exit_code=0, exit_code_source="reviewer", expected_level=None,
            claim="Reference run recorded from files with `workbench reference`.",
            intended_hardware=None, observed_hardware=observed,
        )
        checked.append((attempt, log, reference_points(sdb, migration, log, series)))
    made = []
    for attempt, log, points in checked:
        attempt = dataclasses.replace(attempt, seq=store.next_reference_seq(sdb.db, migration.id))
        made.append(dataclasses.replace(attempt, id=store.add_reference(sdb.db, attempt, log, points, reviewer)))
    return made
