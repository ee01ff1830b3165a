"""Typed, immutable views of what the endpoint returns, read leniently from any api-version.

One model serves every api-version (SPEC 2, "What each api-version shows"):
a field a version does not send (Description before 2019-04-01, EventSource before 2019-08-01,
DurationInSeconds before 2020-07-01) is None rather than a guess. An EventType, EventStatus or
EventSource this client does not know is kept as the plain string it was sent as, so a newer
service never crashes an older client; the known ones are :class:`~enum.StrEnum` members, which
compare equal to their strings either way (``event.event_type == "Freeze"``).

What is refused (:class:`~forewarn.client.MalformedResponseError`): a body that is not a JSON
object, no integer DocumentIncarnation, no Events array, an event without an EventId string,
or a field of the wrong JSON type. A NotBefore that is neither RFC 1123 (the documented form)
nor ISO 8601 (the 2017 preview's example) reads as None; its text stays in ``raw``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import MappingProxyType
from typing import Any, TypeVar

from forewarn.client._errors import MalformedResponseError

#: api-version 2017-03-01 prefixed IaaS VM names in Resources with ``_`` (SPEC 2).
UNDERSCORE_PREFIX_VERSION = "2017-03-01"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _no_fields() -> Mapping[str, Any]:
    return _EMPTY


class EventType(enum.StrEnum):
    """The documented impacts (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
    "Event Properties")."""

    FREEZE = "Freeze"
    REBOOT = "Reboot"
    REDEPLOY = "Redeploy"
    PREEMPT = "Preempt"
    TERMINATE = "Terminate"


class EventStatus(enum.StrEnum):
    """There is no Completed status: a finished event disappears from the document."""

    SCHEDULED = "Scheduled"
    STARTED = "Started"


class EventSource(enum.StrEnum):
    PLATFORM = "Platform"
    USER = "User"


_E = TypeVar("_E", bound=enum.StrEnum)


def _known(kind: type[_E], value: str) -> _E | str:
    try:
        return kind(value)
    except ValueError:
        return value


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """One event as one api-version shows it.

    ``raw`` is the event's JSON object as received and ``api_version`` the version asked
    for; neither takes part in equality, so two polls that show the same event compare equal.
    """

    event_id: str
    event_type: EventType | str
    status: EventStatus | str
    resources: tuple[str, ...]
    not_before: datetime | None
    resource_type: str | None = None
    description: str | None = None
    source: EventSource | str | None = None
    duration_seconds: int | None = None
    raw: Mapping[str, Any] = field(default_factory=_no_fields, compare=False, repr=False)
    api_version: str | None = field(default=None, compare=False, repr=False)

    @property
    def is_scheduled(self) -> bool:
        return self.status == EventStatus.SCHEDULED

    @property
    def is_started(self) -> bool:
        return self.status == EventStatus.STARTED

    def impacts(self, vm_name: str) -> bool:
        """Whether ``vm_name`` is one of the Resources, and not merely told about the event.

        Events reach every VM of an availability set or placement group, so handlers check
        Resources (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope":
        "check the Resources field in the event to identify which VMs are affected"). Under
        api-version 2017-03-01 the ``_``-prefixed IaaS name matches too.
        """
        if vm_name in self.resources:
            return True
        return self.api_version == UNDERSCORE_PREFIX_VERSION and "_" + vm_name in self.resources


@dataclass(frozen=True, slots=True)
class ScheduledEventsDocument:
    """The answer to ``GET /metadata/scheduledevents``: an incarnation and its events."""

    incarnation: int
    events: tuple[ScheduledEvent, ...]
    api_version: str | None = field(default=None, compare=False)

    def event(self, event_id: str) -> ScheduledEvent | None:
        """The event with ``event_id`` (case-insensitive, as GUIDs are), or None."""
        wanted = event_id.upper()
        return next((e for e in self.events if e.event_id.upper() == wanted), None)

    def impacting(self, vm_name: str) -> tuple[ScheduledEvent, ...]:
        """The events whose Resources name ``vm_name``."""
        return tuple(e for e in self.events if e.impacts(vm_name))


@dataclass(frozen=True, slots=True)
class ComputeMetadata:
    """The ``compute`` section of instance metadata: who this VM is.

    Handlers read it to find their own name in an event's Resources. Fields the service does
    not send are ``""`` (or None for the numeric ones); ``raw`` keeps everything it did send.
    """

    name: str
    vm_id: str
    location: str
    resource_group: str
    subscription_id: str
    resource_id: str
    vm_size: str
    os_type: str
    zone: str
    vm_scale_set_name: str
    platform_fault_domain: int | None
    platform_update_domain: int | None
    tags: Mapping[str, str]
    raw: Mapping[str, Any] = field(default_factory=_no_fields, compare=False, repr=False)


# -- parsing -------------------------------------------------------------------------------


def parse_not_before(text: str) -> datetime | None:
    """NotBefore as an aware UTC datetime; ``""`` (Started) and unreadable text give None.

    The documented form is RFC 1123 (``Mon, 19 Sep 2016 18:29:47 GMT``,
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties"); the 2017
    preview's table shows ``2016-09-19T18:29:47Z``
    (docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Event
    Properties").
    """
    text = text.strip()
    if not text:
        return None
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _malformed(message: str) -> MalformedResponseError:
    return MalformedResponseError(f"not a Scheduled Events document: {message}")


def _integer(value: Any, name: str) -> int:
    """An integer, also from a numeric string (the 2017 C# sample models it as a string)."""
    if isinstance(value, bool):
        raise _malformed(f"{name} is a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _malformed(f"{name} is not an integer: {value!r}")


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _malformed(f"{name} is not a string: {value!r}")
    return value


def _optional_string(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    return None if value is None else _string(value, name)


def parse_event(payload: Any, api_version: str | None = None) -> ScheduledEvent:
    """One element of the Events array."""
    if not isinstance(payload, dict):
        raise _malformed("an event is not a JSON object")
    event_id = payload.get("EventId")
    if not isinstance(event_id, str) or not event_id:
        raise _malformed("an event has no EventId")
    resources = payload.get("Resources", [])
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise _malformed(f"Resources of {event_id} is not a list of names")
    not_before = payload.get("NotBefore", "")
    source = _optional_string(payload, "EventSource")
    duration = payload.get("DurationInSeconds")
    return ScheduledEvent(
        event_id=event_id,
        event_type=_known(EventType, _string(payload.get("EventType"), "EventType")),
        status=_known(EventStatus, _string(payload.get("EventStatus"), "EventStatus")),
        resources=tuple(resources),
        not_before=parse_not_before(_string(not_before, "NotBefore")),
        resource_type=_optional_string(payload, "ResourceType"),
        description=_optional_string(payload, "Description"),
        source=None if source is None else _known(EventSource, source),
        duration_seconds=None if duration is None else _integer(duration, "DurationInSeconds"),
        raw=MappingProxyType(payload),
        api_version=api_version,
    )


def parse_document(payload: Any, api_version: str | None = None) -> ScheduledEventsDocument:
    """A decoded ``GET /metadata/scheduledevents`` body, from any api-version."""
    if not isinstance(payload, dict):
        raise _malformed("the body is not a JSON object")
    if "DocumentIncarnation" not in payload:
        raise _malformed("no DocumentIncarnation")
    incarnation = _integer(payload["DocumentIncarnation"], "DocumentIncarnation")
    if incarnation < 0:
        # SPEC 2: an integer that only ever increases from where a VM's documents start.
        raise _malformed("DocumentIncarnation is negative")
    events = payload.get("Events")
    if not isinstance(events, list):
        raise _malformed("no Events array")
    return ScheduledEventsDocument(
        incarnation=incarnation,
        events=tuple(parse_event(event, api_version) for event in events),
        api_version=api_version,
    )


def _optional_integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _tags(compute: Mapping[str, Any]) -> dict[str, str]:
    """``tagsList`` when sent (newer versions), else the ``name:value;...`` ``tags`` string."""
    tags_list = compute.get("tagsList")
    if isinstance(tags_list, list):
        return {
            str(item.get("name", "")): str(item.get("value", ""))
            for item in tags_list
            if isinstance(item, dict)
        }
    text = compute.get("tags")
    if not isinstance(text, str) or not text:
        return {}
    pairs = (item.partition(":") for item in text.split(";") if item)
    return {key: value for key, _, value in pairs}


def parse_compute(payload: Any) -> ComputeMetadata:
    """The ``compute`` object of instance metadata (or a whole instance document)."""
    if isinstance(payload, dict) and isinstance(payload.get("compute"), dict):
        payload = payload["compute"]
    if not isinstance(payload, dict):
        raise MalformedResponseError("not an instance compute document: not a JSON object")

    def text(name: str) -> str:
        value = payload.get(name)
        return value if isinstance(value, str) else ""

    return ComputeMetadata(
        name=text("name"),
        vm_id=text("vmId"),
        location=text("location"),
        resource_group=text("resourceGroupName"),
        subscription_id=text("subscriptionId"),
        resource_id=text("resourceId"),
        vm_size=text("vmSize"),
        os_type=text("osType"),
        zone=text("zone"),
        vm_scale_set_name=text("vmScaleSetName"),
        platform_fault_domain=_optional_integer(payload.get("platformFaultDomain")),
        platform_update_domain=_optional_integer(payload.get("platformUpdateDomain")),
        tags=MappingProxyType(_tags(payload)),
        raw=MappingProxyType(payload),
    )
