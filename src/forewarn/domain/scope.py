"""Who is shown an event: the delivery scope rules of SPEC 5.

Sources: scheduled-events-linux.txt, "The Basics" ("Scheduled events are delivered to:
Standalone Virtual Machines. All the VMs in a cloud service. All the VMs in an availability
set. ... All the VMs in a scale set placement group." and "Specific to VMs in an availability
zone, the scheduled events go to single VMs in a zone"); scheduled-events-windows-2024.txt,
"Scope" and "Resources" ("GPU accelerated Virtual Machines in a scale set using 1 fault domain
(FD = 1) will only receive scheduled events for the impacted resource"). ``Resources`` still
lists only the impacted VMs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from forewarn.domain.fleet import ScaleSet
from forewarn.domain.vms import Vm


def scope_group(vm: Vm, scale_sets: Mapping[str, ScaleSet]) -> tuple[str, str]:
    """The group whose members all see each other's events, as ``(kind, name)``."""
    if vm.cloud_service is not None:
        return ("cloud-service", vm.cloud_service)
    if vm.availability_set is not None:
        return ("availability-set", vm.availability_set)
    if vm.vm_scale_set_name:
        scale_set = scale_sets.get(vm.vm_scale_set_name)
        if vm.is_gpu and scale_set is not None and scale_set.platform_fault_domain_count == 1:
            return ("vm", vm.name)
        return ("placement-group", f"{vm.vm_scale_set_name}/{vm.placement_group or '0'}")
    return ("vm", vm.name)


def audience(
    impacted: Iterable[Vm],
    members: Callable[[tuple[str, str]], Iterable[str]],
    scale_sets: Mapping[str, ScaleSet] | None = None,
) -> frozenset[str]:
    """Names of every VM that sees an event impacting ``impacted``.

    ``members`` gives the names in a scope group; the platform keeps that index so that an
    event costs the size of its groups, not of the fleet.
    """
    scale_sets = scale_sets or {}
    names: set[str] = set()
    for vm in impacted:
        names.add(vm.name)
        group = scope_group(vm, scale_sets)
        if group[0] != "vm":
            names.update(members(group))
    return frozenset(names)
