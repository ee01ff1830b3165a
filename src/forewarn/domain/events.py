"""Scheduled events as the platform knows them.

An :class:`Event` is an immutable snapshot: every lifecycle step produces a new one, so a
document built from snapshots can be compared with the previous one to decide whether the
DocumentIncarnation must move (SPEC 2).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class EventType(enum.Enum):
    """The impact an event causes (reference: scheduled-events-linux.txt, Event Properties)."""

    FREEZE = "Freeze"
    REBOOT = "Reboot"
    REDEPLOY = "Redeploy"
    PREEMPT = "Preempt"
    TERMINATE = "Terminate"


class EventStatus(enum.Enum):
    """Scheduled or Started; there is no Completed status, a finished event disappears."""

    SCHEDULED = "Scheduled"
    STARTED = "Started"


class EventSource(enum.Enum):
    """Who initiated the event (api-version 2019-08-01 and later)."""

    PLATFORM = "Platform"
    USER = "User"


RESOURCE_TYPE_VM = "VirtualMachine"

#: DurationInSeconds value for "unknown or not applicable" (scheduled-events-windows-2024.txt).
DURATION_UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class Resource:
    """A VM named in an event's Resources.

    ``iaas`` matters only to api-version 2017-03-01, which prefixed IaaS VM names with ``_``
    (the 2017-08-01 release note removed it); classic cloud-service role instances kept
    their names.
    """

    name: str
    iaas: bool = True


@dataclass(frozen=True, slots=True)
class Event:
    """One scheduled event as every VM that can see it is shown it."""

    event_id: str
    event_type: EventType
    status: EventStatus
    resources: tuple[Resource, ...]
    not_before: datetime | None
    description: str
    source: EventSource
    duration_seconds: int
    resource_type: str = RESOURCE_TYPE_VM

    def started(self) -> Event:
        """The same event once Started: NotBefore no longer applies and is shown as ``""``.

        Built field by field rather than with :func:`dataclasses.replace`, which costs a few
        microseconds per event of a campaign; ``tests/domain`` holds the two to the same result.
        """
        return Event(
            self.event_id,
            self.event_type,
            EventStatus.STARTED,
            self.resources,
            None,
            self.description,
            self.source,
            self.duration_seconds,
            self.resource_type,
        )

    def impacts(self, vm_name: str) -> bool:
        """True when ``vm_name`` is one of the event's Resources (not merely an observer)."""
        return any(resource.name == vm_name for resource in self.resources)


__all__ = [
    "DURATION_UNKNOWN",
    "RESOURCE_TYPE_VM",
    "Event",
    "EventSource",
    "EventStatus",
    "EventType",
    "Resource",
]
