"""Virtual machines of the simulated fleet, as far as their own endpoint needs to know them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Vm:
    """One VM: its identity in the compute metadata, and where its endpoint answers.

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

    @property
    def tenant(self) -> str:
        """Approvals are counted per tenant: one approval speaks for a whole subscription."""
        return self.subscription_id
