"""Import a study bundle (docs/bundle-format.md) into a study database.

Each attempt is written in its own transaction: a bad record is reported with its file and
line and skipped whole, the rest import. Re-importing the same bundle changes nothing.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError
from domain.imports import ImportReport
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
from domain.redact import redact, redact_env
from storage import artifacts, imports, queries, records, runs
from storage.converters import attempt_to_row, migration_to_row, study_to_row
from storage.database import StudyDatabase
from storage.logs import store_log
from storage.sqlite import Database
from workbench.repos import CommitResolver, materialise

FORMAT = 1
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class BadRecord(ValueError):
    """What is wrong with one record, in words."""


_TYPES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


def take(table: dict[str, Any], key: str, kind: type, *, required: bool = True, default: Any = None,
         finite: bool = True) -> Any:
    """table[key] checked against kind; ints pass as floats, bools never pass as numbers; a float
    must be finite unless `finite` is false (a metric point: a diverged run's NaN is data)."""
    if key not in table or table[key] is None:
        if required:
            raise BadRecord(f"missing {key!r}")
        return default
    value = table[key]
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise BadRecord(f"{key!r} must be {_TYPES[kind]}, not {type(value).__name__} {value!r:.40}")
    if kind is float and finite and not math.isfinite(value):
        raise BadRecord(f"{key!r} must be a finite number")
    return value


def choice(table: dict[str, Any], key: str, enum: type, *, default: Any = None) -> Any:
    raw = take(table, key, str, required=default is None, default=None)
    if raw is None:
        return default
    try:
        return enum(raw)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise BadRecord(f"{key!r} must be one of {allowed}, not {raw!r:.40}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise WorkbenchError(f"{path}: missing") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read ({exc.strerror})") from None


def parse_study(path: Path) -> Study:
    data = _read_toml(path)
    try:
        fmt = take(data, "format", int)
        if fmt != FORMAT:
            raise BadRecord(f"bundle format {fmt} is not supported (this workbench reads {FORMAT})")
        study = take(data, "study", dict)
        slug = take(study, "slug", str)
        if not SLUG.match(slug):
            raise BadRecord(f"study slug {slug!r} must be lower-case letters, digits, '-', '.' or '_'")
        prices = take(data, "prices", dict, required=False, default={})
        for kind in prices:
            take(prices, kind, float)
        reviewers = take(study, "reviewers", list, required=False, default=[])
        if not all(isinstance(r, str) for r in reviewers):
            raise BadRecord("'reviewers' must be a list of strings")
        return Study(
            slug=slug,
            title=take(study, "title", str),
            prices={k: float(v) for k, v in prices.items()},
            staff_hourly_rate=take(study, "staff_hourly_rate", float, required=False, default=0.0),
            reviewers=tuple(reviewers),
            intervention_kinds=_intervention_kinds(take(data, "interventions", dict, required=False, default={})),
        )
    except BadRecord as exc:
        raise WorkbenchError(f"{path}: {exc}") from None


def _intervention_kinds(table: dict[str, Any]) -> dict[str, str]:
    """`[interventions] kinds = ["name", ...]` with optional `[interventions.describe] name = "..."`
    (docs/effort.md): the study's own kinds beside the built-in ones."""
    from domain.effort import valid_kind_name

    kinds = take(table, "kinds", list, required=False, default=[])
    describe = take(table, "describe", dict, required=False, default={})
    out: dict[str, str] = {}
    for name in kinds:
        if not isinstance(name, str) or not valid_kind_name(name):
            raise BadRecord(f"[interventions] kinds: {str(name)[:40]!r} must be a lower-case name"
                            " (letters, digits, '_' or '-', at most 40)")
        text = describe.get(name, "")
        if not isinstance(text, str):
            raise BadRecord(f"[interventions.describe] {name}: must be a string")
        out[name] = text
    return out


def parse_migration(path: Path, slug: str) -> tuple[Migration, str]:
    """The migration (id 0, repo unresolved) and its repo spec as written."""
    data = _read_toml(path)
    try:
        if not SLUG.match(slug):
            raise BadRecord(f"folder name {slug!r} is not a valid migration slug")
        target = take(data, "target", dict)
        goal = take(data, "goal", dict)
        budgets = take(data, "budgets", dict, required=False, default={})
        chips = take(target, "chips", int)
        if chips < 1:
            raise BadRecord("'chips' must be at least 1")
        level = take(data, "acceptance_level", int, required=False, default=4)
        if not 1 <= level <= 5:
            raise BadRecord("'acceptance_level' must be between 1 and 5")
        migration = Migration(
            id=0,
            slug=slug,
            title=take(data, "title", str),
            repo="",
            base_commit=take(data, "base_commit", str),
            target=Target(take(target, "accelerator", str), chips, take(target, "runtime", str)),
            goal=Goal(
                metric=take(goal, "metric", str),
                reference=take(goal, "reference", float),
                direction=choice(goal, "direction", Direction),
                tolerance=take(goal, "tolerance", float, required=False, default=0.0),
            ),
            budgets=Budgets(
                compute_dollars=take(budgets, "compute_dollars", float, required=False),
                staff_hours=take(budgets, "staff_hours", float, required=False),
                attempts=take(budgets, "attempts", int, required=False),
                calendar_days=take(budgets, "calendar_days", float, required=False),
            ),
            status=choice(data, "status", MigrationStatus, default=MigrationStatus.IN_PROGRESS),
            acceptance_level=level,
        )
        return migration, take(data, "repo", str)
    except BadRecord as exc:
        raise WorkbenchError(f"{path}: {exc}") from None


def _hardware(record: dict[str, Any], key: str) -> Hardware | None:
    value = take(record, key, dict, required=False)
    if value is None:
        return None
    try:
        return Hardware(take(value, "kind", str), take(value, "count", int))
    except BadRecord as exc:
        raise BadRecord(f"{key}: {exc}") from None


def parse_attempt(record: Any, migration_id: int) -> tuple[Attempt, int | None, str | None, str | None]:
    """The attempt (id 0, log unset), its rerun_of seq, and its log and metrics paths."""
    if not isinstance(record, dict):
        raise BadRecord(f"expected a JSON object, not {type(record).__name__}")
    seq = take(record, "seq", int)
    if seq < 0:
        raise BadRecord("'seq' must not be negative")
    command = take(record, "command", dict)
    argv = take(command, "argv", list)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise BadRecord("'command.argv' must be a non-empty list of strings")
    env = take(command, "env", dict, required=False, default={})
    if not all(isinstance(v, str) for v in env.values()):
        raise BadRecord("'command.env' values must be strings")
    expected = take(record, "expected_level", int, required=False)
    if expected is not None and not 1 <= expected <= 5:
        raise BadRecord("'expected_level' must be between 1 and 5")
    attempt = Attempt(
        id=0,
        migration_id=migration_id,
        seq=seq,
        source=choice(record, "source", AttemptSource),
        commit=take(record, "commit", str),
        command=Command(
            tuple(redact(a) for a in argv),
            take(command, "cwd", str, required=False, default="."),
            redact_env(env),
        ),
        status=choice(record, "status", AttemptStatus),
        started_at=take(record, "started_at", str, required=False),
        ended_at=take(record, "ended_at", str, required=False),
        exit_code=take(record, "exit_code", int, required=False),
        exit_code_source=take(record, "exit_code_source", str, required=False),
        expected_level=expected,
        claim=redact(take(record, "claim", str, required=False, default="")),
        intended_hardware=_hardware(record, "intended_hardware"),
        observed_hardware=_hardware(record, "observed_hardware"),
    )
    return (
        attempt,
        take(record, "rerun_of", int, required=False),
        take(record, "log", str, required=False),
        take(record, "metrics", str, required=False),
    )


def parse_metrics(path: Path) -> list[tuple[str, int, float]]:
    points: dict[tuple[str, int], float] = {}
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise BadRecord(f"metrics {path}: cannot read ({exc.strerror})") from None
    with fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                point = json.loads(raw.strip())
                if not isinstance(point, dict):
                    raise BadRecord("expected a JSON object")
                name = take(point, "name", str)
                step = take(point, "step", int)
                if step < 0:
                    raise BadRecord("'step' must not be negative")
                points[(name, step)] = take(point, "value", float, finite=False)
            except (ValueError, BadRecord) as exc:
                raise BadRecord(f"{path}:{number}: {_json_error(exc)}") from None
    return [(name, step, value) for (name, step), value in sorted(points.items())]


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg.removesuffix(' at')}, column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8"
    return str(exc)


