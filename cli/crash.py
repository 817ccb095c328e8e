"""An app that stopped on an error: its traceback kept in a file, named on exit, and a non-zero
exit (it exited 0, and Textual's traceback went with the terminal's scrollback)."""

from __future__ import annotations

import datetime
import os
import sys
import traceback
from pathlib import Path

import click

from domain.text import clean


def crash_dir() -> Path:
    """crashes/ in the user state dir ($XDG_STATE_HOME/workbench, ~/.local/state/workbench on Linux)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("workbench", appauthor=False)) / "crashes"


def keep(error: BaseException | None, study: Path) -> Path:
    """Write the traceback of `error` (without local variables, which may hold secrets) to a new
    file in crash_dir(); returns its path."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "?"

    folder = crash_dir()
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    path = folder / f"crash-{now:%Y%m%d-%H%M%S}-{os.getpid()}.txt"
    header = (f"workbench {installed('workbench')}, textual {installed('textual')}, "
              f"Python {sys.version.split()[0]}\nstudy: {study}\nat: {now.isoformat(timespec='seconds')}\n\n")
    trace = "".join(traceback.format_exception(error)) if error is not None else "(no exception was recorded)\n"
    path.write_text(header + trace, encoding="utf-8")
    return path


def report(error: BaseException | None, study: Path, code: int) -> None:
    """Say where the traceback is, on stderr, and exit with `code`."""
    what = f" ({clean(type(error).__name__)}: {clean(str(error))[:200]})" if error is not None else ""
    try:
        where = f"its traceback is in {clean(str(keep(error, study)))}"
    except OSError as exc:
        where = f"its traceback could not be kept ({clean(str(exc))})"
    click.echo(f"workbench: the app stopped on an error{what}; {where}", err=True)
    sys.exit(code)
