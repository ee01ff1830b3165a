"""The slice of ``/metadata/instance`` that Scheduled Events handlers read to learn who they are.

Handlers call it before reading events (to find their own name in ``Resources``, their
``priority``, ``placementGroupId``, ``osProfile.computerName``). Field names, string-typed
values and which api-version shows which field follow the IMDS instance document; ``network``
has one interface carrying the VM's address.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from forewarn.domain import arm
from forewarn.domain.vms import Priority, Vm

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


#: The api-version that introduced each compute field (SPEC 9: the IMDS overview,
#: "Instance metadata", the compute table); a caller is shown the fields its
#: version has. The table starts at 2017-04-02; 2017-03-01 callers get that first set (SPEC 9).
_COMPUTE_SINCE: dict[str, str] = {
    "azEnvironment": "2018-10-01", "evictionPolicy": "2020-12-01",
    "isHostCompatibilityLayerVm": "2020-06-01", "location": "2017-04-02", "name": "2017-04-02",
    "offer": "2017-04-02", "osProfile": "2020-07-15", "osType": "2017-04-02",
    "placementGroupId": "2017-08-01", "plan": "2018-04-02", "platformFaultDomain": "2017-04-02",
    "platformUpdateDomain": "2017-04-02", "priority": "2020-12-01", "provider": "2018-10-01",
    "publicKeys": "2018-04-02", "publisher": "2017-04-02", "resourceGroupName": "2017-08-01",
    "resourceId": "2019-03-11", "securityProfile": "2020-06-01", "sku": "2017-04-02",
    "storageProfile": "2019-06-01", "subscriptionId": "2017-08-01", "tags": "2017-08-01",
    "tagsList": "2019-06-04", "userData": "2021-01-01", "version": "2017-04-02",
    "virtualMachineScaleSet": "2021-03-01", "vmId": "2017-04-02", "vmScaleSetName": "2017-12-01",
    "vmSize": "2017-04-02", "zone": "2017-12-01",
}  # fmt: skip
#: Fields inside an object that came later than the object itself (same table).
_NESTED_SINCE: dict[tuple[str, str], str] = {
    ("osProfile", "disablePasswordAuthentication"): "2020-10-01",
    ("securityProfile", "encryptionAtHost"): "2021-11-01",
    ("securityProfile", "securityType"): "2021-12-13",
}
_FIRST_INSTANCE_VERSION = "2017-04-02"


def _resource_group_path(vm: Vm) -> str:
    return f"{arm.group_id(vm.subscription_id, vm.resource_group)}/providers"


def _computer_name(vm: Vm) -> str:
    """A Uniform scale set names its machines prefix + the instance id in base 36, six digits
    (``web00000a``); other VMs keep their own name."""
    instance = vm.name.rsplit("_", 1)[-1]
    if vm.vm_scale_set_name and not vm.flexible and instance.isdigit():
        digits, number = "", int(instance)
        while True:
            number, digit = divmod(number, 36)
            digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
            if not number:
                break
        return vm.vm_scale_set_name + digits.rjust(6, "0")
    return vm.name


def _stable_id(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "forewarn:" + "/".join(parts)))


def _all_compute_fields(vm: Vm) -> dict[str, Any]:
    image = vm.image_reference
    spot = vm.priority is Priority.SPOT
    in_set = bool(vm.vm_scale_set_name)
    linux = vm.os_type == "Linux"
    os_profile = {"adminUsername": "azureuser", "computerName": _computer_name(vm)}
    if linux:
        os_profile["disablePasswordAuthentication"] = "true"
    fields: dict[str, Any] = {
        "azEnvironment": "AzurePublicCloud",
        "evictionPolicy": "Deallocate" if spot else "",
        "isHostCompatibilityLayerVm": "false",
        "location": vm.location,
        "name": vm.name,
        "offer": image.offer,
        "osProfile": os_profile,
        "osType": vm.os_type,
        "placementGroupId": _stable_id(
            vm.subscription_id, vm.vm_scale_set_name, vm.scale_set_placement_group
        )
        if in_set and not vm.flexible
        else "",
        "plan": {"name": "", "product": "", "publisher": ""},
        "platformFaultDomain": str(vm.platform_fault_domain),
        "platformUpdateDomain": str(vm.platform_update_domain),
        "priority": "Spot" if spot else "Regular",
        "provider": "Microsoft.Compute",
        "publicKeys": [],
        "publisher": image.publisher,
        "resourceGroupName": vm.resource_group,
        "resourceId": arm.vm_id(vm),
        "securityProfile": {
            "secureBootEnabled": "false",
            "virtualTpmEnabled": "false",
            "encryptionAtHost": "false",
            "securityType": "",
        },
        "sku": image.sku,
        "storageProfile": {
            "dataDisks": [],
            "imageReference": {
                "id": "",
                "offer": image.offer,
                "publisher": image.publisher,
                "sku": image.sku,
                "version": image.version,
            },
            "osDisk": {
                "caching": "ReadWrite",
                "createOption": "FromImage",
                "diskSizeGB": "30",
                "managedDisk": {
                    "id": f"{_resource_group_path(vm)}/Microsoft.Compute/disks/{vm.name}_OsDisk_1",
                    "storageAccountType": "Premium_LRS",
                },
                "name": f"{vm.name}_OsDisk_1",
                "osType": vm.os_type,
                "writeAcceleratorEnabled": "false",
            },
        },
        "subscriptionId": vm.subscription_id,
        "tags": ";".join(f"{key}:{value}" for key, value in vm.tags),
        "tagsList": [{"name": key, "value": value} for key, value in vm.tags],
        "userData": "",
        "version": image.version,
        "vmId": vm.vm_id,
        "vmScaleSetName": vm.vm_scale_set_name,
        "vmSize": vm.vm_size,
        "zone": vm.zone,
    }
    if vm.flexible:  # "This field isn't available for ... uniform orchestration"
        fields["virtualMachineScaleSet"] = {"id": arm.scale_set_id(vm)}
    return fields


def compute_fields(vm: Vm, api_version: str = INSTANCE_API_VERSIONS[-1]) -> dict[str, Any]:
    """The ``compute`` object a caller asking with ``api_version`` is shown, keys in the IMDS
    document's alphabetical order. Versions are ISO dates, so they compare as strings."""
    version = max(api_version, _FIRST_INSTANCE_VERSION)
    shown: dict[str, Any] = {}
    for name, value in _all_compute_fields(vm).items():
        if _COMPUTE_SINCE[name] > version:
            continue
        if isinstance(value, dict):
            value = {
                key: inner
                for key, inner in value.items()
                if _NESTED_SINCE.get((name, key), "") <= version
            }
        shown[name] = value
    return shown


