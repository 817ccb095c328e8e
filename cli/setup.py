"""`workbench init`, `migration add|edit`, `reference`: a study made without a bundle (docs/setup.md).

Bad input prints one line and exits with status 2 (the main group turns a WorkbenchError into
that); nothing is written until every check has passed.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import click

from cli.common import DB_PATH
from domain.errors import WorkbenchError
from domain.text import clean, plural
from workbench import config


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
    click.echo(f"next: workbench migration add {clean(str(path))} SLUG --repo PATH [--base REV] --target ACCEL:CHIPS"
               " --goal METRIC --direction max|min --command \"...\"")


@click.group()
def migration() -> None:
    """Add or change a migration of a study."""


def _budget_options(fn):
    for name, kind in (("attempts", int), ("calendar-days", float), ("staff-hours", float),
                       ("compute-dollars", float)):
        fn = click.option(f"--budget-{name}", type=kind, help=f"Budget: {name.replace('-', ' ')}.")(fn)
    return click.option("--acceptance-level", type=int, help="Ladder level required to accept, 1-5.")(fn)


def _run_options(fn):
    fn = click.option("--metric", "metric", multiple=True, metavar="WORDS=NAME",
                      help="Read the log's WORDS (as it writes them) as the metric NAME, e.g. \"val loss=val_loss\";"
                           " repeatable; the reference run, re-runs and verify read it so, and --goal may name"
                           " WORDS. Edit: WORDS= removes one.")(fn)
    fn = click.option("--shell", is_flag=True,
                      help="The --command needs a shell (&&, pipes, globs): it runs as sh -c COMMAND.")(fn)
    return click.option("--setup", metavar="LINE",
                        help="A shell line run in each re-run's worktree (and the reference run's) before the"
                             " command: prepare the data git ignores, install the project. Edit: \"\" clears it.")(fn)


@migration.command("add")
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--repo", required=True, type=click.Path(path_type=Path), help="The project's git working tree.")
@click.option("--base", help="The original (GPU) code's revision. Default: the commit before the agent's work"
              " (the parent of its first trailer-marked commit, the last commit before its first Claude Code"
              " session, or where HEAD left its upstream branch), shown; refused when none tells.")
@click.option("--target", required=True, metavar="ACCEL[:CHIPS]", help="e.g. tpu-v5e:4.")
@click.option("--runtime", default="torch_xla", show_default=True)
@click.option("--goal", required=True, metavar="METRIC", help="The metric the migration must reach.")
@click.option("--direction", required=True, type=click.Choice(["max", "min"]), help="max: higher is better.")
@click.option("--reference-value", type=float,
              help="The goal metric's value to meet. Default: the reference run's last value, once recorded.")
@click.option("--tolerance", type=float, default=0.0, show_default=True, help="Absolute slack on the wrong side.")
@click.option("--command", help="The command that runs the project, e.g. \"python train.py\".")
@_run_options
@click.option("--title", help="A title (default: the slug).")
@_budget_options
def migration_add(db: Path, slug: str, repo: Path, base: str | None, target: str, runtime: str, goal: str,
                  direction: str, reference_value: float | None, tolerance: float, command: str | None,
                  setup: str | None, shell: bool, metric: tuple[str, ...], title: str | None,
                  acceptance_level: int | None, **budgets: float | None) -> None:
    """Add a migration of a git project to a study."""
    from domain.models import Budgets
    from workbench.studies import MigrationSpec, add_migration, open_existing

    spec = MigrationSpec(
        slug=slug, repo=repo, base=base, target=target, runtime=runtime, goal=goal, direction=direction,
        reference_value=reference_value, tolerance=tolerance, command=command, setup=setup, shell=shell, title=title,
        metric_names=metric,
        acceptance_level=4 if acceptance_level is None else acceptance_level,
        budgets=Budgets(**{k.removeprefix("budget_"): v for k, v in budgets.items()}),
    )
    sdb = open_existing(db)
    try:
        made, why = add_migration(sdb, spec, config.reviewer())
    finally:
        sdb.close()
    value = "(the reference run's, once recorded)" if reference_value is None else f"{made.goal.reference:g}"
    click.echo(f"migration {clean(made.slug)} added: base {made.base_commit[:12]}, target"
               f" {clean(made.target.describe())}, goal {clean(made.goal.metric)} {made.goal.direction.value}"
               f" {value}")
    if why:
        click.echo(clean(f"base      {made.base_commit[:12]}: {why} (give --base to choose another)"))
    click.echo(f"next: workbench reference {clean(str(db))} {clean(made.slug)} --run | --log FILE [--metrics FILE]")


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
@_run_options
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
    if "metric_names" in changed:
        click.echo(f"next: workbench verify {clean(str(db))} --migration {clean(slug)} --force  (reads the stored"
                   " runs' series again with the new names)")


@click.command()
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--log", "logs", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The run's output (from files); repeated: each log a replicate, seed N for the Nth.")
@click.option("--metrics", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Its metric series, JSON Lines as in the bundle format (default: read from the log); one per --log.")
@click.option("--wall", multiple=True, type=float, help="Wall-clock seconds the run took; one per --log.")
@click.option("--hardware", metavar="ACCEL:N", help="Where it ran, e.g. a100:1 (--run: unless the probe saw it).")
@click.option("--command", help="The command it ran (default: the migration's --command).")
@click.option("--run", "run_it", is_flag=True,
              help="Run the command at the base commit on this machine, with the probe, and record that.")
@click.option("--backend", type=click.Choice(["local"]), default="local", show_default=True,
              help="Where --run runs (only this machine for now).")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="--run: environment (repeatable).")
@click.option("--venv", help="--run: the environment's folder (its bin/ goes first on PATH).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="--run: stop after this many seconds.")
@click.option("--replicates", type=click.IntRange(1, 100), default=1, show_default=True,
              help="--run: run it this many times, seed N in WORKBENCH_SEED (and for {seed} in the command).")
def reference(db: Path, slug: str, logs: tuple[Path, ...], metrics: tuple[Path, ...], wall: tuple[float, ...],
              hardware: str | None, command: str | None, run_it: bool, backend: str, env_pairs: tuple[str, ...],
              venv: str | None, timeout: float | None, replicates: int) -> None:
    """Record a migration's reference run (the original code's run): from its files (--log), or
    by running its command at the base commit here (--run), measured by the re-run probe. Several
    runs (--log repeated, or --run --replicates N) are replicates: level 2 measures the noise."""
    from workbench.studies import open_existing, record_references

    if run_it == bool(logs):
        raise WorkbenchError("give either --log FILE (a run's files) or --run (run it here)")
    if replicates > 1 and not run_it:
        raise WorkbenchError("--replicates needs --run (give --log once per replicate's log instead)")
    from storage.queries import get_migration

    sdb = open_existing(db)
    try:
        found = get_migration(sdb.db, slug)
        unset = found is not None and math.isnan(found.goal.reference)
        if run_it:
            made = _run_reference(sdb, slug, command, env_pairs, venv, timeout, hardware, replicates)
        else:
            made = record_references(sdb, slug, logs=logs, metrics=metrics or (None,) * len(logs),
                                     walls=wall or (None,) * len(logs), hardware=hardware, command=command,
                                     reviewer=config.reviewer())
        goal = get_migration(sdb.db, slug).goal
    finally:
        sdb.close()
    if len(made) == 1:
        click.echo(f"reference run recorded for {clean(slug)} as attempt {made[0].seq}")
    else:
        click.echo(f"{len(made)} reference runs recorded for {clean(slug)} as attempts {made[0].seq}-{made[-1].seq}"
                   f" (WORKBENCH_SEED 1-{len(made)})")
    if unset and not math.isnan(goal.reference):
        click.echo(clean(f"goal      {goal.metric} {goal.direction.value} {goal.reference:g}: the reference value,"
                         " taken from this run (its last step)"))


def _run_reference(sdb, slug: str, command: str | None, env_pairs: tuple[str, ...], venv: str | None,
                   timeout: float | None, hardware: str | None, replicates: int):
    from domain.models import Hardware
    from workbench.reference_run import run_replicates
    from workbench.rerun.preflight import target_venv
    from workbench.studies import parse_target

    env = {}
    for text in env_pairs:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise WorkbenchError(f"--env: {text[:40]!r} must be KEY=VALUE")
        env[key] = value
    given = Hardware(*parse_target(hardware, "--hardware")) if hardware else None
    return run_replicates(sdb, slug, replicates, command=command, env=env, venv=target_venv(venv), timeout=timeout,
                          hardware=given, reviewer=config.reviewer())


@click.command()
@click.argument("db", type=DB_PATH)
@click.argument("slug")
@click.option("--project", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The project whose Claude Code sessions to follow; also the default --repo.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="The git repository that ties attempts to commits (default: the project).")
@click.option("--all-bash", is_flag=True, help="Count every Bash call as an attempt, not only workload runs.")
@click.option("--workload", "patterns", multiple=True, metavar="REGEX",
              help="A Bash command matching this regular expression is an attempt (repeatable).")
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True,
              help="Seconds between looks at the transcripts.")
@click.option("--for", "stop_after", type=click.FloatRange(0), help="Stop after this many seconds.")
def watch(db: Path, slug: str, project: Path, repo: Path | None, all_bash: bool, patterns: tuple[str, ...],
          interval: float, stop_after: float | None) -> None:
    """Follow the project's Claude Code sessions live: new Bash calls become attempts of SLUG and
    are verified as their results arrive; prints one line per verified attempt. Ctrl-C stops."""
    from workbench.studies import find_migration, open_existing
    from workbench.watch import Watcher

    rule = _rule(all_bash, patterns)
    _project_folder(project)
    sdb = open_existing(db)
    try:
        find_migration(sdb, slug)
        watcher = Watcher(sdb, slug, project, config.reviewer(), rule=rule, repo=repo or project)
        click.echo(f"watching {clean(str(watcher.project))} for {clean(slug)} (Ctrl-C stops)", err=True)
        try:
            watcher.run(interval=interval, stop_after=stop_after, echo=lambda line: click.echo(clean(line)))
        except KeyboardInterrupt:
            pass
    finally:
        sdb.close()


def _project_folder(project: Path) -> None:
    if not project.is_dir():
        raise WorkbenchError(f"--project: {project}: no such folder")


def _list_sessions(project: Path, all_bash: bool, patterns: tuple[str, ...]) -> None:
    from workbench.importers.sessions import find_sessions, projects_dir

    sessions = find_sessions(project, _rule(all_bash, patterns))
    if not sessions:
        click.echo(f"no Claude Code sessions of {clean(str(project))} under {clean(str(projects_dir()))}")
        return
    for info in sessions:
        agents = f", {plural(info.subagents, 'sub-agent')}" if info.subagents else ""
        click.echo(f"{clean(info.started_at or '?')}  {info.size:>10,} bytes  {plural(info.attempts, 'attempt'):>13}"
                   f"{agents}  {clean(str(info.path))}")


def _rule(all_bash: bool, patterns: tuple[str, ...]):
    import re

    from workbench.importers.rules import WorkloadRule

    try:
        return WorkloadRule(all_bash=all_bash, patterns=patterns)
    except re.error as exc:
        raise WorkbenchError(f"--workload: not a regular expression ({exc})") from None


def _check_migration(db: Path, slug: str | None) -> None:
    """One line naming `workbench migration add` when the migration is not there."""
    from storage.queries import get_migration
    from workbench.studies import open_existing

    if slug is None:
        raise WorkbenchError("--migration: name the migration to import into (or give --list)")
    sdb = open_existing(db)
    try:
        found = get_migration(sdb.db, slug)
    finally:
        sdb.close()
    if found is None:
        raise WorkbenchError(f"{db}: no migration {slug!r}; add it with `workbench migration add {db} {slug}"
                             " --repo PATH --target ... --goal ...`")


def with_project(command: click.Command) -> click.Command:
    """`import claude-code --project REPO_PATH [--list]`: the project's sessions found in the
    Claude Code projects folder stand in for PATH. Decorates that command in cli/imports.py."""
    original = command.callback
    for param in command.params:
        if param.name in ("paths", "slug"):
            param.required = False
    command.params += [
        click.Option(["--project"], type=click.Path(file_okay=False, path_type=Path),
                     help="Import this project's sessions from the Claude Code projects folder"
                          " ($CLAUDE_CONFIG_DIR or ~/.claude); also the default --repo."),
        click.Option(["--list", "list_only"], is_flag=True,
                     help="With --project: list the sessions (start, size, attempts) and import nothing."),
    ]

    def callback(paths: tuple[Path, ...], db: Path | None, slug: str | None, project: Path | None,
                 list_only: bool, **rest):
        if project is not None:
            _project_folder(project)
        if project is not None and list_only:
            return _list_sessions(project, rest["all_bash"], rest["patterns"])
        if project is None and (list_only or not paths):
            raise WorkbenchError("give transcript PATHs or --project REPO_PATH (--list needs --project)")
        path = db or config.default_db()
        _check_migration(path, slug)
        if project is not None:
            from workbench.importers.sessions import find_sessions

            found = tuple(info.path for info in find_sessions(project, _rule(rest["all_bash"], rest["patterns"])))
            if not found and not paths:
                raise WorkbenchError(f"--project: no Claude Code sessions of {project} found")
            paths += found
            rest["repo"] = rest["repo"] or project
        return original(paths=paths, db=path, slug=slug, **rest)

    command.callback = callback
    command.help = inspect.cleandoc(command.help or "") + "\n\nWith --project REPO_PATH, the project's sessions are found in" \
        " the Claude Code projects folder; --list shows them without importing."
    return command

