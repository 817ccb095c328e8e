"""What every command shares, written once: the error path, the study opener, options, output."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

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
            if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_READONLY"):  # a write study_at let by
                fail(ctx, "the study is read-only: nothing was recorded")
            hint = ""
            if isinstance(exc, sqlite3.OperationalError) and any(
                words in str(exc) for words in ("disk I/O error", "disk is full")
            ):
                hint = " (is the disk full, or a file-size limit reached?)"
            fail(ctx, f"database error: {clean(str(exc))}{hint}")


def capped(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A note, reason or justification holds what the app's box holds (`NOTE_MAX`): a longer one is
    refused whole, with the box's words, rather than cut (the CLI keeps nothing it did not say)."""
    from domain.text import NOTE_MAX, note_limit

    if value is not None and len(value) > NOTE_MAX:
        raise WorkbenchError(f"{param.opts[0]} {note_limit(len(value) - NOTE_MAX, refused=True)}")
    return value


def fail(ctx: click.Context, line: str) -> NoReturn:
    click.echo(f"workbench: {line}", err=True)
    ctx.exit(2)


def open_study(path: Path, *, create: bool = False):
    """The study at PATH; a missing or foreign file is a WorkbenchError (exit 2)."""
    from storage.database import open_study as open_

    return open_(path, create=create)


@contextmanager
def study_at(path: Path, *, create: bool = False, write: bool = True) -> Iterator[Any]:
    """The study at PATH for the length of a command, closed however it ends. A command that
    writes is refused at once on a study that cannot be written; one that only reads says
    `write=False` (the study then opens read-only where it must)."""
    study = open_study(path, create=create)
    try:
        if write:
            study.require_writable()
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


def table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    """Left-aligned columns of cleaned text: untrusted names never reach the terminal raw."""
    out = Spooled(headers)
    for row in rows:
        out.add(row)
    return "\n".join(out.lines())


class Spooled:
    """Rows that come one at a time, more than memory should hold (a verify run of 150,000
    attempts), spooled to a temporary file that stays in memory up to 8 MiB: as a table's cleaned
    cells with the column widths kept as they grow, or with no headers as a JSON array's items.
    An item is kept as `echo` prints it, indented, with a carriage return for each of its newlines
    so that it stays one line of the spool (JSON text holds no raw one, and reads it as a space):
    the 55 MB that `verify --json` prints at scale 1 is encoded once, as the rows come, rather
    than encoded, decoded and encoded again once every worker has finished."""

    IN_MEMORY = 8 << 20
    """Characters held in memory before the rows move to a temporary file."""

    def __init__(self, headers: list[str] | None = None) -> None:
        self.headers = headers
        self.widths = [len(h) for h in headers or ()]
        # tempfile.SpooledTemporaryFile's rollover, written out: tempfile (with shutil, random,
        # bz2 and lzma) is imported only by a list that outgrows memory, not at every start (issue 19)
        self.file: IO[str] = io.StringIO()
        self.count = 0

    def add(self, row: Any) -> None:
        if self.headers is not None:
            row = [clean("" if v is None else str(v)) for v in row]
            self.widths = [max(w, len(v)) for w, v in zip(self.widths, row)]
            self.file.write(json.dumps(row) + "\n")
        else:
            self.file.write(indented(row, "\r  ") + "\n")
        self.count += 1
        if isinstance(self.file, io.StringIO) and self.file.tell() > self.IN_MEMORY:
            import tempfile

            spool = tempfile.TemporaryFile(mode="w+", encoding="utf-8", newline="\n")  # "\r" stays in its line
            spool.write(self.file.getvalue())
            self.file = spool

    def items(self) -> Iterator[Any]:
        """What was added, in order (a table's rows as cleaned cells; JSON reads its items' carriage
        returns as the spaces between tokens)."""
        self.file.seek(0)
        return (json.loads(line) for line in self.file)

    def lines(self) -> Iterator[str]:
        """The table's lines: the headers, then each row."""
        assert self.headers is not None
        yield "  ".join(h.ljust(w) for h, w in zip(self.headers, self.widths)).rstrip()
        for row in self.items():
            yield "  ".join(v.ljust(w) for v, w in zip(row, self.widths)).rstrip()

    def echo(self) -> None:
        """The table, or the JSON array as `echo_json` writes a list, on stdout."""
        if self.headers is not None:
            for line in self.lines():
                click.echo(line)
            return
        if not self.count:
            click.echo("[]")
            return
        click.echo("[")
        self.file.seek(0)
        for i, line in enumerate(self.file):
            click.echo("  " + line[:-1].replace("\r", "\n") + ("," if i < self.count - 1 else ""))
        click.echo("]")


def jsonable(value: Any) -> Any:
    """Plain JSON types only: dates, enums and paths become strings."""
    return json.loads(json.dumps(value, default=str))


def echo_json(value: Any) -> None:
    click.echo(indented(value))


def indented(value: Any, newline: str = "\n") -> str:
    """`json.dumps(value, indent=2)` with each newline as `newline`, written without the json
    module's pure-Python generators for indented output: about twice as fast, and `verify --json`
    writes 55 MB of it at scale 1 after every worker has finished."""
    out: list[str] = []
    _indented(value, newline, out.append)
    return "".join(out)


def _indented(value: Any, newline: str, add: Callable[[str], Any]) -> None:
    """`indented`'s step, in the json module's order of tests (a bool before an int)."""
    if isinstance(value, str):
        add(_json_str(value))
    elif value is None:
        add("null")
    elif value is True:
        add("true")
    elif value is False:
        add("false")
    elif isinstance(value, int):
        add(int.__repr__(value))
    elif isinstance(value, float):
        add(_json_float(value))
    elif isinstance(value, (list, tuple)):
        if not value:
            add("[]")
            return
        inner, lead = newline + "  ", "["
        for item in value:
            add(lead + inner)
            _indented(item, inner, add)
            lead = ","
        add(newline + "]")
    elif isinstance(value, dict):
        if not value:
            add("{}")
            return
        inner, lead = newline + "  ", "{"
        for key, item in value.items():
            add(lead + inner + _json_key(key) + ": ")
            _indented(item, inner, add)
            lead = ","
        add(newline + "}")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _json_float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _json_key(key: Any) -> str:
    """A key as json writes it: a string, or a bool, None, int or float as its text in quotes."""
    if isinstance(key, str):
        return _json_str(key)
    if key is None or isinstance(key, bool):
        return '"' + {None: "null", True: "true", False: "false"}[key] + '"'
    if isinstance(key, int):
        return '"' + int.__repr__(key) + '"'
    if isinstance(key, float):
        return '"' + _json_float(key) + '"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def counts(report: Any) -> str:
    """The one summary line every importer prints."""
    return f"{report.inserted} new, {report.updated} updated, {report.unchanged} unchanged"
