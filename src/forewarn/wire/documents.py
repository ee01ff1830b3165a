"""Documents as JSON, one field set per api-version (SPEC 2, "What each api-version shows").

Key order follows real captures: DocumentIncarnation, Events; in an event EventId, EventStatus,
EventType, ResourceType, Resources, NotBefore, Description, EventSource, DurationInSeconds.
Output is compact JSON encoded by orjson, which keeps insertion order.
"""

from __future__ import annotations

from typing import Any

import orjson

from forewarn.domain.api_versions import ApiVersion
from forewarn.domain.documents import Document
from forewarn.domain.events import Event
from forewarn.wire.dates import format_not_before


def event_fields(event: Event, version: ApiVersion) -> dict[str, Any]:
    """One event as ``version`` shows it."""
    if version.underscore_iaas_names:
        resources = ["_" + r.name if r.iaas else r.name for r in event.resources]
    else:
        resources = [r.name for r in event.resources]
    # ``_value_`` is what the ``value`` property returns, read without a call through the
    # enum's descriptor: every event is encoded for every VM shown it, at every change.
    fields: dict[str, Any] = {
        "EventId": event.event_id,
        "EventStatus": event.status._value_,
        "EventType": event.event_type._value_,
        "ResourceType": event.resource_type,
        "Resources": resources,
        "NotBefore": format_not_before(event.not_before),
    }
    if version.description:
        fields["Description"] = event.description
    if version.event_source:
        fields["EventSource"] = event.source._value_
    if version.duration:
        fields["DurationInSeconds"] = event.duration_seconds
    return fields


def document_fields(document: Document, version: ApiVersion) -> dict[str, Any]:
    """The document as ``version`` shows it: the events of the types it knows, and the
    incarnation of the last change to those (:meth:`Document.incarnation_for`)."""
    return {
        "DocumentIncarnation": document.incarnation_for(version.event_types),
        "Events": [
            event_fields(event, version)
            for event in document.events
            if version.shows(event.event_type)
        ],
    }


def encode_document(document: Document, version: ApiVersion) -> bytes:
    """The exact response body of ``GET /metadata/scheduledevents`` for this version.

    Copied out of orjson's buffer: orjson hands back its whole (about 4 KiB) output buffer,
    and these bodies are cached per VM, so the copy is what keeps an idle VM small.
    """
    return bytes(memoryview(orjson.dumps(document_fields(document, version))))


__all__ = [
    "document_fields",
    "encode_document",
    "event_fields",
]
