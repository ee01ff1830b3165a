"""The slice of ``/metadata/instance`` that Scheduled Events handlers read to learn who they are.

Handlers call it before reading events (to find their own name in ``Resources``). Field names
and string-typed numbers follow the IMDS instance document; only the ``compute`` section is
modelled, and the ``network`` section is an empty interface list.
"""

from __future__ import annotations

from typing import Any

import orjson

from forewarn.domain.vms import Vm

#: The general IMDS api-versions; unlike Scheduled Events, instance metadata accepts these.
INSTANCE_API_VERSIONS: tuple[str, ...] = (
    "2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01", "2018-02-01",
    "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11", "2019-04-30", "2019-06-01",
    "2019-06-04", "2019-08-01", "2019-08-15", "2019-11-01", "2020-06-01", "2020-07-15",
    "2020-09-01", "2020-10-01", "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01",
    "2021-05-01", "2021-08-01", "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13",
    "2023-07-01", "2023-11-15", "2024-07-17", "2025-04-07",
)  # fmt: skip

INSTANCE_NEWEST_VERSIONS: tuple[str, ...] = tuple(reversed(INSTANCE_API_VERSIONS[-3:]))


def _resource_id(vm: Vm) -> str:
    group = f"/subscriptions/{vm.subscription_id}/resourceGroups/{vm.resource_group}/providers"
    if vm.vm_scale_set_name:
        instance = vm.name.rsplit("_", 1)[-1]
        return (
            f"{group}/Microsoft.Compute/virtualMachineScaleSets/{vm.vm_scale_set_name}"
            f"/virtualMachines/{instance}"
        )
    return f"{group}/Microsoft.Compute/virtualMachines/{vm.name}"


def compute_fields(vm: Vm) -> dict[str, Any]:
    """The ``compute`` object, in the IMDS document's alphabetical key order."""
    return {
        "azEnvironment": "AzurePublicCloud",
        "location": vm.location,
        "name": vm.name,
        "osType": vm.os_type,
        "platformFaultDomain": str(vm.platform_fault_domain),
        "platformUpdateDomain": str(vm.platform_update_domain),
        "resourceGroupName": vm.resource_group,
        "resourceId": _resource_id(vm),
        "subscriptionId": vm.subscription_id,
        "tags": ";".join(f"{key}:{value}" for key, value in vm.tags),
        "tagsList": [{"name": key, "value": value} for key, value in vm.tags],
        "vmId": vm.vm_id,
        "vmScaleSetName": vm.vm_scale_set_name,
        "vmSize": vm.vm_size,
        "zone": vm.zone,
    }


def instance_fields(vm: Vm) -> dict[str, Any]:
    return {"compute": compute_fields(vm), "network": {"interface": []}}


def select(fields: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value under ``path`` (``("compute", "name")``), or raise KeyError."""
    value: Any = fields
    for part in path:
        if not isinstance(value, dict):
            raise KeyError(part)
        value = value[part]
    return value


def encode_json(value: Any) -> bytes:
    return orjson.dumps(value)


def encode_text(value: Any) -> bytes:
    """``format=text`` for a leaf: the bare value; for an object, its keys one per line."""
    if isinstance(value, dict):
        return "\n".join(value).encode()
    if isinstance(value, list):
        return orjson.dumps(value)
    return str(value).encode()


def versions_body() -> bytes:
    return orjson.dumps({"apiVersions": list(INSTANCE_API_VERSIONS)})
