"""The `workbench` command. Importing this module loads neither Textual nor Rich."""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from domain.errors import WorkbenchError
from domain.text import clean
from workbench import config

DB_PATH = click.Path(dir_okay=False, path_type=Path)


class Group(click.Group):
    """Turns a user's error into one line on stderr and exit status 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except WorkbenchError as exc:
            click.echo(f"workbench: {clean(str(exc))}", err=True)
            ctx.exit(2)
        except sqlite3.Error as exc:
            hint = ""
            if isinstance(exc, sqlite3.OperationalError) and any(
                words in str(exc) for words in ("disk I/O error", "disk is full")
            ):
                hint = " (is the disk full, or a file-size limit reached?)"
            click.echo(f"workbench: database error: {clean(str(exc))}{hint}", err=True)
            ctx.exit(2)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="workbench")
def main() -> None:
    """Review coding-agent migrations of PyTorch projects from GPUs to TPUs.

    One SQLite file holds a study. Without a database argument, commands use
    WORKBENCH_DB, else study.db in the user data directory.
    """


def _open(path: Path, *, create: bool = False):
    from storage.database import open_study

    return open_study(path, create=create)


def _run_app(path: Path) -> None:
    study = _open(path)  # refuse a missing or foreign database before the screen takes over
    try:
        from workbench.rerun.jobs import recover

        recover(study.db, config.reviewer())  # re-runs whose runner died while the app was away
    finally:
        study.close()
    from screens.app import WorkbenchApp

    WorkbenchApp(path).run()


@main.command()
@click.option("--rebuild", is_flag=True, help="Build the demo database again from the bundle.")
@click.option("--no-open", is_flag=True, help="Only build the demo database and print its path.")
def demo(rebuild: bool, no_open: bool) -> None:
    """Open the app on the bundled demo study (built and verified once in the user data dir)."""
    from workbench.bundle import import_bundle

    path = config.demo_db()
    if rebuild and path.exists():
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)
    if not path.exists():
        if not config.DEMO_BUNDLE.is_dir():
            raise WorkbenchError(f"{config.DEMO_BUNDLE}: the demo bundle is missing from this install")
        from workbench.verify import verify_study

        study = _open(path, create=True)
        try:
            report = import_bundle(study, config.DEMO_BUNDLE, config.reviewer())
            if not report.problems:
                verify_study(study.db, config.reviewer())  # so the demo opens with verdicts
        except BaseException:
            study.close()
            path.unlink(missing_ok=True)
            raise
        study.close()
        if report.problems:
            path.unlink(missing_ok=True)
            raise WorkbenchError(f"the demo bundle did not import cleanly: {report.problems[0]}")
    if no_open:
        click.echo(str(path))
        return
    _run_app(path)


@main.command()
@click.argument("db", type=DB_PATH, required=False)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (the default answers this machine only).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on.")
def serve(db: Path | None, host: str, port: int) -> None:
    """Serve the app to a web browser (textual-serve): every page load runs `workbench open DB`.

    Listens on 127.0.0.1 unless --host says otherwise: anyone who reaches the port can review
    (and record decisions) as the user running this command.
    """
    import shlex

    path = (db or config.default_db()).resolve()
    _open(path).close()  # refuse a missing or foreign database before serving anything
    try:
        from textual_serve.server import Server
    except ImportError as exc:
        raise WorkbenchError(f"serve needs textual-serve ({exc}): pip install textual-serve") from exc
    command = shlex.join([sys.executable, "-m", "cli", "open", str(path)])
    click.echo(f"workbench: serving {clean(str(path))} at http://{host}:{port}/ (ctrl+c stops)", err=True)
    Server(command, host=host, port=port, title=f"workbench — {clean(path.name)}").serve()


@main.command("open")
@click.argument("db", type=DB_PATH, required=False)
def open_(db: Path | None) -> None:
    """Open the app on a study database."""
    _run_app(db or config.default_db())


@main.group("import")
def import_() -> None:
    """Bring records into a study database."""


@import_.command("bundle")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--db", type=DB_PATH, help="Study database (created if missing).")
def import_bundle_cmd(directory: Path, db: Path | None) -> None:
    """Import a study bundle (see docs/bundle-format.md).

    Bad records are reported as FILE:LINE and skipped; the rest import. Exit status 2
    when anything was reported.
    """
    from workbench.bundle import BundleImporter

    importer = BundleImporter(directory)
    study = _open(db or config.default_db(), create=True)
    try:
        report = importer.run(study, config.reviewer())
    finally:
        study.close()
    for problem in report.problems:
        click.echo(clean(problem), err=True)
    click.echo(_counts(report) + (f"; {len(report.problems)} problem(s) reported" if report.problems else ""))
    if report.problems:
        sys.exit(2)


@import_.command("claude-code")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--db", type=DB_PATH, help="Study database (it must hold the migration).")
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
    study = _open(db or config.default_db())
    try:
        total = sum(p.stat().st_size for p in _jsonl_files(paths))
        show = sys.stderr.isatty() and total > (8 << 20)
        with click.progressbar(length=total, label="reading transcripts", file=sys.stderr,
                               show_eta=True) if show else _NoBar() as bar:
            importer = ClaudeCodeImporter(study, slug, config.reviewer(), rule=rule, repo=repo,
                                          progress=bar.update)
            report = importer.run(list(paths))
    finally:
        study.close()
    for problem in report.problems:
        click.echo(clean(problem), err=True)
    for file in report.files:
        click.echo(clean(file.summary()))
        for problem in file.problems:
            click.echo(f"  {clean(problem)}")
    click.echo(_counts(report))
    if report.imported == 0:
        sys.exit(2)


@import_.command("git")
@click.argument("repo", type=click.Path(file_okay=False, path_type=Path))
@click.option("--db", type=DB_PATH, help="Study database (it must hold the migration).")
@click.option("--migration", "slug", required=True, help="Slug of the migration.")
@click.option("--ref", default="HEAD", show_default=True, help="The branch or commit whose history to import.")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path),
              help="A folder with <sha>.log and <sha>.metrics.jsonl beside the commits.")
def import_git_cmd(repo: Path, db: Path | None, slug: str, ref: str, logs: Path | None) -> None:
    """Import a repository in which each commit after the base is one attempt.

    Command, status and expectations come from Attempt-* trailers of the commit message; the
    log and metrics from .workbench/ in the commit or from --logs (docs/claude-code-import.md).
    Exit status 0 when attempts were imported (or were already there), 2 when none were.
    """
    from workbench.importers.git_history import import_git

    study = _open(db or config.default_db())
    try:
        report = import_git(study, repo, slug, config.reviewer(), ref=ref, logs=logs)
    finally:
        study.close()
    for problem in report.problems:
        click.echo(clean(problem), err=True)
    click.echo(_counts(report) + (f"; {len(report.problems)} commit(s) skipped" if report.problems else ""))
    if report.imported == 0:
        sys.exit(2)


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def _jsonl_files(paths: tuple[Path, ...]):
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*.jsonl") if p.is_file())


def _counts(report: Any) -> str:
    """The one summary line every importer prints."""
    return f"{report.inserted} new, {report.updated} updated, {report.unchanged} unchanged"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[clean("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@main.command()
@click.argument("db", type=DB_PATH)
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def migrations(db: Path, as_json: bool) -> None:
    """List a study's migrations."""
    from storage.queries import iter_migration_summaries

    study = _open(db)
    try:
        summaries = list(iter_migration_summaries(study.db))
    finally:
        study.close()
    if as_json:
        click.echo(json.dumps([_jsonable(asdict(s)) for s in summaries], indent=2))
        return
    click.echo(
        _table(
            ["migration", "status", "target", "attempts", "failed", "silent", "interventions", "level"],
            [
                [
                    s.migration.slug,
                    s.migration.status.value,
                    s.migration.target.describe(),
                    s.attempts,
                    s.failed,
                    s.silent_failures,
                    s.interventions,
                    "-" if s.highest_level is None else s.highest_level,
                ]
                for s in summaries
            ],
        )
    )


