"""The fleet file (YAML): which VMs exist, how they are grouped, and where each one answers.

Validated with pydantic so that a mistake is reported with the file, the field and the
reason, and nothing starts. The schema, with every field, is documented in
``examples/fleet-full.yaml``; ``examples/fleet.yaml`` is the smallest useful one.

Names and defaults follow Azure's where Azure has them: ``notBeforeTimeout`` as an ISO 8601
duration (PT5M..PT15M), ``scheduledEventsPolicy.userInitiatedReboot.automaticallyApprove``,
``platformFaultDomainCount``, ``priority: Spot``, scale-set instances named
``{scaleSet}_{instanceId}`` and classic role instances named ``{role}_IN_{n}``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import pickle
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forewarn import collector
from forewarn.config.policy import PolicyIn
from forewarn.domain.errors import DomainError
from forewarn.domain.fleet import INSTANCE_ID_PATTERN, AvailabilitySet, ScaleSet
from forewarn.domain.operations import instance_name
from forewarn.domain.placement import Placements, placement_error
from forewarn.domain.vms import ImageReference, Priority, Vm
from forewarn.errors import ForewarnError
from forewarn.validation import first_problem
from forewarn.yaml_files import YamlInputError, load_yaml

MAX_FLEET_FILE_BYTES = 16 * 1024 * 1024
#: VMs a fleet may hold in all: standalone VMs, scale-set instances (listed or by capacity) and
#: cloud-service role instances together, counted before any VM is built.
MAX_VMS = 1_000_000
DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
#: The Microsoft Entra tenant of every subscription unless the file names one (``tenantId``).
DEFAULT_TENANT = "00000000-0000-0000-0000-000000000000"

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
#: Up to 6 digits a part: notBeforeTimeout is PT5M to PT15M, and a longer count only costs.
_ISO_DURATION = re.compile(r"^PT(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,6})S)?$")


class FleetFileError(ForewarnError):
    """The fleet file cannot be used; the message names the file, the field and why."""


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#: An IPv4 address as :func:`ipaddress.ip_address` reads one (four decimal octets, no leading
#: zero), matched in a fraction of its time: a large fleet gives every VM an address.
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")


def _check_address(value: str | None) -> str | None:
    """``value`` unchanged if it is an IP address; else :func:`ipaddress.ip_address`'s
    ValueError, which pydantic reports at the field."""
    if value is not None and _IPV4.fullmatch(value) is None:
        ipaddress.ip_address(value)  # IPv6, or refused
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _ImageSpec(_Strict):
    publisher: str = Field(min_length=1, max_length=128)
    offer: str = Field(min_length=1, max_length=128)
    sku: str = Field(min_length=1, max_length=128)
    version: str = Field(default="latest", min_length=1, max_length=64)

    def reference(self) -> ImageReference:
        return ImageReference(self.publisher, self.offer, self.sku, self.version)


class _Defaults(_Strict):
    subscription_id: str = Field(
        default=DEFAULT_SUBSCRIPTION, alias="subscriptionId", max_length=64
    )
    resource_group: str = Field(default="forewarn", alias="resourceGroup", max_length=90)
    location: str = Field(default="westeurope", max_length=64)
    tenant_id: str = Field(default=DEFAULT_TENANT, alias="tenantId", max_length=64)
    size: str = Field(default="Standard_D2s_v3", max_length=64)
    os_type: Literal["Linux", "Windows"] = Field(default="Linux", alias="osType")
    image: _ImageSpec | None = None


class _VmSpec(_Strict):
    name: Name
    vm_id: str | None = Field(default=None, alias="vmId", max_length=64)
    address: str | None = None
    host: str | None = Field(default=None, max_length=64)
    subscription_id: str | None = Field(default=None, alias="subscriptionId", max_length=64)
    resource_group: str | None = Field(default=None, alias="resourceGroup", max_length=90)
    location: str | None = Field(default=None, max_length=64)
    zone: str = Field(default="", max_length=8)
    fault_domain: int | None = Field(default=None, alias="faultDomain", ge=0, le=19)
    update_domain: int | None = Field(default=None, alias="updateDomain", ge=0, le=19)
    size: str | None = Field(default=None, max_length=64)
    os_type: Literal["Linux", "Windows"] | None = Field(default=None, alias="osType")
    image: _ImageSpec | None = None
    tags: dict[str, str] = Field(default_factory=dict, max_length=50)
    availability_set: str | None = Field(default=None, alias="availabilitySet", max_length=80)
    priority: Literal["Regular", "Spot"] = "Regular"
    #: None: ARM's defaults, or its availability set's policy.
    scheduled_events_policy: PolicyIn | None = Field(default=None, alias="scheduledEventsPolicy")
    scheduled_events_enabled: bool = Field(default=True, alias="scheduledEventsEnabled")

    _address = field_validator("address")(_check_address)


class _AvailabilitySetSpec(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=80)]
    fault_domains: int = Field(default=2, alias="faultDomains", ge=1, le=3)
    update_domains: int = Field(default=5, alias="updateDomains", ge=1, le=20)
    #: Every member's policy: "All VMs in the same ... availability set are required to have
    #: the same scheduled events policy"
    #: (learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid).
    scheduled_events_policy: PolicyIn = Field(
        default_factory=PolicyIn, alias="scheduledEventsPolicy"
    )


class _TerminateSpec(_Strict):
    enabled: bool = True
    not_before_timeout: str = Field(default="PT5M", alias="notBeforeTimeout")

    @field_validator("not_before_timeout")
    @classmethod
    def _iso_duration(cls, value: str) -> str:
        if _ISO_DURATION.match(value) is None or value == "PT":
            raise ValueError("must be an ISO 8601 duration such as PT5M")
        return value


class _InstanceSpec(_Strict):
    id: Annotated[str, Field(pattern=INSTANCE_ID_PATTERN)]
    address: str | None = None
    host: str | None = Field(default=None, max_length=64)
    zone: str | None = Field(default=None, max_length=8)

    _address = field_validator("address")(_check_address)


class _ScaleSetSpec(_Strict):
    name: Name
    capacity: int = Field(default=0, ge=0, le=MAX_VMS)
    instances: list[_InstanceSpec] = Field(default_factory=list, max_length=MAX_VMS)
    address_start: str | None = Field(default=None, alias="addressStart")
    hosts: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(default_factory=list)
    zones: list[Annotated[str, Field(max_length=8)]] = Field(default_factory=list)
    subscription_id: str | None = Field(default=None, alias="subscriptionId", max_length=64)
    resource_group: str | None = Field(default=None, alias="resourceGroup", max_length=90)
    location: str | None = Field(default=None, max_length=64)
    size: str | None = Field(default=None, max_length=64)
    priority: Literal["Regular", "Spot"] = "Regular"
    platform_fault_domain_count: int = Field(
        default=5, alias="platformFaultDomainCount", ge=1, le=5
    )
    placement_group_size: int = Field(default=100, alias="placementGroupSize", ge=1, le=1000)
    orchestration_mode: Literal["Uniform", "Flexible"] = Field(
        default="Uniform", alias="orchestrationMode"
    )
    terminate_notification: _TerminateSpec | None = Field(
        default=None, alias="terminateNotification"
    )
    os_image_notification: bool = Field(default=False, alias="osImageNotification")
    scheduled_events_policy: PolicyIn = Field(
        default_factory=PolicyIn, alias="scheduledEventsPolicy"
    )

    _address = field_validator("address_start")(_check_address)


class _RoleSpec(_Strict):
    name: Name
    instances: int = Field(default=1, ge=1, le=1000)


class _CloudServiceSpec(_Strict):
    name: Name
    roles: list[_RoleSpec] = Field(min_length=1, max_length=25)
    update_domains: int = Field(default=5, alias="updateDomains", ge=1, le=20)
    address_start: str | None = Field(default=None, alias="addressStart")
    host: str | None = Field(default=None, max_length=64)
    subscription_id: str | None = Field(default=None, alias="subscriptionId", max_length=64)

    _address = field_validator("address_start")(_check_address)


#: A classic cloud service spreads each role over two fault domains.
_CLASSIC_FAULT_DOMAINS = 2


class _FleetSpec(_Strict):
    defaults: _Defaults = Field(default_factory=_Defaults)
    vms: list[_VmSpec] = Field(default_factory=list, max_length=MAX_VMS)
    availability_sets: list[_AvailabilitySetSpec] = Field(
        default_factory=list, alias="availabilitySets"
    )
    scale_sets: list[_ScaleSetSpec] = Field(default_factory=list, alias="scaleSets")
    cloud_services: list[_CloudServiceSpec] = Field(default_factory=list, alias="cloudServices")


@dataclass(frozen=True)
class Fleet:
    """What a fleet file describes, ready for :class:`forewarn.domain.platform.Platform`."""

    vms: tuple[Vm, ...]
    scale_sets: tuple[ScaleSet, ...] = ()
    availability_sets: tuple[AvailabilitySet, ...] = ()
    not_receiving: frozenset[str] = field(default_factory=frozenset)


#: The hash of every generated vmId's name so far (RFC 4122's URL namespace and the prefix),
#: copied for each VM rather than hashed again.
_VM_ID_PREFIX = hashlib.sha1(uuid.NAMESPACE_URL.bytes + b"forewarn:vm:")
#: The hexadecimal digit that starts a vmId's fourth group, by the hash's digit there: its two
#: high bits made RFC 4122's variant (``10``).
_VARIANT_DIGIT = {digit: f"{int(digit, 16) & 0x3 | 0x8:x}" for digit in "0123456789abcdef"}


def _vm_id(name: str) -> str:
    """``str(uuid.uuid5(uuid.NAMESPACE_URL, f"forewarn:vm:{name}"))``, written out: building
    a :class:`uuid.UUID` took four times as long, a third of a second per 100,000 VMs. The
    version (5) and the variant are written into the hash's hexadecimal digits."""
    digest = _VM_ID_PREFIX.copy()
    digest.update(name.encode())
    text = digest.hexdigest()
    return (
        f"{text[:8]}-{text[8:12]}-5{text[13:16]}-{_VARIANT_DIGIT[text[16]]}{text[17:20]}-"
        f"{text[20:32]}"
    )


