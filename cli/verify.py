"""`workbench verify`: the five-level ladder from a shell, as a table, with reasons, or as JSON."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

import click

from cli.common import Spooled, db_argument, json_option, migration_filter, migration_or_exit, study_at
from domain.errors import WorkbenchError
from domain.jobs import VERDICT_MARKS
from domain.text import clean, plural
from workbench import config


@click.command()
@db_argument
@migration_filter
@click.option("--attempt", "seq", type=int, help="Only the attempt with this sequence number.")
@click.option("--set", "assignments", multiple=True, metavar="KEY=VALUE",
              help="Override a verify setting for --migration (recorded, then re-verifies); repeatable.")
@click.option("--force", is_flag=True,
              help="Verify again even when the evidence is unchanged; first read the series of the runs the"
                   " workbench ran (re-runs, reference --run) again from their logs with the migration's patterns.")
@click.option("--changed", is_flag=True,
              help="List only attempts whose evidence or settings changed (the others are skipped by their inputs hash).")
@click.option("--workers", type=click.IntRange(min=1), help="Processes judging attempts. Default: the cores, at most 8.")
@click.option("--rerun-unknown", is_flag=True,
              help="Then re-run with the probe every attempt whose level 3 is unknown or that has no trace "
                   "(no probe report of its own or of a re-run; needs --backend).")
@click.option("--backend", type=click.Choice(["local", "ssh", "gcloud", "skypilot"]),
              help="Backend of the --rerun-unknown jobs.")
@click.option("--chips", type=click.IntRange(min=1), help="Chips of the --rerun-unknown jobs. Default: the intended count.")
@click.option("--host", help="ssh host, TPU VM name or cluster of the --rerun-unknown jobs.")
@click.option("--yes", "-y", is_flag=True, help="Start the --rerun-unknown jobs without asking (commands are printed first).")
@click.option("--reasons", is_flag=True, help="Print each level's reason and evidence under the table.")
@json_option()
def verify(db: Path, slug: str | None, seq: int | None, assignments: tuple[str, ...], force: bool, changed: bool,
           workers: int | None, rerun_unknown: bool, backend: str | None, chips: int | None, host: str | None,
           yes: bool, reasons: bool, as_json: bool) -> None:
    """Verify attempts on the five-level ladder from the evidence in the database.

    Unchanged evidence, settings and verifier change nothing; otherwise new verdicts
    supersede the current ones, which stay in history. See docs/verification.md.
    """
    import time

    from storage.records import now
    from workbench.blind import sight
    from workbench.verify import NotAllVerified, overrides_left_behind, study_targets, verify_groups
    from workbench.verify.batch import default_workers
    from workbench.verify.runseries import EXTRACTION_SETTINGS
    from workbench.verify.unknown import unknown_at_level3

    if seq is not None and slug is None:
        raise WorkbenchError("--attempt needs --migration")
    if rerun_unknown and backend is None:
        raise WorkbenchError("--rerun-unknown needs --backend")
    with study_at(db) as study:
        sdb = study.db
        if seq is not None:
            _attempt_or_exit(sdb, migration_or_exit(sdb, db, slug), seq)
        if assignments:
            if slug is None:
                raise WorkbenchError("--set needs --migration")
            _record_settings(sdb, migration_or_exit(sdb, db, slug), assignments)
        if force or any(a.partition("=")[0].strip().split(".")[0] in EXTRACTION_SETTINGS for a in assignments):
            _extract_again(sdb, slug, seq)
        started, since = time.perf_counter(), now()
        rows = Spooled(None if as_json else COLUMNS)  # spooled as printed: 150,000 rows stay off the heap
        said = Spooled()
        seen = judged = hidden = reruns = 0
        unknown_l3: list[Any] = []
        failed: NotAllVerified | None = None
        with _progress() as progress:
            study_of, migrations = study_targets(sdb, slug)
            try:
                for group in verify_groups(sdb, migrations, study_of, config.reviewer(), seq=seq, force=force,
                                           workers=workers or default_workers(), progress=progress):
                    seen, judged = seen + len(group), judged + sum(o.changed for o in group)
                    reruns += sum(o.attempt.rerun_of is not None for o in group)
                    blind = sight(sdb, config.reviewer(), attempts=[o.attempt.id for o in group])
                    hidden += len(blind.hidden)
                    listed = [o for o in group if (o.changed or not changed) and blind.sees_attempt(o.attempt.id)]
                    for row in _rows(sdb, listed, evidence=reasons or as_json):
                        rows.add(_json_row(*row) if as_json else _cells(*row))
                        for line in _reasons(*row) if reasons and not as_json else []:
                            said.add(line)
                    if rerun_unknown:
                        unknown_l3 += unknown_at_level3(sdb, [o.attempt for o in group if blind.sees_attempt(o.attempt.id)])
            except NotAllVerified as exc:  # raised once every other attempt is written: they are listed first
                failed = exc
        _summary(seen, judged, time.perf_counter() - started, reruns)
        for line in overrides_left_behind(sdb, config.reviewer(), since):
            click.echo(line, err=True)
        if hidden:
            click.echo(f"{hidden} of them not listed: you judge them blind (docs/judgements.md)", err=True)
        elif seq is None:
            _counted(sdb, [m.id for m in migrations], config.reviewer())
        if rerun_unknown:
            _rerun_unknown(study, unknown_l3, backend or "local", chips, host, yes)
    rows.echo()
    for line in said.items():
        click.echo(line)
    if failed is not None:
        raise failed


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal (the service only calls back)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("verifying", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _summary(seen: int, judged: int, seconds: float, reruns: int) -> None:
    """How many were verified; re-runs said apart, as runs of their attempts (the rows mark them)."""
    rate = f", {judged / seconds:.0f} attempts/s" if judged and seconds > 0 else ""
    what = "attempts" if not reruns else f"runs: {seen - reruns} attempts, {plural(reruns, 're-run')}"
    click.echo(f"verified {judged} of {seen} {what} ({seen - judged} unchanged) in {seconds:.1f} s{rate}", err=True)


def _counted(db: Any, migration_ids: list[int], reviewer: str) -> None:
    """The counts as the app's header and the report give them (storage.counted: a re-run counts as
    a run of the attempt it re-ran, overrides included); not while the reviewer judges one blind."""
    from storage import queries, runs

    if not migration_ids or queries.hidden_migrations(db, reviewer) & set(migration_ids):
        return
    whole = len(migration_ids) != 1
    t = runs.counted_totals(db, None if whole else migration_ids[0])
    click.echo(f"counted: {plural(t['attempts'], 'attempt')} (re-runs as runs of the attempt they re-ran),"
               f" {t['verified']} verified, {t['failed']} failed ({t['silent']} silent),"
               f" {plural(t['over_claims'], 'over-claim')}", err=True)


def _rerun_unknown(study: Any, targets: list[Any], backend: str, chips: int | None, host: str | None,
                   yes: bool) -> None:
    """Re-run with the probe each attempt whose level 3 is unknown or that has no trace; says which
    jobs it started."""
    import shlex

    from storage import queries
    from workbench.verify.unknown import launch_all, rerun_specs

    if not targets:
        click.echo("no attempt has an unknown level 3 or no trace: nothing to re-run", err=True)
        return
    specs = rerun_specs(study.db, targets, backend, chips=chips, host=host)
    names = {}
    for attempt, spec in zip(targets, specs):
        migration = queries.migration_by_id(study.db, attempt.migration_id)
        names[attempt.id] = f"{migration.slug if migration else attempt.migration_id} #{attempt.seq}"
        click.echo(clean(f"re-run {names[attempt.id]} on {backend}, {plural(spec.chips, 'chip')}: {shlex.join(spec.argv)}"),
                   err=True)
    if not yes and not click.confirm(f"Start {plural(len(specs), 're-run')}?", default=False, err=True):
        raise WorkbenchError("not confirmed: nothing ran")
    for attempt, job in zip(targets, launch_all(study, specs, config.reviewer())):
        click.echo(clean(f"job {job.id} started for {names[attempt.id]} (log: {job.log_path})"), err=True)


def _extract_again(sdb: Any, slug: str | None, seq: int | None) -> None:
    """The series of the runs the workbench ran (re-runs, `reference --run`) read again from their
    logs with the migration's current patterns and names, before verifying; says how many changed."""
    from workbench.verify import study_targets
    from workbench.verify.runseries import extract_again

    _, migrations = study_targets(sdb, slug)
    for migration in migrations:
        changed = extract_again(sdb, migration.id, config.reviewer(), seq)
        if changed:
            click.echo(clean(f"{migration.slug}: series read again from the logs of {plural(len(changed), 'run')}"
                             " with its patterns"), err=True)


