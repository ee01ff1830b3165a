"""The control API: what an operator (or a test) does to the platform.

Served on its own address and port, never through the VM-facing endpoint. FastAPI is used for
its typed request and response models: ``/openapi.json`` then describes every route, and bad
input is refused with the field and the reason before any handler runs. Handlers are ``async``
so they all run on the event loop's thread, one at a time between awaits; the service is not
thread-safe. A change awaits its record (the service's ``execute_grouped`` and ``*_async``
methods): with a shared PostgreSQL journal the loop goes on answering meanwhile.

Every mutation is one :class:`~forewarn.commands.Command` given to the service, so it is
journaled and replayed like any other; with a shared journal, the mutations of handlers
running in one turn of the event loop are journaled in one transaction (group commit,
:meth:`~forewarn.service.ScheduledEventsService.execute_grouped`), as VMs' approvals are.
Status codes are assigned here and nowhere else:

    404  unknown VM, event, host or scale set, or unknown route
    409  not possible in the current state (a Started event cannot be cancelled...)
    422  invalid input (a field of the wrong type, a notice shorter than the minimum...)
    400  a body that is not JSON
    413  a body larger than MAX_CONTROL_BODY
    503  the store cannot record the change (a full disk, an I/O error, PostgreSQL down)
         or the state is being rebuilt from it: nothing was changed

and every error body is ``{"error": "..."}``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from forewarn import __version__
from forewarn.commands import CancelEvent, ScheduleEvent
from forewarn.domain.api_versions import CURRENT_VERSION, find_version
from forewarn.domain.errors import (
    DomainError,
    InvalidEventError,
    InvalidOperationError,
    TimeOutOfRangeError,
    UnknownEventError,
    UnknownGroupError,
    UnknownVmError,
)
from forewarn.errors import InvalidInputError
from forewarn.eventgrid.delivery import EventGrid
from forewarn.registry import OPERATIONS, Operation, describe
from forewarn.server._activity import Activity
from forewarn.server._control_faults import fault_router
from forewarn.server._control_models import (
    API,
    MAX_CONTROL_BODY,
    AdvanceClockRequest,
    ApprovedOut,
    ApproveRequest,
    CampaignRequest,
    CampaignsOut,
    CampaignStartedOut,
    ClockOut,
    CreateEventRequest,
    DocumentOut,
    ErrorOut,
    EventOut,
    EventsOut,
    HostOut,
    HostsOut,
    OperationsOut,
    SetClockRequest,
    VmOut,
    VmsOut,
    campaign_out,
    clock_out,
    created_out,
    event_out,
    operation_arguments,
    request_model,
    vm_out,
)
from forewarn.server._openapi_errors import describe_errors
from forewarn.server.azure._arm import ArmPaths, arm_code, arm_error, is_arm_path
from forewarn.server.azure.eventgrid import eventgrid_router
from forewarn.server.azure.maintenance import PREFIX as MAINTENANCE_PREFIX
from forewarn.server.azure.maintenance import maintenance_router
from forewarn.server.azure.resourcegraph import PATH as RESOURCE_GRAPH_PATH
from forewarn.server.azure.resourcegraph import QueryRunner, resource_graph_router
from forewarn.server.dashboard import add_dashboard
from forewarn.server.dashboard._scenarios import ScenarioRuns
from forewarn.server.health import Health, health_router
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError, UnstorableValueError
from forewarn.wire.documents import document_fields

#: The status of each error class; an error gets the entry nearest it along its MRO, as
#: starlette looks up exception handlers, so a new subclass inherits its parent's status and
#: no ordering of checks matters. An error with no entry is a bug (500).
STATUS_BY_ERROR: dict[type[Exception], int] = {
    UnknownVmError: 404,
    UnknownGroupError: 404,
    UnknownEventError: 404,
    InvalidInputError: 422,
    InvalidEventError: 422,
    TimeOutOfRangeError: 422,
    InvalidOperationError: 409,
    # a change the store could not record (a full disk, PostgreSQL down) or confirm, or a
    # state being rebuilt from the store: nothing was changed
    StoreUnavailableError: 503,
    # a value the journal would not keep: refused before anything changed
    UnstorableValueError: 422,
    DomainError: 409,
}


#: The routes that answer as Azure Resource Manager does, errors in its envelope included.
ARM_PREFIXES = (MAINTENANCE_PREFIX, RESOURCE_GRAPH_PATH)


def error_response(
    path: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error as the route at ``path`` answers one: ``{"error": message}`` on the control
    API; ARM's envelope (``{"error": {"code", "message"}}``) on an ARM route, whatever went
    wrong there (a store being rebuilt, a body past the bound), so a management SDK reads
    its code there as it would Azure's."""
    if is_arm_path(path, ARM_PREFIXES):
        response = arm_error(status, arm_code(status), message)
        if headers:
            response.headers.update(headers)
        return response
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def status_of(error: BaseException) -> int | None:
    """The status :data:`STATUS_BY_ERROR` gives ``error``'s nearest class, or None."""
    for cls in type(error).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    return None


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
            response = error_response(
                scope["path"], 413, f"the body is larger than {self.max_bytes} bytes"
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


def create_control_app(
    service: ScheduledEventsService,
    *,
    activity: Activity | None = None,
    runs: ScenarioRuns | None = None,
    health: Health | None = None,
    eventgrid: EventGrid | None = None,
    queries: QueryRunner | None = None,
) -> FastAPI:
    """The control API around ``service``, and the dashboard; ``activity`` is what the VMs'
    endpoint records for the dashboard's timelines, ``health`` what ``/healthz`` answers
    (by default: the service's store alone), ``eventgrid`` the system topic's subscriptions
    and deliveries (``forewarn serve`` only), ``queries`` what runs Resource Graph's queries
    (a worker thread unless given)."""
    app = FastAPI(
        title="forewarn control API",
        version=__version__,
        description="Drive the simulated platform behind the Scheduled Events endpoint.",
        redoc_url=None,
        # Swagger UI loads its assets from a CDN, so it is blank offline: /openapi.json is
        # the description, for any OpenAPI viewer.
        docs_url=None,
    )
    router = APIRouter(prefix=API)

    # -- VMs ------------------------------------------------------------------------------------

    @router.get("/vms", tags=["vms"])
    async def list_vms() -> VmsOut:
        return VmsOut(vms=[vm_out(state) for state in service.vm_states()])

    @router.get("/vms/{name}", tags=["vms"])
    async def show_vm(name: str) -> VmOut:
        return vm_out(service.vm_state(name))

    @router.get("/vms/{name}/document", tags=["vms"])
    async def vm_document(
        name: str, api_version: Annotated[str, Query(alias="api-version")] = CURRENT_VERSION.name
    ) -> DocumentOut:
        """The document the VM is shown, without counting as a request from it."""
        version = find_version(api_version)
        if version is None:
            raise InvalidInputError(f"unknown api-version {api_version!r}")
        return DocumentOut.model_validate(document_fields(service.document(name), version))

    @router.post("/vms/{name}/approve", tags=["vms"])
    async def approve(name: str, body: ApproveRequest) -> ApprovedOut:
        """Approve as the VM would through the endpoint; real VMs POST StartRequests there."""
        wanted = None if body.event_ids == "all" else tuple(body.event_ids)
        approval = service.approval_for(name, wanted)
        await service.execute_grouped(approval)
        return ApprovedOut(approved=list(approval.event_ids))

    # -- hosts ----------------------------------------------------------------------------------

    @router.get("/hosts", tags=["hosts"])
    async def list_hosts() -> HostsOut:
        return HostsOut(
            hosts=[HostOut(name=host.name, vms=list(host.vms)) for host in service.hosts()]
        )

    # -- operations on one named VM, scale set or host, from the registry ----------------------

    @router.get("/operations", tags=["operations"])
    async def list_operations() -> OperationsOut:
        """Every operation below, with its parameters: what a dashboard builds its forms from."""
        return OperationsOut.model_validate({"operations": describe()})

    for operation in OPERATIONS:
        _add_operation_route(router, operation, service)

    # -- maintenance campaigns ------------------------------------------------------------------

    @router.get("/campaigns", tags=["maintenance"])
    async def list_campaigns() -> CampaignsOut:
        return CampaignsOut(campaigns=[campaign_out(view) for view in service.campaigns()])

    @router.post("/campaigns", status_code=201, tags=["maintenance"])
    async def start_campaign(body: CampaignRequest) -> CampaignStartedOut:
        """Routine maintenance one fault domain at a time, over the listed VMs or all."""
        vms = tuple(body.vms) if body.vms is not None else None
        kinds = None if body.kinds is None else tuple(kind.value for kind in body.kinds)
        # One write for the whole campaign, not grouped with others: the campaign it started
        # is told apart as the one that was not there before.
        started = await service.start_campaign_async(vms, body.event_type, kinds)
        return CampaignStartedOut(
            campaign=campaign_out(started.campaign) if started.campaign is not None else None,
            events=[created_out(created) for created in started.events],
        )

    # -- events ---------------------------------------------------------------------------------

    @router.get("/events", tags=["events"])
    async def list_events() -> EventsOut:
        return EventsOut(events=[event_out(view.event, view) for view in service.events()])

    @router.post("/events", status_code=201, tags=["events"])
    async def create_event(body: CreateEventRequest) -> EventOut:
        """Any event, bypassing the operations' rules except the minimum notice."""
        (created,) = service.created(
            await service.execute_grouped(
                ScheduleEvent(
                    body.type.value,
                    tuple(body.resources),
                    source=body.source.value,
                    description=body.description,
                    duration_seconds=body.duration_in_seconds,
                    notice_seconds=body.notice_seconds,
                    started=body.started,
                    started_seconds=body.started_seconds,
                )
            )
        )
        return created_out(created)

    @router.get("/events/{event_id}", tags=["events"])
    async def show_event(event_id: str) -> EventOut:
        view = service.event(event_id)
        return event_out(view.event, view)

    @router.delete("/events/{event_id}", status_code=204, tags=["events"])
    async def cancel_event(event_id: str) -> Response:
        """The platform calls off a Scheduled event; it vanishes from every document."""
        await service.execute_grouped(CancelEvent(event_id))
        return Response(status_code=204)

    add_clock_routes(router, service)
    app.include_router(router)
    app.include_router(fault_router(service))
    app.include_router(health_router(health or Health(service.check_store)))
    app.include_router(maintenance_router(service))
    app.include_router(resource_graph_router(service, queries))
    app.include_router(eventgrid_router(eventgrid))
    add_dashboard(
        app,
        service,
        activity or Activity(),
        runs=runs,
        eventgrid=eventgrid,
    )
    install_error_handlers(app)
    describe_errors(app, API, ErrorOut)
    app.add_middleware(BodyLimit, max_bytes=MAX_CONTROL_BODY)
    app.add_middleware(ArmPaths, prefixes=ARM_PREFIXES)
    return app


def add_clock_routes(router: APIRouter, service: ScheduledEventsService) -> None:
    """``/clock``: read it; move a manual one (``forewarn replay`` serves these too)."""

    @router.get("/clock", tags=["clock"])
    async def show_clock() -> ClockOut:
        return clock_out(service.clock_status())

    @router.post("/clock/advance", tags=["clock"])
    async def advance_clock(body: AdvanceClockRequest) -> ClockOut:
        """Move a manual clock forward; every deadline passed on the way fires in order."""
        return clock_out(await service.advance_clock_async(timedelta(seconds=body.seconds)))

    @router.post("/clock/set", tags=["clock"])
    async def set_clock(body: SetClockRequest) -> ClockOut:
        return clock_out(await service.set_clock_async(body.now))


_TAGS = {
    "vm": "vms",
    "scale-set": "scale sets",
    "availability-set": "availability sets",
    "host": "hosts",
}


def _add_operation_route(
    router: APIRouter,
    operation: Operation,
    service: ScheduledEventsService,
) -> None:
    """``POST`` :attr:`Operation.route`, its body model built from the operation's parameters."""
    model = request_model(operation)

    async def perform(name: str, body: BaseModel | None = None) -> EventsOut:
        command = service.operation_command(operation, name, operation_arguments(body))
        created = service.created(await service.execute_grouped(command))
        return EventsOut(events=[created_out(c) for c in created])

    parameters = [
        inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)
    ]
    if model is not None:
        # Optional when every parameter is (``host fail``'s ``as``): no body, the defaults.
        optional = not any(field.is_required() for field in model.model_fields.values())
        default = None if optional else inspect.Parameter.empty
        parameters.append(
            inspect.Parameter(
                "body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model, default=default
            )
        )
    perform.__signature__ = inspect.Signature(parameters, return_annotation=EventsOut)  # type: ignore[attr-defined]
    kind = operation.target.kind
    router.add_api_route(
        operation.route,
        perform,
        methods=["POST"],
        tags=[_TAGS[kind]],
        summary=operation.summary,
        operation_id=f"{kind.replace('-', '_')}_{operation.name.replace('-', '_')}",
    )


def install_error_handlers(app: FastAPI) -> None:
    """Every error with its status (:data:`STATUS_BY_ERROR`), as :func:`error_response`
    words it for the route."""

    async def on_known_error(request: Request, exc: Exception) -> Response:
        status = status_of(exc)
        if status is None:  # unreachable: registered only for the table's classes
            raise exc
        return error_response(request.url.path, status, str(exc))

    async def on_invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        status, message = _validation_message(exc)
        return error_response(request.url.path, status, message)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return error_response(request.url.path, exc.status_code, message, exc.headers)

    async def on_bug(request: Request, exc: Exception) -> Response:
        return error_response(request.url.path, 500, f"internal error: {type(exc).__name__}")

    # Starlette finds the handler along the error's MRO too; anything else (a store failure, a
    # bug) reaches the 500 handler, which also lets the server log it.
    for error_type in STATUS_BY_ERROR:
        app.add_exception_handler(error_type, on_known_error)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_bug)


__all__ = [
    "API",
    "ARM_PREFIXES",
    "MAX_CONTROL_BODY",
    "STATUS_BY_ERROR",
    "BodyLimit",
    "InvalidInputError",
    "add_clock_routes",
    "create_control_app",
    "error_response",
    "install_error_handlers",
    "status_of",
]
