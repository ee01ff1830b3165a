"""A recorded document's events as the domain's :class:`~forewarn.domain.events.Event`s.

Replay shows them to api-versions other than the recorded one (each version's fields,
through :mod:`forewarn.wire.documents`), and ``scenario from-trace`` makes each again on
forewarn's platform. The fields are a trace's, so untrusted: each is checked against what the
documentation allows (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
"Event properties"), and a field that is not is one :class:`TraceError` naming the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forewarn.domain.events import (
    DURATION_UNKNOWN,
    RESOURCE_TYPE_VM,
    Event,
    EventSource,
    EventStatus,
    EventType,
    Resource,
)
from forewarn.trace.format import DocumentRecord, TraceError
from forewarn.wire.dates import parse_not_before

#: Longer than any name or text the platform shows; a trace with more is not a recording.
_MAX_TEXT = 1024


def _text(event: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = event.get(key, default)
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise ValueError(f"{key} is not text")
    return value


def _event(raw: Mapping[str, Any]) -> Event:
    try:
        status = EventStatus(raw.get("EventStatus"))
        event_type = EventType(raw.get("EventType"))
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    source = EventSource(raw.get("EventSource", EventSource.PLATFORM.value))
    resources = raw.get("Resources")
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise ValueError("Resources is not a list of VM names")
    duration = raw.get("DurationInSeconds", DURATION_UNKNOWN)
    if not isinstance(duration, int) or isinstance(duration, bool) or duration < -1:
        raise ValueError("DurationInSeconds is not -1 or a count of seconds")
    not_before_text = _text(raw, "NotBefore")
    if (status is EventStatus.STARTED) != (not_before_text == ""):
        raise ValueError(f"a {status.value} event with NotBefore {not_before_text!r}")
    try:
        not_before = parse_not_before(not_before_text)
    except (TypeError, ValueError):
        raise ValueError(f"NotBefore {not_before_text!r} is not an RFC 1123 time") from None
    return Event(
        _text(raw, "EventId"),
        event_type,
        status,
        tuple(Resource(name) for name in resources),
        not_before,
        _text(raw, "Description", ""),
        source,
        duration,
        _text(raw, "ResourceType", RESOURCE_TYPE_VM),
    )


def recorded_events(document: DocumentRecord, source: str) -> tuple[Event, ...]:
    """The events of ``document`` (a line of the trace ``source``)."""
    events = []
    for index, raw in enumerate(document.events):
        try:
            events.append(_event(raw))
        except ValueError as exc:
            raise TraceError(f"{source}:{document.line}: Events[{index}]: {exc}") from None
    return tuple(events)


__all__ = ["recorded_events"]