@main.command()
@click.argument("db", type=DB_PATH)
@click.argument("migration")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def attempts(db: Path, migration: str, as_json: bool) -> None:
    """List a migration's attempts, the reference runs included."""
    from storage.queries import get_migration, iter_attempt_summaries

    study = _open(db)
    try:
        found = get_migration(study.db, migration)
        if found is None:
            raise WorkbenchError(f"{db}: no migration {migration!r}")
        summaries = list(iter_attempt_summaries(study.db, found.id))
    finally:
        study.close()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {**_jsonable(asdict(s.attempt)), "ladder": s.ladder, "highest_level": s.highest_level,
                     "failure": _jsonable(asdict(s.failure)) if s.failure else None,
                     "interventions": s.interventions}
                    for s in summaries
                ],
                indent=2,
            )
        )
        return
    click.echo(
        _table(
            ["seq", "source", "status", "exit", "commit", "expected", "command"],
            [
                [
                    s.attempt.seq,
                    s.attempt.source.value,
                    s.attempt.status.value,
                    "" if s.attempt.exit_code is None else s.attempt.exit_code,
                    s.attempt.commit[:10],
                    s.attempt.expected_level or "",
                    s.attempt.command.display()[:60],
                ]
                for s in summaries
            ],
        )
    )


_MARK = {"pass": "✓", "fail": "✗", "unknown": "?"}


