"""The control API: what an operator (or a test) does to the platform.

Served on its own address and port, never through the VM-facing endpoint. FastAPI is used for
its typed request and response models: ``/openapi.json`` then describes every route, and bad
input is refused with the field and the reason before any handler runs. Handlers are ``async``
so they all run one at a time on the event loop's thread; the service is not thread-safe.

Every mutation is one :class:`~forewarn.commands.Command` given to the service, so it is
journaled and replayed like any other. Status codes are assigned here and nowhere else:

    404  unknown VM, event, host or scale set, or unknown route
    409  not possible in the current state (a Started event cannot be cancelled...)
    422  invalid input (a field of the wrong type, a notice shorter than the minimum...)
    400  a body that is not JSON
    413  a body larger than MAX_CONTROL_BODY

and every error body is ``{"error": "..."}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException

from forewarn import __version__
from forewarn.commands import (
    Approve,
    CancelEvent,
    Command,
    DeleteInstances,
    HostOperation,
    OsImageUpgrade,
    Redeploy,
    Restart,
    ScheduleEvent,
    SimulateEviction,
    StartCampaign,
)
from forewarn.domain.api_versions import CURRENT_VERSION, find_version
from forewarn.domain.errors import (
    DomainError,
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
    UnknownVmError,
)
from forewarn.domain.events import Event, EventSource, EventStatus, EventType
from forewarn.domain.platform import CampaignView, EventView, VmState
from forewarn.service import ScheduledEventsService
from forewarn.wire.documents import document_fields, event_fields
from forewarn.wire.instance import compute_fields

MAX_CONTROL_BODY = 64 * 1024
API = "/api/v1"
#: Upper bounds that keep every duration far from datetime's year-9999 overflow.
MAX_SECONDS = 100 * 365 * 24 * 3600
MAX_NAMES = 10_000

VmName = Annotated[str, Field(min_length=1, max_length=128)]
InstanceId = Annotated[str, Field(pattern=r"^[0-9]{1,16}$")]
EventIds = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_NAMES)]
Seconds = Annotated[float, Field(strict=True, ge=0, le=MAX_SECONDS, allow_inf_nan=False)]


class NotFoundError(Exception):
    """A host or scale set the fleet does not have (the domain calls these wrong state)."""


class InvalidInputError(Exception):
    """A value the request models cannot check alone (an unknown api-version...)."""


_STATUS_BY_ERROR: tuple[tuple[type[Exception], int], ...] = (
    (NotFoundError, 404),
    (InvalidInputError, 422),
    (UnknownVmError, 404),
    (UnknownEventError, 404),
    (InvalidEventError, 422),
    (InvalidOperationError, 409),
    (DomainError, 409),
)


# -- request bodies -----------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateEventRequest(_Body):
    type: EventType
    resources: list[VmName] = Field(min_length=1, max_length=MAX_NAMES)
    source: EventSource = EventSource.PLATFORM
    description: str = Field(default="", max_length=1024)
    duration_in_seconds: StrictInt = Field(
        default=-1, alias="durationInSeconds", ge=-1, le=MAX_SECONDS
    )
    notice_seconds: Seconds | None = Field(default=None, alias="noticeSeconds")
    started: StrictBool = False


class InstancesRequest(_Body):
    instance_ids: list[InstanceId] = Field(alias="instanceIds", min_length=1, max_length=MAX_NAMES)


class DeleteInstancesRequest(InstancesRequest):
    autoscale: StrictBool = False


class ApproveRequest(_Body):
    event_ids: EventIds | Literal["all"] = Field(alias="eventIds")


class CampaignRequest(_Body):
    vms: list[VmName] | None = Field(default=None, min_length=1, max_length=MAX_NAMES)
    event_type: Literal["Reboot", "Freeze"] = Field(default="Reboot", alias="eventType")


class AdvanceClockRequest(_Body):
    seconds: Seconds


class SetClockRequest(_Body):
    now: AwareDatetime


# -- responses ----------------------------------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class EventOut(_Out):
    """The event as api-version 2020-07-01 shows it, plus who sees and who approved it."""

    event_id: str = Field(alias="EventId")
    event_status: EventStatus = Field(alias="EventStatus")
    event_type: EventType = Field(alias="EventType")
    resource_type: str = Field(alias="ResourceType")
    resources: list[str] = Field(alias="Resources")
    not_before: str = Field(alias="NotBefore")
    description: str = Field(alias="Description")
    event_source: EventSource = Field(alias="EventSource")
    duration_in_seconds: int = Field(alias="DurationInSeconds")
    audience: list[str] = Field(description="VMs whose document shows the event")
    parties: list[str] = Field(description="Tenants (subscriptions) that must approve")
    approved_by: list[str] = Field(alias="approvedBy", description="Tenants that approved")
    job_id: int | None = Field(alias="jobId", description="Events of one job start together")


class EventsOut(_Out):
    events: list[EventOut]


class ApprovedOut(_Out):
    approved: list[str]


class VmOut(_Out):
    name: str
    address: str | None
    host: str
    reachable: bool = Field(description="False while an impact is under way")
    receiving: bool = Field(description="Scheduled Events is on for this VM")
    subscription_id: str = Field(alias="subscriptionId")
    availability_set: str | None = Field(alias="availabilitySet")
    scale_set: str | None = Field(alias="scaleSet")
    cloud_service: str | None = Field(alias="cloudService")
    fault_domain: int = Field(alias="faultDomain")
    update_domain: int = Field(alias="updateDomain")
    priority: str
    compute: dict[str, Any] = Field(description="The VM's /metadata/instance compute section")


class VmsOut(_Out):
    vms: list[VmOut]


class DocumentOut(_Out):
    document_incarnation: int = Field(alias="DocumentIncarnation")
    events: list[dict[str, Any]] = Field(alias="Events")


class HostOut(_Out):
    name: str
    vms: list[str]


class HostsOut(_Out):
    hosts: list[HostOut]


class CampaignOut(_Out):
    id: int
    step: int = Field(description="Steps (fault domains) begun so far")
    steps: int
    current_events: list[str] = Field(alias="currentEvents")


class CampaignsOut(_Out):
    campaigns: list[CampaignOut]


class CampaignStartedOut(_Out):
    campaign: CampaignOut | None = Field(description="None when it had nothing left to do")
    events: list[EventOut]


class ClockOut(_Out):
    now: str
    kind: str
    profile: str
    next_deadline: str | None = Field(alias="nextDeadline")


class ErrorOut(_Out):
    error: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 404, 409, 413, 422)
}


# -- mapping ------------------------------------------------------------------------------------


def _event_out(event: Event, view: EventView | None) -> EventOut:
    return EventOut.model_validate(
        {
            **event_fields(view.event if view else event, CURRENT_VERSION),
            "audience": sorted(view.audience) if view else [],
            "parties": sorted(view.parties) if view else [],
            "approvedBy": sorted(view.approvals) if view else [],
            "jobId": view.job_id if view else None,
        }
    )


def _vm_out(state: VmState) -> VmOut:
    vm = state.vm
    return VmOut.model_validate(
        {
            "name": vm.name,
            "address": vm.address,
            "host": vm.host,
            "reachable": state.reachable,
            "receiving": state.receiving,
            "subscriptionId": vm.subscription_id,
            "availabilitySet": vm.availability_set,
            "scaleSet": vm.vm_scale_set_name or None,
            "cloudService": vm.cloud_service,
            "faultDomain": vm.platform_fault_domain,
            "updateDomain": vm.platform_update_domain,
            "priority": vm.priority.value,
            "compute": compute_fields(vm),
        }
    )


def _campaign_out(view: CampaignView) -> CampaignOut:
    return CampaignOut(
        id=view.campaign_id,
        step=view.step,
        steps=view.steps,
        currentEvents=sorted(view.current),
    )


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """400 for a body that is not JSON, 422 naming each bad field otherwise."""
    errors = exc.errors()
    if any(error.get("type") == "json_invalid" for error in errors):
        return 400, "the body is not valid JSON"
    parts = []
    for error in errors[:5]:
        loc = [str(part) for part in error.get("loc", ()) if part != "body"]
        where = ".".join(loc) or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return 422, "invalid request: " + "; ".join(parts)


class BodyLimit:
    """Refuses bodies over ``max_bytes`` before the app reads them (413).

    The whole body is read here, bounded, and replayed to the app, so a client that lies in
    Content-Length or streams without one is held to the same limit.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        too_large = not declared.isdigit() or int(declared) > self.max_bytes
        body = bytearray()
        while not too_large:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            too_large = len(body) > self.max_bytes
            if not message.get("more_body", False):
                break
        if too_large:
            response = JSONResponse(
                {"error": f"the body is larger than {self.max_bytes} bytes"}, status_code=413
            )
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