def parse_iso_duration(text: str) -> timedelta:
    match = _ISO_DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not an ISO 8601 duration such as PT5M")
    hours, minutes, seconds = (int(group or 0) for group in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


class _Addresses:
    """Hands out consecutive addresses from a start address."""

    def __init__(self, start: str | None) -> None:
        self._next = ipaddress.ip_address(start) if start is not None else None

    def take(self) -> str | None:
        if self._next is None:
            return None
        current = self._next
        self._next = current + 1
        return str(current)


#: The fleet file's ``priority`` values (``Regular`` or ``Spot``, as validated), looked up
#: rather than made by :class:`Priority` for each of a large fleet's VMs.
_PRIORITIES = {priority.value: priority for priority in Priority}


class _Builder:
    def __init__(self, spec: _FleetSpec) -> None:
        self.spec = spec
        self.defaults = spec.defaults
        self.vms: list[Vm] = []
        self.scale_sets: list[ScaleSet] = []
        self.not_receiving: set[str] = set()
        self.sets = {s.name: s for s in spec.availability_sets}
        #: ARM's default policy, one object for every VM that names none (it is frozen).
        self.default_policy = PolicyIn().policy()
        #: The image of every VM that names none (None, or one frozen reference for all).
        self.default_image = self._image(None)

    def build(self) -> Fleet:
        members: dict[str, int] = {}
        for index, vm_spec in enumerate(self.spec.vms):
            self._standalone(index, vm_spec, members)
        for set_index, scale_spec in enumerate(self.spec.scale_sets):
            self._scale_set(set_index, scale_spec)
        for service in self.spec.cloud_services:
            self._cloud_service(service)
        availability = tuple(AvailabilitySet(s.name) for s in self.spec.availability_sets)
        return Fleet(
            tuple(self.vms), tuple(self.scale_sets), availability, frozenset(self.not_receiving)
        )

    def _standalone(self, index: int, spec: _VmSpec, members: dict[str, int]) -> None:
        defaults = self.defaults
        fault, update = spec.fault_domain or 0, spec.update_domain or 0
        given = spec.scheduled_events_policy
        policy = self.default_policy if given is None else given.policy()
        if spec.availability_set is not None:
            group = self.sets.get(spec.availability_set)
            if group is None:
                raise _FleetProblemError(
                    f"vms.{index}.availabilitySet",
                    f"no availability set named {spec.availability_set!r}",
                )
            if spec.scheduled_events_policy is not None:
                raise _FleetProblemError(
                    f"vms.{index}.scheduledEventsPolicy",
                    f"a VM of availability set {group.name!r} has the set's policy: "
                    "all VMs of a set are required to have the same scheduled events policy; "
                    "set scheduledEventsPolicy on the set",
                )
            policy = group.scheduled_events_policy.policy()
            position = members.get(group.name, 0)
            members[group.name] = position + 1
            fault = (
                spec.fault_domain
                if spec.fault_domain is not None
                else (position % group.fault_domains)
            )
            update = (
                spec.update_domain
                if spec.update_domain is not None
                else (position % group.update_domains)
            )
            if fault >= group.fault_domains or update >= group.update_domains:
                raise _FleetProblemError(
                    f"vms.{index}", f"fault/update domain outside set {group.name!r}"
                )
        self.vms.append(
            Vm(
                name=spec.name,
                vm_id=spec.vm_id or _vm_id(spec.name),
                subscription_id=spec.subscription_id or defaults.subscription_id,
                resource_group=spec.resource_group or defaults.resource_group,
                location=spec.location or defaults.location,
                zone=spec.zone,
                platform_fault_domain=fault,
                platform_update_domain=update,
                vm_size=spec.size or defaults.size,
                os_type=spec.os_type or defaults.os_type,
                tags=tuple(sorted(spec.tags.items())) if spec.tags else (),
                image=self.default_image if spec.image is None else spec.image.reference(),
                availability_set=spec.availability_set,
                address=spec.address,
                host=spec.host or f"host-{spec.name}",
                priority=_PRIORITIES[spec.priority],
                policy=policy,
                tenant_id=defaults.tenant_id,
            )
        )
        if not spec.scheduled_events_enabled:
            self.not_receiving.add(spec.name)

    def _image(self, image: _ImageSpec | None) -> ImageReference | None:
        chosen = image or self.defaults.image
        return None if chosen is None else chosen.reference()

    def _scale_set(self, set_index: int, spec: _ScaleSetSpec) -> None:
        where = f"scaleSets.{set_index}"
        terminate = spec.terminate_notification
        try:
            scale_set = ScaleSet(
                name=spec.name,
                priority=Priority(spec.priority),
                platform_fault_domain_count=spec.platform_fault_domain_count,
                terminate_notification=terminate is not None and terminate.enabled,
                terminate_timeout=parse_iso_duration(
                    terminate.not_before_timeout if terminate else "PT5M"
                ),
                os_image_notification=spec.os_image_notification,
            )
        except DomainError as exc:
            raise _FleetProblemError(where, str(exc)) from None
        self.scale_sets.append(scale_set)
        flexible = spec.orchestration_mode == "Flexible"
        listed = spec.instances
        for index, spec_instance in enumerate(listed):
            if not flexible and not spec_instance.id.isdigit():
                raise _FleetProblemError(
                    f"{where}.instances.{index}.id",
                    f"{spec_instance.id!r}: a Uniform scale set's instance ids are numbers",
                )
        addresses = _Addresses(spec.address_start)
        defaults = self.defaults
        # What every instance shares, made once: a set of capacity 1,000,000 is that many VMs.
        policy = spec.scheduled_events_policy.policy()
        fd_count = spec.platform_fault_domain_count
        hosts = spec.hosts or [f"host-{spec.name}-{i}" for i in range(fd_count)]
        zones = spec.zones or [""]
        subscription_id = spec.subscription_id or defaults.subscription_id
        resource_group = spec.resource_group or defaults.resource_group
        location = spec.location or defaults.location
        vm_size = spec.size or defaults.size
        image = self.default_image
        priority = _PRIORITIES[spec.priority]
        for position in range(len(listed) or spec.capacity):
            instance = listed[position] if listed else None
            if instance is None:  # one of capacity's: no field of its own
                instance_id = _flexible_id(spec.name, position) if flexible else str(position)
                address, host, zone = addresses.take(), None, None
            else:
                instance_id, host, zone = instance.id, instance.host, instance.zone
                address = instance.address or addresses.take()
            name = instance_name(spec.name, instance_id)
            self.vms.append(
                Vm(
                    name=name,
                    vm_id=_vm_id(name),
                    subscription_id=subscription_id,
                    resource_group=resource_group,
                    location=location,
                    tenant_id=defaults.tenant_id,
                    zone=zone if zone is not None else zones[position % len(zones)],
                    platform_fault_domain=position % fd_count,
                    platform_update_domain=position % 5,
                    vm_scale_set_name=spec.name,
                    vm_size=vm_size,
                    os_type=defaults.os_type,
                    address=address,
                    # one fault domain per host: the hosts list is per fault domain
                    host=host or hosts[(position % fd_count) % len(hosts)],
                    # Flexible orchestration has no placement groups: the set is one scope
                    placement_group=None
                    if flexible
                    else str(position // spec.placement_group_size),
                    image=image,
                    flexible=flexible,
                    priority=priority,
                    policy=policy,
                )
            )

    def _cloud_service(self, spec: _CloudServiceSpec) -> None:
        """Instance *n* of every role is in update domain *n mod count* and fault domain *n mod
        2*, so one event can name ``["FrontEnd_IN_0", "BackEnd_IN_0"]`` (the Resources example of
        learn.microsoft.com/azure/virtual-machines/linux/scheduled-events; classic cloud services
        have two fault domains)."""
        addresses = _Addresses(spec.address_start)
        for role in spec.roles:
            for n in range(role.instances):
                name = f"{role.name}_IN_{n}"
                self.vms.append(
                    Vm(
                        name=name,
                        vm_id=_vm_id(f"{spec.name}/{name}"),
                        subscription_id=spec.subscription_id or self.defaults.subscription_id,
                        resource_group=self.defaults.resource_group,
                        location=self.defaults.location,
                        tenant_id=self.defaults.tenant_id,
                        platform_fault_domain=n % _CLASSIC_FAULT_DOMAINS,
                        platform_update_domain=n % spec.update_domains,
                        vm_size=self.defaults.size,
                        os_type=self.defaults.os_type,
                        address=addresses.take(),
                        host=spec.host or f"host-{spec.name}-{n % _CLASSIC_FAULT_DOMAINS}",
                        cloud_service=spec.name,
                        iaas=False,
                    )
                )


def _flexible_id(scale_set: str, position: int) -> str:
    """The eight hexadecimal digits Azure appends to the VMs a Flexible scale set creates
    (``web_1a2b3c4d``); derived from the set and position, so every load names them alike."""
    return hashlib.sha256(f"{scale_set}/{position}".encode()).hexdigest()[:8]


class _FleetProblemError(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")


def _where(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location) or "(top level)"


def _check_unique(fleet: Fleet, source: str) -> None:
    names: set[str] = set()
    addresses: set[str] = set()
    for vm in fleet.vms:
        if vm.name in names:
            raise FleetFileError(f"{source}: VM name {vm.name!r} is used twice")
        names.add(vm.name)
        if vm.address is not None:
            if vm.address in addresses:
                raise FleetFileError(
                    f"{source}: address {vm.address} is used twice (second time by {vm.name})"
                )
            addresses.add(vm.address)
    if not fleet.vms:
        raise FleetFileError(f"{source}: the fleet has no VMs")
    placed: list[Vm] = []
    placements = Placements()
    for vm in fleet.vms:
        misplaced = placement_error(vm, placed, placements)
        if misplaced is not None:
            raise FleetFileError(f"{source}: {misplaced}")
        placed.append(vm)
        placements.add(vm)
    unaddressed = [vm.name for vm in fleet.vms if vm.address is None]
    if len(fleet.vms) > 1 and unaddressed:
        raise FleetFileError(
            f"{source}: with more than one VM each needs an address to be told apart "
            f"(missing for {', '.join(unaddressed[:5])}"
            f"{' and more' if len(unaddressed) > 5 else ''}; scale sets and cloud services "
            f"take addressStart)"
        )
    set_names = [s.name for s in fleet.availability_sets]
    if len(set(set_names)) != len(set_names):
        raise FleetFileError(f"{source}: availabilitySets: a name is used twice")


def _sizes(spec: _FleetSpec) -> Iterator[tuple[str, int]]:
    """Each field that adds VMs, with how many: what the fleet will hold, known before
    anything is built."""
    for index, _ in enumerate(spec.vms):
        yield f"vms.{index}", 1
    for index, scale_set in enumerate(spec.scale_sets):
        if scale_set.instances:
            yield f"scaleSets.{index}.instances", len(scale_set.instances)
        else:
            yield f"scaleSets.{index}.capacity", scale_set.capacity
    for index, service in enumerate(spec.cloud_services):
        for role_index, role in enumerate(service.roles):
            yield f"cloudServices.{index}.roles.{role_index}.instances", role.instances


def _check_sizes(spec: _FleetSpec) -> None:
    """Refuse a fleet past :data:`MAX_VMS` in all, or of several VMs one of which could not be
    told apart, at the field that makes it so, before a single VM is built: ten scale sets of
    a million would otherwise cost gigabytes and minutes before any refusal."""
    total = 0
    for where, count in _sizes(spec):
        total += count
        if total > MAX_VMS:
            raise _FleetProblemError(
                where, f"with these the fleet holds {total:,} VMs; at most {MAX_VMS:,} in all"
            )
    if total <= 1:
        return
    for index, scale_set in enumerate(spec.scale_sets):
        unaddressed = scale_set.address_start is None and (
            not scale_set.instances or any(i.address is None for i in scale_set.instances)
        )
        if unaddressed and (scale_set.capacity or scale_set.instances):
            raise _FleetProblemError(
                f"scaleSets.{index}.addressStart",
                "with more than one VM each needs an address to be told apart: give the set "
                "addressStart (or each instance an address)",
            )
    for index, service in enumerate(spec.cloud_services):
        if service.address_start is None:
            raise _FleetProblemError(
                f"cloudServices.{index}.addressStart",
                "with more than one VM each needs an address to be told apart",
            )


def _load_yaml(text: str) -> object:
    """The YAML document's values, laid out anew once the parser's own objects are gone.

    The loader builds a node for every value of the file before the values themselves, and
    makes each value string among those nodes. Freed, the nodes leave the interpreter's
    memory arenas holed but held, one kept string in each: 2 KiB per VM of a large fleet,
    for the life of the server. A pickle round trip of the plain values (made here, from
    safe YAML: strings, numbers, dates, lists, mappings, with their shared references) copies
    them out before the originals and the nodes' arenas are freed whole.
    """
    loaded = load_yaml(text)  # bounded: depth, aliases, integers, keys given twice
    copied = pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)
    del loaded
    return pickle.loads(copied)


def parse_fleet(text: str, source: str = "<fleet>") -> Fleet:
    """The fleet described by YAML ``text``; raises :class:`FleetFileError` naming ``source``."""
    # Values, specs and VMs, all kept or freed whole: nothing for the collector to find while
    # a large fleet is built (forewarn.collector).
    with collector.paused():
        return _parse_fleet(text, source)


def _parse_fleet(text: str, source: str) -> Fleet:
    try:
        raw = _load_yaml(text)
    except YamlInputError as exc:
        raise FleetFileError(f"{source}: {exc}") from None
    if raw is None:
        raise _empty(source)
    try:
        spec = _FleetSpec.model_validate(raw)
    except ValidationError as exc:
        where, problem = first_problem(exc, _FleetSpec)
        raise FleetFileError(f"{source}: {_where(where)}: {problem}") from None
    try:
        _check_sizes(spec)
        fleet = _Builder(spec).build()
    except _FleetProblemError as exc:
        raise FleetFileError(f"{source}: {exc}") from None
    except ValueError as exc:  # e.g. an address range running past the end of IPv4
        raise FleetFileError(f"{source}: {exc}") from None
    _check_unique(fleet, source)
    return fleet


def _empty(source: str | Path) -> FleetFileError:
    return FleetFileError(
        f"{source}: the file holds no fleet: name its VMs under vms, scaleSets or "
        "cloudServices (see examples/fleet.yaml), or leave out --fleet for the one VM vm0"
    )


def read_fleet_text(path: Path) -> str:
    """The fleet file's text, bounded in size; every failure names the file. An empty file is
    refused: an empty text is what the store keeps for the default fleet (vm0)."""
    try:
        size = path.stat().st_size
        if size > MAX_FLEET_FILE_BYTES:
            raise FleetFileError(f"{path}: larger than {MAX_FLEET_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FleetFileError(f"{path}: not UTF-8 text") from None
    if not text.strip():
        raise _empty(path)
    return text


def load_fleet(path: Path) -> Fleet:
    return parse_fleet(read_fleet_text(path), str(path))


def default_fleet() -> Fleet:
    """The zero-configuration fleet: one standalone VM answering on the bind address."""
    return Fleet((Vm(name="vm0", vm_id=_vm_id("vm0"), host="host-vm0"),))


__all__ = [
    "DEFAULT_SUBSCRIPTION",
    "MAX_FLEET_FILE_BYTES",
    "MAX_VMS",
    "Fleet",
    "FleetFileError",
    "Name",
    "default_fleet",
    "load_fleet",
    "parse_fleet",
    "parse_iso_duration",
    "read_fleet_text",
]
