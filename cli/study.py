"""`workbench migrations` and `attempts`: a study's lists as tables or JSON."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from cli.common import db_argument, echo_json, json_option, jsonable, migration_or_exit, study_read, table


@click.command()
@db_argument
@json_option()
def migrations(db: Path, as_json: bool) -> None:
    """List a study's migrations.

    A reviewer judging one of a migration's attempts blind (docs/judgements.md) sees no failures,
    silent failures, level or over-claims for it until they have judged it."""
    from storage.queries import iter_migration_summaries
    from workbench.blind import MIGRATION_HIDDEN, migrations_seen_by
    from workbench.config import reviewer

    with study_read(db) as conn:
        summaries = migrations_seen_by(conn, reviewer(), list(iter_migration_summaries(conn)))
    if as_json:
        echo_json([{k: "hidden" if s.hidden and k in MIGRATION_HIDDEN else v for k, v in jsonable(asdict(s)).items()}
                   for s in summaries])
        return
    click.echo(
        table(
            ["migration", "status", "target", "attempts", "failed", "silent", "interventions", "level"],
            [
                [
                    s.migration.slug,
                    s.migration.status.value,
                    s.migration.target.describe(),
                    s.attempts,
                    "hidden" if s.hidden else s.failed,
                    "hidden" if s.hidden else s.silent_failures,
                    s.interventions,
                    "hidden" if s.hidden else "-" if s.highest_level is None else s.highest_level,
                ]
                for s in summaries
            ],
        )
    )


@click.command()
@db_argument
@click.argument("migration")
@json_option()
@click.option("--all-runs", is_flag=True, help="List each re-run as a row of its own too (by default a re-run is"
              " a run of the attempt it re-ran, counted in its `runs`).")
def attempts(db: Path, migration: str, as_json: bool, all_runs: bool) -> None:
    """List a migration's attempts, the reference runs included.

    A re-run is another run of the attempt it re-ran: one row per attempt, `runs` says how many
    it has and its ladder is counted over them (docs/report.md, "Re-run"). A reviewer blind to an
    attempt (docs/judgements.md) sees no claim, expected level, verdicts or cause for it until
    they have judged it."""
    from storage.queries import iter_attempt_summaries
    from workbench.blind import HIDDEN_FIELDS, as_seen_by
    from workbench.config import reviewer

    with study_read(db) as conn:
        found = migration_or_exit(conn, db, migration)
        summaries = as_seen_by(conn, reviewer(), list(iter_attempt_summaries(conn, found.id, folded=not all_runs)))
        if as_json:
            from workbench.ranwith import compare, reference_of

            ref = reference_of(conn, found.id)   # once for the list, not once an attempt
            ran = {s.attempt.id: (c.as_json() if (c := compare(conn, s.attempt, ref)) else None) for s in summaries}
    if as_json:
        echo_json([{k: "hidden" if s.hidden and k in HIDDEN_FIELDS else v for k, v in {
            **jsonable(asdict(s.attempt)), "ladder": s.ladder, "highest_level": s.highest_level,
            "failure": jsonable(asdict(s.failure)) if s.failure else None,
            "interventions": s.interventions, "runs": s.runs,
            "ran_with": ran[s.attempt.id]}.items()} for s in summaries])
        return
    click.echo(table(["seq", "source", "status", "exit", "L1-5", "level", "cause", "over", "expected", "runs",
                      "commit", "command"], [_attempt_row(s) for s in summaries]))


def _attempt_row(s) -> list[object]:
    """One attempt as `workbench attempts` lists it: its counted ladder, level, cause (the run that
    decided its lowest failing level) and over-claim, as the app's row shows them; `hidden` for
    each of them while the reviewer judges it blind."""
    from domain.jobs import VERDICT_MARKS

    a = s.attempt
    if s.hidden:
        judged = ["hidden"] * 5
    elif not any(s.ladder):
        judged = ["·" * len(s.ladder), "", "", "", a.expected_level or ""]
    else:
        cause = f"{s.failure.cause}{' (silent)' if s.failure.silent else ''}" if s.failure else ""
        judged = ["".join(VERDICT_MARKS[o.value] if o else "·" for o in s.ladder), s.highest_level, cause,
                  "over" if s.over_claim else "", a.expected_level or ""]
    return [a.seq, a.source.value, a.status.value, "" if a.exit_code is None else a.exit_code, *judged, s.runs,
            a.commit[:10], a.command.display()[:60]]