def utf8_problem(path: Path) -> str | None:
    """Where the file stops being UTF-8, or None if it is UTF-8 throughout."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with path.open("rb") as fh:
        while True:
            block = fh.read(1 << 20)
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                return f"not valid UTF-8 (byte {offset + exc.start})"
            if not block:
                return None
            offset += len(block)


class BundleImporter:
    """Checks the bundle's study file on creation, before any database is touched."""

    def __init__(self, bundle: Path) -> None:
        if not bundle.is_dir():
            raise WorkbenchError(f"{bundle}: not a directory")
        self.bundle = bundle
        self.study = parse_study(bundle / "study.toml")

    @property
    def db(self) -> Database:
        return self.study_db.db

    def run(self, study_db: StudyDatabase, reviewer: str) -> ImportReport:
        self.study_db = study_db
        self.reviewer = reviewer
        self.report = ImportReport()
        study = self.study
        migrations_dir = self.bundle / "migrations"
        folders = sorted(p for p in migrations_dir.iterdir() if p.is_dir()) if migrations_dir.is_dir() else []
        with records.immediate(self.db):
            existing = queries.get_study(self.db)
            if existing is not None and existing.slug != study.slug:
                raise WorkbenchError(
                    f"{self.study_db.path}: holds study {existing.slug!r}; "
                    f"the bundle is study {study.slug!r}"
                )
            _, what = records.upsert_by_key(self.db, "study", {"id": 1}, study_to_row(study), self.reviewer)
        self.report.count(what)
        for folder in folders:
            try:
                self._import_migration(folder)
            except WorkbenchError as exc:
                self.report.problems.append(str(exc))
        return self.report

    def _import_migration(self, folder: Path) -> None:
        toml_path = folder / "migration.toml"
        migration, repo_spec = parse_migration(toml_path, folder.name)
        spec = Path(repo_spec)
        spec = spec if spec.is_absolute() else folder / spec
        clones = self.study_db.path.parent / f"{self.study_db.path.stem}.repos"
        repo = materialise(spec.resolve(), clones / migration.slug)
        resolver = CommitResolver(repo)
        try:
            base = resolver.resolve(migration.base_commit)
            if base is None:
                raise WorkbenchError(f"{toml_path}: base_commit {migration.base_commit!r} is not in {repo}")
            row = migration_to_row(migration)
            row.update(repo=str(repo.resolve()), base_commit=base)
            with records.immediate(self.db):
                migration_id, what = records.upsert_by_key(
                    self.db, "migration", {"slug": migration.slug}, row, self.reviewer, keep=("status",)
                )
            self.report.count(what)
            self._import_attempts(folder, migration_id, resolver)
        finally:
            resolver.close()

    def _import_attempts(self, folder: Path, migration_id: int, resolver: CommitResolver) -> None:
        path = folder / "attempts.jsonl"
        try:
            fh = path.open("rb")
        except OSError as exc:
            self.report.problems.append(f"{path}: cannot read ({exc.strerror})")
            return
        with fh:
            for number, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.strip())
                    with records.immediate(self.db):
                        self._import_attempt(folder, migration_id, record, resolver)
                except (ValueError, BadRecord) as exc:
                    self.report.problems.append(f"{path}:{number}: {_json_error(exc)}")

    def _import_attempt(
        self, folder: Path, migration_id: int, record: Any, resolver: CommitResolver
    ) -> None:
        attempt, rerun_seq, log_name, metrics_name = parse_attempt(record, migration_id)
        checkpoint = self._checkpoint(folder, record)
        commit = resolver.resolve(attempt.commit)
        if commit is None:
            raise BadRecord(f"commit {attempt.commit!r} is not in the repository")
        rerun_of = None
        if rerun_seq is not None:
            rerun_of = queries.attempt_id_by_seq(self.db, migration_id, rerun_seq)
            if rerun_of is None:
                raise BadRecord(f"'rerun_of' names seq {rerun_seq}, which is not imported before it")
            rerun_of = runs.root_of(self.db, rerun_of)  # a re-run of a re-run is a run of the original
        log_id = None
        if log_name is not None:
            log_path = folder / log_name
            if not log_path.is_file():
                raise BadRecord(f"log {log_name!r} does not exist")
            problem = utf8_problem(log_path)
            if problem:
                self.report.warnings.append(
                    f"{log_path}: {problem}; stored as bytes, shown with replacement characters"
                )
            log_id = store_log(self.db, log_path)
        points = parse_metrics(folder / metrics_name) if metrics_name is not None else []
        row = attempt_to_row(attempt)
        row.update(commit_sha=commit, log_id=log_id, rerun_of=rerun_of)
        key = {"migration_id": migration_id, "seq": attempt.seq}
        del row["migration_id"], row["seq"]
        attempt_id, what = records.upsert_by_key(self.db, "attempt", key, row, self.reviewer)
        if imports.replace_metric_points(self.db, attempt_id, points, self.reviewer) and what == "same":
            what = "update"
        if self._store_checkpoint(attempt_id, checkpoint) and what == "same":
            what = "update"
        self.report.count(what)

    @staticmethod
    def _checkpoint(folder: Path, record: dict[str, Any]) -> tuple[str, Path] | None:
        """The record's `checkpoint` name and file, checked before anything is written."""
        name = take(record, "checkpoint", str, required=False)
        if name is None:
            return None
        if not name.strip():
            raise BadRecord("'checkpoint' must not be empty")
        path = folder / name
        if not path.exists():
            raise BadRecord(f"checkpoint {name!r} does not exist")
        if not path.is_file():
            raise BadRecord(f"checkpoint {name!r} is not a file")
        return name, path

    def _store_checkpoint(self, attempt_id: int, checkpoint: tuple[str, Path] | None) -> bool:
        """Hash and copy the checkpoint into the store (never unpickled here); True if it changed."""
        if checkpoint is None:
            return artifacts.drop_artifact(self.db, attempt_id, "checkpoint", self.reviewer)
        name, path = checkpoint
        try:
            what = artifacts.store_artifact(self.db, self.study_db.path, attempt_id, "checkpoint", path, name,
                                            self.reviewer)
        except OSError as exc:
            raise BadRecord(f"checkpoint {name!r}: cannot store ({exc.strerror or exc})") from None
        return what != "same"


def import_bundle(study_db: StudyDatabase, bundle: Path, reviewer: str) -> ImportReport:
    return BundleImporter(bundle).run(study_db, reviewer)
