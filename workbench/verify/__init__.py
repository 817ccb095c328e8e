"""Verification: every attempt on the five-level ladder, from evidence the workbench reads itself.

`verify_study` loads each attempt's record, scans its stored log in one streaming pass, takes its
metric series (stored, else extracted from the log), compares it with the migration's reference
run and stores five verdicts, a failure cause and the derived flags. Verifying again with the
same evidence, settings and verifier changes nothing; anything else supersedes the current
verdicts and keeps the old ones in history. docs/verification.md is the specification.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from domain.models import Attempt, Migration, Study
from storage import verify_inputs
from storage.logs import log_chunks

if TYPE_CHECKING:
    from workbench.verify.ladder import Judgement

VERIFIER = "workbench.ladder"
VERSION = "1.3.0"
"""Bump on any change to what a level checks: stored verdicts of an older version are redone."""

EXTRACT_LIMIT = 64 << 20
"""Logs up to this size are scanned for metric lines even when series are stored, so verdicts
can cite the log line of a metric point; larger ones are scanned for errors and counters only."""


@dataclass
class AttemptResult:
    """What verifying one attempt did."""

    attempt: Attempt
    verification_id: int
    changed: bool
    judgement: Judgement | None = None


@dataclass
class Report:
    outcomes: list[AttemptResult] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(1 for o in self.outcomes if o.changed)


def load_run(db: Database, attempt: Attempt, settings: dict[str, Any]):
    """The attempt's evidence: the topology its log's head and command state, log facts from one
    streaming pass (over the untangled log when several processes wrote it), its metric series,
    and the probe reports a re-run stored with it."""
    from storage.queries import probe_reports
    from workbench.verify import topology
    from workbench.verify.ladder import Run
    from workbench.verify.logscan import compile_patterns, scan_chunks

    stored = verify_inputs.metric_series(db, attempt.id)
    facts = topo = None
    log = verify_inputs.log_info(db, attempt.log_id) if attempt.log_id is not None else None
    if attempt.log_id is not None and log is not None:
        head, chunks = topology.head_of(log_chunks(db, attempt.log_id))
        topo = topology.read(head, attempt.command.argv)
        patterns = compile_patterns(settings.get("patterns") or (), defaults=settings.get("default_patterns", True))
        untangler = topology.Untangler() if topo.multi_process else None
        facts = scan_chunks(untangler.chunks(chunks) if untangler else chunks, patterns=patterns,
                            extract_metrics=not stored or log.size <= EXTRACT_LIMIT)
        if untangler is not None:
            facts = untangler.remap(facts)
    reports = probe_reports(db, attempt.id)
    series = stored or (facts.point_series() if facts else {})
    return Run(attempt, facts, series, "stored" if stored else "log", reports, topo)


def _input_digest(db: Database, attempt: Attempt) -> dict[str, Any]:
    from storage.artifacts import artifact_of
    from storage.queries import probe_reports

    record = verify_inputs.attempt_record(db, attempt.id)
    info = verify_inputs.log_info(db, attempt.log_id) if attempt.log_id is not None else None
    log = info.sha256 if info is not None else None
    digest = hashlib.sha256()
    for name, points in verify_inputs.metric_series(db, attempt.id).items():
        for step, value in points.items():
            digest.update(repr((name, step, value)).encode())
    probes = json.dumps(probe_reports(db, attempt.id), sort_keys=True, default=str)
    checkpoint = artifact_of(db, attempt.id)
    return {
        "record": hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest(),
        "log_sha256": log,
        "metrics_sha256": digest.hexdigest(),
        "probes_sha256": hashlib.sha256(probes.encode()).hexdigest(),
        "checkpoint_sha256": checkpoint["sha256"] if checkpoint else None,
    }


def inputs_for(db: Database, migration: Migration, study: Study, attempt: Attempt, reference: Attempt | None,
               settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Hashes of every input a verdict depends on, and one hash over them all. `attempt` carries
    its effective expected level (see `with_effective_expected`): a claim review changes it.
    When both runs saved a checkpoint, the torch version (None when absent) is an input too:
    installing torch redoes a comparison that was skipped for want of it."""
    mine = _input_digest(db, attempt)
    theirs = _input_digest(db, reference) if reference else None
    tensor_backend = None
    if mine["checkpoint_sha256"] and theirs and theirs["checkpoint_sha256"]:
        from workbench.verify.tensors import backend

        tensor_backend = backend() or "absent"
    inputs = {
        "verifier": VERIFIER,
        "version": VERSION,
        "settings": settings,
        "attempt": mine,
        "expected_level": attempt.expected_level,
        "reference": theirs,
        "tensor_backend": tensor_backend,
        "migration": {
            "goal": [migration.goal.metric, migration.goal.reference, migration.goal.direction.value,
                     migration.goal.tolerance],
            "target": [migration.target.accelerator, migration.target.chips],
        },
        "prices": study.prices,
    }
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest(), inputs


