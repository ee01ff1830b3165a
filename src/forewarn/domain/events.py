"""Scheduled events as the platform knows them.

An :class:`Event` is an immutable snapshot: every lifecycle step produces a new one, so a
document built from snapshots can be compared with the previous one to decide whether the
DocumentIncarnation must move (SPEC 2).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from forewarn.domain._frozen import frozen_slot_setters


class EventType(enum.Enum):
    """The impact an event causes (reference:
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, Event Properties)."""

    FREEZE = "Freeze"
    REBOOT = "Reboot"
    REDEPLOY = "Redeploy"
    PREEMPT = "Preempt"
    TERMINATE = "Terminate"

    # Members are compared by identity, so they may be hashed by it: Enum's own hash is a
    # Python function, called for every event hashed (each document's encoding is cached by
    # its value) and for every lookup of a type's notice or impact.
    __hash__ = object.__hash__


class EventStatus(enum.Enum):
    """Scheduled or Started; there is no Completed status, a finished event disappears."""

    SCHEDULED = "Scheduled"
    STARTED = "Started"

    __hash__ = object.__hash__  # as EventType's


class EventSource(enum.Enum):
    """Who initiated the event (api-version 2019-08-01 and later)."""

    PLATFORM = "Platform"
    USER = "User"

    __hash__ = object.__hash__  # as EventType's


RESOURCE_TYPE_VM = "VirtualMachine"

#: DurationInSeconds value for "unknown or not applicable"
#: (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events).
DURATION_UNKNOWN = -1


@dataclass(frozen=True, slots=True, init=False)
class Resource:
    """A VM named in an event's Resources.

    ``iaas`` matters only to api-version 2017-03-01, which prefixed IaaS VM names with ``_``
    (the 2017-08-01 release note removed it); classic cloud-service role instances kept
    their names.
    """

    name: str
    iaas: bool = True

    def __init__(self, name: str, iaas: bool = True) -> None:
        _set_name(self, name)  # as Event's: one per VM an event impacts
        _set_iaas(self, iaas)


@dataclass(frozen=True, slots=True, init=False)
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

    def __init__(
        self,
        event_id: str,
        event_type: EventType,
        status: EventStatus,
        resources: tuple[Resource, ...],
        not_before: datetime | None,
        description: str,
        source: EventSource,
        duration_seconds: int,
        resource_type: str = RESOURCE_TYPE_VM,
    ) -> None:
        _set_event_id(self, event_id)
        _set_event_type(self, event_type)
        _set_status(self, status)
        _set_resources(self, resources)
        _set_not_before(self, not_before)
        _set_description(self, description)
        _set_source(self, source)
        _set_duration_seconds(self, duration_seconds)
        _set_resource_type(self, resource_type)

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


_set_name, _set_iaas = frozen_slot_setters(Resource)

#: Event's slots, set through their own setters: a frozen dataclass's generated ``__init__``
#: reaches them through ``object.__setattr__``, which costs more than half of building an
#: event, and every event of a campaign is built twice (Scheduled, then Started).
(
    _set_event_id,
    _set_event_type,
    _set_status,
    _set_resources,
    _set_not_before,
    _set_description,
    _set_source,
    _set_duration_seconds,
    _set_resource_type,
) = frozen_slot_setters(Event)


__all__ = [
    "DURATION_UNKNOWN",
    "RESOURCE_TYPE_VM",
    "Event",
    "EventSource",
    "EventStatus",
    "EventType",
    "Resource",
]
