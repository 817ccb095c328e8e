"""The `workbench` command group. Importing this module loads neither Textual nor Rich.

Each command group lives in its own module; what they share (the error path, options, the
study opener) is in cli/common.py.
"""

from __future__ import annotations

import click

from cli import app, assist, effort, imports, judge, report, rerun, setup, study, verify
from cli.common import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="workbench")
def main() -> None:
    """Review coding-agent migrations of PyTorch projects from GPUs to TPUs.

    One SQLite file holds a study. Without a database argument, commands use
    WORKBENCH_DB, else study.db in the user data directory.
    """


for command in (app.demo, app.serve, app.open_, imports.import_, study.migrations, study.attempts,
                verify.verify, assist.assist, report.report, effort.intervene, effort.decide,
                rerun.rerun, rerun.jobs_cmd):
    main.add_command(command)
setup.register(main)  # init, migration add|edit, reference, watch; --project on import claude-code
judge.register(main)  # judge, assign, queue, blind, agreement, adjudicate (docs/judgements.md)
