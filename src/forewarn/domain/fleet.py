"""Group settings of the fleet: scale sets and availability sets, and the checks on them.

Sources: SPEC 5-6; scale-set terminate notification ``notBeforeTimeout`` PT5M..PT15M and "cannot
be enabled on Spot VMs" (SPEC 6); OS image notification only for sizes outside G, M, N, H
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated maintenance").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.vms import Priority

#: A scale-set instance id: a number in Uniform orchestration (``web_3``), eight hexadecimal
#: digits in Flexible (``web_1a2b3c4d``, the suffix Azure gives the VMs it creates there).
INSTANCE_ID_PATTERN = r"^[0-9a-z]{1,16}$"

MIN_TERMINATE_TIMEOUT = timedelta(minutes=5)
MAX_TERMINATE_TIMEOUT = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class ScaleSet:
    """A virtual machine scale set; its instances are VMs named ``{name}_{instanceId}``."""

    name: str
    priority: Priority = Priority.REGULAR
    platform_fault_domain_count: int = 5
    terminate_notification: bool = False
    terminate_timeout: timedelta = MIN_TERMINATE_TIMEOUT
    os_image_notification: bool = False

    def __post_init__(self) -> None:
        if self.terminate_notification:
            if self.priority is Priority.SPOT:
                raise InvalidOperationError(
                    f"scale set {self.name!r}: terminate notification cannot be enabled on Spot"
                )
            if not MIN_TERMINATE_TIMEOUT <= self.terminate_timeout <= MAX_TERMINATE_TIMEOUT:
                raise InvalidOperationError(
                    f"scale set {self.name!r}: notBeforeTimeout must be PT5M to PT15M"
                )
        if self.platform_fault_domain_count < 1:
            raise InvalidOperationError(
                f"scale set {self.name!r}: platform fault domain count must be at least 1"
            )


@dataclass(frozen=True, slots=True)
class AvailabilitySet:
    """A named availability set; its members carry their own fault and update domains (the
    fleet file checks them against the set's counts), so the set itself needs only its name."""

    name: str


__all__ = [
    "INSTANCE_ID_PATTERN",
    "MAX_TERMINATE_TIMEOUT",
    "MIN_TERMINATE_TIMEOUT",
    "AvailabilitySet",
    "ScaleSet",
]
