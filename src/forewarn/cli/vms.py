"""``forewarn vm ...`` and ``forewarn vmss ...``: named and shaped as ``az vm`` / ``az vmss``."""

from __future__ import annotations

from typing import Any

import click

from forewarn.cli.common import (
    F,
    control_api,
    control_option,
    emit,
    emit_events,
    output_option,
)
from forewarn.registry import SCALE_SET, VM, Operation, for_target
from forewarn.scenario.client import segment

VM_HEADER = ("NAME", "ADDRESS", "HOST", "REACHABLE", "RECEIVING", "GROUP")


def _group(vm: dict[str, Any]) -> str:
    for key, kind in (
        ("availabilitySet", "availability set"),
        ("scaleSet", "scale set"),
        ("cloudService", "cloud service"),
    ):
        if vm.get(key):
            return f"{kind} {vm[key]}"
    return "standalone"


def _vm_row(vm: dict[str, Any]) -> tuple[object, ...]:
    address = vm["address"] or "(bind address)"
    return (vm["name"], address, vm["host"], vm["reachable"], vm["receiving"], _group(vm))


name_option = click.option("--name", "-n", required=True, help="The VM's name.")


@click.group()
def vm() -> None:
    """Inspect VMs and do to one what a user does: restart, redeploy, evict."""


@vm.command("list")
@control_option
@output_option
def vm_list(control: str, output: str) -> None:
    """List VMs: where each answers, its host, whether it is up and receiving events."""
    with control_api(control) as api:
        data = api.get("/vms")
    emit(data, output, [_vm_row(v) for v in data["vms"]], VM_HEADER)


@vm.command("show")
@name_option
@control_option
@output_option
def vm_show(name: str, control: str, output: str) -> None:
    """One VM, with its groups and fault/update domains."""
    with control_api(control) as api:
        data = api.get(f"/vms/{segment(name)}")
    keys = (
        "name",
        "address",
        "host",
        "reachable",
        "receiving",
        "subscriptionId",
        "availabilitySet",
        "scaleSet",
        "cloudService",
        "faultDomain",
        "updateDomain",
        "priority",
    )
    emit(data, output, [(key, data.get(key)) for key in keys], ("FIELD", "VALUE"))


def _vm_operation(operation: Operation) -> click.Command:
    @click.command(operation.name, help=operation.summary)
    @name_option
    @control_option
    @output_option
    def command(name: str, control: str, output: str) -> None:
        with control_api(control) as api:
            data = api.post(operation.path(name))
        emit_events(data, output, f"{operation.name} {name}: done, with no event")

    return command


for _operation in for_target(VM):
    vm.add_command(_vm_operation(_operation))


@vm.command("approve")
@name_option
@click.argument("event_ids", nargs=-1)
@click.option("--all", "approve_all", is_flag=True, help="Every event the VM is shown.")
@control_option
@output_option
def vm_approve(
    name: str, event_ids: tuple[str, ...], approve_all: bool, control: str, output: str
) -> None:
    """Approve events as the VM would (real VMs POST StartRequests to the endpoint)."""
    if approve_all == bool(event_ids):
        raise click.UsageError("name the EVENT_IDS to approve, or --all (not both)")
    with control_api(control) as api:
        data = api.post(
            f"/vms/{segment(name)}/approve",
            {"eventIds": "all" if approve_all else list(event_ids)},
        )
    if output == "json":
        emit(data, output, [], ())
    elif data["approved"]:
        click.echo(f"{name} approved {', '.join(data['approved'])}")
    else:
        click.echo(f"{name} is shown no event to approve")


@click.group()
def vmss() -> None:
    """Do to scale-set instances what a user or autoscale does."""


def _instances(function: F) -> F:
    """``--name SET --instance-ids 0 1 2``: az's spelling, where one option takes many values.

    click options take one value each, so the ids after the first are gathered by a trailing
    argument; ``--instance-ids 0 --instance-ids 1`` works as well.
    """
    decorators = (
        click.option("--name", "-n", required=True, help="The scale set's name."),
        click.option(
            "--instance-ids",
            "--instance-id",
            "instance_ids",
            multiple=True,
            help="Instance ids, as az takes them: --instance-ids 0 1 2.",
        ),
        click.argument("more_ids", nargs=-1, metavar="[INSTANCE_ID]..."),
        control_option,
        output_option,
    )
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def _scale_set_operation(operation: Operation) -> click.Command:
    """``vmss OPERATION --name SET --instance-ids 0 1 [--flag]`` for a registry operation."""

    def command(
        name: str,
        instance_ids: tuple[str, ...],
        more_ids: tuple[str, ...],
        control: str,
        output: str,
        **flags: bool,
    ) -> None:
        ids = (*instance_ids, *more_ids)
        if not ids:
            raise click.UsageError("name at least one instance: --instance-ids 0 1 ...")
        with control_api(control) as api:
            data = api.post(operation.path(name), operation.body({"instance_ids": ids, **flags}))
        emit_events(data, output, f"{operation.name} {name} {' '.join(ids)}: done, with no event")

    for param in reversed(operation.params):
        if param.kind == "flag":
            flag = "--" + param.name.replace("_", "-")
            command = click.option(flag, param.name, is_flag=True, help=param.help)(command)
    return click.command(operation.name, help=operation.summary)(_instances(command))


for _operation in for_target(SCALE_SET):
    _command = _scale_set_operation(_operation)
    for _name in (_operation.name, *_operation.cli_aliases):
        vmss.add_command(_command, _name)


__all__ = [
    "VM_HEADER",
    "name_option",
    "vm",
    "vm_approve",
    "vm_list",
    "vm_show",
    "vmss",
]
