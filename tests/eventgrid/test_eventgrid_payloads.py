"""The events Event Grid delivers, field for field, built in process from one change.

Sources: learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid, the sample
event (``id``, ``topic`` ``/subscriptions/{subscription-id}``, ``subject`` the scheduled
event's ARM id, ``data.resourceInfo`` and ``data.apiVersion`` "2024-07-01", ``eventType``
``Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted``,
``dataVersion`` "3.0", ``metadataVersion`` "1", ``eventTime`` with seven fractional digits);
"CloudEvents v1.0 schema with Azure Event Grid" (the sample: ``specversion`` "1.0", ``type``,
``source``, ``id``, ``time``, ``subject``, ``data``); "Endpoint validation with Event Grid
events" (webhook-event-delivery: the ``SubscriptionValidationEvent`` sample); docs/azure-side.md,
"Event Grid", "What is delivered". The end-to-end tests
(``test_eventgrid_delivery.py``) parse the same events with the official SDKs; these pin every
field where mutation testing reaches them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from forewarn.domain.events import Event, EventSource, EventStatus, EventType, Resource
from forewarn.domain.history import EventChange, Phase, Publication
from forewarn.eventgrid.payloads import (
    DEFAULT_TOPIC,
    SCHEMAS,
    cloud_event,
    event_time,
    eventgrid_event,
    grid_id,
    payload,
    topic_of,
    validation_event,
)

SUB = "11111111-2222-3333-4444-555555555555"
VM = f"/subscriptions/{SUB}/resourceGroups/Ops/providers/Microsoft.Compute/virtualMachines/db0"
EVENT_ID = "A1B2C3D4-0000-4000-8000-000000000001"
ARM_ID = f"{VM}/providers/microsoft.maintenance/scheduledevents/{EVENT_ID}"
NOT_BEFORE = datetime(2026, 5, 1, 12, 15, tzinfo=UTC)
#: 14:00:00.123456 at UTC+2: the platform's time of the change, in another zone.
AT = datetime(2026, 5, 1, 14, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
WHERE = Publication(VM, SUB, "Ops", "westeurope", "tenant", (), "2020-07-01")


def change(
    status: EventStatus = EventStatus.SCHEDULED,
    phase: Phase = Phase.SCHEDULED,
    event_id: str = EVENT_ID,
    not_before: datetime | None = NOT_BEFORE,
) -> EventChange:
    event = Event(
        event_id,
        EventType.REBOOT,
        status,
        (Resource("db0"),),
        not_before,
        "Virtual machine is going to be restarted as requested by authorized user.",
        EventSource.USER,
        -1,
    )
    return EventChange(3, AT, phase, event, WHERE)


def data(status: str, not_before: str) -> dict[str, Any]:
    return {
        "resourceInfo": {
            "id": ARM_ID,
            "name": EVENT_ID,
            "type": "microsoft.maintenance/scheduledEvents",
            "location": "westeurope",
            "properties": {
                "DurationInSeconds": -1,
                "Description": (
                    "Virtual machine is going to be restarted as requested by authorized user."
                ),
                "EventId": EVENT_ID,
                "EventSource": "User",
                "EventStatus": status,
                "EventType": "Reboot",
                "NotBefore": not_before,
                "Resources": ["db0"],
                "ResourceType": "VirtualMachine",
                "ScheduledEventApiVersion": "2020-07-01",
            },
        },
        "apiVersion": "2024-07-01",
    }


def test_the_event_grid_schema_is_the_samples_field_for_field() -> None:
    """The Scheduled Events in Event Grid page's sample: its fields in its order, ``topic``
    the subscription, ``subject`` and ``resourceInfo.id`` the event's ARM id, ``eventTime``
    the change's time in UTC with seven fractional digits."""
    made = eventgrid_event(change())
    assert made == {
        "id": grid_id(change()),
        "topic": f"/subscriptions/{SUB}",
        "subject": ARM_ID,
        "data": data("Scheduled", "Fri, 01 May 2026 12:15:00 GMT"),
        "eventType": "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted",
        "dataVersion": "3.0",
        "metadataVersion": "1",
        "eventTime": "2026-05-01T12:00:00.1234560Z",
    }
    assert list(made) == [
        "id", "topic", "subject", "data", "eventType", "dataVersion", "metadataVersion",
        "eventTime",
    ]  # fmt: skip
    assert payload(change(), "eventgrid") == made


