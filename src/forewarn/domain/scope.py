"""Who is shown an event: the delivery scope rules of SPEC 5.

Source: scheduled-events-linux.txt, "The Basics" ("Scheduled events are delivered to:
Standalone Virtual Machines ... All the VMs in an availability set") and
scheduled-events-windows-2024.txt, "Scope". ``Resources`` still lists only the impacted VMs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from forewarn.domain.vms import Vm


def audience(impacted: Iterable[Vm], fleet: Mapping[str, Vm]) -> frozenset[str]:
    """Names of every VM that sees an event impacting ``impacted``.

    A standalone VM sees its own events; every VM of an availability set sees the events of
    any member of the set.
    """
    names: set[str] = set()
    sets = set()
    for vm in impacted:
        names.add(vm.name)
        if vm.availability_set is not None:
            sets.add(vm.availability_set)
    if sets:
        names.update(vm.name for vm in fleet.values() if vm.availability_set in sets)
    return frozenset(names)
