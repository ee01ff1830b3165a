"""Where VMs run: the fault-domain guarantee every placement keeps.

"VMs in different fault domains won't be impacted by routine maintenance operations at the same
time" (scheduled-events-windows-2024.txt, "High level overview"): Azure gives each fault domain
of an availability set, scale set or cloud service its own hardware. A host's maintenance hits
every VM on it at once, so a host that held two fault domains of one set would break that
promise. Every placement here (the fleet, a VM added later, a redeploy, recovery from a failed
host) therefore keeps each set's fault domains on distinct hosts.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from forewarn.domain.vms import Vm


class SetKind(enum.Enum):
    """The groups whose fault domains are separate hardware."""

    AVAILABILITY_SET = "availability set"
    SCALE_SET = "scale set"
    CLOUD_SERVICE = "cloud service"


@dataclass(frozen=True, slots=True)
class FaultDomainSet:
    """One availability set, scale set or cloud service, by kind and name."""

    kind: SetKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.name!r}"


def fault_domain_set(vm: Vm) -> FaultDomainSet | None:
    """The set whose fault domains ``vm``'s placement must keep apart; None for a lone VM."""
    if vm.availability_set is not None:
        return FaultDomainSet(SetKind.AVAILABILITY_SET, vm.availability_set)
    if vm.vm_scale_set_name:
        return FaultDomainSet(SetKind.SCALE_SET, vm.vm_scale_set_name)
    if vm.cloud_service is not None:
        return FaultDomainSet(SetKind.CLOUD_SERVICE, vm.cloud_service)
    return None


def conflict(vm: Vm, host: str, others: Iterable[Vm]) -> Vm | None:
    """A VM of ``vm``'s set, in another fault domain, already on ``host``; None when ``vm`` may
    run there."""
    group = fault_domain_set(vm)
    if group is None or not host:
        return None
    for other in others:
        if (
            other.name != vm.name
            and other.host == host
            and other.platform_fault_domain != vm.platform_fault_domain
            and fault_domain_set(other) == group
        ):
            return other
    return None


def placement_error(vm: Vm, others: Iterable[Vm]) -> str | None:
    """Why ``vm`` cannot run on its host beside ``others``, or None when it can."""
    other = conflict(vm, vm.host, others)
    if other is None:
        return None
    return (
        f"host {vm.host!r} already runs {other.name!r} in fault domain "
        f"{other.platform_fault_domain} of {fault_domain_set(vm)}; {vm.name!r} is in fault "
        f"domain {vm.platform_fault_domain}, and a set's fault domains never share a host"
    )


def new_host(vm: Vm, vms: Iterable[Vm], avoid: Iterable[str]) -> str:
    """The host ``vm`` moves to when it leaves its own (redeploy, recovery from a failure).

    The first existing host, by name, that is not ``vm``'s, not in ``avoid`` (failed or failing
    hardware) and holds no other fault domain of its set; a new host when none qualifies. Only
    the state decides, so a replay moves every VM the same way.
    """
    fleet = tuple(vms)
    taken = {other.host for other in fleet}
    excluded = {vm.host, ""} | set(avoid)
    for host in sorted(taken - excluded):
        if conflict(vm, host, fleet) is None:
            return host
    stem = f"{vm.host or 'host'}-redeployed"
    candidate, n = stem, 1
    while candidate in taken or candidate in excluded:
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


__all__ = [
    "FaultDomainSet",
    "SetKind",
    "conflict",
    "fault_domain_set",
    "new_host",
    "placement_error",
]