def test_cloudevents_carry_the_same_event_under_their_own_names() -> None:
    """The page "CloudEvents v1.0 schema with Azure Event Grid": ``specversion`` "1.0", ``source`` the
    topic, ``type`` the event type, ``time`` the event time; the same ``id``, ``subject`` and
    ``data`` as the Event Grid schema's, whose ``datacontenttype`` is JSON."""
    made = cloud_event(change())
    grid = eventgrid_event(change())
    assert made == {
        "specversion": "1.0",
        "id": grid["id"],
        "source": f"/subscriptions/{SUB}",
        "subject": ARM_ID,
        "type": "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted",
        "time": "2026-05-01T12:00:00.1234560Z",
        "datacontenttype": "application/json",
        "data": data("Scheduled", "Fri, 01 May 2026 12:15:00 GMT"),
    }
    assert payload(change(), "cloudevents") == made
    assert SCHEMAS == ("eventgrid", "cloudevents")


def test_a_started_event_shows_the_not_before_it_was_given() -> None:
    """docs/azure-side.md, "What is delivered": the page's sample shows a Started event with
    its NotBefore, so a Started event delivered carries the NotBefore it had while Scheduled;
    without one given it is blank, as the field tables say ("Is blank if the event is in the
    started state")."""
    started = change(EventStatus.STARTED, Phase.STARTED, not_before=None)
    for schema in SCHEMAS:
        shown = payload(started, schema, NOT_BEFORE)["data"]
        assert shown == data("Started", "Fri, 01 May 2026 12:15:00 GMT")
        assert payload(started, schema)["data"] == data("Started", "")
    assert eventgrid_event(started, NOT_BEFORE)["data"] == cloud_event(started, NOT_BEFORE)["data"]


def test_the_grid_id_is_one_per_state_reached_never_the_event_id() -> None:
    """The sample's id is "Unique identifier for the event in Event Grid. This ID is different than the scheduled
    event ID", and duplicates "can be identified by checking for the ID field" ("Double
    notifications"): the same state of the same event always gets the same id (a replay, a
    retry, the duplicate fault), another state or event another."""
    first = grid_id(change())
    assert str(uuid.UUID(first)) == first
    assert first != EVENT_ID
    assert grid_id(change()) == first
    started = grid_id(change(EventStatus.STARTED, Phase.STARTED))
    other = grid_id(change(event_id="A1B2C3D4-0000-4000-8000-000000000002"))
    assert len({first, started, other}) == 3
    # [ours] a function of the event's id and the state alone, never of the process: a new
    # leader of a fleet (docs/azure-side.md, "a change of leader may deliver an event a second
    # time") sends the id the last one sent
    assert first == str(uuid.uuid5(uuid.UUID("5c1b7e3e-57a3-4c0e-9a43-6f0b3c3e7f21"),
                                   f"{EVENT_ID}/Scheduled"))  # fmt: skip


def test_the_topic_is_the_subscription() -> None:
    """The sample's ``"topic": "/subscriptions/{subscription-id}"``; a fleet without VMs
    has the subscription of zeros."""
    assert topic_of(SUB) == f"/subscriptions/{SUB}"
    assert DEFAULT_TOPIC == "/subscriptions/00000000-0000-0000-0000-000000000000"


@pytest.mark.usefixtures("server_zone_east")
def test_event_time_is_utc_whatever_the_zone_given() -> None:
    """The sample's ``"eventTime": "2017-06-26T18:41:00.9584103Z"``: UTC (``Z``) with seven
    fractional digits, from a time in any zone, on a server in any zone."""
    assert event_time(AT) == "2026-05-01T12:00:00.1234560Z"
    assert event_time(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.0000060Z"
    )


def test_the_validation_event_is_the_samples() -> None:
    """Webhook event delivery, "Endpoint validation with Event Grid events": the sample's ``id``, ``topic``,
    ``subject`` "", ``data`` with ``validationCode`` and ``validationUrl``, ``eventType``
    ``Microsoft.EventGrid.SubscriptionValidationEvent``, ``eventTime``, ``metadataVersion`` "1"
    and ``dataVersion`` "1", in an array of one."""
    url = "http://127.0.0.1:1/api/v1/eventgrid/validate?name=ops&code=c"
    (event,) = validation_event(f"/subscriptions/{SUB}", "the-code", url, AT)
    made = dict(event)
    event_id = made.pop("id")
    assert uuid.UUID(event_id).version == 4
    assert made == {
        "topic": f"/subscriptions/{SUB}",
        "subject": "",
        "data": {"validationCode": "the-code", "validationUrl": url},
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime": "2026-05-01T12:00:00.1234560Z",
        "metadataVersion": "1",
        "dataVersion": "1",
    }
    (again,) = validation_event(f"/subscriptions/{SUB}", "the-code", url, AT)
    assert again["id"] != event_id  # each validation event an id of its own
