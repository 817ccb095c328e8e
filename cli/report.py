"""`workbench report`: the study's counted outcomes in md, html, csv, json or latex."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.common import db_argument, study_at
from domain.errors import WorkbenchError
from domain.text import clean


@click.command()
@db_argument
@click.option("--migration", "slugs", multiple=True, metavar="SLUG",
              help="Only this migration (repeatable); the whole study without it.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "csv", "json", "latex"]), default=None,
              help="md unless -o's name says (.md .html .json .tex .zip); csv writes a zip with one CSV file per table.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output; its name must fit the format.")
@click.option("--pseudonymise", is_flag=True, help="Replace reviewer names with Reviewer 1, 2, ...")
@click.option("--final", type=click.Choice(["accepted", "last-passing"]), default="accepted", show_default=True,
              help="Final run: the accepted attempt, or the last verified one that passed level 1.")
def report(db: Path, slugs: tuple[str, ...], fmt: str | None, output: Path | None, pseudonymise: bool,
           final: str) -> None:
    """Export the study's counted outcomes, human effort and costs (see docs/report.md).

    API keys and tokens in commands, claims, notes and reasons are redacted in every format.
    Refused to a reviewer (WORKBENCH_REVIEWER) while they judge any attempt blind.
    """
    from workbench import config
    from workbench.blind import closed_while_blind
    from workbench.report import build_for, render

    fmt = output_format(fmt, output)

    with study_at(db, write=False) as study:
        closed_while_blind(study.db, config.reviewer(), "workbench report")
        data = render(build_for(study.db, fmt, list(slugs), pseudonymise=pseudonymise, final=final), fmt)
    if output is not None:
        try:
            output.write_bytes(data)
        except OSError as exc:
            raise WorkbenchError(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
        click.echo(f"wrote {clean(str(output))} ({len(data):,} bytes)", err=True)
    elif fmt == "csv" and sys.stdout.isatty():
        raise WorkbenchError("--format csv writes a zip: give -o FILE or redirect standard output")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json", ".tex": "latex",
            ".zip": "csv"}
"""The format each file name promises; csv's is .zip (one CSV file per table)."""


def output_format(fmt: str | None, output: Path | None) -> str:
    """The format to write: --format, else what -o's name promises, else md. A name that promises
    another format than --format (`--format csv -o x.csv` wrote a zip) is refused, before any work."""
    if output is None:
        return fmt or "md"
    suffix = output.suffix.lower()
    named = SUFFIXES.get(suffix)
    if suffix == ".csv":
        raise WorkbenchError(f"-o {output}: the csv format is a zip of one CSV file per table,"
                             f" so give -o a .zip name ({output.with_suffix('.zip').name})")
    if fmt is None:
        return named or "md"
    if named is not None and named != fmt:
        raise WorkbenchError(f"-o {output}: the name promises {named}, not --format {fmt}:"
                             f" give -o a {_suffix_of(fmt)} name, or drop --format")
    return fmt


def _suffix_of(fmt: str) -> str:
    return next(suffix for suffix, named in SUFFIXES.items() if named == fmt)
