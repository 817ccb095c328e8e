"""`workbench intervene` and `decide`: the human side of a migration, recorded from a shell."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import db_argument, migration_or_exit, study_at
from domain.errors import WorkbenchError
from workbench import config


@click.command()
@db_argument
@click.argument("migration")
@click.option("--kind", required=True, help="Intervention kind (docs/effort.md), e.g. fix_environment.")
@click.option("--minutes", required=True, help="Minutes spent: 15, 7.5 or 1:30.")
@click.option("--note", help="What was done.")
@click.option("--attempt", "seq", type=int, help="Sequence number of the attempt it concerns.")
@click.option("--corrects", type=int, help="Id of the intervention this record corrects.")
def intervene(db: Path, migration: str, kind: str, minutes: str, note: str | None, seq: int | None,
              corrects: int | None) -> None:
    """Record a human intervention in a migration (the reviewer from WORKBENCH_REVIEWER).

    Without --attempt, while the migration's sessions are being watched (`workbench watch` or the
    app's W), the intervention concerns the attempt that is the latest at this moment.
    Prints the new record's id. Bad input (an unknown kind, negative or absurd minutes, an
    attempt that does not exist) prints one line and exits with status 2.
    """
    from storage import queries, records, watches

    if note is not None and not note.strip():
        raise WorkbenchError("--note is empty: say what was done, or leave --note out")
    with study_at(db) as study:
        sdb = study.db
        found = migration_or_exit(sdb, db, migration)
        attempt_id = None
        if seq is not None:
            attempt_id = queries.attempt_id_by_seq(sdb, found.id, seq)
            if attempt_id is None:
                raise WorkbenchError(f"--attempt: migration {migration!r} has no attempt {seq}")
        try:
            new_id = records.record_intervention(
                sdb, migration_id=found.id, kind=kind, minutes=minutes, note=note or "",
                reviewer=config.reviewer(), attempt_id=attempt_id, corrects=corrects,
            )
        except ValueError as exc:
            raise WorkbenchError(f"--{exc}") from None
        linked = watches.intervention_seq(sdb, new_id) if attempt_id is None and corrects is None else None
    if linked is not None:
        click.echo(f"intervention {new_id} recorded, on attempt {linked} (the latest: a watch is live)")
    else:
        click.echo(f"intervention {new_id} recorded")


@click.command()
@db_argument
@click.argument("migration")
@click.argument("kind", type=click.Choice(["accept", "stop", "continue"]))
@click.option("--reason", default="", help="Why; required when it goes against the rules' suggestion.")
def decide(db: Path, migration: str, kind: str, reason: str) -> None:
    """Record a decision on a migration: accept, stop or continue.

    The budget figures and the rules' suggestion at this moment are stored with it, and the
    migration's status follows. Prints the figures. A decision against the suggestion without
    --reason prints one line and exits with status 2; so does any decision without --reason from
    a reviewer judging one of the migration's attempts blind, who is shown neither the suggestion
    nor the best level (docs/judgements.md).
    """
    from domain.models import DecisionKind
    from storage import queries, records
    from workbench.blind import sight

    with study_at(db) as study:
        sdb = study.db
        found = migration_or_exit(sdb, db, migration)
        seen = sight(sdb, config.reviewer(), migrations=True)
        if not seen.sees_migration(found.id) and not reason.strip():
            raise WorkbenchError("--reason: required while you judge one of this migration's attempts blind"
                                 " (whether the rules agree would tell its verdicts)")
        try:
            new_id = records.record_decision(
                sdb, migration_id=found.id, kind=DecisionKind(kind), reason=reason,
                reviewer=config.reviewer(),
            )
        except ValueError as exc:
            raise WorkbenchError(f"--{exc}") from None
        made = queries.decisions(sdb, found.id)[-1]
    suggested = seen.suggested(found.id, made.suggested)
    against = "" if suggested is None or suggested is made.kind else f" (the rules suggested {suggested.value})"
    click.echo(f"decision {new_id}: {kind}{against}")
    click.echo(" ".join(f"{k}={v}" for k, v in seen.figures(found.id, made.figures).items() if v is not None))
