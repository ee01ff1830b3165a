"""``forewarn``: run the service, and drive it from the shell through the control API.

``forewarn serve`` starts both planes; every other command is a client of the control API
(``--control HOST:PORT`` or ``FOREWARN_CONTROL``), printing a table, or JSON with ``-o json``.

Each command's module is imported only when that command runs (or when ``--help`` lists
them all): a one-shot command such as ``forewarn clock advance`` would otherwise pay for the
agent's, the server's and every other command's imports on each call, which scripts and
handlers run by the hundred.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

from forewarn import __version__

if TYPE_CHECKING:
    from forewarn.cli.common import CliContext, parse_address, parse_duration

#: Each command's name, and the module and attribute that define it.
COMMANDS: dict[str, str] = {
    "agent": "forewarn.agent.cli:agent",
    "clock": "forewarn.cli.clock:clock",
    "eventgrid": "forewarn.cli.eventgrid:eventgrid",
    "events": "forewarn.cli.events:events",
    "fault": "forewarn.cli.faults:fault",
    "health": "forewarn.cli.health:health",
    "host": "forewarn.cli.hosts:host",
    "init": "forewarn.cli.init:init",
    "maintenance": "forewarn.cli.hosts:maintenance",
    "record": "forewarn.cli.record:record",
    "replay": "forewarn.cli.replay:replay",
    "scenario": "forewarn.cli.scenario:scenario",
    "serve": "forewarn.cli.serve:serve",
    "store": "forewarn.cli.store:store",
    "verify": "forewarn.cli.verify:verify",
    "vm": "forewarn.cli.vms:vm",
    "vmss": "forewarn.cli.vms:vmss",
}


def load_command(name: str) -> click.Command:
    """The command ``name`` defines, its module imported now."""
    module_name, attribute = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command), COMMANDS[name]
    return command


class _LazyGroup(click.Group):
    """A group whose commands are imported when asked for (click's documented pattern,
    "Lazily Loading Subcommands")."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def invoke(self, ctx: click.Context) -> Any:
        """Every command's usage errors, with what to do where click says only what failed
        (:mod:`forewarn.cli.usage`)."""
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            from forewarn.cli.usage import explained

            replaced = explained(error)
            if replaced is error:
                raise
            raise replaced from None


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="forewarn")
def main() -> None:
    """forewarn: the Azure Scheduled Events service, runnable anywhere."""


def __getattr__(name: str) -> Any:
    """The shared CLI helpers, imported on first use (see the module's docstring)."""
    if name in ("CliContext", "parse_address", "parse_duration"):
        from forewarn.cli import common

        return getattr(common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "CliContext", "load_command", "main", "parse_address", "parse_duration"]
