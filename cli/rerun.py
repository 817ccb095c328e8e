"""`workbench rerun` and `workbench jobs`: re-runs from a shell (added to the main command group)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from cli.common import db_argument, study_at
from domain.errors import WorkbenchError
from domain.text import clean, plural
from workbench import config


def _env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for text in pairs:
        if "=" not in text:
            raise WorkbenchError(f"--env expects KEY=VALUE, not {text!r}")
        key, value = text.split("=", 1)
        out[key] = value
    return out


@click.command()
@db_argument
@click.argument("migration")
@click.argument("attempt", type=int)
@click.option("--backend", type=click.Choice(["local", "ssh", "gcloud", "skypilot"]), default="local", show_default=True)
@click.option("--host", help="ssh host, TPU VM name (gcloud) or cluster name (skypilot).")
@click.option("--zone", help="gcloud zone.")
@click.option("--chips", type=click.IntRange(min=1), help="Chips (local without a TPU: virtual XLA:CPU devices). Default: the intended count.")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Environment override (repeatable).")
@click.option("--command", "command", help="Replace the command (a shell-quoted line; it is split, never run by a shell).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Stop the run after this many seconds.")
@click.option("--venv", help="The target environment's folder (its bin/ goes first on PATH).")
@click.option("--keep-worktree", is_flag=True, help="Keep the job's git worktree afterwards.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE", help="Backend option (ssh_options, project, mode, ...).")
@click.option("--yes", "-y", is_flag=True, help="Run without asking: the command is still printed in full first.")
@click.option("--wait", is_flag=True, help="Stream the output and wait for the result.")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Run it N times, one after another, seed N in WORKBENCH_SEED (and for {seed} in the command).")
def rerun(db: Path, migration: str, attempt: int, backend: str, host: str | None, zone: str | None,
          chips: int | None, env_pairs: tuple[str, ...], command: str | None, timeout: float | None,
          venv: str | None, keep_worktree: bool, extra: tuple[str, ...], yes: bool, wait: bool, repeat: int) -> None:
    """Re-run attempt ATTEMPT (its seq) of MIGRATION; the result becomes a new, verified attempt.

    The command comes from the attempt's record, which came from an agent's transcript: it is
    shown in full and runs only after you confirm it (or pass --yes). With --repeat N it runs N
    times in turn, each run an attempt: levels 2 and 5 count their spread. See docs/rerun.md.
    """
    import shlex

    from storage import queries
    from workbench.rerun import jobs, preflight

    with study_at(db) as study:
        sdb = study.db
        jobs.recover(sdb, config.reviewer())
        _, target = queries.find_attempt(sdb, migration, attempt)
        spec = jobs.spec_for(sdb, target, backend, chips=chips, host=host, zone=zone,
                             timeout_s=timeout, keep_worktree=keep_worktree, options=_options(extra, venv))
        if command:
            spec = jobs.with_changes(spec, argv=tuple(shlex.split(command)))
        spec = preflight.resolved(jobs.with_changes(spec, env={**spec.env, **_env_pairs(env_pairs)}))
        _, differ = jobs.environment(target.command.env, backend, spec.chips, spec.options)
        changes = jobs.env_changes(target.command.env, spec.env, differ)
        if changes:  # the reviewer's choice, recorded on the job
            spec = jobs.with_changes(spec, options={**spec.options, "env_changes": changes})
        changed = {c["name"] for c in changes}
        for d in differ:
            if d.name not in changed:
                click.echo(clean(f"kept      {d.name}={d.recorded} (recorded; the {backend} backend would set "
                                 f"{d.default}: {d.why})"))
        for c in changes:
            click.echo(clean(f"changed   {c['name']}: recorded {c['recorded']}, used {c['used']} ({c['why']})"))
        where = backend + (f" {host}" if host else "") + (f" ({zone})" if zone else "")
        click.echo(clean(f"backend   {where}, {plural(spec.chips, 'chip')} of {spec.accelerator}"))
        click.echo(clean(f"directory {spec.cwd}"))
        click.echo(clean("env       " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(spec.env.items()))))
        if spec.options.get("setup"):
            click.echo(clean(f"setup     {spec.options['setup']} (the migration's, first, in the worktree)"))
        if spec.options.get("venv"):
            click.echo(clean(f"venv      {spec.options['venv']}"))
        click.echo(clean(f"command   {shlex.join(spec.argv)}"))
        if repeat > 1:
            click.echo(f"repeat    {repeat} times, one after another, WORKBENCH_SEED 1-{repeat} ({{seed}} in the command too)")
        preflight.check(sdb, spec)  # an environment that cannot start it: one line naming the fix, exit 2
        if not yes and not click.confirm("Run this command?", default=False):
            raise WorkbenchError("not confirmed: nothing ran")
        job = jobs.launch(study, spec, config.reviewer(), checked=True, repeat=repeat)
        made = [j for j in jobs.list_jobs(sdb, spec.migration_id, limit=10_000)
                if j.runner_pid == job.runner_pid and j.id >= job.id] if repeat > 1 else [job]
        made.sort(key=lambda j: j.id)
        for j in made:
            click.echo(f"job {j.id} started (log: {j.log_path})" if j is made[0] else f"job {j.id} queued after it")
        if not wait:
            return
        made = [_follow(sdb, j) for j in made]
        while len(made) > 1 and jobs.runner_alive(made[-1]):
            time.sleep(0.2)  # the runner verifies each repeat again with all the others
        for j in made:
            click.echo(_describe(sdb, jobs.get_job(sdb, j.id)))
        if any(j.state is not jobs.JobState.FINISHED for j in made):
            sys.exit(1)


def _options(extra: tuple[str, ...], venv: str | None) -> dict[str, object]:
    """Backend options from --option KEY=VALUE (JSON values where they parse) and the target venv."""
    import json

    options: dict[str, object] = {}
    for text in extra:
        key, _, value = text.partition("=")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    if venv or config_venv():
        options["venv"] = venv or config_venv()
    return options


def _follow(sdb, job):
    """Stream the job's output to stdout until it ends; returns the finished job."""
    from workbench.rerun import jobs

    offset = 0
    while True:
        data, offset = jobs.read_output(job, offset)
        if data:
            sys.stdout.write(clean(data.decode("utf-8", errors="replace"), keep_newlines=True))
            sys.stdout.flush()
        job = jobs.get_job(sdb, job.id)
        if not job.active:
            data, offset = jobs.read_output(job, offset, 1 << 30)
            if data:
                sys.stdout.write(clean(data.decode("utf-8", errors="replace"), keep_newlines=True))
            return job
        if not jobs.runner_alive(job) and job.runner_pid is not None:
            jobs.recover(sdb, config.reviewer())
            continue
        time.sleep(0.2)