def _attempt_or_exit(sdb: Any, migration: Any, seq: int) -> None:
    from storage import queries

    if queries.attempt_id_by_seq(sdb, migration.id, seq) is None:
        raise WorkbenchError(f"--attempt: migration {migration.slug!r} has no attempt {seq}")


def _record_settings(sdb: Any, migration: Any, assignments: tuple[str, ...]) -> None:
    """The reviewer's KEY=VALUE overrides on top of the current ones, recorded before verifying."""
    import json
    import re

    from storage import queries, records
    from workbench.verify.patterns import migration_patterns
    from workbench.verify.settings import apply_assignment, parse_assignment

    overrides = queries.verify_settings(sdb, migration.id)
    keys = []
    try:
        for text in assignments:
            key, value = parse_assignment(text)
            overrides = apply_assignment(overrides, key, value)
            keys.append(key)
        migration_patterns({**overrides, "default_patterns": False})  # a bad pattern or name refused now, by name
    except (ValueError, re.error, KeyError, TypeError, AttributeError) as exc:
        raise WorkbenchError(f"--set: {exc}") from None
    stored = records.add_verify_settings(sdb, migration_id=migration.id, settings=overrides,
                                         source="reviewer", reviewer=config.reviewer())
    for key in dict.fromkeys(keys):
        value: Any = overrides
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        said = "stored" if stored is not None else "unchanged"
        click.echo(clean(f"{said} for {migration.slug}: {key} = {json.dumps(value)}"), err=True)


