"""The Maintenance resource provider's acknowledge calls, on the control port.

``POST /subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/providers/
Microsoft.Compute/{resourceType}/{resourceName}/providers/Microsoft.Maintenance/scheduledevents/
{scheduledEventId}/acknowledge`` acknowledges one event, and ``POST .../Microsoft.Maintenance/
scheduledevents`` with ``{"value": [scheduledEventId, ...]}`` several of the resource's at once:
the paths of Azure's generated SDKs for the Maintenance provider (``azure-mgmt-maintenance``'s
``scheduled_events.acknowledge`` and ``acknowledge_list``, the JavaScript
``@azure/arm-maintenance`` client's ``scheduledEvents.acknowledge``), which ``az maintenance
scheduledevent acknowledge --ids {the event's ARM id}`` and ``az maintenance scheduledevents
list-acknowledge`` send too (learn.microsoft.com, "Scheduled Events in Event Grid",
"Acknowledging with the Maintenance Resource Provider Endpoint"). Both answer ``{"value":
"Successfully Approved"}``, the REST specification's examples' answer
(github.com/Azure/azure-rest-api-specs, specification/maintenance, ``ScheduledEvents_
Acknowledge.json`` and ``ScheduledEvents_AcknowledgeList.json``). It is the approval a POST to
IMDS from one of the resource's VMs gives: "Azure treats an approval request from either
endpoint as meaning that the event can start"
(learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Acknowledging Scheduled
Events").

ARM matches paths without regard to case: :data:`PREFIX` in any spelling reaches the route
(:class:`~forewarn.server.azure._arm.ArmPaths`), and
:func:`forewarn.domain.arm.parse_scheduled_event_id` reads the rest so.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forewarn.commands import Acknowledge, AcknowledgeList, Command
from forewarn.domain.arm import parse_scheduled_event_id
from forewarn.domain.errors import UnknownEventError
from forewarn.server.azure._arm import api_version_error, arm_error
from forewarn.service import ScheduledEventsService

#: The api-versions ``acknowledge`` is answered for: ``az maintenance``'s (2023-10-01-preview,
#: also the JavaScript SDK's default), ``azure-mgmt-maintenance`` 2.2.0b4's default
#: (2025-10-01-preview) and the newest command model of ``az maintenance scheduledevents``
#: (2026-02-01-preview, github.com/Azure/aaz).
ACKNOWLEDGE_API_VERSIONS = frozenset(
    {"2023-10-01-preview", "2025-10-01-preview", "2026-02-01-preview"}
)
#: Those ``acknowledge_list`` is answered for: it came with 2025-10-01-preview.
ACKNOWLEDGE_LIST_API_VERSIONS = ACKNOWLEDGE_API_VERSIONS - {"2023-10-01-preview"}
#: Where the route's paths begin (any spelling: :class:`~forewarn.server.azure._arm.ArmPaths`).
PREFIX = "/subscriptions/"
#: What the REST specification's examples answer an acknowledgement with.
APPROVED = {"value": "Successfully Approved"}
#: The most EventIds one ``acknowledge_list`` may name.
MAX_LISTED = 1000
_ACKNOWLEDGE = "/acknowledge"
_ANY_ID = "00000000-0000-0000-0000-000000000000"
_EVENTS = "/providers/microsoft.maintenance/scheduledevents"


class EventIdList(BaseModel):
    """``ScheduledEventsIdList``: the EventIds to acknowledge, each a GUID."""

    model_config = ConfigDict(extra="forbid")

    value: list[Annotated[str, Field(max_length=64)]] = Field(min_length=1, max_length=MAX_LISTED)


def maintenance_router(service: ScheduledEventsService) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post(PREFIX + "{path:path}")
    async def scheduled_events(request: Request, path: str) -> Response:
        """Acknowledge (approve) scheduled events from outside their VMs."""
        whole = request.url.path
        lowered = whole.lower()
        if lowered.endswith(_ACKNOWLEDGE):
            return await _acknowledge(service, request, whole[: -len(_ACKNOWLEDGE)])
        if lowered.endswith(_EVENTS):
            return await _acknowledge_list(service, request, whole, await request.body())
        return _no_route(whole)

    return router


async def _acknowledge(
    service: ScheduledEventsService, request: Request, event_id: str
) -> Response:
    refused = api_version_error(request, ACKNOWLEDGE_API_VERSIONS)
    if refused is not None:
        return refused
    ref = parse_scheduled_event_id(event_id)
    if ref is None:
        return _no_route(request.url.path)
    return await _executed(service, Acknowledge(event_id), ref.resource_group, listed=False)


async def _acknowledge_list(
    service: ScheduledEventsService, request: Request, events: str, body: bytes
) -> Response:
    refused = api_version_error(request, ACKNOWLEDGE_LIST_API_VERSIONS)
    if refused is not None:
        return refused
    resource = parse_scheduled_event_id(f"{events}/{_ANY_ID}")  # the resource's part
    if resource is None:
        return _no_route(events)
    try:
        listed = EventIdList.model_validate_json(body or b"null")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        return arm_error(
            400, "InvalidRequestContent", f"The request content is invalid: {where}: {first['msg']}"
        )
    ids = {given: f"{events}/{given}" for given in listed.value}
    malformed = [given for given, whole in ids.items() if parse_scheduled_event_id(whole) is None]
    if malformed:
        return arm_error(
            400,
            "InvalidScheduledEventId",
            f"A scheduled event id is a GUID ({_ANY_ID}).",
            [_detail(given, "InvalidScheduledEventId", "not a GUID") for given in malformed],
        )
    listed_ids = tuple(ids.values())
    return await _executed(
        service, AcknowledgeList(listed_ids), resource.resource_group, listed=True
    )


async def _executed(
    service: ScheduledEventsService, command: Command, group: str, *, listed: bool
) -> Response:
    """Run the acknowledgement, journaled with the other writes of its turn of the event
    loop, its waits on PostgreSQL off the loop
    (:meth:`~forewarn.service.ScheduledEventsService.execute_grouped`); an id naming no event
    of the resource (the resource group ``group``) is ARM's 404, each such id in ``details``
    for a list."""
    try:
        await service.execute_grouped(command)
    except UnknownEventError as exc:
        unknown = exc.event_ids
        details = [_detail(event_id, "ResourceNotFound", "not found") for event_id in unknown]
        return arm_error(
            404,
            "ResourceNotFound",
            f"The Resource 'Microsoft.Maintenance/scheduledevents/{unknown[0]}' under "
            f"resource group '{group}' was not found.",
            details if listed else (),
        )
    return JSONResponse(APPROVED)


def _detail(target: str, code: str, message: str) -> dict[str, Any]:
    """One entry of ``ScheduledEventsListAcknowledgeErrorDetails.details``."""
    return {"target": target, "code": code, "message": message}


def _no_route(path: str) -> JSONResponse:
    return arm_error(
        404,
        "InvalidResourceType",
        f"The resource type could not be found for the request path '{path[:256]}'.",
    )


__all__ = [
    "ACKNOWLEDGE_API_VERSIONS",
    "ACKNOWLEDGE_LIST_API_VERSIONS",
    "APPROVED",
    "MAX_LISTED",
    "PREFIX",
    "EventIdList",
    "maintenance_router",
]
