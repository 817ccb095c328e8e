"""What every command shares, written once: the error path, the study opener, options, output."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from domain.errors import WorkbenchError
from domain.text import clean

DB_PATH = click.Path(dir_okay=False, path_type=Path)
F = TypeVar("F", bound=Callable[..., Any])


class Group(click.Group):
    """Turns a user's error into one line on stderr and exit status 2, never a traceback.

    Sub-groups raise through the top group, so this is the one place errors become exit 2: a
    WorkbenchError, an SQLite error, and click's usage errors in a subcommand (a bad option
    value, a missing argument), which click would print over four lines.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            fail(ctx, f"{clean(exc.format_message())} (see '{where} -h')")
        except WorkbenchError as exc:
            fail(ctx, clean(str(exc)))
        except sqlite3.Error as exc:
            hint = ""
            if isinstance(exc, sqlite3.OperationalError) and any(
                words in str(exc) for words in ("disk I/O error", "disk is full")
            ):
                hint = " (is the disk full, or a file-size limit reached?)"
            fail(ctx, f"database error: {clean(str(exc))}{hint}")


def fail(ctx: click.Context, line: str) -> NoReturn:
    click.echo(f"workbench: {line}", err=True)
    ctx.exit(2)


def open_study(path: Path, *, create: bool = False):
    """The study at PATH; a missing or foreign file is a WorkbenchError (exit 2)."""
    from storage.database import open_study as open_

    return open_(path, create=create)


@contextmanager
def study_at(path: Path, *, create: bool = False) -> Iterator[Any]:
    """The study at PATH for the length of a command, closed however it ends."""
    study = open_study(path, create=create)
    try:
        yield study
    finally:
        study.close()


@contextmanager
def study_read(path: Path) -> Iterator[Any]:
    """A connection for a command that only reads: read-only on the standard sqlite3 module when
    the study is up to date (no sqlite-utils to import), else the full open, which upgrades an
    older study and gives the errors."""
    from storage.fastread import open_readonly

    conn = open_readonly(path)
    if conn is None:
        with study_at(path) as study:
            yield study.db
        return
    try:
        yield conn
    finally:
        conn.close()


def migration_or_exit(sdb: Any, db: Path, slug: str):
    """The migration SLUG, or the one-line error every command gives for a wrong slug."""
    from storage.queries import get_migration

    found = get_migration(sdb, slug)
    if found is None:
        raise WorkbenchError(f"{db}: no migration {slug!r}")
    return found


def migration_id_or_all(sdb: Any, db: Path, slug: str | None) -> int | None:
    """For `--migration` filters: its id, or None for the whole study."""
    return None if slug is None else migration_or_exit(sdb, db, slug).id


# The options several commands share, declared once (sqlite-utils' `output_options` pattern).


def db_argument(func: F) -> F:
    """DB: the study database file, required."""
    return click.argument("db", type=DB_PATH)(func)


def db_option(help: str) -> Callable[[F], F]:
    """--db: for commands whose database is optional (WORKBENCH_DB, else the default study)."""
    return click.option("--db", type=DB_PATH, help=help)


def json_option(help: str = "One JSON array instead of a table.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help)


def migration_filter(func: F) -> F:
    return click.option("--migration", "slug", help="Only this migration (its slug).")(func)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Left-aligned columns of cleaned text: untrusted names never reach the terminal raw."""
    cells = [[clean("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """Plain JSON types only: dates, enums and paths become strings."""
    return json.loads(json.dumps(value, default=str))


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def counts(report: Any) -> str:
    """The one summary line every importer prints."""
    return f"{report.inserted} new, {report.updated} updated, {report.unchanged} unchanged"
