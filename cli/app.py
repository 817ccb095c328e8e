"""`workbench demo`, `open` and `serve`: the commands that start the app (loaded only when run)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.common import DB_PATH, open_study, study_at
from domain.errors import WorkbenchError
from domain.text import clean
from workbench import config


def run_app(path: Path) -> None:
    prepare(path)
    from screens.app import WorkbenchApp

    app = WorkbenchApp(path)
    app.run()
    if app.return_code:  # an error stopped it (Textual's `_exception` holds it)
        from cli.crash import report

        report(getattr(app, "_exception", None), path, app.return_code)


def prepare(path: Path) -> None:
    """Before the screen takes over: refuse a missing or foreign database, and mark the re-runs
    whose runner died while the app was away. An up-to-date study with no queued or running job
    is only checked, read-only on the standard sqlite3 module (sqlite-utils and the re-run code
    cost the launch 150-250 ms, issue 19); any other gets the full open, which also upgrades an
    older study, and the recovery."""
    import sqlite3

    from storage.fastread import has_active_jobs, open_readonly

    conn = open_readonly(path)  # a newer, half-made or foreign file: the full open's error
    if conn is not None:
        try:
            if not has_active_jobs(conn):
                return
        except sqlite3.Error:
            pass  # the full open says what is wrong
        finally:
            conn.close()
    with study_at(path, write=False) as study:
        from workbench.rerun.jobs import recover

        if study.read_only is None:  # a read-only study keeps its jobs as they were left
            recover(study.db, config.reviewer())


def build_demo(path: Path) -> None:
    """Import and verify the demo bundle into PATH; nothing is left behind when that fails."""
    from workbench.bundle import import_bundle
    from workbench.verify import verify_study

    if not config.DEMO_BUNDLE.is_dir():
        raise WorkbenchError(f"{config.DEMO_BUNDLE}: the demo bundle is missing from this install")
    study = open_study(path, create=True)
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


def _verify_stale_demo(path: Path) -> None:
    """Verdicts an older verifier made are made again (a workbench upgraded since the demo was
    built); the file is opened for writing only then, so an up-to-date demo is left as it is."""
    from cli.common import study_read
    from storage.queries import current_verifier_versions
    from workbench.verify import verify_study
    from workbench.verify.evidence import VERIFIER, VERSION, older_version

    with study_read(path) as db:
        stale = sorted(v for v in current_verifier_versions(db, VERIFIER) if older_version(v, VERSION))
    if not stale:
        return
    with study_at(path) as study:
        report = verify_study(study.db, config.reviewer())
    click.echo(f"demo: verdicts of verifier {', '.join(stale)} made again with {VERSION}"
               f" ({report.changed} attempts)", err=True)


@click.command()
@click.option("--rebuild", is_flag=True, help="Build the demo database again from the bundle.")
@click.option("--no-open", is_flag=True, help="Only build the demo database and print its path.")
def demo(rebuild: bool, no_open: bool) -> None:
    """Open the app on the bundled demo study (built and verified once in the user data dir)."""
    path = config.demo_db()
    if rebuild and path.exists():
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)
    if not path.exists():
        build_demo(path)
    else:
        _verify_stale_demo(path)
    if no_open:
        click.echo(str(path))
        return
    run_app(path)


@click.command()
@click.argument("db", type=DB_PATH, required=False)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (the default answers this machine only).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a --host beyond this machine (the page needs the token printed at start, as on loopback).")
def serve(db: Path | None, host: str, port: int, allow_remote: bool) -> None:
    """Serve the app to a web browser (textual-serve): every page load runs `workbench open DB`.

    Listens on 127.0.0.1 unless --host says otherwise. Anyone who reaches the page can review,
    record decisions and launch re-runs (which run commands) as the user running this command, so
    the page needs a token made at each start: open the URL printed at start (its ?token= sets a
    cookie), or type the token into the page that asks. Requests must name this server (its
    address, localhost, or the --host name) and come from its own page, so no other web page in
    the browser can drive it. A --host beyond this machine needs --allow-remote. The page loads
    nothing from outside this machine.
    """
    import errno
    import secrets
    import shlex

    from cli.web import is_loopback, make_server, netloc, served_names

    path = (db or config.default_db()).resolve()
    open_study(path).close()  # refuse a missing or foreign database before serving anything
    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise WorkbenchError(f"--host {host} answers beyond this machine, and the app can launch re-runs: "
                             "pass --allow-remote (the page then needs the token printed at start)")
    _check_can_listen(host, port)
    token = secrets.token_urlsafe(24)
    command = shlex.join([sys.executable, "-m", "cli", "open", str(path)])
    try:
        server = make_server(command, host, port, f"workbench — {clean(path.name)}", token,
                             served_names(host, remote))
    except ImportError as exc:
        raise WorkbenchError(f"serve needs textual-serve ({exc}): pip install textual-serve") from exc
    where = f"http://{netloc(host, port)}/?token={token}"
    click.echo(f"workbench: serving {clean(str(path))} at {where} (ctrl+c stops)", err=True)
    try:
        server.serve()
    except OSError as exc:  # taken between the check and the start
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        raise WorkbenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _check_can_listen(host: str, port: int) -> None:
    """Bind HOST:PORT once the way aiohttp will, so a port in use is one line, not a traceback."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise WorkbenchError(f"--host {host}: {exc.strerror}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise WorkbenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command("open")
@click.argument("db", type=DB_PATH, required=False)
def open_(db: Path | None) -> None:
    """Open the app on a study database."""
    run_app(db or config.default_db())
