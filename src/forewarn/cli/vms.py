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
    operation_body,
    operation_examples,
    operation_options,
    output_option,
)
from forewarn.registry import AVAILABILITY_SET, INSTANCE_IDS, SCALE_SET, VM, Operation, for_target
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


def _named_operation(operation: Operation) -> click.Command:
    """``OPERATION --name NAME`` (and the operation's options) for a registry operation on a
    named VM or set."""

    def command(name: str, control: str, output: str, **arguments: Any) -> None:
        with control_api(control) as api:
            data = api.post(operation.path(name), operation_body(operation, arguments))
        emit_events(data, output, f"{operation.name} {name}: done, with no event")

    decorated = output_option(control_option(operation_options(operation, command)))
    named = click.option("--name", "-n", required=True, help=operation.target.name_help)
    return click.command(
        operation.name, help=operation.summary, epilog=operation_examples(operation)
    )(named(decorated))


for _operation in for_target(VM):
    vm.add_command(_named_operation(_operation))


@vm.group("availability-set")
def availability_set() -> None:
    """Change what applies to every VM of an availability set."""


for _operation in for_target(AVAILABILITY_SET):
    availability_set.add_command(_named_operation(_operation))


@vm.command("approve")
@name_option
@click.argument("event_ids", nargs=-1)
@click.option("--all", "approve_all", is_flag=True, help="Every event the VM is shown.")
@control_option
@output_option
def vm_approve(
    name: str, event_ids: tuple[str, ...], approve_all: bool, control: str, output: str
) -> None:
    """Approve events for VM NAME through the control API, as if it had POSTed them (`events
    approve`, run inside a VM, POSTs them to the VM-facing endpoint itself)."""
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
    if INSTANCE_IDS not in operation.params:
        return _named_operation(operation)

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
        body = operation_body(operation, {"instance_ids": ids, **flags})
        with control_api(control) as api:
            data = api.post(operation.path(name), body)
        emit_events(data, output, f"{operation.name} {name} {' '.join(ids)}: done, with no event")

    command = operation_options(operation, command)
    return click.command(
        operation.name, help=operation.summary, epilog=operation_examples(operation)
    )(_instances(command))


for _operation in for_target(SCALE_SET):
    _command = _scale_set_operation(_operation)
    for _name in (_operation.name, *_operation.cli_aliases):
        vmss.add_command(_command, _name)


__all__ = [
    "VM_HEADER",
    "availability_set",
    "name_option",
    "vm",
    "vm_approve",
    "vm_list",
    "vm_show",
    "vmss",
]
