"""The Maintenance resource provider's acknowledge call, on the control port.

``POST /subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/providers/
Microsoft.Compute/{resourceType}/{resourceName}/providers/Microsoft.Maintenance/scheduledevents/
{scheduledEventId}/acknowledge?api-version=2023-10-01-preview``: the path and default
api-version of Azure's generated SDK for the Maintenance provider (the JavaScript
``@azure/arm-maintenance`` client's ``scheduledEvents.acknowledge``, ``_acknowledgeSend``), which
``az maintenance scheduledevent acknowledge --ids {the event's ARM id}`` sends too
(learn.microsoft.com, "Scheduled Events in Event Grid", "Acknowledging with the Maintenance
Resource Provider Endpoint"). It is the approval a POST to IMDS from one of the resource's VMs
gives: "Azure treats an approval request from either endpoint as meaning that the event can
start" (learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Acknowledging
Scheduled Events").

ARM matches paths without regard to case, so the route takes any spelling and
:func:`forewarn.domain.arm.parse_scheduled_event_id` reads it.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from forewarn.commands import Acknowledge
from forewarn.domain.arm import parse_scheduled_event_id
from forewarn.domain.errors import UnknownEventError
from forewarn.server.azure._arm import api_version_error, arm_error
from forewarn.service import ScheduledEventsService

#: The api-versions the acknowledge call is answered for: the SDK's default.
ACKNOWLEDGE_API_VERSIONS = frozenset({"2023-10-01-preview"})
_SUFFIX = "/acknowledge"


def maintenance_router(service: ScheduledEventsService) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post("/subscriptions/{path:path}")
    async def acknowledge(request: Request, path: str) -> Response:
        """Acknowledge (approve) a scheduled event from outside its VMs."""
        refused = api_version_error(request, ACKNOWLEDGE_API_VERSIONS)
        if refused is not None:
            return refused
        whole = request.url.path
        if not whole.lower().endswith(_SUFFIX):
            return _no_route(whole)
        resource_id = whole[: -len(_SUFFIX)]
        ref = parse_scheduled_event_id(resource_id)
        if ref is None:
            return _no_route(whole)
        try:
            service.execute(Acknowledge(resource_id))
        except UnknownEventError:
            return arm_error(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.Maintenance/scheduledevents/{ref.event_id}' under "
                f"resource group '{ref.resource_group}' was not found.",
            )
        return JSONResponse({"value": "Success"})

    return router


def _no_route(path: str) -> JSONResponse:
    return arm_error(
        404,
        "InvalidResourceType",
        f"The resource type could not be found for the request path '{path[:256]}'.",
    )


__all__ = ["ACKNOWLEDGE_API_VERSIONS", "maintenance_router"]
