"""The `workbench` command group. Importing this module loads neither Textual nor Rich.

Each command group lives in its own module; what they share (the error path, options, the
study opener) is in cli/common.py. A command's module is imported only when that command runs or
its help is shown (issue 19: `workbench migrations DB` should not pay for `verify`'s imports).
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import click

from cli.common import Group

COMMANDS = {
    "demo": "cli.app:demo", "serve": "cli.app:serve", "open": "cli.app:open_",
    "import": "cli.imports:import_",
    "migrations": "cli.study:migrations", "attempts": "cli.study:attempts",
    "verify": "cli.verify:verify", "assist": "cli.assist:assist", "report": "cli.report:report",
    "intervene": "cli.effort:intervene", "decide": "cli.effort:decide",
    "override": "cli.effort:override",
    "rerun": "cli.rerun:rerun", "jobs": "cli.rerun:jobs_cmd", "explain": "cli.explain:explain",
    # a study made without a bundle (docs/setup.md)
    "init": "cli.setup:init", "migration": "cli.setup:migration", "reference": "cli.setup:reference",
    "watch": "cli.setup:watch",
    # docs/judgements.md
    "judge": "cli.judge:judge", "assign": "cli.judge:assign", "queue": "cli.judge:queue_cmd",
    "blind": "cli.judge:blind", "agreement": "cli.judge:agreement", "adjudicate": "cli.judge:adjudicate",
}
"""Each command's name and where it is defined, as `module:attribute`."""


class LazyGroup(Group):
    """Lists every command of COMMANDS and imports a command's module only when it is asked for
    (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, attribute = where.split(":")
        return getattr(import_module(module), attribute)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, but a mistyped name is offered its close matches among every command (click
        looks among the commands it holds, and this group holds none until asked), and an existing
        file in a command's place is opened: `workbench study.db` is `workbench open study.db`, as
        `harlequin file.db` opens its file."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            if args and args[0] not in COMMANDS and Path(args[0]).is_file():
                return "open", self.get_command(ctx, "open"), args
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=COMMANDS, ctx=ctx) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="workbench")
def main() -> None:
    """Review coding-agent migrations of PyTorch projects from GPUs to TPUs.

    One SQLite file holds a study. Without a database argument, commands use
    WORKBENCH_DB, else study.db in the user data directory.
    """
