"""Kinds of event: what the platform is doing, as far as an event's own fields say.

An event's type says what the VM will feel (a Freeze, a Reboot...), not what the platform is
doing: a live migration and a memory-preserving host update are both Freezes, yet Azure keeps
them Started for different periods (the public captures of Microsoft's Scheduled Events mock
server, Azure-Samples/scheduled-events-mock-server ``main.py``: a live migration Started for
5 minutes, a host update for 10). Each kind is told by its type and its Description, the
texts the documentation lists (:mod:`forewarn.domain.descriptions`); eviction and deletion by
their type alone, whose Description is often empty. The timing profile keys its Started
periods by kind (:meth:`forewarn.domain.timing.TimingProfile.started_period_for`).
"""

from __future__ import annotations

import enum

from forewarn.domain import descriptions
from forewarn.domain.events import EventType


class EventKind(enum.Enum):
    """What the platform is doing; the value is how timing overrides name it
    (``started_period.live-migration=5m``)."""

    LIVE_MIGRATION = "live-migration"
    #: The memory-preserving host update: a Freeze described as host maintenance.
    HOST_UPDATE = "host-update"
    #: Host maintenance that reboots the VM.
    HOST_MAINTENANCE = "host-maintenance"
    USER_REBOOT = "user-reboot"
    USER_REDEPLOY = "user-redeploy"
    #: Hardware predicted to fail: a Redeploy days ahead ("emergency repair").
    PREDICTED_FAILURE = "predicted-failure"
    #: "Virtual machine has encountered a failure.": a Redeploy (the overview, and the
    #: captured platform redeploy) or a Reboot (the VM pages' hardware failure).
    FAILURE_REDEPLOY = "failure-redeploy"
    FAILURE_REBOOT = "failure-reboot"
    EVICTION = "eviction"
    DELETION = "deletion"

    __hash__ = object.__hash__  # as EventType's: looked up for every event that starts


_BY_TYPE_AND_DESCRIPTION: dict[tuple[EventType, str], EventKind] = {
    (EventType.FREEZE, descriptions.LIVE_MIGRATION): EventKind.LIVE_MIGRATION,
    (EventType.FREEZE, descriptions.HOST_MAINTENANCE): EventKind.HOST_UPDATE,
    (EventType.FREEZE, descriptions.HOST_INFRASTRUCTURE_MAINTENANCE): EventKind.HOST_UPDATE,
    (EventType.REBOOT, descriptions.HOST_MAINTENANCE): EventKind.HOST_MAINTENANCE,
    (EventType.REBOOT, descriptions.HOST_INFRASTRUCTURE_MAINTENANCE): EventKind.HOST_MAINTENANCE,
    (EventType.REBOOT, descriptions.USER_RESTART): EventKind.USER_REBOOT,
    (EventType.REDEPLOY, descriptions.USER_REDEPLOY): EventKind.USER_REDEPLOY,
    (EventType.REDEPLOY, descriptions.EMERGENCY_REPAIR): EventKind.PREDICTED_FAILURE,
    (EventType.REDEPLOY, descriptions.VM_FAILURE): EventKind.FAILURE_REDEPLOY,
    (EventType.REBOOT, descriptions.VM_FAILURE): EventKind.FAILURE_REBOOT,
}
_BY_TYPE: dict[EventType, EventKind] = {
    EventType.PREEMPT: EventKind.EVICTION,
    EventType.TERMINATE: EventKind.DELETION,
}


def kind_of(event_type: EventType, description: str) -> EventKind | None:
    """The kind an event of ``event_type`` described by ``description`` is; None when its
    fields name none (an event made by hand with a text of its own)."""
    kind = _BY_TYPE_AND_DESCRIPTION.get((event_type, description))
    if kind is None:
        kind = _BY_TYPE.get(event_type)
    return kind


__all__ = [
    "EventKind",
    "kind_of",
]