@main.command()
@click.argument("db", type=DB_PATH)
@click.option("--migration", "slug", help="Only this migration (its slug).")
@click.option("--attempt", "seq", type=int, help="Only the attempt with this sequence number.")
@click.option("--set", "assignments", multiple=True, metavar="KEY=VALUE",
              help="Override a verify setting for --migration (recorded, then re-verifies); repeatable.")
@click.option("--force", is_flag=True, help="Verify again even when the evidence is unchanged.")
@click.option("--reasons", is_flag=True, help="Print each level's reason and evidence under the table.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def verify(db: Path, slug: str | None, seq: int | None, assignments: tuple[str, ...], force: bool,
           reasons: bool, as_json: bool) -> None:
    """Verify attempts on the five-level ladder from the evidence in the database.

    Unchanged evidence, settings and verifier change nothing; otherwise new verdicts
    supersede the current ones, which stay in history. See docs/verification.md.
    """
    from storage import queries, records
    from workbench.verify import verify_study
    from workbench.verify.settings import apply_assignment, parse_assignment

    if seq is not None and slug is None:
        raise WorkbenchError("--attempt needs --migration")
    study = _open(db)
    try:
        sdb = study.db
        if assignments:
            if slug is None:
                raise WorkbenchError("--set needs --migration")
            migration = queries.get_migration(sdb, slug)
            if migration is None:
                raise WorkbenchError(f"{db}: no migration {slug!r}")
            overrides = queries.verify_settings(sdb, migration.id)
            try:
                for text in assignments:
                    overrides = apply_assignment(overrides, *parse_assignment(text))
            except ValueError as exc:
                raise WorkbenchError(str(exc)) from None
            records.add_verify_settings(sdb, migration_id=migration.id, settings=overrides,
                                        source="reviewer", reviewer=config.reviewer())
        report = verify_study(sdb, config.reviewer(), slug=slug, seq=seq, force=force)
        rows = []
        for outcome in report.outcomes:
            a = outcome.attempt
            v = queries.current_verification(sdb, a.id)
            verdicts = queries.verdicts(sdb, a.id)
            failure = queries.current_failure(sdb, a.id)
            slug_of = sdb.execute("SELECT slug FROM migration WHERE id = ?", [a.migration_id]).fetchone()[0]
            rows.append((slug_of, a, v, verdicts, failure, outcome.changed))
    finally:
        study.close()
    if as_json:
        click.echo(json.dumps([
            {
                "migration": slug_of,
                "seq": a.seq,
                "changed": changed,
                "verification": _jsonable(asdict(v)),
                "levels": [
                    {"level": d.level, "outcome": d.outcome.value, "effective": d.effective.value,
                     "reason": d.reason, "evidence": [asdict(e) for e in d.evidence]}
                    for d in verdicts
                ],
                "failure": _jsonable(asdict(failure)) if failure else None,
                "expected_level": a.expected_level,
            }
            for slug_of, a, v, verdicts, failure, changed in rows
        ], indent=2))
        return
    click.echo(_table(
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
    ))
    if reasons:
        for slug_of, a, v, verdicts, failure, _ in rows:
            click.echo(f"\n{slug_of} #{a.seq}")
            for d in verdicts:
                click.echo(clean(f"  L{d.level} {d.effective.value}: {d.reason}"))
                for e in d.evidence[:4]:
                    click.echo(clean(f"      {e.kind} {e.ref}: {e.text}"))
            if failure is not None:
                click.echo(clean(f"  cause {failure.cause.value}{' (silent)' if failure.silent else ''}: {failure.note}"))


