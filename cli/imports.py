"""`workbench import bundle|claude-code|git`: bring records into a study database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cli.common import counts, db_option, study_at
from cli.setup import with_project
from domain.errors import WorkbenchError
from domain.text import clean, plural
from workbench import config


@click.group("import")
def import_() -> None:
    """Bring records into a study database."""


def _print_problems(report: Any) -> None:
    for problem in report.problems:
        click.echo(clean(problem), err=True)


@import_.command("bundle")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@db_option("Study database (created if missing).")
def import_bundle_cmd(directory: Path, db: Path | None) -> None:
    """Import a study bundle (see docs/bundle-format.md).

    Bad records are reported as FILE:LINE and skipped; the rest import. Exit status 2 when a
    record was skipped; 0 when everything imported, with a warning line per log that was not
    UTF-8 (stored as bytes).
    """
    from workbench.bundle import BundleImporter

    importer = BundleImporter(directory)
    with study_at(db or config.default_db(), create=True) as study:
        report = importer.run(study, config.reviewer())
    _print_problems(report)
    for warning in report.warnings:
        click.echo(f"warning: {clean(warning)}", err=True)
    click.echo(counts(report) + (f"; {plural(len(report.problems), 'problem')} reported" if report.problems else "")
               + (f"; {plural(len(report.warnings), 'warning')}" if report.warnings else ""))
    if report.problems:
        sys.exit(2)


@with_project  # --project and --list (cli/setup.py)
@import_.command("claude-code")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option("Study database (it must hold the migration).")
@click.option("--migration", "slug", required=True, help="Slug of the migration the session worked on.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="The project's git repository: ties each attempt to a commit.")
@click.option("--all-bash", is_flag=True, help="Count every Bash call as an attempt, not only workload runs.")
@click.option("--workload", "patterns", multiple=True, metavar="REGEX",
              help="A Bash command matching this regular expression is an attempt (repeatable;"
                   " replaces the default rule).")
def import_claude_code_cmd(
    paths: tuple[Path, ...], db: Path | None, slug: str, repo: Path | None, all_bash: bool,
    patterns: tuple[str, ...],
) -> None:
    """Import attempts from Claude Code session transcripts (see docs/claude-code-import.md).

    PATH is a session .jsonl, a project folder under ~/.claude/projects, or a folder holding
    several. Prints one summary line per transcript. Exit status 0 when attempts were
    imported (or were already there), 2 when none were.
    """
    import re

    from workbench.importers.claude_code import ClaudeCodeImporter
    from workbench.importers.rules import WorkloadRule

    try:
        rule = WorkloadRule(all_bash=all_bash, patterns=patterns)
    except re.error as exc:
        raise WorkbenchError(f"--workload: not a regular expression ({exc})") from None
    with study_at(db or config.default_db()) as study:
        total = sum(p.stat().st_size for p in _jsonl_files(paths))
        show = sys.stderr.isatty() and total > (8 << 20)
        with click.progressbar(length=total, label="reading transcripts", file=sys.stderr,
                               show_eta=True) if show else _NoBar() as bar:
            importer = ClaudeCodeImporter(study, slug, config.reviewer(), rule=rule, repo=repo,
                                          progress=bar.update)
            report = importer.run(list(paths))
    _print_problems(report)
    for file in report.files:
        click.echo(clean(file.summary()))
        for problem in file.problems:
            click.echo(f"  {clean(problem)}")
    click.echo(counts(report))
    if report.imported == 0:
        if report.files:  # transcripts were read (a missing path is its own line already)
            click.echo(clean(report.why_none(rule)), err=True)
        sys.exit(2)


@import_.command("git")
@click.argument("repo", type=click.Path(file_okay=False, path_type=Path))
@db_option("Study database (it must hold the migration).")
@click.option("--migration", "slug", required=True, help="Slug of the migration.")
@click.option("--ref", default="HEAD", show_default=True, help="The branch or commit whose history to import.")
@click.option("--range", "commits", metavar="A..B",
              help="Import the first-parent commits of A..B instead of those after the base commit.")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path),
              help="A folder with <sha>.log and <sha>.metrics.jsonl beside the commits.")
def import_git_cmd(repo: Path, db: Path | None, slug: str, ref: str, commits: str | None,
                   logs: Path | None) -> None:
    """Import a repository in which each commit after the base is one attempt, as it is.

    An ordinary commit runs the migration's command and is timed by the commit; Attempt-*
    trailers of the message, where present, win (command, status, expectations); the log and
    metrics come from .workbench/ in the commit or from --logs (docs/claude-code-import.md).
    Exit status 0 when attempts were imported (or were already there), 2 when none were.
    """
    from workbench.importers.git_history import import_git

    if commits and ref != "HEAD":
        raise WorkbenchError("--range and --ref: give one of them")
    with study_at(db or config.default_db()) as study:
        report = import_git(study, repo, slug, config.reviewer(), ref=ref, logs=logs, commits=commits)
    _print_problems(report)
    click.echo(counts(report))
    if report.imported == 0:
        sys.exit(2)


class _NoBar:
    """Stands in for click's progress bar when stderr is not a terminal or the input is small."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def _jsonl_files(paths: tuple[Path, ...]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*.jsonl") if p.is_file())
