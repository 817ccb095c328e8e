"""`workbench judge`, `assign`, `queue`, `blind`, `agreement` and `adjudicate`: reviewers'
judgements, their queues and how far they agree (docs/judgements.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import (
    capped,
    db_argument,
    echo_json,
    json_option,
    migration_filter,
    migration_id_or_all,
    study_at,
    study_read,
    table,
)
from domain.errors import WorkbenchError
from workbench import config


@click.command()
@db_argument
@click.argument("migration")
@click.argument("seq", type=int)
@click.option("--levels", required=True, help="Five outcomes, level 1 first: pass, fail or unknown.")
@click.option("--cause", help="Failure cause (docs/failure-taxonomy.md) when a level fails.")
@click.option("--note", help="A free note.", callback=capped)
@click.option("--active-seconds", type=click.FloatRange(min=0), default=0.0, help="Time spent judging.")
def judge(db: Path, migration: str, seq: int, levels: str, cause: str | None, note: str | None,
          active_seconds: float) -> None:
    """Record your judgement of attempt SEQ (the reviewer from WORKBENCH_REVIEWER).

    A second judgement of the same attempt supersedes your first; both are kept. Then shows
    the verifier's verdicts beside yours, marking where they differ.
    """
    from domain.judgements import missing_cause
    from domain.models import Outcome
    from workbench.judging import record_judgement

    with study_at(db) as study:
        new_id, blind, rows = record_judgement(study.db, migration, seq, levels=levels, cause=cause, note=note,
                                               reviewer=config.reviewer(), active_seconds=active_seconds)
    click.echo(f"judgement {new_id} recorded{' (blind)' if blind else ''}")
    missing = missing_cause([Outcome(you) for _, you, _ in rows], cause)
    if missing:
        click.echo(f"warning: {missing}; judge again with --cause to name one", err=True)
    click.echo(table(["level", "you", "verifier", ""],
                     [[lv, you, machine, "differs" if machine not in ("-", you) else ""] for lv, you, machine in rows]))


def _reviewers(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


@click.command()
@db_argument
@click.option("--reviewers", required=True, help="Comma-separated names, e.g. ana,ben,chen.")
@click.option("--overlap", type=float, default=0.2, show_default=True,
              help="Fraction of attempts dealt to two reviewers, for agreement.")
@migration_filter
@click.option("--blind", is_flag=True, help="The reviewers judge these attempts blind.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same deal.")
def assign(db: Path, reviewers: str, overlap: float, slug: str | None, blind: bool, seed: int) -> None:
    """Deal the unjudged agent attempts out evenly (reference runs and re-runs excluded)."""
    from workbench.judging import assign as deal

    with study_at(db) as study:
        batch, pairs = deal(study.db, _reviewers(reviewers), overlap=overlap,
                            migration_id=migration_id_or_all(study.db, db, slug), blind=blind, seed=seed,
                            assigned_by=config.reviewer())
    per: dict[str, int] = {}
    for _, name in pairs:
        per[name] = per.get(name, 0) + 1
    click.echo(f"batch {batch}: {len({a for a, _ in pairs})} attempts, {len(pairs)} assignments"
               f"{' (blind)' if blind else ''}")
    click.echo(table(["reviewer", "attempts"], [[name, count] for name, count in sorted(per.items())]))


@click.command("queue")
@db_argument
@click.option("--reviewer", help="Whose queue (default: WORKBENCH_REVIEWER).")
@json_option("One JSON object instead of a table.")
def queue_cmd(db: Path, reviewer: str | None, as_json: bool) -> None:
    """List a reviewer's assigned attempts, with counts of done and left."""
    from storage.judgements import queue

    name = reviewer or config.reviewer()
    with study_read(db) as conn:
        items = queue(conn, name)
    done = sum(i.done for i in items)
    if as_json:
        echo_json({"reviewer": name, "done": done, "left": len(items) - done,
                   "attempts": [{"migration": i.migration, "seq": i.seq, "attempt_id": i.attempt_id,
                                 "blind": i.blind, "done": i.done} for i in items]})
        return
    click.echo(f"{name}: {done} done, {len(items) - done} left")
    click.echo(table(["migration", "seq", "blind", "done"],
                     [[i.migration, i.seq, "yes" if i.blind else "", "yes" if i.done else ""] for i in items]))