def _rows(sdb: Any, outcomes: list[Any], evidence: bool) -> Iterator[tuple[Any, ...]]:
    """Each outcome's row as printed: one migration's attempts (a group), read in one go; the
    verdicts' evidence and the failures only where they are printed (`evidence`: the table has
    neither, and its failure column is the verification's cause). A re-run is a run of the
    attempt it re-ran, not an attempt (the `counted:` line counts it so): its row follows that
    attempt's, marked `N (re-run of #M)`."""
    from storage import queries, runs

    if not outcomes:
        return
    ids = [o.attempt.id for o in outcomes]
    migration = queries.migration_by_id(sdb, outcomes[0].attempt.migration_id)
    slug = migration.slug if migration else ""
    verifications, verdicts = queries.current_verifications(sdb, ids), queries.current_verdicts(sdb, ids, evidence=evidence)
    failures = queries.current_failures(sdb, ids) if evidence else {}
    of = runs.rerun_of_seqs(sdb, ids)
    for o in sorted(outcomes, key=lambda o: (of.get(o.attempt.id, o.attempt.seq), o.attempt.seq)):
        aid = o.attempt.id
        yield (slug, o.attempt, verifications.get(aid), verdicts.get(aid, []), failures.get(aid), o.changed,
               of.get(aid))


def _json_row(slug_of: str, a: Any, v: Any, verdicts: Any, failure: Any, changed: bool,
              of: int | None) -> dict[str, Any]:
    """One attempt's item of `--json`: its records' fields as `jsonable(asdict(...))` gives them,
    built directly (asdict deep-copies every value: about 80 us a row, 150,000 rows a study)."""
    return {
        "migration": slug_of,
        "seq": a.seq,
        "rerun_of": of,
        "changed": changed,
        "verification": _fields(v),
        "levels": [
            {"level": d.level, "outcome": d.outcome.value, "effective": d.effective.value,
             "reason": d.reason, "evidence": [_fields(e) for e in d.evidence]}
            for d in verdicts
        ],
        "failure": {**_fields(failure), "evidence": [_fields(e) for e in failure.evidence]} if failure else None,
        "expected_level": a.expected_level,
    }


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields by name, enums as their values (a `Verification`, `Failure` or `Evidence`:
    plain values but for a failure's evidence)."""
    out = {name: getattr(record, name) for name in record.__slots__}
    for name, value in out.items():
        if isinstance(value, Enum):
            out[name] = value.value
    return out


COLUMNS = ["migration", "seq", "L1-5", "level", "expected", "cause", "silent", "over-claim", "time", "cost", "new"]


def _cells(slug_of: str, a: Any, v: Any, verdicts: Any, failure: Any, changed: bool,
           of: int | None) -> list[Any]:
    """One row of the table, as printed: level and over-claim follow overrides, as the app's
    header and the report count them (domain.ladder)."""
    from domain.ladder import highest_level, over_claim

    effective = {d.level: d.effective.value for d in verdicts}
    over = over_claim(a.expected_level, effective)
    return [
        slug_of,
        a.seq if of is None else f"{a.seq} (re-run of #{of})",
        "".join(VERDICT_MARKS[d.effective.value] for d in verdicts),
        highest_level(effective),
        a.expected_level or "",
        v.cause.value if v.cause else "",
        "yes" if v.silent and "fail" in effective.values() else "",
        "" if over is None else ("yes" if over else "no"),
        "" if v.time_ratio is None else f"x{v.time_ratio:.2f}",
        "" if v.cost_ratio is None else f"x{v.cost_ratio:.2f}",
        "yes" if changed else "",
    ]


def _reasons(slug_of: str, a: Any, v: Any, verdicts: Any, failure: Any, changed: bool,
             of: int | None) -> list[str]:
    """`--reasons`: each level's reason and first evidence, and the cause, under the table."""
    out = [f"\n{slug_of} #{a.seq}" + ("" if of is None else f" (re-run of #{of})")]
    for d in verdicts:
        out.append(clean(f"  L{d.level} {d.effective.value}: {d.reason}"))
        out += [clean(f"      {e.kind} {e.ref}: {e.text}") for e in d.evidence[:4]]
    if failure is not None:
        out.append(clean(f"  cause {failure.cause.value}{' (silent)' if failure.silent else ''}: {failure.note}"))
    return out
