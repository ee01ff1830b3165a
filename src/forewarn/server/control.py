"""The control API: what an operator (or a test) does to the platform.

Served on its own address and port, never through the VM-facing endpoint. Starlette gives
routing and request parsing here; this plane is low-traffic, so convenience wins over speed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from forewarn.commands import CancelEvent, ScheduleEvent
from forewarn.domain.api_versions import CURRENT_VERSION, find_version
from forewarn.domain.errors import (
    DomainError,
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
    UnknownVmError,
)
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.platform import EventView
from forewarn.domain.vms import Vm
from forewarn.service import ScheduledEventsService
from forewarn.wire.documents import document_fields, event_fields
from forewarn.wire.instance import compute_fields

MAX_CONTROL_BODY = 64 * 1024
API = "/api/v1"


class ControlRequestError(Exception):
    """A control request that cannot be understood (400)."""


_STATUS_BY_ERROR: tuple[tuple[type[Exception], int], ...] = (
    (UnknownVmError, 404),
    (UnknownEventError, 404),
    (InvalidEventError, 422),
    (InvalidOperationError, 409),
    (DomainError, 400),
    (ControlRequestError, 400),
)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _vm_json(vm: Vm) -> dict[str, Any]:
    return {"name": vm.name, "address": vm.address, "compute": compute_fields(vm)}


def _event_json(view: EventView) -> dict[str, Any]:
    return {
        **event_fields(view.event, CURRENT_VERSION),
        "audience": sorted(view.audience),
        "approvedBy": sorted(view.approvals),
    }


async def _json_body(request: Request) -> dict[str, Any]:
    body = await request.body()
    if len(body) > MAX_CONTROL_BODY:
        raise ControlRequestError(f"the body is larger than {MAX_CONTROL_BODY} bytes")
    try:
        import orjson

        payload = orjson.loads(body or b"{}")
    except ValueError:
        raise ControlRequestError("the body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ControlRequestError("the body must be a JSON object")
    return payload


def _field(payload: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = payload.get(name, default)
    if value is default:
        return value
    if kind is int and isinstance(value, bool):
        raise ControlRequestError(f"{name} must be {kind.__name__}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise ControlRequestError(f"{name} must be {kind.__name__}")
    return value


def _enum(enum_type: Any, name: str, value: Any) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise ControlRequestError(f"{name} must be one of {allowed}") from None


def create_control_app(service: ScheduledEventsService) -> Starlette:
    """The control API around ``service``."""

    async def list_vms(request: Request) -> Response:
        return JSONResponse({"vms": [_vm_json(vm) for vm in service.vms()]})

    async def vm_document(request: Request) -> Response:
        name = request.path_params["name"]
        version = find_version(request.query_params.get("api-version", CURRENT_VERSION.name))
        if version is None:
            raise ControlRequestError("unknown api-version")
        return JSONResponse(document_fields(service.document(name), version))

    async def list_events(request: Request) -> Response:
        return JSONResponse({"events": [_event_json(view) for view in service.events()]})

    async def create_event(request: Request) -> Response:
        payload = await _json_body(request)
        event_type = _enum(EventType, "type", payload.get("type"))
        resources = payload.get("resources")
        if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
            raise ControlRequestError("resources must be a list of VM names")
        source = _enum(EventSource, "source", payload.get("source", "Platform"))
        notice = _field(payload, "noticeSeconds", float)
        if notice is not None and notice < 0:
            raise ControlRequestError("noticeSeconds must not be negative")
        (event,) = service.execute(
            ScheduleEvent(
                event_type.value,
                tuple(resources),
                source=source.value,
                description=_field(payload, "description", str, ""),
                duration_seconds=_field(payload, "durationInSeconds", int, -1),
                notice_seconds=notice,
                started=_field(payload, "started", bool, False),
            )
        )
        return JSONResponse(_event_json(service.platform.event(event.event_id)), 201)

    async def cancel_event(request: Request) -> Response:
        service.execute(CancelEvent(request.path_params["event_id"]))
        return Response(status_code=204)

    async def show_clock(request: Request) -> Response:
        now = service.catch_up()
        return JSONResponse({"now": now.isoformat(), "kind": type(service.clock).__name__})

    async def advance_clock(request: Request) -> Response:
        payload = await _json_body(request)
        seconds = _field(payload, "seconds", float)
        if seconds is None or seconds < 0:
            raise ControlRequestError("seconds must be a non-negative number")
        now = service.advance_clock(timedelta(seconds=seconds))
        return JSONResponse({"now": now.isoformat()})

    async def on_error(request: Request, exc: Exception) -> Response:
        for error_type, status in _STATUS_BY_ERROR:
            if isinstance(exc, error_type):
                return _error(status, str(exc))
        raise exc

    return Starlette(
        routes=[
            Route(f"{API}/vms", list_vms, methods=["GET"]),
            Route(f"{API}/vms/{{name}}/document", vm_document, methods=["GET"]),
            Route(f"{API}/events", list_events, methods=["GET"]),
            Route(f"{API}/events", create_event, methods=["POST"]),
            Route(f"{API}/events/{{event_id}}", cancel_event, methods=["DELETE"]),
            Route(f"{API}/clock", show_clock, methods=["GET"]),
            Route(f"{API}/clock/advance", advance_clock, methods=["POST"]),
        ],
        exception_handlers={DomainError: on_error, ControlRequestError: on_error},
    )
