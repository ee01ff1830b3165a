"""Where VMs run: the fault-domain guarantee every placement keeps.

"VMs in different fault domains won't be impacted by routine maintenance operations at the same
time" (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview"):
Azure gives each fault domain of an availability set, scale set or cloud service its own hardware. A
host's maintenance hits every VM on it at once, so a host that held two fault domains of one set
would break that promise. Every placement here (the fleet, a VM added later, a redeploy, recovery
from a failed host) therefore keeps each set's fault domains on distinct hosts.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable
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


class Placements:
    """Which fault domains of each set every host holds.

    An index over a fleet, kept by whoever adds, moves and removes its VMs, so that checking a
    placement costs the size of one host rather than of the fleet: without it, adding the
    VMs of a large fleet of sets one by one is quadratic. The index only says when the fleet
    must be searched (:meth:`crowded`); which VM is in the way is still found in the fleet's
    own order, so every message names the same VM as a search of the whole fleet.
    """

    __slots__ = ("_domains",)

    def __init__(self) -> None:
        # (set, host) -> fault domain -> how many of the set's VMs in it run on the host
        self._domains: dict[tuple[FaultDomainSet, str], dict[int, int]] = {}

    def add(self, vm: Vm) -> None:
        group = fault_domain_set(vm)
        if group is not None:
            domains = self._domains.setdefault((group, vm.host), {})
            domain = vm.platform_fault_domain
            domains[domain] = domains.get(domain, 0) + 1

    def remove(self, vm: Vm) -> None:
        group = fault_domain_set(vm)
        if group is not None:
            key = (group, vm.host)
            domains = self._domains[key]
            domain = vm.platform_fault_domain
            domains[domain] -= 1
            if not domains[domain]:
                del domains[domain]
            if not domains:
                del self._domains[key]

    def crowded(self, vm: Vm, host: str) -> bool:
        """Whether ``host`` runs a VM of ``vm``'s set in a fault domain other than ``vm``'s:
        when False, ``vm`` may run there."""
        group = fault_domain_set(vm)
        if group is None:
            return False
        domains = self._domains.get((group, host))
        return domains is not None and any(domain != vm.platform_fault_domain for domain in domains)


def conflict(
    vm: Vm, host: str, others: Iterable[Vm], placements: Placements | None = None
) -> Vm | None:
    """A VM of ``vm``'s set, in another fault domain, already on ``host``; None when ``vm`` may
    run there. ``placements``, an index of ``others``, spares the search when the host holds
    no other fault domain of the set."""
    group = fault_domain_set(vm)
    if group is None or not host:
        return None
    if placements is not None and not placements.crowded(vm, host):
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


def placement_error(
    vm: Vm, others: Iterable[Vm], placements: Placements | None = None
) -> str | None:
    """Why ``vm`` cannot run on its host beside ``others`` (indexed by ``placements``, when
    given), or None when it can."""
    other = conflict(vm, vm.host, others, placements)
    if other is None:
        return None
    return (
        f"host {vm.host!r} already runs {other.name!r} in fault domain "
        f"{other.platform_fault_domain} of {fault_domain_set(vm)}; {vm.name!r} is in fault "
        f"domain {vm.platform_fault_domain}, and a set's fault domains never share a host"
    )


#: The suffix a host made by :func:`new_host` carries.
_REDEPLOYED = re.compile(r"-redeployed(-\d+)?$")


def new_host(
    vm: Vm, vms: Collection[Vm], avoid: Iterable[str], placements: Placements | None = None
) -> str:
    """The host ``vm`` moves to when it leaves its own (redeploy, recovery from a failure).

    The first existing host, by name, that is not ``vm``'s, not in ``avoid`` (failed or failing
    hardware) and holds no other fault domain of its set; a new host when none qualifies. Only
    the state decides, so a replay moves every VM the same way. ``placements``, an index of
    ``vms``, spares a search of the fleet for each host.
    """
    taken = {other.host for other in vms}
    excluded = {vm.host, ""} | set(avoid)
    for host in sorted(taken - excluded):
        if conflict(vm, host, vms, placements) is None:
            return host
    # One suffix however often the VM moves: host-vm0-redeployed, -redeployed-2, ...
    stem = _REDEPLOYED.sub("", vm.host or "host") + "-redeployed"
    candidate, n = stem, 1
    while candidate in taken or candidate in excluded:
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


__all__ = [
    "FaultDomainSet",
    "Placements",
    "SetKind",
    "conflict",
    "fault_domain_set",
    "new_host",
    "placement_error",
]
