"""`workbench explain`: which factor an attempt's level-2 deviation follows (docs/explain.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.common import db_argument, study_at
from domain.text import clean
from workbench import config


@click.command()
@db_argument
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--backend", type=click.Choice(["local"]), default="local", show_default=True,
              help="Where the controlled re-runs run (only local so far).")
@click.option("--venv", help="Target environment for the runs (default $WORKBENCH_TARGET_VENV).")
@click.option("--max-runs", type=click.IntRange(min=0), default=6, show_default=True, help="At most this many re-runs.")
@click.option("--minutes", type=click.FloatRange(min=0), default=30.0, show_default=True, help="At most this long in all.")
@click.option("--find-links", "find_links", multiple=True, metavar="DIR",
              help="Where the libraries factor finds wheels of the reference's versions (repeatable; "
                   "default $WORKBENCH_FIND_LINKS).")
@click.option("--json", "as_json", is_flag=True, help="Print the stored explanation as JSON.")
def explain(db: Path, migration: str, attempt: int, backend: str, venv: str | None, max_runs: int,
            minutes: float, find_links: tuple[str, ...], as_json: bool) -> None:
    """Explain attempt ATTEMPT (its seq) of MIGRATION when its level 2 fails: controlled re-runs,
    each changing one factor (package versions, device count, device, then commit by bisection),
    each a job with its own record; stops at the first factor that explains the deviation. The runs execute the attempt's
    recorded command, like `workbench rerun --yes`. The result is stored with the attempt."""
    import os

    from workbench.explain import default_find_links
    from workbench.explain import explain as run_explain
    from workbench.rerun import jobs

    venv = venv or os.environ.get("WORKBENCH_TARGET_VENV") or None
    with study_at(db) as study:
        jobs.recover(study.db, config.reviewer())
        result = run_explain(study, migration, attempt, config.reviewer(), backend=backend, venv=venv,
                             max_runs=max_runs, minutes=minutes, find_links=list(find_links) or default_find_links(),
                             echo=(lambda _: None) if as_json else (lambda s: click.echo(clean(s), err=True)))
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    click.echo(clean(result["sentence"]))
    for f in result["factors"]:
        head = f"{f['factor']:<10} {'explains' if f['explains'] else 'tried' if f['tried'] else 'not tried'}: {f['reason']}"
        click.echo(clean(head))
        env = f.get("environment") or {}
        if env.get("path"):
            how = "found in the cache" if env["cached"] else f"built in {env['seconds']:g} s"
            click.echo(clean(f"           environment {env['path']} ({how})"))
        for r in f["runs"]:
            click.echo(clean(f"           job {r['job']} -> attempt {r['seq']} on {r['chips']} at {str(r['commit'])[:12]}:"
                             f" level 2 {r['level2']}" + (f", {r['sigmas']:.1f}σ" if r.get("sigmas") is not None else "")
                             + f" ({r['reason']})"))
