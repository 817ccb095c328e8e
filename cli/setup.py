"""`workbench init`, `migration add|edit`, `reference`: a study made without a bundle (docs/setup.md).

Bad input prints one line and exits with status 2 (the main group turns a WorkbenchError into
that); nothing is written until every check has passed.
"""

from __future__ import annotations

from pathlib import Path

import click

from domain.text import clean
from workbench import config

DB_PATH = click.Path(dir_okay=False, path_type=Path)


@click.command()
@click.argument("db", type=DB_PATH, required=False)
@click.option("--title", required=True, help="The study's title.")
@click.option("--slug", help="The study's short name (default: from the file name).")
@click.option("--price", "prices", multiple=True, metavar="ACCEL=USD_PER_CHIP_HOUR",
              help="Dollars per chip-hour of an accelerator kind (repeatable), e.g. tpu-v5e=1.20.")
@click.option("--staff-rate", type=float, default=0.0, help="Dollars per staff hour.")
def init(db: Path | None, title: str, slug: str | None, prices: tuple[str, ...], staff_rate: float) -> None:
    """Make an empty study database (never overwrites an existing file)."""
    from workbench.studies import init_study, parse_price

    path = db or config.default_db()
    table = dict(parse_price(p) for p in prices)
    study = init_study(path, title, table, slug=slug, reviewer=config.reviewer(), staff_hourly_rate=staff_rate)
    click.echo(f"study {clean(study.slug)} created in {clean(str(path))}")
    click.echo(f"next: workbench migration add {clean(str(path))} SLUG --repo PATH --target ACCEL:CHIPS"
               " --goal METRIC --direction max|min --reference-value X")


@click.group()
def migration() -> None:
    """Add or change a migration of a study."""


def _budget_options(fn):
    for name, kind in (("attempts", int), ("calendar-days", float), ("staff-hours", float),
                       ("compute-dollars", float)):
        fn = click.option(f"--budget-{name}", type=kind, help=f"Budget: {name.replace('-', ' ')}.")(fn)
    return click.option("--acceptance-level", type=int, help="Ladder level required to accept, 1-5.")(fn)


@migration.command("add")
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--repo", required=True, type=click.Path(path_type=Path), help="The project's git working tree.")
@click.option("--base", default="HEAD", show_default=True, help="The original (GPU) code's revision.")
@click.option("--target", required=True, metavar="ACCEL[:CHIPS]", help="e.g. tpu-v5e:4.")
@click.option("--runtime", default="torch_xla", show_default=True)
@click.option("--goal", required=True, metavar="METRIC", help="The metric the migration must reach.")
@click.option("--direction", required=True, type=click.Choice(["max", "min"]), help="max: higher is better.")
@click.option("--reference-value", required=True, type=float, help="The goal metric's value to meet.")
@click.option("--tolerance", type=float, default=0.0, show_default=True, help="Absolute slack on the wrong side.")
@click.option("--command", help="The command that runs the project, e.g. \"python train.py\".")
@click.option("--title", help="A title (default: the slug).")
@_budget_options
def migration_add(db: Path, slug: str, repo: Path, base: str, target: str, runtime: str, goal: str,
                  direction: str, reference_value: float, tolerance: float, command: str | None,
                  title: str | None, acceptance_level: int | None, **budgets: float | None) -> None:
    """Add a migration of a git project to a study."""
    from domain.models import Budgets
    from workbench.studies import MigrationSpec, add_migration, open_existing

    spec = MigrationSpec(
        slug=slug, repo=repo, base=base, target=target, runtime=runtime, goal=goal, direction=direction,
        reference_value=reference_value, tolerance=tolerance, command=command, title=title,
        acceptance_level=4 if acceptance_level is None else acceptance_level,
        budgets=Budgets(**{k.removeprefix("budget_"): v for k, v in budgets.items()}),
    )
    sdb = open_existing(db)
    try:
        made = add_migration(sdb, spec, config.reviewer())
    finally:
        sdb.close()
    click.echo(f"migration {clean(made.slug)} added: base {made.base_commit[:12]}, target"
               f" {clean(made.target.describe())}, goal {clean(made.goal.metric)} {made.goal.direction.value}"
               f" {made.goal.reference:g}")
    click.echo(f"next: workbench reference {clean(str(db))} {clean(made.slug)} --log FILE [--metrics FILE]")


@migration.command("edit")
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--target", metavar="ACCEL[:CHIPS]")
@click.option("--runtime")
@click.option("--goal", metavar="METRIC")
@click.option("--direction", type=click.Choice(["max", "min"]))
@click.option("--reference-value", type=float)
@click.option("--tolerance", type=float)
@click.option("--command")
@click.option("--title")
@_budget_options
def migration_edit(db: Path, slug: str, acceptance_level: int | None, **given: object) -> None:
    """Change a migration's target, goal, tolerance, command or budgets (audited)."""
    from workbench.studies import edit_migration, open_existing

    budgets = {k.removeprefix("budget_"): given.pop(k) for k in list(given) if k.startswith("budget_")}
    budgets["acceptance_level"] = acceptance_level
    sdb = open_existing(db)
    try:
        changed = edit_migration(sdb, slug, budgets=budgets, reviewer=config.reviewer(), **given)
    finally:
        sdb.close()
    click.echo(f"migration {clean(slug)}: " + (f"changed {', '.join(changed)}" if changed else "nothing changed"))


@click.command()
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--log", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The run's output.")
@click.option("--metrics", type=click.Path(dir_okay=False, path_type=Path),
              help="Its metric series, JSON Lines as in the bundle format (default: read from the log).")
@click.option("--wall", type=float, help="Wall-clock seconds the run took.")
@click.option("--hardware", metavar="ACCEL:N", help="Where it ran, e.g. a100:1.")
@click.option("--command", help="The command it ran (default: the migration's --command).")
def reference(db: Path, slug: str, log: Path, metrics: Path | None, wall: float | None,
              hardware: str | None, command: str | None) -> None:
    """Record a migration's reference run (the original code's run) from its files."""
    from workbench.studies import open_existing, record_reference

    sdb = open_existing(db)
    try:
        made = record_reference(sdb, slug, log=log, metrics=metrics, wall=wall, hardware=hardware,
                                command=command, reviewer=config.reviewer())
    finally:
        sdb.close()
    click.echo(f"reference run recorded for {clean(slug)} as attempt {made.seq}")


def register(main: click.Group) -> None:
    """Put this module's commands on the main group."""
    for command in (init, migration, reference):
        main.add_command(command)

