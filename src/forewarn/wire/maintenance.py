"""A published event's change as Event Grid's ``data.resourceInfo`` and Resource Graph's row.

"the content of the payload is the same regardless of which one you choose" (learn.microsoft.com,
"Scheduled Events overview"): both are built here from one
:class:`~forewarn.domain.history.EventChange`, whose event is the one IMDS showed, encoded by
:func:`forewarn.wire.documents.event_fields` for the policy's ``scheduledEventsApiVersion``.
Properties are in the order of the Event Grid page's sample
(learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid), with EventStatus the
change's (Completed and Canceled are "Event Grid and ARG only"), and ``ScheduledEventApiVersion``
added. NotBefore is ``""`` once Started, as the field tables say ("Is blank if the event is in the
started state"; the sample shows a Started event with a NotBefore, which the tables contradict).
"""

from __future__ import annotations

from typing import Any

from forewarn.domain.api_versions import CURRENT_VERSION, find_version
from forewarn.domain.arm import SCHEDULED_EVENT_TYPE
from forewarn.domain.history import EventChange
from forewarn.wire.documents import event_fields

#: Resource Graph lower-cases resource types (the page's query compares ``type ==
#: "microsoft.maintenance/scheduledevents"``).
ARG_TYPE = SCHEDULED_EVENT_TYPE.lower()

_ORDER = (
    "DurationInSeconds",
    "Description",
    "EventId",
    "EventSource",
    "EventStatus",
    "EventType",
    "NotBefore",
    "Resources",
    "ResourceType",
)


def properties(change: EventChange) -> dict[str, Any]:
    """The scheduled event's own fields, as Event Grid and Resource Graph both show them."""
    version = find_version(change.where.api_version) or CURRENT_VERSION
    fields = event_fields(change.event, version)
    fields["EventStatus"] = change.phase.value
    shown = {name: fields[name] for name in _ORDER if name in fields}
    shown["ScheduledEventApiVersion"] = version.name
    return shown


def resource_info(change: EventChange) -> dict[str, Any]:
    """Event Grid's ``data.resourceInfo``."""
    return {
        "id": change.where.event_id(change.event.event_id),
        "name": change.event.event_id,
        "type": SCHEDULED_EVENT_TYPE,
        "location": change.where.location,
        "properties": properties(change),
    }


def arg_row(change: EventChange) -> dict[str, Any]:
    """A row of Resource Graph's ``maintenanceresources`` table: the page's columns, the
    resource group lower-cased as Resource Graph shows it, zones null when there are none."""
    where = change.where
    return {
        "id": where.event_id(change.event.event_id),
        "name": change.event.event_id,
        "type": ARG_TYPE,
        "tenantId": where.tenant_id,
        "location": where.location,
        "resourceGroup": where.resource_group.lower(),
        "subscriptionId": where.subscription_id,
        "properties": properties(change),
        "zones": list(where.zones) or None,
    }


__all__ = ["ARG_TYPE", "arg_row", "properties", "resource_info"]
