"""The study database schema, as sqlite-utils migrations applied in order.

Never edit an applied migration: add a new one. Each runs in a transaction; a failed one
stays pending. `known()` lists their names so a database from a newer workbench is refused.
A new study file gets all of them before it takes its name (storage.database.open_study).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlite_utils import Database

MIGRATIONS_TABLE = "_sqlite_migrations"
"""Where sqlite-utils records the applied migrations: (migration_set, name, applied_at)."""


class _Migrations:
    """sqlite-utils' `Migrations("workbench")`, built on first use: the registry alone imports
    nothing, so a read-only command checks versions without importing sqlite-utils (60-300 ms
    with its numpy and pandas). `@migrations()` registers; every other attribute is the real set's."""

    name = "workbench"
    migrations_table = MIGRATIONS_TABLE

    def __init__(self) -> None:
        self.functions: list[Callable[[Database], None]] = []
        self._real: Any = None

    def __call__(self) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
        def register(func: Callable[[Database], None]) -> Callable[[Database], None]:
            assert self._real is None, "a migration registered after the set was built"
            self.functions.append(func)
            return func

        return register

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        if self._real is None:
            from storage.sqlite import Migrations

            self._real = Migrations(self.name)
            for func in self.functions:
                self._real()(func)
        return getattr(self._real, attr)


migrations = _Migrations()

APPEND_ONLY = ("intervention", "decision", "verdict_override", "review_session", "audit")
"""Human records and the audit trail: a correction is a new row, never an edit."""


@migrations()
def m001_study_and_attempts(db: Database) -> None:
    db.table("study").create(
        {
            "id": int,
            "slug": str,
            "title": str,
            "staff_hourly_rate": float,
            "reviewers": str,
            "prices": str,
        },
        pk="id",
        not_null={"slug", "title"},
        defaults={"staff_hourly_rate": 0.0, "reviewers": "[]", "prices": "{}"},
    )
    db.table("migration").create(
        {
            "id": int,
            "slug": str,
            "title": str,
            "repo": str,
            "base_commit": str,
            "accelerator": str,
            "chips": int,
            "runtime": str,
            "goal_metric": str,
            "goal_reference": float,
            "goal_direction": str,
            "goal_tolerance": float,
            "budget_compute_dollars": float,
            "budget_staff_hours": float,
            "budget_attempts": int,
            "budget_calendar_days": float,
            "acceptance_level": int,
            "status": str,
        },
        pk="id",
        not_null={"slug", "title", "repo", "base_commit", "accelerator", "chips", "status"},
    )
    db.table("migration").create_index(["slug"], unique=True)
    _log_tables(db)
    db.table("attempt").create(
        {
            "id": int,
            "migration_id": int,
            "seq": int,
            "source": str,
            "commit_sha": str,
            "argv": str,
            "cwd": str,
            "env": str,
            "started_at": str,
            "ended_at": str,
            "status": str,
            "exit_code": int,
            "exit_code_source": str,
            "expected_level": int,
            "claim": str,
            "intended_kind": str,
            "intended_count": int,
            "observed_kind": str,
            "observed_count": int,
            "log_id": int,
            "rerun_of": int,
        },
        pk="id",
        not_null={"migration_id", "seq", "source", "commit_sha", "argv", "status"},
        foreign_keys=[
            ("migration_id", "migration", "id"),
            ("log_id", "log", "id"),
            ("rerun_of", "attempt", "id"),
        ],
    )
    db.table("attempt").create_index(["migration_id", "seq"], unique=True)
    db.execute(
        "CREATE TABLE metric_point (attempt_id INTEGER NOT NULL REFERENCES attempt(id),"
        " name TEXT NOT NULL, step INTEGER NOT NULL, value REAL NOT NULL,"
        " PRIMARY KEY (attempt_id, name, step)) WITHOUT ROWID"
    )


