"""Resource Graph's ``resources`` table for the fleet: a row per VM and per scale set.

learn.microsoft.com, Azure Resource Graph "Understanding the Azure Resource Graph query
language", "Resource Graph tables": ``Resources`` is "the default table if a table isn't
defined in the query. Most Resource Manager resource types and properties are here", with the
columns ``id``, ``name``, ``type`` (lower case), ``tenantId``, ``kind``, ``location``,
``resourceGroup``, ``subscriptionId``, ``managedBy``, ``sku``, ``plan``, ``properties``,
``tags``, ``identity``, ``zones``, ``extendedLocation``. A VM's ``id`` is the one
``/metadata/instance`` reports (:func:`forewarn.domain.arm.vm_id`), a scale set's the one its
events are filed under; a Uniform scale set's instances are not rows of ``resources`` (Resource
Graph keeps them in ``ComputeResources``), a Flexible set's VMs are, as standalone VMs are.
Only what the fleet knows is filled in: ``properties`` holds the VM's ``vmId``, size, OS and
``provisioningState``, a scale set's orchestration mode and capacity (its ``sku``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from forewarn.domain import arm
from forewarn.domain.vms import Vm

VM_TYPE = "microsoft.compute/virtualmachines"
SCALE_SET_TYPE = "microsoft.compute/virtualmachinescalesets"


def _row(vm: Vm, resource_id: str, name: str, kind: str) -> dict[str, Any]:
    return {
        "id": resource_id,
        "name": name,
        "type": kind,
        "tenantId": vm.tenant_id,
        "kind": "",
        "location": vm.location,
        "resourceGroup": vm.resource_group.lower(),
        "subscriptionId": vm.subscription_id,
        "managedBy": "",
        "sku": None,
        "plan": None,
        "properties": {},
        "tags": dict(vm.tags),
        "identity": None,
        "zones": [vm.zone] if vm.zone else None,
        "extendedLocation": None,
    }


def resource_rows(vms: Iterable[Vm]) -> list[dict[str, Any]]:
    """The ``resources`` rows of the fleet ``vms``: its VMs, then its scale sets, each in the
    order its first VM comes."""
    rows: list[dict[str, Any]] = []
    sets: dict[str, list[Vm]] = {}
    for vm in vms:
        if vm.vm_scale_set_name:
            sets.setdefault(arm.scale_set_id(vm), []).append(vm)
        if vm.vm_scale_set_name and not vm.flexible:
            continue
        row = _row(vm, arm.vm_id(vm), vm.name, VM_TYPE)
        row["properties"] = {
            "vmId": vm.vm_id,
            "hardwareProfile": {"vmSize": vm.vm_size},
            "storageProfile": {"osDisk": {"osType": vm.os_type}},
            "provisioningState": "Succeeded",
        }
        if vm.flexible:
            row["properties"]["virtualMachineScaleSet"] = {"id": arm.scale_set_id(vm)}
        rows.append(row)
    for set_id, members in sets.items():
        first = members[0]
        row = _row(first, set_id, first.vm_scale_set_name, SCALE_SET_TYPE)
        row["zones"] = sorted({vm.zone for vm in members if vm.zone}) or None
        row["sku"] = {"name": first.vm_size, "tier": "Standard", "capacity": len(members)}
        row["properties"] = {
            "orchestrationMode": "Flexible" if first.flexible else "Uniform",
            "provisioningState": "Succeeded",
        }
        rows.append(row)
    return rows


__all__ = ["SCALE_SET_TYPE", "VM_TYPE", "resource_rows"]