@main.group()
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
@click.argument("db", type=DB_PATH)
@click.option("--migration", "slug", help="Only this migration (its slug).")
@click.option("--model", help="Model id (default: WORKBENCH_ASSIST_MODEL, else the built-in default).")
@click.option("--dry-run", is_flag=True,
              help="Print each request body (one JSON object a line) instead of sending it.")
def assist_claims(db: Path, slug: str | None, model: str | None, dry_run: bool) -> None:
    """Extract claims the rules could not read: the level an agent said it reached.

    For agent attempts with a claim but no expected level, no extraction and no reviewer
    record yet. Extractions count in reports only once a reviewer accepts them
    (`workbench assist review`, or the app). Exit status 2 when any call failed.
    """
    from storage import queries
    from workbench.assist import claims
    from workbench.assist.client import AssistUnavailable

    assistant = _assistant(model)
    study = _open(db)
    failed = 0
    try:
        sdb = study.db
        migration_id = None
        if slug is not None:
            found = queries.get_migration(sdb, slug)
            if found is None:
                raise WorkbenchError(f"{db}: no migration {slug!r}")
            migration_id = found.id
        todo = claims.pending(sdb, migration_id)
        if dry_run:
            for migration, attempt in todo:
                request = claims.claim_request(assistant, migration, attempt)
                cached = " (cached: would not be sent)" if assistant.cached(sdb, request) else ""
                click.echo(clean(f"# {migration.slug} #{attempt.seq}{cached}"), err=True)
                click.echo(json.dumps(request.body(), ensure_ascii=False))
            click.echo(f"{len(todo)} request(s); nothing sent", err=True)
            return
        if not todo:
            click.echo("no attempts need a model-extracted claim")
            return
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
    finally:
        study.close()
    if failed:
        sys.exit(2)