def _log_tables(db: Database) -> None:
    """Logs stored once by content: chunks of bytes and an index of line offsets."""
    db.table("log").create(
        {"id": int, "sha256": str, "size": int, "line_count": int},
        pk="id",
        not_null={"sha256", "size", "line_count"},
    )
    db.table("log").create_index(["sha256"], unique=True)
    db.execute(
        "CREATE TABLE log_chunk (log_id INTEGER NOT NULL REFERENCES log(id),"
        " seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (log_id, seq)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE log_line (log_id INTEGER NOT NULL REFERENCES log(id),"
        " line INTEGER NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY (log_id, line)) WITHOUT ROWID"
    )


@migrations()
def m002_verdicts_and_failures(db: Database) -> None:
    db.table("verdict").create(
        {
            "id": int,
            "attempt_id": int,
            "level": int,
            "outcome": str,
            "reason": str,
            "evidence": str,
            "verifier": str,
            "verifier_version": str,
        },
        pk="id",
        not_null={"attempt_id", "level", "outcome", "verifier", "verifier_version"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("verdict").create_index(["attempt_id", "level"], unique=True)
    db.table("failure").create(
        {"id": int, "attempt_id": int, "cause": str, "silent": int, "note": str},
        pk="id",
        not_null={"attempt_id", "cause", "silent"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("failure").create_index(["attempt_id"], unique=True)


@migrations()
def m003_human_records_and_audit(db: Database) -> None:
    db.table("intervention").create(
        {
            "id": int,
            "migration_id": int,
            "attempt_id": int,
            "kind": str,
            "minutes": float,
            "note": str,
            "reviewer": str,
            "at": str,
            "corrects": int,
        },
        pk="id",
        not_null={"migration_id", "kind", "minutes", "reviewer", "at"},
        foreign_keys=[
            ("migration_id", "migration", "id"),
            ("attempt_id", "attempt", "id"),
            ("corrects", "intervention", "id"),
        ],
    )
    db.table("decision").create(
        {
            "id": int,
            "migration_id": int,
            "kind": str,
            "reason": str,
            "figures": str,
            "reviewer": str,
            "at": str,
        },
        pk="id",
        not_null={"migration_id", "kind", "reason", "reviewer", "at"},
        foreign_keys=[("migration_id", "migration", "id")],
    )
    db.table("verdict_override").create(
        {
            "id": int,
            "verdict_id": int,
            "outcome": str,
            "justification": str,
            "reviewer": str,
            "at": str,
        },
        pk="id",
        not_null={"verdict_id", "outcome", "justification", "reviewer", "at"},
        foreign_keys=[("verdict_id", "verdict", "id")],
    )
    db.table("review_session").create(
        {
            "id": int,
            "reviewer": str,
            "migration_id": int,
            "started_at": str,
            "active_seconds": float,
        },
        pk="id",
        not_null={"reviewer", "migration_id", "started_at", "active_seconds"},
        foreign_keys=[("migration_id", "migration", "id")],
    )
    db.table("audit").create(
        {
            "id": int,
            "at": str,
            "reviewer": str,
            "action": str,
            "entity": str,
            "entity_id": int,
            "detail": str,
        },
        pk="id",
        not_null={"at", "reviewer", "action", "entity"},
    )
    for table in APPEND_ONLY:
        for event in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_append_only_{event.lower()} BEFORE {event} ON {table}"
                f" BEGIN SELECT RAISE(ABORT, '{table} records are append-only:"
                f" record a correction instead'); END"
            )


@migrations()
def m004_verification_history(db: Database) -> None:
    """Verifier runs, with history: a re-verification supersedes verdicts, never deletes them."""
    db.table("verification").create(
        {
            "id": int,
            "attempt_id": int,
            "reference_attempt_id": int,
            "verifier": str,
            "verifier_version": str,
            "inputs_hash": str,
            "inputs": str,
            "settings": str,
            "at": str,
            "reviewer": str,
            "superseded_by": int,
            "highest_level": int,
            "cause": str,
            "silent": int,
            "over_claim": int,
            "wall_seconds": float,
            "cost_dollars": float,
            "time_ratio": float,
            "cost_ratio": float,
        },
        pk="id",
        not_null={"attempt_id", "verifier", "verifier_version", "inputs_hash", "at", "highest_level"},
        foreign_keys=[
            ("attempt_id", "attempt", "id"),
            ("reference_attempt_id", "attempt", "id"),
            ("superseded_by", "verification", "id"),
        ],
    )
    db.execute(
        "CREATE UNIQUE INDEX idx_verification_current ON verification (attempt_id)"
        " WHERE superseded_by IS NULL"
    )
    for table in ("verdict", "failure"):
        db.table(table).add_column("verification_id", int, fk="verification", fk_col="id")
        db.table(table).add_column("superseded_by", int)
    db.table("failure").add_column("evidence", str)
    db.execute("DROP INDEX IF EXISTS idx_verdict_attempt_id_level")
    db.execute("DROP INDEX IF EXISTS idx_failure_attempt_id")
    db.execute(
        "CREATE UNIQUE INDEX idx_verdict_current ON verdict (attempt_id, level)"
        " WHERE superseded_by IS NULL"
    )
    db.execute(
        "CREATE UNIQUE INDEX idx_failure_current ON failure (attempt_id) WHERE superseded_by IS NULL"
    )
    db.table("verify_setting").create(
        {"id": int, "migration_id": int, "settings": str, "source": str, "reviewer": str, "at": str},
        pk="id",
        not_null={"migration_id", "settings", "source", "reviewer", "at"},
        foreign_keys=[("migration_id", "migration", "id")],
    )
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER verify_setting_append_only_{event.lower()} BEFORE {event} ON verify_setting"
            " BEGIN SELECT RAISE(ABORT, 'verify_setting records are append-only:"
            " record a new one instead'); END"
        )


@migrations()
def m005_transcript_imports(db: Database) -> None:
    """Attempts imported from agent transcripts: their key, the edits and the other tool calls."""
    db.table("attempt").add_column("external_id", str)
    # The transcript's tool_use id (or `git:<sha>`): the key for idempotent re-imports.
    db.table("attempt").add_column("session_id", str)
    db.table("attempt").add_column("agent_id", str)
    # The sub-agent that ran it; NULL for the main session.
    db.table("attempt").add_column("commit_basis", str)
    # How the commit was found: agent_commit, built, built_partial, base, git.
    db.table("attempt").add_column("result_note", str)
    # e.g. the transcript's returnCodeInterpretation for a benign non-zero exit.
    db.execute(
        "CREATE UNIQUE INDEX idx_attempt_external ON attempt (migration_id, external_id)"
        " WHERE external_id IS NOT NULL"
    )
    db.table("attempt_edit").create(
        {
            "attempt_id": int,
            "ord": int,
            "tool_use_id": str,
            "tool": str,
            "file_path": str,
            "old_text": str,
            "new_text": str,
            "replace_all": int,
            "patch": str,
            "at": str,
        },
        pk=("attempt_id", "ord"),
        not_null={"attempt_id", "ord", "tool"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("attempt_tool_call").create(
        {
            "attempt_id": int,
            "ord": int,
            "tool_use_id": str,
            "name": str,
            "input": str,
            "result": str,
            "is_error": int,
            "called_at": str,
            "result_at": str,
            "agent_id": str,
            "spawned_agent_id": str,
        },
        pk=("attempt_id", "ord"),
        not_null={"attempt_id", "ord", "name"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )


@migrations()
def m006_llm_calls(db: Database) -> None:
    """AI assist (docs/assist.md): every call to a language model with its tokens and cost, the
    claims a model extracted, and the reviewer's accept or correct records. All append-only."""
    db.table("llm_call").create(
        {
            "id": int,
            "at": str,
            "purpose": str,
            "migration_id": int,
            "attempt_id": int,
            "model": str,
            "input_hash": str,
            "request": str,
            "input_tokens": int,
            "output_tokens": int,
            "cache_read_tokens": int,
            "cache_write_tokens": int,
            "cost_usd": float,
            "response": str,
            "error": str,
            "duration_s": float,
            "reviewer": str,
        },
        pk="id",
        not_null={"at", "purpose", "model", "input_hash"},
        defaults={"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                  "cache_write_tokens": 0},
        foreign_keys=[("migration_id", "migration", "id"), ("attempt_id", "attempt", "id")],
    )
    db.table("llm_call").create_index(["input_hash"])
    db.table("llm_call").create_index(["attempt_id", "purpose"])
    db.table("claim_extraction").create(
        {
            "id": int,
            "attempt_id": int,
            "llm_call_id": int,
            "model": str,
            "expected_level": int,
            "success_claimed": int,
            "sentence": str,
            "quote_found": int,
            "at": str,
        },
        pk="id",
        not_null={"attempt_id", "llm_call_id", "model", "success_claimed", "at"},
        foreign_keys=[("attempt_id", "attempt", "id"), ("llm_call_id", "llm_call", "id")],
    )
    db.table("claim_extraction").create_index(["attempt_id"])
    db.table("claim_review").create(
        {
            "id": int,
            "attempt_id": int,
            "extraction_id": int,
            "action": str,
            "expected_level": int,
            "note": str,
            "reviewer": str,
            "at": str,
        },
        pk="id",
        not_null={"attempt_id", "action", "reviewer", "at"},
        foreign_keys=[("attempt_id", "attempt", "id"), ("extraction_id", "claim_extraction", "id")],
    )
    db.table("claim_review").create_index(["attempt_id"])
    for table in ("llm_call", "claim_extraction", "claim_review"):
        for event in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_append_only_{event.lower()} BEFORE {event} ON {table}"
                f" BEGIN SELECT RAISE(ABORT, '{table} records are append-only:"
                f" record a new one instead'); END"
            )


@migrations()
def m007_human_effort(db: Database) -> None:
    """Human effort (docs/effort.md): a study's own intervention kinds, budget changes made in
    the app (append-only, latest wins), what the rules suggested at each decision, when a
    review session ended, and indexes for the per-migration and per-attempt lists."""
    db.table("study").add_column("intervention_kinds", str)
    # JSON object: kind name to description, from study.toml's [interventions] kinds.
    db.table("decision").add_column("suggested", str)
    # plain ALTER TABLE: sqlite-utils' fk= rebuilds the table, which would drop its triggers
    db.execute("ALTER TABLE decision ADD COLUMN attempt_id INTEGER REFERENCES attempt(id)")
    db.table("review_session").add_column("ended_at", str)
    db.table("budget_change").create(
        {
            "id": int,
            "migration_id": int,
            "compute_dollars": float,
            "staff_hours": float,
            "attempts": int,
            "calendar_days": float,
            "acceptance_level": int,
            "reason": str,
            "reviewer": str,
            "at": str,
        },
        pk="id",
        not_null={"migration_id", "acceptance_level", "reviewer", "at"},
        foreign_keys=[("migration_id", "migration", "id")],
    )
    db.table("budget_change").create_index(["migration_id"])
    db.table("intervention").create_index(["migration_id"])
    db.table("intervention").create_index(["attempt_id"])
    db.table("intervention").create_index(["corrects"])
    db.table("decision").create_index(["migration_id"])
    db.table("review_session").create_index(["migration_id"])
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER budget_change_append_only_{event.lower()} BEFORE {event} ON budget_change"
            " BEGIN SELECT RAISE(ABORT, 'budget_change records are append-only:"
            " record a new one instead'); END"
        )


@migrations()
def m008_rerun_jobs(db: Database) -> None:
    """Re-run jobs (docs/rerun.md): stored before they start, updated as they run; and the probe
    reports each job brought back, one row per process."""
    db.table("job").create(
        {
            "id": int,
            "migration_id": int,
            "attempt_id": int,
            "backend": str,
            "host": str,
            "zone": str,
            "accelerator": str,
            "chips": int,
            "argv": str,
            "cwd": str,
            "env": str,
            "options": str,
            "timeout_s": float,
            "keep_worktree": int,
            "state": str,
            "created_at": str,
            "started_at": str,
            "ended_at": str,
            "wall_seconds": float,
            "exit_code": int,
            "error": str,
            "job_dir": str,
            "runner_pid": int,
            "runner_host": str,
            "child_pid": int,
            "log_id": int,
            "result_attempt_id": int,
            "reviewer": str,
        },
        pk="id",
        not_null={"migration_id", "attempt_id", "backend", "chips", "argv", "state", "created_at"},
        defaults={"keep_worktree": 0},
        foreign_keys=[
            ("migration_id", "migration", "id"),
            ("attempt_id", "attempt", "id"),
            ("log_id", "log", "id"),
            ("result_attempt_id", "attempt", "id"),
        ],
    )
    db.table("job").create_index(["state"])
    db.table("probe_report").create(
        {"id": int, "job_id": int, "attempt_id": int, "file": str, "rank": int, "data": str},
        pk="id",
        not_null={"attempt_id", "file", "data"},
        foreign_keys=[("job_id", "job", "id"), ("attempt_id", "attempt", "id")],
    )
    db.table("probe_report").create_index(["attempt_id"])


@migrations()
def m009_artifacts(db: Database) -> None:
    """Files an attempt saved (docs/bundle-format.md `checkpoint`): copied on import into the
    content-addressed store beside the database (`<db stem>.artifacts/<sha256>`); one row per
    attempt and kind. `name` is the path the bundle gave, `path` the stored copy's, relative to
    the database's folder."""
    db.table("artifact").create(
        {"id": int, "attempt_id": int, "kind": str, "name": str, "sha256": str, "size": int, "path": str},
        pk="id",
        not_null={"attempt_id", "kind", "name", "sha256", "size", "path"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("artifact").create_index(["attempt_id", "kind"], unique=True)



@migrations()
def m010_migration_command(db: Database) -> None:
    """The command that runs the project (`workbench migration add --command`): what the reference
    run executes; NULL for migrations imported from a bundle."""
    db.table("migration").add_column("command", str)


@migrations()
def m011_override_index(db: Database) -> None:
    """The latest override of a verdict is read for every verdict the study counts (storage.queries
    EFFECTIVE_VERDICTS): without this index each read scanned every override (issue 19)."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_verdict_override_verdict ON verdict_override (verdict_id, id)")


@migrations()
def m012_judgements(db: Database) -> None:
    """Reviewers' judgements, review queues, adjudications and the study's blind mode
    (docs/judgements.md). All four are human records: append-only, a change is a new row."""
    db.table("judgement").create(
        {
            "id": int, "attempt_id": int, "reviewer": str,
            "level1": str, "level2": str, "level3": str, "level4": str, "level5": str,
            "cause": str, "note": str, "blind": int, "active_seconds": float, "at": str,
            "supersedes": int,
        },
        pk="id",
        not_null={"attempt_id", "reviewer", "level1", "level2", "level3", "level4", "level5",
                  "blind", "active_seconds", "at"},
        defaults={"note": "", "blind": 0, "active_seconds": 0.0},
        foreign_keys=[("attempt_id", "attempt", "id"), ("supersedes", "judgement", "id")],
    )
    db.table("judgement").create_index(["attempt_id", "reviewer"])
    # a judgement is superseded at most once: two reviewers' processes cannot fork one history
    db.execute("CREATE UNIQUE INDEX idx_judgement_supersedes ON judgement (supersedes)"
               " WHERE supersedes IS NOT NULL")
    db.table("assignment").create(
        {"id": int, "batch": int, "attempt_id": int, "reviewer": str, "blind": int, "seed": int,
         "overlap": float, "assigned_by": str, "at": str},
        pk="id",
        not_null={"batch", "attempt_id", "reviewer", "blind", "assigned_by", "at"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("assignment").create_index(["reviewer", "attempt_id"])
    db.table("assignment").create_index(["attempt_id"])
    db.table("adjudication").create(
        {"id": int, "attempt_id": int, "level": int, "outcome": str, "reason": str, "reviewer": str,
         "at": str, "override_id": int},
        pk="id",
        not_null={"attempt_id", "level", "outcome", "reason", "reviewer", "at", "override_id"},
        foreign_keys=[("attempt_id", "attempt", "id"), ("override_id", "verdict_override", "id")],
    )
    db.table("adjudication").create_index(["attempt_id", "level"])
    db.table("blind_mode").create(
        {"id": int, "blind": int, "reviewer": str, "at": str},
        pk="id",
        not_null={"blind", "reviewer", "at"},
    )
    for table in ("judgement", "assignment", "adjudication", "blind_mode"):
        for event in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER {table}_append_only_{event.lower()} BEFORE {event} ON {table}"
                f" BEGIN SELECT RAISE(ABORT, '{table} records are append-only:"
                f" record a new one instead'); END"
            )


@migrations()
def m013_watches(db: Database) -> None:
    """Live watches of a migration's agent sessions (`workbench watch`, the app's `W`): one row per
    running watcher, its heartbeat renewed every few seconds, removed when it stops. Machine
    state, not a human record: not audited. A heartbeat older than WATCH_STALE seconds does not
    count (a watcher killed without stopping)."""
    db.table("watch").create(
        {"id": int, "migration_id": int, "pid": int, "host": str, "started_at": str, "heartbeat_at": str},
        pk="id",
        not_null={"migration_id", "pid", "host", "started_at", "heartbeat_at"},
        foreign_keys=[("migration_id", "migration", "id")],
    )
    db.table("watch").create_index(["migration_id"])


@migrations()
def m014_metric_point_last_step(db: Database) -> None:
    """An attempt's last recorded step (the report's smoke-run rule: workbench.report.final) is one
    index seek with this index; by the table's key (attempt, name, step) it read every point of
    the attempt: 150 ms of a report on 15,000 attempts with 1.5M points, seconds at 150,000
    (issue 19)."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_metric_point_attempt_step ON metric_point (attempt_id, step)")


@migrations()
def m015_metric_point_non_finite(db: Database) -> None:
    """A point's value may be NULL, which stands for NaN: SQLite stores a bound NaN as NULL, so a
    diverged run's `loss nan` could not be kept under NOT NULL and its import lost the whole
    attempt (issue 35). Infinities are REAL values already. Readers turn NULL back into NaN
    (`storage.queries.point_value`)."""
    db.execute("CREATE TABLE metric_point_new (attempt_id INTEGER NOT NULL REFERENCES attempt(id),"
               " name TEXT NOT NULL, step INTEGER NOT NULL, value REAL,"
               " PRIMARY KEY (attempt_id, name, step)) WITHOUT ROWID")
    db.execute("INSERT INTO metric_point_new SELECT attempt_id, name, step, value FROM metric_point")
    db.execute("DROP TABLE metric_point")
    db.execute("ALTER TABLE metric_point_new RENAME TO metric_point")
    db.execute("CREATE INDEX idx_metric_point_attempt_step ON metric_point (attempt_id, step)")


@migrations()
def m016_migration_setup(db: Database) -> None:
    """What runs in each re-run's worktree (and the reference run's) before the command: prepare
    the data git ignores, install the project (`migration add --setup`). A shell line; NULL: none.
    Studies from before it read as migrations without one."""
    db.table("migration").add_column("setup", str)


@migrations()
def m017_explanation(db: Database) -> None:
    """`workbench explain`'s result for an attempt that fails level 2 (docs/explain.md): which factor
    the deviation follows (`topology`, `backend`, `libraries`, `code`, or NULL), the commit where
    it starts (code), the sentence, and the factors tried with their runs as JSON (`data`). A
    machine's finding from recorded re-runs, not a human record; a newer row replaces an older."""
    db.table("explanation").create(
        {"id": int, "attempt_id": int, "created_at": str, "reviewer": str, "explained_by": str,
         "commit_sha": str, "sentence": str, "data": str},
        pk="id",
        not_null={"attempt_id", "created_at", "sentence", "data"},
        foreign_keys=[("attempt_id", "attempt", "id")],
    )
    db.table("explanation").create_index(["attempt_id"])


@migrations()
def m018_runs_of_an_attempt(db: Database) -> None:
    """A re-run is another run of the agent attempt it re-ran (issue 38, storage.counted): a re-run
    of a re-run now names the original attempt, so every run of an attempt is one `rerun_of` away
    (existing chains are flattened); and an index for an attempt's runs."""
    for _ in range(1000):  # one step up the chain each pass; a loop in bad data stops here
        moved = db.execute(
            "UPDATE attempt SET rerun_of = (SELECT p.rerun_of FROM attempt p WHERE p.id = attempt.rerun_of)"
            " WHERE rerun_of IN (SELECT id FROM attempt WHERE rerun_of IS NOT NULL AND rerun_of != id)"
            " AND rerun_of != id").rowcount
        if not moved:
            break
    db.table("attempt").create_index(["rerun_of"], if_not_exists=True)


VERDICT_CODE = ("(SELECT SUM((CASE d.outcome WHEN 'pass' THEN 1 WHEN 'fail' THEN 2 WHEN 'unknown' THEN 3 END)"
                " << (2 * (d.level - 1))) FROM verdict d WHERE d.attempt_id = {a}"
                " AND d.superseded_by IS NULL AND d.level BETWEEN 1 AND 5)")
"""SQL: the verdict code of attempt id `{a}` (m019): two bits per level 1 to 5 of its current
verdicts' automated outcomes (0 none, 1 pass, 2 fail, 3 unknown: domain.kinds.Outcome's order,
storage.report reads it back); NULL without a current verdict. A function of the verdict table
alone, so m019's triggers keep it right whichever path writes a verdict."""


@migrations()
def m019_attempt_verdict_code(db: Database) -> None:
    """Each attempt's verdict code (VERDICT_CODE) stored on its row, kept by triggers on `verdict`
    (an insert, a change of its outcome, level, attempt or superseded_by, a delete), so every
    writer of a verdict keeps it right: the report read it per attempt with a subquery over its
    verdicts, ~0.3 s of CPU at 150,000 attempts (issue 39). Filled here for an existing study.
    Overrides are not in it: readers apply them (storage.report.report_override_rows)."""
    _attempt_summary(db, "verdict_code", VERDICT_CODE, "verdict", "outcome, level, attempt_id, superseded_by")


def _attempt_summary(db: Database, column: str, value: str, table: str, columns: str) -> None:
    """An attempt column `column` holding SQL `value` (of attempt id `{a}`) over its current rows of
    `table`: added, filled, and kept by triggers on an insert, a delete and a change of `columns`.
    m019 and m022 run it: what it writes must not change (applied migrations)."""
    db.execute(f"ALTER TABLE attempt ADD COLUMN {column} INTEGER")
    db.execute(f"UPDATE attempt SET {column} = {value.format(a='attempt.id')}"
               f" WHERE id IN (SELECT attempt_id FROM {table} WHERE superseded_by IS NULL)")
    for name, event, ids in (("insert", "INSERT", ("NEW",)), ("delete", "DELETE", ("OLD",)),
                             ("update", f"UPDATE OF {columns}", ("NEW", "OLD"))):
        sets = " ".join(f"UPDATE attempt SET {column} = {value.format(a=f'{row}.attempt_id')}"
                        f" WHERE id = {row}.attempt_id;" for row in ids)
        db.execute(f"CREATE TRIGGER {column}_{name} AFTER {event} ON {table} BEGIN {sets} END")


@migrations()
def m020_override_carried(db: Database) -> None:
    """A reviewer's override goes on counting when its level is verified again with the same
    automated outcome: the new verdict gets a copy (storage.records.carry_overrides) naming the
    override it carries (`carried_from`), so the ledger lists each human act once. Before this, a
    re-verification (a new sibling, a new verifier version, --force) left every override on the
    superseded verdict, and no count read it any more."""
    db.execute("ALTER TABLE verdict_override ADD COLUMN carried_from INTEGER REFERENCES verdict_override(id)")
    # the ledger asks of each override whether a copy of it counts
    db.execute("CREATE INDEX idx_verdict_override_carried ON verdict_override (carried_from)"
               " WHERE carried_from IS NOT NULL")


LAST_POINT = ("INSERT INTO metric_last SELECT attempt_id, name, step, value FROM metric_point"
              " WHERE attempt_id = {row}.attempt_id AND name = {row}.name ORDER BY step DESC LIMIT 1")
"""SQL (in a trigger): the last point of the series of the changed point `{row}` (OLD or NEW) into
`metric_last`, its old row deleted first."""


@migrations()
def m021_metric_last(db: Database) -> None:
    """The last point of each of an attempt's series (`metric_last`: attempt, name, its highest step
    and that step's value), kept by triggers on `metric_point`, so every writer keeps it right: the
    report looked up each attempt's goal value and last step among every point (two b-tree
    descents into 15 M points, ~0.3 s at 150,000 attempts, issue 39), the rerun job its
    reference's last step. The (attempt, step) index that served the last step goes: it cost
    every point written more than the trigger (0.8 against 1.2 µs a point measured, 900,000
    points)."""
    db.execute("CREATE TABLE metric_last (attempt_id INTEGER NOT NULL REFERENCES attempt(id), name TEXT NOT NULL,"
               " step INTEGER NOT NULL, value REAL, PRIMARY KEY (attempt_id, name)) WITHOUT ROWID")
    # min() and max() give a bare column from the row they chose: the value at the highest step
    db.execute("INSERT INTO metric_last SELECT attempt_id, name, MAX(step), value FROM metric_point"
               " GROUP BY attempt_id, name")
    db.execute("DROP INDEX IF EXISTS idx_metric_point_attempt_step")
    db.execute("""CREATE TRIGGER metric_last_insert AFTER INSERT ON metric_point BEGIN
        INSERT INTO metric_last VALUES (NEW.attempt_id, NEW.name, NEW.step, NEW.value)
        ON CONFLICT (attempt_id, name) DO UPDATE SET step = excluded.step, value = excluded.value
        WHERE excluded.step >= metric_last.step; END""")
    last = "(SELECT l.step FROM metric_last l WHERE l.attempt_id = OLD.attempt_id AND l.name = OLD.name)"
    # a series deleted in key order recounts once, at its last point
    db.execute(f"""CREATE TRIGGER metric_last_delete AFTER DELETE ON metric_point WHEN OLD.step >= {last} BEGIN
        DELETE FROM metric_last WHERE attempt_id = OLD.attempt_id AND name = OLD.name; {LAST_POINT.format(row="OLD")}; END""")
    db.execute(f"""CREATE TRIGGER metric_last_update AFTER UPDATE ON metric_point BEGIN
        DELETE FROM metric_last WHERE attempt_id = OLD.attempt_id AND name = OLD.name; {LAST_POINT.format(row="OLD")};
        DELETE FROM metric_last WHERE attempt_id = NEW.attempt_id AND name = NEW.name; {LAST_POINT.format(row="NEW")};
        END""")


OWN_FAILURE_SILENT = "(SELECT f.silent FROM failure f WHERE f.attempt_id = {a} AND f.superseded_by IS NULL)"
"""SQL: the silent flag of attempt id `{a}`'s current failure (m022); NULL without one."""

ATTEMPT_SUMMARIES = ("verdict_code", "own_failure_silent")
"""The attempt row's columns that triggers keep from the verifier's records (m019, m022): not the
attempt's own fields, so nothing a verdict depends on (storage.verify_inputs.attempt_record)."""


@migrations()
def m022_report_groups(db: Database) -> None:
    """What the report's count of groups (storage.report.report_attempt_groups, issue 39) reads, held
    so that SQLite groups the attempts as it reads them from one index and reads no wide row:
    `own_failure_silent` on the attempt row (OWN_FAILURE_SILENT: its own failure, where a report
    row or the app may show a re-run's; kept by triggers on `failure` like m019's
    verdict code), an index on the columns a group shares in the order the count groups them (its
    sort of 150,000 rows was 0.2 s), and one holding the verification columns every report takes
    (reading those rows, behind the verifier's inputs of ~2 kB in overflow pages, was 0.2 s in the
    count of groups and 0.5 s in a report of a row per attempt). Each index entry ends with its
    row's id."""
    _attempt_summary(db, "own_failure_silent", OWN_FAILURE_SILENT, "failure", "silent, attempt_id, superseded_by")
    db.execute("CREATE INDEX idx_attempt_report ON attempt (migration_id, source, verdict_code, expected_level,"
               " own_failure_silent, exit_code, intended_kind, intended_count, observed_count, seq, rerun_of)")
    # superseded_by a column, not a partial index's WHERE: SQLite reads the row for a term the WHERE implies
    db.execute("CREATE INDEX idx_verification_report ON verification (attempt_id, superseded_by, wall_seconds,"
               " cost_dollars, time_ratio, cost_ratio)")


def known() -> list[str]:
    """Every migration this workbench knows, oldest first."""
    return [func.__name__ for func in migrations.functions]
