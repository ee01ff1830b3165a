"""``forewarn host ...`` and ``forewarn maintenance ...``: what the platform does to hardware."""

from __future__ import annotations

from typing import Any

import click

from forewarn.cli.common import (
    control_api,
    control_option,
    emit,
    emit_events,
    output_option,
)
from forewarn.scenario.client import segment

HOST_ACTIONS = {
    "live-migrate": "Live migration: a Platform Freeze of a few seconds for every VM on the host.",
    "maintain": "Host maintenance needing a reboot: a Platform Reboot for every VM on the host.",
    "predict-failure": "Predicted hardware failure: a Platform Redeploy days ahead.",
    "fail": "Hardware failure: a Started Reboot at once for every VM on the host, no notice.",
}


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


def _host_command(action: str, summary: str) -> click.Command:
    @click.command(action, help=summary)
    @click.option("--name", "-n", required=True, help="The host's name (see `host list`).")
    @control_option
    @output_option
    def command(name: str, control: str, output: str) -> None:
        with control_api(control) as api:
            data = api.post(f"/hosts/{segment(name)}/{action}")
        emit_events(data, output, f"{action} {name}: no event")

    return command


for _action, _summary in HOST_ACTIONS.items():
    host.add_command(_host_command(_action, _summary))


@click.group()
def maintenance() -> None:
    """Routine maintenance campaigns: one fault domain at a time."""


@maintenance.command("start")
@click.option("--vm", "vms", multiple=True, help="A VM to include (repeatable; default: all).")
@click.option(
    "--type",
    "event_type",
    type=click.Choice(["Reboot", "Freeze"]),
    default="Reboot",
    show_default=True,
    help="Reboot (host maintenance) or Freeze (memory-preserving).",
)
@control_option
@output_option
def maintenance_start(vms: tuple[str, ...], event_type: str, control: str, output: str) -> None:
    """Start a campaign; fault domains follow one another, never two at once."""
    payload: dict[str, Any] = {"vms": list(vms) or None, "eventType": event_type}
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
