"""``forewarn``: run the service, and drive it from the shell through the control API.

``forewarn serve`` starts both planes; every other command is a client of the control API
(``--control HOST:PORT`` or ``FOREWARN_CONTROL``), printing a table, or JSON with ``-o json``.
"""

from __future__ import annotations

import click

from forewarn import __version__
from forewarn.agent.cli import agent
from forewarn.cli.clock import clock
from forewarn.cli.common import CliContext, parse_address, parse_duration
from forewarn.cli.eventgrid import eventgrid
from forewarn.cli.events import events
from forewarn.cli.faults import fault
from forewarn.cli.health import health
from forewarn.cli.hosts import host, maintenance
from forewarn.cli.init import init
from forewarn.cli.record import record
from forewarn.cli.replay import replay
from forewarn.cli.scenario import scenario
from forewarn.cli.serve import serve
from forewarn.cli.store import store
from forewarn.cli.vms import vm, vmss


@click.group()
@click.version_option(__version__, prog_name="forewarn")
def main() -> None:
    """forewarn: the Azure Scheduled Events service, runnable anywhere."""


for _command in (
    serve, init, vm, vmss, host, maintenance, events, eventgrid, clock, fault, scenario, store,
    record, replay,
):  # fmt: skip
    main.add_command(_command)
main.add_command(health)
main.add_command(agent)

__all__ = ["CliContext", "main", "parse_address", "parse_duration"]
