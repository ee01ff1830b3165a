"""``forewarn host ...`` and ``forewarn maintenance ...``: what the platform does to hardware."""

from __future__ import annotations

from typing import Any

import click

from forewarn.cli.common import (
    AzureNames,
    control_api,
    control_option,
    emit,
    emit_events,
    operation_body,
    operation_examples,
    operation_options,
    output_option,
)
from forewarn.domain.operations import MaintenanceKind
from forewarn.registry import HOST, Operation, for_target


@click.group()
def host() -> None:
    """Operate on the hosts VMs share: live migration, maintenance, failures."""


@host.command("list")
@control_option
@output_option
def host_list(control: str, output: str) -> None:
    """Hosts and the VMs on each."""
    with control_api(control) as api:
        data = api.get("/hosts")
    emit(data, output, [(h["name"], h["vms"]) for h in data["hosts"]], ("HOST", "VMS"))


def _host_command(operation: Operation) -> click.Command:
    def command(name: str, control: str, output: str, **arguments: Any) -> None:
        with control_api(control) as api:
            data = api.post(operation.path(name), operation_body(operation, arguments))
        emit_events(data, output, f"{operation.name} {name}: done, with no event")

    decorated = output_option(control_option(operation_options(operation, command)))
    named = click.option("--name", "-n", required=True, help=HOST.name_help)
    return click.command(
        operation.name, help=operation.summary, epilog=operation_examples(operation)
    )(named(decorated))


for _operation in for_target(HOST):
    host.add_command(_host_command(_operation))


@click.group()
def maintenance() -> None:
    """Routine maintenance campaigns: one fault domain at a time."""


@maintenance.command("start")
@click.option("--vm", "vms", multiple=True, help="A VM to include (repeatable; default: all).")
@click.option(
    "--type",
    "event_type",
    type=AzureNames(["Reboot", "Freeze"]),
    default="reboot",
    show_default=True,
    help="reboot (host maintenance) or freeze (live migration), when no --kind is given.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice([kind.value for kind in MaintenanceKind]),
    help="Each fault domain's maintenance in turn (repeatable; step i takes the i-th, cycling): "
    "update (Freeze ~9 s), live-migrate (Freeze 5 s), maintain (Reboot).",
)
@control_option
@output_option
def maintenance_start(
    vms: tuple[str, ...], event_type: str, kinds: tuple[str, ...], control: str, output: str
) -> None:
    """Start a campaign; fault domains follow one another, never two at once."""
    payload: dict[str, Any] = {"vms": list(vms) or None, "eventType": event_type}
    if kinds:
        payload["kinds"] = list(kinds)
    with control_api(control) as api:
        data = api.post("/campaigns", payload)
    if output == "table" and data["campaign"] is not None:
        campaign = data["campaign"]
        click.echo(f"campaign {campaign['id']}: {campaign['steps']} fault domain step(s)")
    emit_events(data, output, "nothing to maintain")


@maintenance.command("list")
@control_option
@output_option
def maintenance_list(control: str, output: str) -> None:
    """Campaigns still running, with the step each is at."""
    with control_api(control) as api:
        data = api.get("/campaigns")
    rows = [(c["id"], f"{c['step']}/{c['steps']}", c["currentEvents"]) for c in data["campaigns"]]
    emit(data, output, rows, ("CAMPAIGN", "STEP", "CURRENT EVENTS"))


__all__ = [
    "host",
    "host_list",
    "maintenance",
    "maintenance_list",
    "maintenance_start",
]