def config_venv() -> str | None:
    import os

    return os.environ.get("WORKBENCH_TARGET_VENV")


def _describe(db, job) -> str:
    from domain.jobs import result_line
    from storage.jobs import job_result

    text = f"job {job.id} {job.state.value}"
    if job.exit_code is not None:
        text += f", exit {job.exit_code}"
    if job.wall_seconds is not None:
        text += f", {job.wall_seconds:.1f} s"
    if job.error:
        text += f": {clean(job.error)}"
    from workbench.blind import sight

    seen = sight(db, config.reviewer(), attempts=[job.result_attempt_id])
    result = seen.job_result(job.result_attempt_id, job_result(db, job))
    if result is not None:
        text += "\n" + result_line(result)
    return text


@click.command("jobs")
@db_argument
@click.option("--cancel", "cancel_id", type=int, help="Cancel this job.")
def jobs_cmd(db: Path, cancel_id: int | None) -> None:
    """List re-run jobs (marking those whose runner is gone as interrupted), or cancel one."""
    from workbench.rerun import jobs

    with study_at(db, write=cancel_id is not None) as study:
        sdb = study.db
        if study.read_only is None:
            jobs.recover(sdb, config.reviewer())
        if cancel_id is not None:
            job = jobs.get_job(sdb, cancel_id)
            if not job.active:
                raise WorkbenchError(f"job {cancel_id} is already {job.state.value}")
            jobs.cancel(job)
            click.echo(f"job {cancel_id}: cancel requested")
            return
        for job in jobs.list_jobs(sdb):
            line = f"{job.id:>4} {job.state.value:<11} {job.spec.backend:<8} {job.spec.chips:>2} chips  {job.created_at}"
            if job.wall_seconds is not None:
                line += f"  {job.wall_seconds:.1f} s"
            if job.state is jobs.JobState.ENVIRONMENT and job.error:
                line += f"  {job.error}"  # what to fix, where the reviewer looks
            click.echo(clean(line))