@assist.command("brief")
@click.argument("db", type=DB_PATH)
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--model", help="Model id (default: WORKBENCH_ASSIST_MODEL, else the built-in default).")
@click.option("--dry-run", is_flag=True, help="Print the request body instead of sending it.")
@click.option("--json", "as_json", is_flag=True, help="The brief as one JSON object.")
def assist_brief(db: Path, migration: str, attempt: int, model: str | None, dry_run: bool, as_json: bool) -> None:
    """An advisory brief on one attempt: what happened, a suspected cause, a next step.

    Sends the attempt's diff (trimmed), its log around the verifier's evidence and its
    verdicts, all redacted. It never changes a verdict or a count.
    """
    from workbench.assist import brief as briefs

    assistant = _assistant(model)
    study = _open(db)
    try:
        sdb = study.db
        found, target = briefs.find_attempt(sdb, migration, attempt)
        inputs = briefs.gather(sdb, found, target)
        request = briefs.brief_request(assistant, inputs)
        if dry_run:
            if assistant.cached(sdb, request):
                click.echo("# cached: this request would not be sent", err=True)
            click.echo(request.dry_run())
            return
        result = briefs.ask(sdb, assistant, found, target, inputs)
    finally:
        study.close()
    if as_json:
        click.echo(json.dumps({**_jsonable(asdict(result)), "advisory": briefs.ADVISORY}, indent=2))
        return
    click.echo(clean(briefs.render_text(result), keep_newlines=True))


@assist.command("review")
@click.argument("db", type=DB_PATH)
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--accept", is_flag=True, help="Accept the latest model extraction.")
@click.option("--level", type=click.IntRange(1, 5), help="Correct: the agent expected this level.")
@click.option("--no-level", is_flag=True, help="Correct: the agent expected no level.")
@click.option("--note", default="", help="Why (kept with the record).")
def assist_review(db: Path, migration: str, attempt: int, accept: bool, level: int | None,
                  no_level: bool, note: str) -> None:
    """Accept or correct an attempt's model-extracted claim (an append-only record)."""
    from storage import queries, records
    from workbench.assist import brief as briefs

    if sum([accept, level is not None, no_level]) != 1:
        raise WorkbenchError("give one of --accept, --level N, --no-level")
    study = _open(db)
    try:
        sdb = study.db
        _, target = briefs.find_attempt(sdb, migration, attempt)
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
    finally:
        study.close()
    shown = "none" if effective.level is None else f"L{effective.level}"
    click.echo(f"{migration} #{attempt}: expected level {shown} (from the {effective.source or 'reviewer'})")


