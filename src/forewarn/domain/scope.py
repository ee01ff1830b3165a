"""Who is shown an event: the delivery scope rules of SPEC 5.

Sources: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics" ("Scheduled
events are delivered to: Standalone Virtual Machines. All the VMs in a cloud service. All the VMs in
an availability set. ... All the VMs in a scale set placement group." and "Specific to VMs in an
availability zone, the scheduled events go to single VMs in a zone");
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope" and "Resources" ("GPU
accelerated Virtual Machines in a scale set using 1 fault domain (FD = 1) will only receive
scheduled events for the impacted resource"). ``Resources`` still lists only the impacted VMs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import NamedTuple, TypeVar

from forewarn.domain.fleet import ScaleSet
from forewarn.domain.vms import Vm

#: What the platform's index keeps of each VM shown an event (its tenant).
_Kept = TypeVar("_Kept")


class ScopeKind(StrEnum):
    """What kind of group shares events: a closed set, so a typo is a type error."""

    VM = "vm"
    CLOUD_SERVICE = "cloud-service"
    AVAILABILITY_SET = "availability-set"
    PLACEMENT_GROUP = "placement-group"


class ScopeGroup(NamedTuple):
    kind: ScopeKind
    name: str


def scope_group(vm: Vm, scale_sets: Mapping[str, ScaleSet]) -> ScopeGroup:
    """The group whose members all see each other's events."""
    if vm.cloud_service is not None:
        return ScopeGroup(ScopeKind.CLOUD_SERVICE, vm.cloud_service)
    if vm.availability_set is not None:
        return ScopeGroup(ScopeKind.AVAILABILITY_SET, vm.availability_set)
    if vm.vm_scale_set_name:
        scale_set = scale_sets.get(vm.vm_scale_set_name)
        if vm.is_gpu and scale_set is not None and scale_set.platform_fault_domain_count == 1:
            return ScopeGroup(ScopeKind.VM, vm.name)
        placement = f"{vm.vm_scale_set_name}/{vm.scale_set_placement_group}"
        return ScopeGroup(ScopeKind.PLACEMENT_GROUP, placement)
    return ScopeGroup(ScopeKind.VM, vm.name)


def audience(
    impacted: Iterable[Vm], members: Callable[[Vm], Mapping[str, _Kept]]
) -> dict[str, _Kept]:
    """Every VM that sees an event impacting ``impacted``, by name, with what ``members`` keeps
    of it: the members of each one's scope group (:func:`scope_group`), a VM alone in its
    group being its one member.

    ``members`` is an index the platform keeps of each VM's group, so that an event costs the
    size of its groups, not of the fleet.
    """
    shown: dict[str, _Kept] = {}
    for vm in impacted:
        shown.update(members(vm))
    return shown


__all__ = [
    "ScopeGroup",
    "ScopeKind",
    "audience",
    "scope_group",
]
