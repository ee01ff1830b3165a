"""The events delivered: the Event Grid schema and CloudEvents 1.0, and the validation event.

The Event Grid schema follows the sample of learn.microsoft.com's "Scheduled Events in Event
Grid" field for field: ``id``, ``topic`` (``/subscriptions/{subscription-id}``), ``subject``
(the scheduled event's ARM id), ``data`` (``resourceInfo`` and ``apiVersion`` "2024-07-01"),
``eventType``, ``dataVersion`` "3.0", ``metadataVersion`` "1" and ISO 8601 ``eventTime``. The
page's field table names the event type ``microsoft.maintenance/scheduledevents/write`` while
its sample says ``Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted``:
the sample is followed. CloudEvents carry the same ``data`` with ``source`` the topic and
``type`` the event type, as Event Grid maps its schema to CloudEvents ("CloudEvents v1.0 schema
with Azure Event Grid").

``id`` is "Unique identifier for the event in Event Grid. This ID is different than the
scheduled event ID": made from the scheduled event's id and the state it reached, so a replay,
a retry and the ``eventgrid-duplicate`` fault send the same ``id`` ("These duplicate
notifications can be identified by checking for the ID field").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from forewarn.domain.history import EventChange
from forewarn.wire.dates import format_not_before
from forewarn.wire.maintenance import resource_info

Schema = Literal["eventgrid", "cloudevents"]
SCHEMAS: tuple[Schema, ...] = ("eventgrid", "cloudevents")

EVENT_TYPE = "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"
DATA_API_VERSION = "2024-07-01"
DATA_VERSION = "3.0"
METADATA_VERSION = "1"
VALIDATION_EVENT_TYPE = "Microsoft.EventGrid.SubscriptionValidationEvent"
_IDS = uuid.UUID("5c1b7e3e-57a3-4c0e-9a43-6f0b3c3e7f21")
#: The topic of a fleet without VMs: an Azure subscription id of zeros.
DEFAULT_TOPIC = "/subscriptions/00000000-0000-0000-0000-000000000000"


def topic_of(subscription_id: str) -> str:
    """The system topic's ``topic``: the Azure subscription whose maintenance resources it
    carries, as the page's sample shows it (``/subscriptions/{subscription-id}``)."""
    return f"/subscriptions/{subscription_id}"


def event_time(moment: datetime) -> str:
    """ISO 8601 with seven fractional digits and ``Z``, as the sample's
    ``2017-06-26T18:41:00.9584103Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond:06d}0Z"


def grid_id(change: EventChange) -> str:
    return str(uuid.uuid5(_IDS, f"{change.event.event_id}/{change.phase.value}"))


def _data(change: EventChange, not_before: datetime | None) -> dict[str, Any]:
    info = resource_info(change)
    if not_before is not None:
        info["properties"]["NotBefore"] = format_not_before(not_before)
    return {"resourceInfo": info, "apiVersion": DATA_API_VERSION}


def eventgrid_event(change: EventChange, not_before: datetime | None = None) -> dict[str, Any]:
    """``change`` in the Event Grid schema; ``not_before`` the NotBefore a Started event shows
    (see :meth:`forewarn.eventgrid.delivery.EventGrid.on_change`)."""
    where = change.where
    return {
        "id": grid_id(change),
        "topic": topic_of(where.subscription_id),
        "subject": where.event_id(change.event.event_id),
        "data": _data(change, not_before),
        "eventType": EVENT_TYPE,
        "dataVersion": DATA_VERSION,
        "metadataVersion": METADATA_VERSION,
        "eventTime": event_time(change.at),
    }


def cloud_event(change: EventChange, not_before: datetime | None = None) -> dict[str, Any]:
    where = change.where
    return {
        "specversion": "1.0",
        "id": grid_id(change),
        "source": topic_of(where.subscription_id),
        "subject": where.event_id(change.event.event_id),
        "type": EVENT_TYPE,
        "time": event_time(change.at),
        "datacontenttype": "application/json",
        "data": _data(change, not_before),
    }


def payload(
    change: EventChange, schema: Schema, not_before: datetime | None = None
) -> dict[str, Any]:
    if schema == "eventgrid":
        return eventgrid_event(change, not_before)
    return cloud_event(change, not_before)


def validation_event(
    topic: str, code: str, validation_url: str, at: datetime
) -> list[dict[str, Any]]:
    """The Event Grid schema's ``SubscriptionValidationEvent`` (learn.microsoft.com, "Endpoint
    validation with Event Grid events"): its ``data`` holds ``validationCode`` (a GUID in the
    page's sample) and ``validationUrl``; ``topic`` is the system topic's, as its events
    carry it, never the event subscription's name."""
    return [
        {
            "id": str(uuid.uuid4()),
            "topic": topic,
            "subject": "",
            "data": {"validationCode": code, "validationUrl": validation_url},
            "eventType": VALIDATION_EVENT_TYPE,
            "eventTime": event_time(at),
            "metadataVersion": "1",
            "dataVersion": "1",
        }
    ]


__all__ = [
    "DATA_API_VERSION",
    "DATA_VERSION",
    "DEFAULT_TOPIC",
    "EVENT_TYPE",
    "METADATA_VERSION",
    "SCHEMAS",
    "VALIDATION_EVENT_TYPE",
    "Schema",
    "cloud_event",
    "event_time",
    "eventgrid_event",
    "grid_id",
    "payload",
    "topic_of",
    "validation_event",
]
