"""Virtual machines of the simulated fleet and the groups they belong to.

A VM names its groups (availability set, scale set and placement group, classic cloud service,
host); the groups' own settings live in :mod:`forewarn.domain.fleet`. Values are frozen: a VM
that moves (redeploy) is replaced by a copy with another host.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from forewarn.domain.policy import DEFAULT_POLICY, ScheduledEventsPolicy


class Priority(enum.Enum):
    REGULAR = "Regular"
    SPOT = "Spot"


#: Size families that do not get OS image notifications
#: (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
#: maintenance": "It doesn't work for G, M, N, and H series").
_NO_OS_IMAGE_NOTIFICATION_FAMILIES = ("G", "M", "N", "H")


@dataclass(frozen=True, slots=True)
class ImageReference:
    """The marketplace image a VM was created from, as the compute metadata names it."""

    publisher: str
    offer: str
    sku: str
    version: str


#: What a VM runs when its fleet file names no image: Ubuntu 22.04 or Windows Server 2022,
#: the images Azure's own quick starts pick.
DEFAULT_IMAGES = {
    "Linux": ImageReference("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2",
                            "22.04.202404080"),
    "Windows": ImageReference("MicrosoftWindowsServer", "WindowsServer",
                              "2022-datacenter-azure-edition", "20348.2340.240303"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Vm:
    """One VM: its identity in the compute metadata, its groups, and where it answers.

    ``address`` is the IP the VM's requests arrive at (each VM its own loopback address, or
    the single default VM on the bind address when None). ``iaas`` is False for classic
    cloud-service role instances, whose names api-version 2017-03-01 left unprefixed.
    """

    name: str
    vm_id: str
    subscription_id: str = "00000000-0000-0000-0000-000000000000"
    resource_group: str = "forewarn"
    location: str = "westeurope"
    zone: str = ""
    platform_fault_domain: int = 0
    platform_update_domain: int = 0
    vm_scale_set_name: str = ""
    vm_size: str = "Standard_D2s_v3"
    os_type: str = "Linux"
    tags: tuple[tuple[str, str], ...] = field(default=())
    availability_set: str | None = None
    address: str | None = None
    iaas: bool = True
    host: str = ""
    placement_group: str | None = None
    cloud_service: str | None = None
    priority: Priority = Priority.REGULAR
    #: Its ``scheduledEventsPolicy`` (:mod:`forewarn.domain.policy`), its set's when in one.
    policy: ScheduledEventsPolicy = DEFAULT_POLICY
    image: ImageReference | None = None
    #: Member of a scale set in Flexible orchestration (named and reached like a standalone
    #: VM; its compute metadata carries ``virtualMachineScaleSet.id``).
    flexible: bool = False
    #: The Microsoft Entra (AAD) tenant its subscription belongs to: Resource Graph's
    #: ``tenantId`` column. Not :attr:`tenant`, which is who approves (the subscription).
    tenant_id: str = "00000000-0000-0000-0000-000000000000"

    @property
    def scale_set_placement_group(self) -> str:
        """The placement group of a scale-set VM: one added without one is in the set's first,
        ``"0"``, the one a fleet file fills up to ``placementGroupSize`` instances."""
        return self.placement_group or "0"

    @property
    def image_reference(self) -> ImageReference:
        return self.image or DEFAULT_IMAGES.get(self.os_type, DEFAULT_IMAGES["Linux"])

    @property
    def tenant(self) -> str:
        """Approvals are counted per tenant: one approval speaks for a whole subscription."""
        return self.subscription_id

    @property
    def size_family(self) -> str:
        """``Standard_NC6s_v3`` -> ``N``: the letter the documented size rules speak of."""
        name = self.vm_size.split("_", 1)[-1]
        return name[:1].upper()

    @property
    def is_gpu(self) -> bool:
        return self.size_family == "N"

    @property
    def gets_os_image_notifications(self) -> bool:
        return self.size_family not in _NO_OS_IMAGE_NOTIFICATION_FAMILIES


__all__ = [
    "DEFAULT_IMAGES",
    "ImageReference",
    "Priority",
    "Vm",
]