# -- the app ------------------------------------------------------------------------------------


def create_control_app(service: ScheduledEventsService) -> FastAPI:
    """The control API around ``service``."""
    app = FastAPI(
        title="forewarn control API",
        version=__version__,
        description="Drive the simulated platform behind the Scheduled Events endpoint.",
        redoc_url=None,
    )
    router = APIRouter(prefix=API, responses=_ERRORS)

    def views() -> dict[str, EventView]:
        return {view.event.event_id: view for view in service.events()}

    def events_out(events: Sequence[Event]) -> EventsOut:
        live = views()
        return EventsOut(events=[_event_out(e, live.get(e.event_id)) for e in events])

    def execute(command: Command) -> EventsOut:
        return events_out(service.execute(command))

    def require_scale_set(name: str) -> None:
        try:
            service.platform.scale_set(name)
        except InvalidOperationError:
            raise NotFoundError(f"no scale set named {name!r}") from None

    def require_host(name: str) -> None:
        if not any(vm.host == name for vm in service.vms()):
            raise NotFoundError(f"no virtual machine runs on host {name!r}")

    def clock_out() -> ClockOut:
        now = service.catch_up()
        deadline = service.platform.next_deadline()
        return ClockOut(
            now=now.isoformat(),
            kind=type(service.clock).__name__,
            profile=service.platform.timing.name,
            nextDeadline=deadline.isoformat() if deadline else None,
        )

    # -- VMs ------------------------------------------------------------------------------------

    @router.get("/vms", tags=["vms"])
    async def list_vms() -> VmsOut:
        return VmsOut(vms=[_vm_out(state) for state in service.vm_states()])

    @router.get("/vms/{name}", tags=["vms"])
    async def show_vm(name: str) -> VmOut:
        service.catch_up()
        return _vm_out(service.platform.vm_state(name))

    @router.get("/vms/{name}/document", tags=["vms"])
    async def vm_document(
        name: str, api_version: Annotated[str, Query(alias="api-version")] = CURRENT_VERSION.name
    ) -> DocumentOut:
        """The document the VM is shown, without counting as a request from it."""
        version = find_version(api_version)
        if version is None:
            raise InvalidInputError(f"unknown api-version {api_version!r}")
        return DocumentOut.model_validate(document_fields(service.document(name), version))

    @router.post("/vms/{name}/restart", tags=["vms"])
    async def restart_vm(name: str) -> EventsOut:
        return execute(Restart(name))

    @router.post("/vms/{name}/redeploy", tags=["vms"])
    async def redeploy_vm(name: str) -> EventsOut:
        return execute(Redeploy(name))

    @router.post("/vms/{name}/simulate-eviction", tags=["vms"])
    async def evict_vm(name: str) -> EventsOut:
        return execute(SimulateEviction((name,)))

    @router.post("/vms/{name}/approve", tags=["vms"])
    async def approve(name: str, body: ApproveRequest) -> ApprovedOut:
        """Approve as the VM would through the endpoint; real VMs POST StartRequests there."""
        service.catch_up()
        if not service.platform.vm_state(name).reachable:
            raise InvalidOperationError(f"{name} is down (an impact is under way) and cannot ask")
        if body.event_ids == "all":
            ids = tuple(event.event_id for event in service.document(name).events)
        else:
            ids = tuple(body.event_ids)
        service.execute(Approve(name, ids))
        return ApprovedOut(approved=list(ids))

    # -- scale sets -----------------------------------------------------------------------------

    @router.post("/scale-sets/{name}/delete-instances", tags=["scale sets"])
    async def delete_instances(name: str, body: DeleteInstancesRequest) -> EventsOut:
        """Terminate events when the set has terminate notification; else instances just go."""
        require_scale_set(name)
        return execute(DeleteInstances(name, tuple(body.instance_ids), body.autoscale))

    @router.post("/scale-sets/{name}/simulate-eviction", tags=["scale sets"])
    async def evict_instances(name: str, body: InstancesRequest) -> EventsOut:
        require_scale_set(name)
        return execute(SimulateEviction(tuple(f"{name}_{i}" for i in body.instance_ids)))

    @router.post("/scale-sets/{name}/os-image-upgrade", tags=["scale sets"])
    async def os_image_upgrade(name: str, body: InstancesRequest) -> EventsOut:
        require_scale_set(name)
        return execute(OsImageUpgrade(name, tuple(body.instance_ids)))

    # -- hosts ----------------------------------------------------------------------------------

    @router.get("/hosts", tags=["hosts"])
    async def list_hosts() -> HostsOut:
        by_host: dict[str, list[str]] = {}
        for vm in service.vms():
            by_host.setdefault(vm.host, []).append(vm.name)
        return HostsOut(
            hosts=[HostOut(name=host, vms=sorted(vms)) for host, vms in sorted(by_host.items())]
        )

    def host_route(action: str, summary: str) -> None:
        async def host_operation(name: str) -> EventsOut:
            require_host(name)
            return execute(HostOperation(name, action))

        router.add_api_route(
            f"/hosts/{{name}}/{action}",
            host_operation,
            methods=["POST"],
            tags=["hosts"],
            summary=summary,
            operation_id=f"host_{action.replace('-', '_')}",
        )

    host_route("live-migrate", "Freeze every VM on the host (memory-preserving maintenance)")
    host_route("maintain", "Reboot every VM on the host (maintenance needing a reboot)")
    host_route("predict-failure", "Redeploy every VM on the host, days ahead")
    host_route("fail", "Hardware failure: a Started Reboot at once, no notice")

    # -- maintenance campaigns ------------------------------------------------------------------

    @router.get("/campaigns", tags=["maintenance"])
    async def list_campaigns() -> CampaignsOut:
        return CampaignsOut(campaigns=[_campaign_out(view) for view in service.campaigns()])

    @router.post("/campaigns", status_code=201, tags=["maintenance"])
    async def start_campaign(body: CampaignRequest) -> CampaignStartedOut:
        """Routine maintenance one fault domain at a time, over the listed VMs or all."""
        before_events = set(views())
        before_campaigns = {view.campaign_id for view in service.campaigns()}
        vms = tuple(body.vms) if body.vms is not None else None
        service.execute(StartCampaign(vms, body.event_type))
        created = [view for view in service.events() if view.event.event_id not in before_events]
        started = [c for c in service.campaigns() if c.campaign_id not in before_campaigns]
        return CampaignStartedOut(
            campaign=_campaign_out(started[0]) if started else None,
            events=[_event_out(view.event, view) for view in created],
        )

    # -- events ---------------------------------------------------------------------------------

    @router.get("/events", tags=["events"])
    async def list_events() -> EventsOut:
        return EventsOut(events=[_event_out(view.event, view) for view in service.events()])

    @router.post("/events", status_code=201, tags=["events"])
    async def create_event(body: CreateEventRequest) -> EventOut:
        """Any event, bypassing the operations' rules except the minimum notice."""
        (event,) = service.execute(
            ScheduleEvent(
                body.type.value,
                tuple(body.resources),
                source=body.source.value,
                description=body.description,
                duration_seconds=body.duration_in_seconds,
                notice_seconds=body.notice_seconds,
                started=body.started,
            )
        )
        return _event_out(event, views().get(event.event_id))

    @router.get("/events/{event_id}", tags=["events"])
    async def show_event(event_id: str) -> EventOut:
        service.catch_up()
        view = service.platform.event(event_id)
        return _event_out(view.event, view)

    @router.delete("/events/{event_id}", status_code=204, tags=["events"])
    async def cancel_event(event_id: str) -> Response:
        """The platform calls off a Scheduled event; it vanishes from every document."""
        service.execute(CancelEvent(event_id))
        return Response(status_code=204)

    # -- the clock ------------------------------------------------------------------------------

    @router.get("/clock", tags=["clock"])
    async def show_clock() -> ClockOut:
        return clock_out()

    @router.post("/clock/advance", tags=["clock"])
    async def advance_clock(body: AdvanceClockRequest) -> ClockOut:
        """Move a manual clock forward; every deadline passed on the way fires in order."""
        service.advance_clock(timedelta(seconds=body.seconds))
        return clock_out()

    @router.post("/clock/set", tags=["clock"])
    async def set_clock(body: SetClockRequest) -> ClockOut:
        if body.now.year > 9000:
            raise InvalidInputError("the clock cannot be set past the year 9000")
        try:
            service.set_clock(body.now)
        except ValueError as exc:  # ManualClock refuses to go backwards
            raise InvalidOperationError(f"{exc}: it is {service.clock.now().isoformat()}") from None
        return clock_out()

    app.include_router(router)
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_CONTROL_BODY)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    async def on_domain_error(request: Request, exc: Exception) -> Response:
        for error_type, status in _STATUS_BY_ERROR:
            if isinstance(exc, error_type):
                return JSONResponse({"error": str(exc)}, status_code=status)
        raise exc

    async def on_invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        status, message = _validation_message(exc)
        return JSONResponse({"error": message}, status_code=status)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    async def on_bug(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"internal error: {type(exc).__name__}"}, status_code=500)

    app.add_exception_handler(DomainError, on_domain_error)
    app.add_exception_handler(NotFoundError, on_domain_error)
    app.add_exception_handler(InvalidInputError, on_domain_error)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_bug)


__all__ = ["API", "MAX_CONTROL_BODY", "create_control_app"]
