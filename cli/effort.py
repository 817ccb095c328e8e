"""`workbench intervene` and `decide`: the human side of a migration, recorded from a shell."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import capped, db_argument, migration_or_exit, study_at
from domain.errors import WorkbenchError
from domain.text import clean
from workbench import config


@click.command()
@db_argument
@click.argument("migration")
@click.option("--kind", required=True, help="Intervention kind (docs/effort.md), e.g. fix_environment.")
@click.option("--minutes", required=True, help="Minutes spent: 15, 7.5 or 1:30.")
@click.option("--note", help="What was done.", callback=capped)
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
@click.option("--reason", default="", help="Why; required when it goes against the rules' suggestion.", callback=capped)
@click.option("--attempt", "seq", type=int,
              help="The attempt decided on (its seq): the run accepted or stopped at. Default: the latest.")
def decide(db: Path, migration: str, kind: str, reason: str, seq: int | None) -> None:
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
        attempt_id = None if seq is None else queries.attempt_id_by_seq(sdb, found.id, seq)
        if seq is not None and attempt_id is None:
            raise WorkbenchError(f"--attempt: migration {migration!r} has no attempt {seq}")
        try:
            new_id = records.record_decision(
                sdb, migration_id=found.id, kind=DecisionKind(kind), reason=reason,
                reviewer=config.reviewer(), attempt_id=attempt_id,
            )
        except ValueError as exc:
            raise WorkbenchError(f"--{exc}") from None
        made = queries.decisions(sdb, found.id)[-1]
        decided = None if made.attempt_id is None else queries.attempt_summary(sdb, made.attempt_id)
    suggested = seen.suggested(found.id, made.suggested)
    against = "" if suggested is None or suggested is made.kind else f" (the rules suggested {suggested.value})"
    on = "" if decided is None else f", attempt #{decided.attempt.seq}" + ("" if seq is not None else " (the latest)")
    if decided is not None and seq is not None and decided.attempt.seq != seq:
        on += f", which re-run #{seq} ran again"
    click.echo(f"decision {new_id}: {kind}{on}{against}")
    click.echo(" ".join(f"{k}={v}" for k, v in seen.figures(found.id, made.figures).items() if v is not None))


@click.command()
@db_argument
@click.argument("migration")
@click.argument("seq", type=int)
@click.option("--level", type=click.IntRange(1, 5), required=True, help="The level whose outcome you override.")
@click.option("--outcome", type=click.Choice(["pass", "fail", "unknown"]), required=True)
@click.option("--justification", required=True, help="Why the verifier's outcome is wrong here.", callback=capped)
def override(db: Path, migration: str, seq: int, level: int, outcome: str, justification: str) -> None:
    """Override one level's outcome of attempt SEQ, as `o` does in the app.

    The verifier's outcome stays beside it; the latest override counts everywhere (the app's
    header, `verify`, the report). Refused while you judge the attempt blind.
    """
    from domain.models import Outcome
    from storage import queries, records
    from workbench.blind import sight

    reviewer = config.reviewer()
    with study_at(db) as study:
        sdb = study.db
        found = migration_or_exit(sdb, db, migration)
        attempt_id = queries.attempt_id_by_seq(sdb, found.id, seq)
        if attempt_id is None:
            raise WorkbenchError(f"migration {migration!r} has no attempt {seq}")
        if not sight(sdb, reviewer, attempts=[attempt_id]).sees_attempt(attempt_id):
            raise WorkbenchError(f"attempt {seq}'s verdicts are hidden while you judge it blind:"
                                 " record your judgement first (workbench judge)")
        verdict = next((v for v in queries.verdicts(sdb, attempt_id) if v.level == level), None)
        if verdict is None:
            raise WorkbenchError(f"attempt {seq} has no level {level} verdict: verify it first (workbench verify)")
        if not justification.strip():
            raise WorkbenchError("--justification: say why the verifier's outcome is wrong")
        new_id = records.add_verdict_override(sdb, verdict_id=verdict.id, outcome=Outcome(outcome),
                                              justification=justification.strip(), reviewer=reviewer)
    click.echo(f"override {new_id}: {clean(migration)} #{seq} L{level} {verdict.effective.value} -> {outcome}"
               f" (the verifier said {verdict.outcome.value}; that stays beside it)")