@assist.command("cost")
@click.argument("db", type=DB_PATH)
@click.option("--migration", "slug", help="Only this migration (its slug).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def assist_cost(db: Path, slug: str | None, as_json: bool) -> None:
    """Tokens and dollars spent on model calls (cached answers cost nothing)."""
    from storage import queries

    study = _open(db)
    try:
        migration_id = None
        if slug is not None:
            found = queries.get_migration(study.db, slug)
            if found is None:
                raise WorkbenchError(f"{db}: no migration {slug!r}")
            migration_id = found.id
        total = queries.llm_cost(study.db, migration_id=migration_id)
    finally:
        study.close()
    if as_json:
        click.echo(json.dumps(asdict(total), indent=2))
        return
    click.echo(
        f"{total.calls} call(s), {total.errors} failed; tokens: {total.input_tokens} in,"
        f" {total.output_tokens} out, {total.cache_read_tokens} cache reads, {total.cache_write_tokens}"
        f" cache writes; ${total.cost_usd:.4f}"
        + (f" (+{total.unpriced_calls} call(s) of unpriced models)" if total.unpriced_calls else "")
    )


@main.command()
@click.argument("db", type=DB_PATH)
@click.option("--migration", "slugs", multiple=True, metavar="SLUG",
              help="Only this migration (repeatable); the whole study without it.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "csv", "json", "latex"]), default="md",
              show_default=True, help="csv writes a zip with one CSV file per table.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@click.option("--pseudonymise", is_flag=True, help="Replace reviewer names with Reviewer 1, 2, ...")
def report(db: Path, slugs: tuple[str, ...], fmt: str, output: Path | None, pseudonymise: bool) -> None:
    """Export the study's counted outcomes, human effort and costs (see docs/report.md).

    API keys and tokens in commands, claims, notes and reasons are redacted in every format.
    """
    from workbench.report import build_report, render

    study = _open(db)
    try:
        data = render(build_report(study.db, list(slugs), pseudonymise=pseudonymise), fmt)
    finally:
        study.close()
    if output is not None:
        output.write_bytes(data)
        click.echo(f"wrote {clean(str(output))} ({len(data):,} bytes)", err=True)
    elif fmt == "csv" and sys.stdout.isatty():
        raise WorkbenchError("--format csv writes a zip: give -o FILE or redirect standard output")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _migration_or_exit(sdb: Any, db: Path, slug: str):
    from storage.queries import get_migration

    found = get_migration(sdb, slug)
    if found is None:
        raise WorkbenchError(f"{db}: no migration {slug!r}")
    return found


@main.command()
@click.argument("db", type=DB_PATH)
@click.argument("migration")
@click.option("--kind", required=True, help="Intervention kind (docs/effort.md), e.g. fix_environment.")
@click.option("--minutes", required=True, help="Minutes spent: 15, 7.5 or 1:30.")
@click.option("--note", default="", help="What was done.")
@click.option("--attempt", "seq", type=int, help="Sequence number of the attempt it concerns.")
@click.option("--corrects", type=int, help="Id of the intervention this record corrects.")
def intervene(db: Path, migration: str, kind: str, minutes: str, note: str, seq: int | None,
              corrects: int | None) -> None:
    """Record a human intervention in a migration (the reviewer from WORKBENCH_REVIEWER).

    Prints the new record's id. Bad input (an unknown kind, negative or absurd minutes, an
    attempt that does not exist) prints one line and exits with status 2.
    """
    from storage import queries, records

    study = _open(db)
    try:
        sdb = study.db
        found = _migration_or_exit(sdb, db, migration)
        attempt_id = None
        if seq is not None:
            attempt_id = queries.attempt_id_by_seq(sdb, found.id, seq)
            if attempt_id is None:
                raise WorkbenchError(f"--attempt: migration {migration!r} has no attempt {seq}")
        try:
            new_id = records.record_intervention(
                sdb, migration_id=found.id, kind=kind, minutes=minutes, note=note,
                reviewer=config.reviewer(), attempt_id=attempt_id, corrects=corrects,
            )
        except ValueError as exc:
            raise WorkbenchError(f"--{exc}") from None
    finally:
        study.close()
    click.echo(f"intervention {new_id} recorded")


@main.command()
@click.argument("db", type=DB_PATH)
@click.argument("migration")
@click.argument("kind", type=click.Choice(["accept", "stop", "continue"]))
@click.option("--reason", default="", help="Why; required when it goes against the rules' suggestion.")
def decide(db: Path, migration: str, kind: str, reason: str) -> None:
    """Record a decision on a migration: accept, stop or continue.

    The budget figures and the rules' suggestion at this moment are stored with it, and the
    migration's status follows. Prints the figures. A decision against the suggestion without
    --reason prints one line and exits with status 2.
    """
    from domain.models import DecisionKind
    from storage import queries, records

    study = _open(db)
    try:
        sdb = study.db
        found = _migration_or_exit(sdb, db, migration)
        try:
            new_id = records.record_decision(
                sdb, migration_id=found.id, kind=DecisionKind(kind), reason=reason,
                reviewer=config.reviewer(),
            )
        except ValueError as exc:
            raise WorkbenchError(f"--{exc}") from None
        made = queries.decisions(sdb, found.id)[-1]
    finally:
        study.close()
    against = "" if made.suggested is made.kind else f" (the rules suggested {made.suggested.value})"
    click.echo(f"decision {new_id}: {kind}{against}")
    click.echo(" ".join(f"{k}={v}" for k, v in made.figures.items() if v is not None))


def _add_rerun_commands() -> None:
    from cli.rerun import jobs_cmd, rerun

    main.add_command(rerun)
    main.add_command(jobs_cmd)


_add_rerun_commands()


def _add_setup_commands() -> None:
    from cli.setup import register

    register(main)


_add_setup_commands()
