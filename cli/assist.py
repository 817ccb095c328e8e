"""`workbench assist claims|brief|review|cost`: advisory model calls (docs/assist.md)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from cli.common import (
    capped,
    db_argument,
    echo_json,
    json_option,
    jsonable,
    migration_filter,
    migration_id_or_all,
    study_at,
    study_read,
)
from domain.errors import WorkbenchError
from domain.text import clean, plural
from workbench import config

_MODEL_HELP = "Model id (default: WORKBENCH_ASSIST_MODEL, else the built-in default)."


@click.group()
def assist() -> None:
    """AI assist through the Anthropic API: advisory only (docs/assist.md).

    Needs ANTHROPIC_API_KEY (read from the environment, never stored). Answers are cached in
    the study database: asking the same again costs nothing. --dry-run prints exactly what
    would be sent and sends nothing.
    """


def _assistant(model: str | None):
    from workbench.assist.client import Assistant, Settings

    return Assistant(Settings.from_env(model), reviewer=config.reviewer())


def _dollars(value: float | None, cached: bool = False) -> str:
    if cached:
        return "cached, no cost"
    return "cost not counted: no price for this model" if value is None else f"${value:.4f}"


@assist.command("claims")
@db_argument
@migration_filter
@click.option("--model", help=_MODEL_HELP)
@click.option("--dry-run", is_flag=True,
              help="Print each request body (one JSON object a line) instead of sending it.")
def assist_claims(db: Path, slug: str | None, model: str | None, dry_run: bool) -> None:
    """Extract claims the rules could not read: the level an agent said it reached.

    For agent attempts with a claim but no expected level, no extraction and no reviewer
    record yet. Extractions count in reports only once a reviewer accepts them
    (`workbench assist review`, or the app). Exit status 2 when any call failed.
    """
    from workbench.assist import claims
    from workbench.blind import sight

    assistant = _assistant(model)
    with study_at(db) as study:
        sdb = study.db
        todo = claims.pending(sdb, migration_id_or_all(sdb, db, slug))
        seen = sight(sdb, config.reviewer(), attempts=[a.id for _, a in todo])
        todo = [(m, a) for m, a in todo if seen.sees_attempt(a.id)]  # a claim is what blind review hides
        if dry_run:
            _print_claim_requests(sdb, assistant, todo)
            return
        if not todo:
            click.echo("no attempts need a model-extracted claim")
            return
        failed = _extract_claims(sdb, assistant, todo)
    if failed:
        sys.exit(2)


def _print_claim_requests(sdb: Any, assistant: Any, todo: list[Any]) -> None:
    from workbench.assist import claims

    for migration, attempt in todo:
        request = claims.claim_request(assistant, migration, attempt)
        cached = " (cached: would not be sent)" if assistant.cached(sdb, request) else ""
        click.echo(clean(f"# {migration.slug} #{attempt.seq}{cached}"), err=True)
        click.echo(json.dumps(request.body(), ensure_ascii=False))
    click.echo(f"{plural(len(todo), 'request')}; nothing sent", err=True)


def _extract_claims(sdb: Any, assistant: Any, todo: list[Any]) -> int:
    """Ask for each claim, print one line each and the total; returns how many calls failed."""
    from workbench.assist import claims
    from workbench.assist.client import AssistUnavailable

    failed = 0
    spent = 0.0
    for migration, attempt in todo:
        try:
            result = claims.extract(sdb, assistant, migration, attempt)
        except AssistUnavailable as exc:
            raise WorkbenchError(str(exc)) from None
        where = f"{migration.slug} #{attempt.seq}"
        if result.error:
            failed += 1
            click.echo(clean(f"{where}: failed: {result.error}"), err=True)
            continue
        answer = result.answer
        data = answer.data
        spent += answer.cost_usd or 0.0
        level = "no level" if data["expected_level"] is None else f"L{data['expected_level']}"
        quote = data["sentence"] or "(no sentence)"
        flag = "" if data["quote_found"] or not data["sentence"] else " [sentence not found in the claim]"
        click.echo(clean(
            f"{where}: {level}, success {'claimed' if data['success_claimed'] else 'not claimed'}:"
            f" {quote!r}{flag} ({answer.model}, {_dollars(answer.cost_usd, answer.cached)})"
        ))
    click.echo(f"{len(todo) - failed} extracted (model-extracted: a reviewer accepts or corrects each),"
               f" {failed} failed; ${spent:.4f} spent")
    return failed


@assist.command("brief")
@db_argument
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--model", help=_MODEL_HELP)
@click.option("--dry-run", is_flag=True, help="Print the request body instead of sending it.")
@json_option("The brief as one JSON object.")
def assist_brief(db: Path, migration: str, attempt: int, model: str | None, dry_run: bool, as_json: bool) -> None:
    """An advisory brief on one attempt: what happened, a suspected cause, a next step.

    Sends the attempt's diff (trimmed), its log around the verifier's evidence and its
    verdicts, all redacted. It never changes a verdict or a count.
    """
    from workbench.assist import brief as briefs

    assistant = _assistant(model)
    with study_at(db) as study:
        sdb = study.db
        found, target = briefs.find_attempt(sdb, migration, attempt, config.reviewer())
        inputs = briefs.gather(sdb, found, target)
        request = briefs.brief_request(assistant, inputs)
        if dry_run:
            if assistant.cached(sdb, request):
                click.echo("# cached: this request would not be sent", err=True)
            click.echo(request.dry_run())
            return
        result = briefs.ask(sdb, assistant, found, target, inputs)
    if as_json:
        echo_json({**jsonable(asdict(result)), "advisory": briefs.ADVISORY})
        return
    click.echo(clean(briefs.render_text(result), keep_newlines=True))


@assist.command("review")
@db_argument
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--accept", is_flag=True, help="Accept the latest model extraction.")
@click.option("--level", type=click.IntRange(1, 5), help="Correct: the agent expected this level.")
@click.option("--no-level", is_flag=True, help="Correct: the agent expected no level.")
@click.option("--note", default="", help="Why (kept with the record).", callback=capped)
def assist_review(db: Path, migration: str, attempt: int, accept: bool, level: int | None,
                  no_level: bool, note: str) -> None:
    """Accept or correct an attempt's model-extracted claim (an append-only record)."""
    from storage import queries, records
    from workbench.assist import brief as briefs

    if sum([accept, level is not None, no_level]) != 1:
        raise WorkbenchError("give one of --accept, --level N, --no-level")
    with study_at(db) as study:
        sdb = study.db
        _, target = briefs.find_attempt(sdb, migration, attempt, config.reviewer())
        if accept:
            extractions = queries.claim_extractions(sdb, target.id)
            if not extractions:
                raise WorkbenchError(f"{migration} #{attempt}: no model extraction to accept")
            records.add_claim_review(sdb, attempt_id=target.id, action="accept", reviewer=config.reviewer(),
                                     extraction_id=extractions[-1].id, note=note)
        else:
            records.add_claim_review(sdb, attempt_id=target.id, action="correct", reviewer=config.reviewer(),
                                     expected_level=level, note=note)
        effective = queries.effective_expected_level(sdb, target.id)
    shown = "none" if effective.level is None else f"L{effective.level}"
    click.echo(f"{migration} #{attempt}: expected level {shown} (from the {effective.source or 'reviewer'})")


@assist.command("cost")
@db_argument
@migration_filter
@json_option("One JSON object.")
def assist_cost(db: Path, slug: str | None, as_json: bool) -> None:
    """Tokens and dollars spent on model calls (cached answers cost nothing)."""
    from storage import queries

    with study_read(db) as conn:
        total = queries.llm_cost(conn, migration_id=migration_id_or_all(conn, db, slug))
    if as_json:
        echo_json(asdict(total))
        return
    click.echo(
        f"{plural(total.calls, 'call')}, {total.errors} failed; tokens: {total.input_tokens} in,"
        f" {total.output_tokens} out, {total.cache_read_tokens} cache reads, {total.cache_write_tokens}"
        f" cache writes; ${total.cost_usd:.4f}"
        + (f" (+{plural(total.unpriced_calls, 'call')} of unpriced models)" if total.unpriced_calls else "")
    )
