"""`workbench reference --run`: run the migration's command at its base commit on this machine,
with the re-run runner's pieces (a detached git worktree, the local backend's environment and
the probe), so the reference's metrics, hardware and times are measured, not typed.

The run is synchronous; its output goes to `<db stem>.reference/<slug>-<time>/output.log`, which
stays for the reviewer. A run that fails, times out or lacks the goal metric records nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError
from domain.jobs import with_setup
from domain.models import Attempt, AttemptSource, AttemptStatus, Command, Hardware, Migration
from domain.noise import SEED
from domain.redact import redact_env
from storage import setup as store
from storage.database import StudyDatabase
from workbench.rerun import preflight
from workbench.studies import check_command, find_migration
from workbench.verify.runseries import RUN_CLAIM


@dataclasses.dataclass(frozen=True, slots=True)
class Measured:
    """What one run gave: exit code, times, where its output is, and the probe's reports."""

    exit_code: int
    started_at: str
    ended_at: str
    log: Path
    reports: list[dict[str, Any]]


def _iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _execute(migration: Migration, argv: list[str], run_dir: Path, env: dict[str, str], venv: str | None,
             timeout: float | None, setup: str | None = None) -> Measured:
    """Check the base commit out, run the command there (after the migration's setup line) with
    the probe, remove the checkout."""
    from workbench import probe
    from workbench.rerun import backends, worktree

    tree, log = run_dir / "src", run_dir / "output.log"
    worktree.add(Path(migration.repo), migration.base_commit, tree)
    try:
        ctx = backends.Context(
            job_id=0, commit=migration.base_commit, worktree=tree, job_dir=run_dir, argv=with_setup(argv, setup), cwd=".",
            env=env, chips=migration.target.chips, host=None, zone=None, options={"venv": venv} if venv else {},
        )
        run_argv, run_env, cwd = backends.Local().main(ctx)
        ctx.probe_dir.mkdir(parents=True, exist_ok=True)
        started = _iso_now()
        with log.open("wb") as out:
            try:
                done = subprocess.run(run_argv, cwd=str(cwd), env=run_env, stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise WorkbenchError(f"--run: timed out after {timeout:g} s; nothing recorded (output: {log})") from None
            except OSError as exc:
                raise WorkbenchError(f"--run: cannot start {argv[0]!r} ({exc.strerror}); nothing recorded") from None
        return Measured(done.returncode, started, _iso_now(), log, probe.read_reports(ctx.probe_dir))
    finally:
        worktree.remove(Path(migration.repo), tree)


def _series(measured: Measured, sdb: StudyDatabase, migration: Migration) -> list[tuple[str, int, float]]:
    """The log's metrics (the verifier's extraction), the probe's series filling the gaps."""
    from storage import queries
    from workbench.verify.logscan import file_chunks
    from workbench.verify.runseries import as_points, run_series

    return as_points(run_series(file_chunks(measured.log), queries.verify_settings(sdb.db, migration.id),
                                measured.reports))


def _missing_goal(sdb: StudyDatabase, migration: Migration, log: Path) -> str:
    """Why a reference run was not recorded when its output lacks the goal metric: the metrics
    that were read, a sample line of each, and how to add a pattern that reads the goal (issue 38)."""
    from domain.text import clean
    from storage import queries
    from workbench.verify.logscan import file_chunks, scan_chunks
    from workbench.verify.patterns import migration_patterns

    facts = scan_chunks(file_chunks(log), patterns=migration_patterns(queries.verify_settings(sdb.db, migration.id)))
    where = {name: point[1] for name, steps in list(facts.point_series().items())[:8]
             if (point := facts.point(name, max(steps))) is not None}
    wanted = set(where.values())
    text: dict[int, str] = {}
    with log.open("rb") as fh:  # only the sample lines are kept
        for number, raw in enumerate(fh, 1):
            if number in wanted:
                text[number] = raw[:200].decode("utf-8", "replace").strip()
                if len(text) == len(wanted):
                    break
    found = [f"{name} (line {line}: {text.get(line, '')[:80]!r})" for name, line in where.items()]
    goal = migration.goal.metric
    return clean(f"--run: the goal metric {goal!r} is not in the reference's output; nothing recorded (output: {log}). "
                 + (f"Metrics read: {', '.join(found)}. " if found else "No metric was read from it. ")
                 + f"To read {goal} from its own line, add a pattern: workbench verify {sdb.path} --migration "
                 f"{migration.slug} --set 'patterns=[{{\"name\": \"{goal}\", \"regex\": \"<text before it> "
                 f"(?P<value>[0-9.]+)\"}}]' (docs/verification.md, Metric patterns), or where the log names it in"
                 f" words of its own, `workbench migration edit {sdb.path} {migration.slug} --metric \"WORDS={goal}\"`;"
                 " then run the reference again")


def _observed(reports: list[dict[str, Any]], given: Hardware | None) -> Hardware | None:
    from workbench import probe

    main = probe.main_report(reports)
    if main is not None and main.get("device_kind"):
        count = main.get("devices_used") or main.get("global_device_count")
        if isinstance(count, int) and count > 0:
            return Hardware(str(main["device_kind"]).lower(), count)
    return given


def run_replicates(sdb: StudyDatabase, slug: str, replicates: int, **options: Any) -> list[Attempt]:
    """The reference run `replicates` times, each with its seed (`SEED`), each recorded: level 2
    measures the reference's noise from them. One run (replicates 1) is `run_reference` as it is,
    without a seed."""
    if replicates <= 1:
        return [run_reference(sdb, slug, **options)]
    made = []
    for seed in range(1, replicates + 1):
        made.append(run_reference(sdb, slug, **{**options, "env": {**options["env"], SEED: str(seed)}}, seed=seed))
    return made


def run_reference(sdb: StudyDatabase, slug: str, *, command: str | None, env: dict[str, str],
                  venv: str | None, timeout: float | None, hardware: Hardware | None, reviewer: str,
                  seed: int | None = None) -> Attempt:
    """Run, measure and record the migration's reference run; WorkbenchError when it fails. With
    `seed`, `{seed}` in the command becomes it."""
    migration = find_migration(sdb, slug)
    text = check_command(command) or store.migration_command(sdb.db, migration.id)
    if not text:
        raise WorkbenchError("--command: the migration has no command; give the reference's command here")
    if seed is not None:
        text = text.replace("{seed}", str(seed))
    argv = shlex.split(text)
    preflight.check_local(Path(migration.repo), migration.base_commit, tuple(argv), ".", env,
                          {"venv": venv} if venv else {})  # as the run will start: nothing stored when it cannot
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    runs = sdb.path.resolve().parent / f"{sdb.path.stem}.reference"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{slug}-{stamp}-", dir=runs))
    t0 = time.monotonic()
    measured = _execute(migration, argv, run_dir, env, venv, timeout, store.migration_setup(sdb.db, migration.id))
    if measured.exit_code != 0:
        raise WorkbenchError(f"--run: the reference run exited with {measured.exit_code}; nothing recorded"
                             f" (output: {measured.log})")
    points = _series(measured, sdb, migration)
    if not any(name == migration.goal.metric for name, _, _ in points):
        raise WorkbenchError(_missing_goal(sdb, migration, measured.log))
    attempt = Attempt(
        id=0, migration_id=migration.id, seq=store.next_reference_seq(sdb.db, migration.id),
        source=AttemptSource.REFERENCE, commit=migration.base_commit,
        command=Command(tuple(shlex.split(text)), ".", redact_env(env)), status=AttemptStatus.OK,
        started_at=measured.started_at, ended_at=measured.ended_at, exit_code=0, exit_code_source="process",
        expected_level=None, claim=f"{RUN_CLAIM} ({time.monotonic() - t0:.1f} s).",
        intended_hardware=None, observed_hardware=_observed(measured.reports, hardware),
    )
    probes = [(r.get("_file") or "probe.json", r.get("rank"), json.dumps(r, default=str)) for r in measured.reports]
    attempt_id = store.add_reference(sdb.db, attempt, measured.log, points, reviewer, probes=probes)
    return dataclasses.replace(attempt, id=attempt_id)
