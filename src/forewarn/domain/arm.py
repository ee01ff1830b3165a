"""Azure Resource Manager identities: the ids of VMs, sets and scheduled events.

Built exactly as Azure's pages spell them. A VM is
``/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}``
(a Uniform scale set's instance ``.../virtualMachineScaleSets/{set}/virtualMachines/{id}``, as
``/metadata/instance``'s ``resourceId`` shows it). A scheduled event is its target resource's
id followed by ``/providers/microsoft.maintenance/scheduledevents/{event-id}``, and "If you're
using a Virtual Machine Scale Sets, then the scheduled event ID includes the ID of the entire
Virtual Machine Scale Set, not just the impacted VMs" (learn.microsoft.com, "Scheduled Events in
Event Grid", "Finding the Virtual Machine ID for a Virtual Machine in a Virtual Machine Scale
Set"). Other events name their first impacted VM [ours: the pages show only VMs and scale sets].

ARM compares ids without regard to case (the pages themselves spell ``resourcegroups`` and
``resourceGroups``, ``Microsoft.Maintenance/Scheduledevents`` and
``microsoft.maintenance/scheduledevents``), so :func:`parse_scheduled_event_id` does too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from forewarn.domain.vms import Vm

#: The resource type of a scheduled event in ARM, Event Grid's ``data.resourceInfo.type``.
SCHEDULED_EVENT_TYPE = "microsoft.maintenance/scheduledEvents"
_EVENT_SUFFIX = "/providers/microsoft.maintenance/scheduledevents/"


def group_id(subscription_id: str, resource_group: str) -> str:
    return f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}"


def _compute(vm: Vm) -> str:
    return f"{group_id(vm.subscription_id, vm.resource_group)}/providers/Microsoft.Compute"


def vm_id(vm: Vm) -> str:
    """``vm``'s ARM id, as ``/metadata/instance`` reports it in ``resourceId``."""
    if vm.vm_scale_set_name and not vm.flexible:
        instance = vm.name.rsplit("_", 1)[-1]
        return f"{scale_set_id(vm)}/virtualMachines/{instance}"
    return f"{_compute(vm)}/virtualMachines/{vm.name}"


def scale_set_id(vm: Vm) -> str:
    """The id of the scale set ``vm`` is an instance of."""
    return f"{_compute(vm)}/virtualMachineScaleSets/{vm.vm_scale_set_name}"


def target_id(impacted: Sequence[Vm]) -> str:
    """The resource an event impacting ``impacted`` is filed under: their scale set, or the
    first of them."""
    first = impacted[0]
    return scale_set_id(first) if first.vm_scale_set_name else vm_id(first)


def scheduled_event_id(target: str, event_id: str) -> str:
    """The ARM id of event ``event_id`` filed under resource ``target``."""
    return f"{target}{_EVENT_SUFFIX}{event_id}"


@dataclass(frozen=True, slots=True)
class ScheduledEventRef:
    """What an acknowledge call names: a resource of the Compute provider and an event."""

    subscription_id: str
    resource_group: str
    resource_type: str
    resource_name: str
    event_id: str


_SEGMENT = r"[^/?#]{1,128}"
_REF = re.compile(
    rf"^/subscriptions/(?P<sub>{_SEGMENT})/resourcegroups/(?P<rg>{_SEGMENT})"
    rf"/providers/microsoft\.compute/(?P<type>virtualmachines|virtualmachinescalesets)"
    rf"/(?P<name>{_SEGMENT}){_EVENT_SUFFIX}(?P<event>[0-9a-f-]{{36}})$",
    re.IGNORECASE,
)


def parse_scheduled_event_id(text: str) -> ScheduledEventRef | None:
    """The parts of a scheduled event's ARM id, or None when ``text`` is not one."""
    match = _REF.match(text) if len(text) <= 1024 else None
    if match is None:
        return None
    return ScheduledEventRef(
        match["sub"], match["rg"], match["type"], match["name"], match["event"].upper()
    )


def names(ref: ScheduledEventRef, vm: Vm) -> bool:
    """Whether ``ref``'s resource is one an acknowledgement of an event impacting ``vm`` may
    name (ARM ids ignore case): the scale set ``vm`` is an instance of, since a scale set's
    event is filed under the whole set ("the scheduled event ID includes the ID of the entire
    Virtual Machine Scale Set, not just the impacted VMs", "Scheduled Events in Event Grid"),
    so an instance's own id names no such event; otherwise ``vm`` itself."""
    if (ref.subscription_id.lower(), ref.resource_group.lower()) != (
        vm.subscription_id.lower(),
        vm.resource_group.lower(),
    ):
        return False
    wanted = ref.resource_name.lower()
    if vm.vm_scale_set_name:
        kind, name = "virtualmachinescalesets", vm.vm_scale_set_name
    else:
        kind, name = "virtualmachines", vm.name
    return ref.resource_type.lower() == kind and name.lower() == wanted


__all__ = [
    "SCHEDULED_EVENT_TYPE",
    "ScheduledEventRef",
    "group_id",
    "names",
    "parse_scheduled_event_id",
    "scale_set_id",
    "scheduled_event_id",
    "target_id",
    "vm_id",
]
