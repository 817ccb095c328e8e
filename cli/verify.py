"""`workbench verify`: the five-level ladder from a shell, as a table, with reasons, or as JSON."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from cli.common import db_argument, echo_json, json_option, jsonable, migration_filter, migration_or_exit, study_at
from cli.common import table as format_table
from domain.errors import WorkbenchError
from domain.text import clean
from workbench import config

_MARK = {"pass": "✓", "fail": "✗", "unknown": "?"}


@click.command()
@db_argument
@migration_filter
@click.option("--attempt", "seq", type=int, help="Only the attempt with this sequence number.")
@click.option("--set", "assignments", multiple=True, metavar="KEY=VALUE",
              help="Override a verify setting for --migration (recorded, then re-verifies); repeatable.")
@click.option("--force", is_flag=True, help="Verify again even when the evidence is unchanged.")
@click.option("--reasons", is_flag=True, help="Print each level's reason and evidence under the table.")
@json_option()
def verify(db: Path, slug: str | None, seq: int | None, assignments: tuple[str, ...], force: bool,
           reasons: bool, as_json: bool) -> None:
    """Verify attempts on the five-level ladder from the evidence in the database.

    Unchanged evidence, settings and verifier change nothing; otherwise new verdicts
    supersede the current ones, which stay in history. See docs/verification.md.
    """
    from workbench.verify import verify_study

    if seq is not None and slug is None:
        raise WorkbenchError("--attempt needs --migration")
    with study_at(db) as study:
        sdb = study.db
        if seq is not None:
            _attempt_or_exit(sdb, migration_or_exit(sdb, db, slug), seq)
        if assignments:
            if slug is None:
                raise WorkbenchError("--set needs --migration")
            _record_settings(sdb, migration_or_exit(sdb, db, slug), assignments)
        report = verify_study(sdb, config.reviewer(), slug=slug, seq=seq, force=force)
        rows = [_row(sdb, outcome) for outcome in report.outcomes]
    if as_json:
        echo_json([_json_row(*row) for row in rows])
        return
    click.echo(_table(rows))
    if reasons:
        _print_reasons(rows)


def _attempt_or_exit(sdb: Any, migration: Any, seq: int) -> None:
    from storage import queries

    if queries.attempt_id_by_seq(sdb, migration.id, seq) is None:
        raise WorkbenchError(f"--attempt: migration {migration.slug!r} has no attempt {seq}")


def _record_settings(sdb: Any, migration: Any, assignments: tuple[str, ...]) -> None:
    """The reviewer's KEY=VALUE overrides on top of the current ones, recorded before verifying."""
    from storage import queries, records
    from workbench.verify.settings import apply_assignment, parse_assignment

    overrides = queries.verify_settings(sdb, migration.id)
    try:
        for text in assignments:
            overrides = apply_assignment(overrides, *parse_assignment(text))
    except ValueError as exc:
        raise WorkbenchError(str(exc)) from None
    records.add_verify_settings(sdb, migration_id=migration.id, settings=overrides,
                                source="reviewer", reviewer=config.reviewer())


def _row(sdb: Any, outcome: Any) -> tuple[Any, ...]:
    from storage import queries

    a = outcome.attempt
    migration = queries.migration_by_id(sdb, a.migration_id)
    return (migration.slug if migration else "", a, queries.current_verification(sdb, a.id),
            queries.verdicts(sdb, a.id), queries.current_failure(sdb, a.id), outcome.changed)


def _json_row(slug_of: str, a: Any, v: Any, verdicts: Any, failure: Any, changed: bool) -> dict[str, Any]:
    return {
        "migration": slug_of,
        "seq": a.seq,
        "changed": changed,
        "verification": jsonable(asdict(v)),
        "levels": [
            {"level": d.level, "outcome": d.outcome.value, "effective": d.effective.value,
             "reason": d.reason, "evidence": [asdict(e) for e in d.evidence]}
            for d in verdicts
        ],
        "failure": jsonable(asdict(failure)) if failure else None,
        "expected_level": a.expected_level,
    }


def _table(rows: list[tuple[Any, ...]]) -> str:
    return format_table(
        ["migration", "seq", "L1-5", "level", "expected", "cause", "silent", "over-claim", "time", "cost", "new"],
        [
            [
                slug_of,
                a.seq,
                "".join(_MARK[d.effective.value] for d in verdicts),
                v.highest_level,
                a.expected_level or "",
                v.cause.value if v.cause else "",
                "yes" if v.silent else "",
                "" if v.over_claim is None else ("yes" if v.over_claim else "no"),
                "" if v.time_ratio is None else f"x{v.time_ratio:.2f}",
                "" if v.cost_ratio is None else f"x{v.cost_ratio:.2f}",
                "yes" if changed else "",
            ]
            for slug_of, a, v, verdicts, failure, changed in rows
        ],
    )


def _print_reasons(rows: list[tuple[Any, ...]]) -> None:
    for slug_of, a, v, verdicts, failure, _ in rows:
        click.echo(f"\n{slug_of} #{a.seq}")
        for d in verdicts:
            click.echo(clean(f"  L{d.level} {d.effective.value}: {d.reason}"))
            for e in d.evidence[:4]:
                click.echo(clean(f"      {e.kind} {e.ref}: {e.text}"))
        if failure is not None:
            click.echo(clean(f"  cause {failure.cause.value}{' (silent)' if failure.silent else ''}: {failure.note}"))