def network_fields(vm: Vm) -> dict[str, Any]:
    """One interface whose private address is the address the VM's requests arrive at (the
    Sample 6 shape of learn.microsoft.com/azure/virtual-machines/instance-metadata-service,
    "Network")."""
    address = vm.address or "10.0.0.4"
    mac = uuid.UUID(_stable_id("mac", vm.vm_id)).hex[:12].upper()
    return {
        "interface": [
            {
                "ipv4": {
                    "ipAddress": [{"privateIpAddress": address, "publicIpAddress": ""}],
                    "subnet": [{"address": address.rsplit(".", 1)[0] + ".0", "prefix": "24"}],
                },
                "ipv6": {"ipAddress": []},
                "macAddress": mac,
            }
        ]
    }


def instance_fields(vm: Vm, api_version: str = INSTANCE_API_VERSIONS[-1]) -> dict[str, Any]:
    return {"compute": compute_fields(vm, api_version), "network": network_fields(vm)}


def is_leaf(value: Any) -> bool:
    """A leaf node: what ``format=json`` cannot serve ("When filtering to a leaf node,
    ``format=json`` doesn't work",
    learn.microsoft.com/azure/virtual-machines/instance-metadata-service)."""
    return not isinstance(value, dict | list)


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


__all__ = [
    "INSTANCE_API_VERSIONS",
    "INSTANCE_NEWEST_VERSIONS",
    "compute_fields",
    "encode_json",
    "encode_text",
    "instance_fields",
    "is_leaf",
    "network_fields",
    "select",
    "versions_body",
]