def compare_checkpoints(db: Database, attempt: Attempt, reference: Attempt | None, settings: dict[str, Any],
                        cache: dict[str, dict[str, Any]] | None = None):
    """Level 2's checkpoint comparison (a `LevelResult`) when the attempt and the reference both
    have a stored checkpoint, else None."""
    from storage.artifacts import artifact_of

    if reference is None:
        return None
    mine, theirs = artifact_of(db, attempt.id), artifact_of(db, reference.id)
    if mine is None or theirs is None:
        return None
    from workbench.verify.tensors import compare_files

    return compare_files(mine["file"], theirs["file"], float(settings["tensor_rtol"]),
                         mine_name=mine["name"], reference_name=theirs["name"], cache=cache)


def with_effective_expected(db: Database, attempt: Attempt) -> Attempt:
    """The attempt with its effective expected level (`storage.queries.expected_level_of`: a
    reviewer's claim review, else the rule-based level), the level its over-claim flag compares."""
    from storage.queries import effective_expected_level

    level = effective_expected_level(db, attempt.id).level
    return attempt if level == attempt.expected_level else dataclasses.replace(attempt, expected_level=level)


def verify_migration(db: Database, migration: Migration, study: Study, reviewer: str, *,
                     seq: int | None = None, force: bool = False) -> Report:
    """Verify a migration's agent attempts (or the one with `seq`)."""
    from storage import queries, records
    from workbench.verify.ladder import judge
    from workbench.verify.settings import merge

    settings = merge(queries.verify_settings(db, migration.id))
    reference = verify_inputs.reference_attempt(db, migration.id)
    ref_run = load_run(db, reference, settings) if reference else None
    loaded: dict[str, dict[str, Any]] = {}
    report = Report()
    for row in verify_inputs.agent_attempts(db, migration.id, seq):
        attempt = with_effective_expected(db, row)
        digest, inputs = inputs_for(db, migration, study, attempt, reference, settings)
        current = queries.current_verification(db, attempt.id)
        if current is not None and current.inputs_hash == digest and not force:
            report.outcomes.append(AttemptResult(attempt, current.id, False))
            continue
        run = load_run(db, attempt, settings)
        judgement = judge(run, ref_run, migration, study, settings,
                          compare_checkpoints(db, attempt, reference, settings, loaded))
        verification_id = records.record_verification(
            db,
            attempt_id=attempt.id,
            reference_attempt_id=reference.id if reference else None,
            verifier=VERIFIER,
            verifier_version=VERSION,
            inputs_hash=digest,
            inputs=inputs,
            settings=settings,
            judgement=judgement,
            reviewer=reviewer,
        )
        report.outcomes.append(AttemptResult(attempt, verification_id, True, judgement))
    return report


def verify_study(db: Database, reviewer: str, *, slug: str | None = None, seq: int | None = None,
                 force: bool = False) -> Report:
    from domain.errors import WorkbenchError
    from storage import queries

    study = queries.get_study(db)
    if study is None:
        raise WorkbenchError("the database holds no study yet: import a bundle first")
    if slug is not None:
        migration = queries.get_migration(db, slug)
        if migration is None:
            raise WorkbenchError(f"no migration {slug!r}")
        migrations = [migration]
    else:
        migrations = [s.migration for s in queries.iter_migration_summaries(db)]
    report = Report()
    for migration in migrations:
        report.outcomes += verify_migration(db, migration, study, reviewer, seq=seq, force=force).outcomes
    return report
