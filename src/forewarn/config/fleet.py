"""The fleet file (YAML): which VMs exist and where each one's endpoint answers.

Validated with pydantic so that a mistake is reported with the file, the field and the
reason, and nothing starts. Example: ``examples/fleet.yaml``.
"""

from __future__ import annotations

import ipaddress
import uuid
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forewarn.domain.errors import ForewarnError
from forewarn.domain.vms import Vm

MAX_FLEET_FILE_BYTES = 16 * 1024 * 1024
_NAME = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class FleetFileError(ForewarnError):
    """The fleet file cannot be used; the message names the file, the field and why."""


class _VmSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: _NAME
    vm_id: str | None = Field(default=None, alias="vmId")
    address: str | None = None
    subscription_id: str = Field(
        default="00000000-0000-0000-0000-000000000000", alias="subscriptionId"
    )
    resource_group: str = Field(default="forewarn", alias="resourceGroup", max_length=90)
    location: str = Field(default="westeurope", max_length=64)
    zone: str = Field(default="", max_length=8)
    fault_domain: int = Field(default=0, alias="faultDomain", ge=0, le=19)
    update_domain: int = Field(default=0, alias="updateDomain", ge=0, le=19)
    scale_set: str = Field(default="", alias="scaleSet", max_length=64)
    size: str = Field(default="Standard_D2s_v3", max_length=64)
    os_type: str = Field(default="Linux", alias="osType", pattern="^(Linux|Windows)$")
    tags: dict[str, str] = Field(default_factory=dict)
    availability_set: str | None = Field(default=None, alias="availabilitySet", max_length=80)
    classic: bool = False

    @field_validator("address")
    @classmethod
    def _address_is_ip(cls, value: str | None) -> str | None:
        if value is not None:
            ipaddress.ip_address(value)
        return value


class _FleetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vms: list[_VmSpec] = Field(min_length=1, max_length=1_000_000)


def _to_vm(spec: _VmSpec) -> Vm:
    vm_id = spec.vm_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"forewarn:vm:{spec.name}"))
    return Vm(
        name=spec.name,
        vm_id=vm_id,
        subscription_id=spec.subscription_id,
        resource_group=spec.resource_group,
        location=spec.location,
        zone=spec.zone,
        platform_fault_domain=spec.fault_domain,
        platform_update_domain=spec.update_domain,
        vm_scale_set_name=spec.scale_set,
        vm_size=spec.size,
        os_type=spec.os_type,
        tags=tuple(sorted(spec.tags.items())),
        availability_set=spec.availability_set,
        address=spec.address,
        iaas=not spec.classic,
    )


def _where(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location) or "(top level)"


def parse_fleet(text: str, source: str = "<fleet>") -> list[Vm]:
    """VMs described by YAML ``text``; raises :class:`FleetFileError` naming ``source``."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FleetFileError(f"{source}: not valid YAML: {exc}") from None
    try:
        fleet = _FleetSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise FleetFileError(f"{source}: {_where(first['loc'])}: {first['msg']}") from None
    vms = [_to_vm(spec) for spec in fleet.vms]
    seen_names: set[str] = set()
    seen_addresses: set[str] = set()
    for index, vm in enumerate(vms):
        if vm.name in seen_names:
            raise FleetFileError(f"{source}: vms.{index}.name: {vm.name!r} is used twice")
        seen_names.add(vm.name)
        if vm.address is not None:
            if vm.address in seen_addresses:
                raise FleetFileError(f"{source}: vms.{index}.address: {vm.address} is used twice")
            seen_addresses.add(vm.address)
    unaddressed = [vm.name for vm in vms if vm.address is None]
    if len(vms) > 1 and unaddressed:
        raise FleetFileError(
            f"{source}: vms: with more than one VM each needs an address to be told apart "
            f"(missing for {', '.join(unaddressed[:5])})"
        )
    return vms


def load_fleet(path: Path) -> list[Vm]:
    try:
        size = path.stat().st_size
        if size > MAX_FLEET_FILE_BYTES:
            raise FleetFileError(f"{path}: larger than {MAX_FLEET_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FleetFileError(f"{path}: not UTF-8 text") from None
    return parse_fleet(text, str(path))


def default_fleet() -> list[Vm]:
    """The zero-configuration fleet: one standalone VM answering on the bind address."""
    return [Vm(name="vm0", vm_id=str(uuid.uuid5(uuid.NAMESPACE_URL, "forewarn:vm:vm0")))]