@click.command()
@db_argument
@click.argument("mode", type=click.Choice(["on", "off"]))
def blind(db: Path, mode: str) -> None:
    """Turn the study's blind mode on or off: every reviewer judges every attempt blind."""
    from storage.judgements import set_study_blind

    with study_at(db) as study:
        set_study_blind(study.db, mode == "on", config.reviewer())
    click.echo(f"blind mode {mode}")


def _figure(s: Any) -> str:
    if s.value is None:
        return f"- (n={s.n})"
    ci = f" [{s.interval[0]:.2f}, {s.interval[1]:.2f}]" if s.interval else ""
    return f"{s.value:.3f}{ci} (n={s.n})"


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "-"


@click.command()
@db_argument
@migration_filter
@click.option("--seed", type=int, default=None,
              help="Bootstrap seed [default: the fixed one, so figures repeat].")
@json_option("One JSON object instead of tables.")
def agreement(db: Path, slug: str | None, seed: int | None, as_json: bool) -> None:
    """Agreement per level: reviewer with reviewer, reviewer with verifier; the disagreements.

    Closed to a reviewer while they judge blind any attempt in its scope (the study, or the
    migration): the figures set the verifier's verdicts beside the judgements, and taking one's
    own away from a few gives the verdicts of the rest (docs/judgements.md). One line, status 2."""
    from workbench.blind import sight
    from workbench.judging import SEED, agreement_dict
    from workbench.judging import agreement as measure

    with study_at(db, write=False) as study:
        mid = migration_id_or_all(study.db, db, slug)
        seen = sight(study.db, config.reviewer(), scope=True if mid is None else [mid])
        if not seen.sees_scope:
            raise WorkbenchError(seen.closed("Agreement"))
        report = measure(study.db, None if mid is None else [mid], seed=SEED if seed is None else seed)
    if as_json:
        echo_json(agreement_dict(report))
        return
    click.echo(table(
        ["level", "kappa (reviewers)", "alpha (reviewers)", "kappa (verifier)", "v.pass/h.fail", "v.fail/h.pass"],
        [[la.level, _figure(la.human_kappa), _figure(la.human_alpha), _figure(la.verifier_kappa),
          la.confusion["pass"]["fail"], la.confusion["fail"]["pass"]] for la in report.levels]))
    click.echo("")
    click.echo(table(["judged", "judgements", "agree with verifier", "agree with claim"],
                     [["blind" if b.blind else "not blind", b.judgements, _rate(b.verifier_agree, b.verifier_n),
                       _rate(b.claim_agree, b.claim_n)] for b in report.blind]))
    click.echo(f"\n{len(report.disagreements)} disagreements to adjudicate")
    if report.disagreements:
        click.echo(table(["migration", "seq", "level", "verifier", "judgements"],
                         [[d.migration, d.seq, d.level, d.verifier or "-",
                           ", ".join(f"{r}={o} (#{i})" for i, r, o in d.judgements)] for d in report.disagreements]))


@click.command()
@db_argument
@click.argument("migration")
@click.argument("seq", type=int)
@click.option("--level", type=int, required=True, help="The level decided, 1 to 5.")
@click.option("--outcome", type=click.Choice(["pass", "fail"]), required=True)
@click.option("--reason", required=True, help="Why this is the final verdict.", callback=capped)
def adjudicate(db: Path, migration: str, seq: int, level: int, outcome: str, reason: str) -> None:
    """Record the final verdict of a level the reviewers disagreed on; it counts as an override."""
    from workbench.judging import adjudicate as decide

    if not reason.strip():
        raise WorkbenchError("--reason is empty: say why this is the final verdict")
    with study_at(db) as study:
        new_id, override_id = decide(study.db, migration, seq, level=level, outcome=outcome, reason=reason,
                                     reviewer=config.reviewer())
    click.echo(f"adjudication {new_id} recorded (override {override_id})")

