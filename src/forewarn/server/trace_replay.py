"""``forewarn replay TRACE``: serve a recorded VM the documents it was shown, in order.

The recorded VM is a VM of forewarn's own (its name and compute metadata from the trace's
start line), answered by the same endpoint and socket server as ``forewarn serve``'s
(:mod:`forewarn.server.imds`, :func:`forewarn.server.http.start_imds_server`), so every check,
error, rate limit and header is the same; only the Scheduled Events document differs: at
each moment it is the one the trace shows at that moment (:meth:`Trace.document_at`), its
body the recorded bytes and its ``ETag`` the recorded one, so an unmodified client reads
exactly what it read on Azure. What is made per response is made again: the request id, the
``Date`` (of the replay's clock) and ``Content-Length``. The clock starts at the trace's
first moment and runs at the recorded speed, faster (``speed``), or moves only when told
(a manual clock, through the control API's ``/clock``).

An api-version other than the recorded one is shown the recorded events as that version
shows them (:mod:`forewarn.wire.documents`); an approval is answered as Azure answers one (200
for an event the document shows, 400 otherwise) and recorded, but changes nothing: the
recording goes on as it went.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse

from forewarn import __version__
from forewarn.clocks import ScaledClock
from forewarn.config.fleet import Fleet
from forewarn.control_token import new_token
from forewarn.defaults import (
    CONTROL_API,
    DEFAULT_CONTROL_PORT,
    DEFAULT_HOST,
    DEFAULT_PORT,
    HEALTH_PATH,
)
from forewarn.domain.api_versions import ApiVersion, find_version
from forewarn.domain.clock import Clock, ManualClock
from forewarn.domain.documents import Document
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm
from forewarn.errors import ForewarnError
from forewarn.server._control_models import MAX_CONTROL_BODY, ErrorOut
from forewarn.server._openapi_errors import describe_errors
from forewarn.server.control import BodyLimit, add_clock_routes, install_error_handlers
from forewarn.server.http import start_imds_server
from forewarn.server.imds import (
    JSON,
    SCHEDULED_EVENTS_PATH,
    Answer,
    Checked,
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
    conditional,
)
from forewarn.server.runner import listen_refusal, start_control, url_for
from forewarn.service import ScheduledEventsService, service_for_fleet
from forewarn.trace.events import recorded_events
from forewarn.trace.format import DocumentRecord, Trace, TraceError, format_time
from forewarn.wire.documents import encode_document


class ReplayError(ForewarnError):
    """The trace cannot be replayed (it holds no document)."""


def recorded_vm(trace: Trace) -> Vm:
    """The recorded VM: its name and what its compute metadata says of it (``vm0`` when the
    recorder could not read the metadata)."""
    compute: dict[str, Any] = dict(trace.start.compute or {})

    def text(key: str, default: str) -> str:
        value = compute.get(key)
        return value if isinstance(value, str) and value else default

    def number(key: str) -> int:
        value = compute.get(key)
        return int(value) if isinstance(value, str) and value.isdigit() else 0

    name = text("name", "vm0")
    return Vm(
        name=name,
        vm_id=text("vmId", f"replay-{name}"),
        subscription_id=text("subscriptionId", "00000000-0000-0000-0000-000000000000"),
        resource_group=text("resourceGroupName", "forewarn"),
        location=text("location", "westeurope"),
        zone=text("zone", ""),
        platform_fault_domain=number("platformFaultDomain"),
        platform_update_domain=number("platformUpdateDomain"),
        vm_size=text("vmSize", "Standard_D2s_v3"),
        os_type=text("osType", "Linux"),
        host=f"replay-host-{name}",
    )


class ReplayEndpoint(ImdsEndpoint):
    """The VM-facing endpoint, showing the trace's documents instead of the platform's."""

    def __init__(
        self,
        service: ScheduledEventsService,
        trace: Trace,
        *,
        rate_limit: float = 5.0,
    ) -> None:
        super().__init__(service, rate_limit=rate_limit)
        if not trace.documents:
            raise ReplayError(f"{trace.source}: holds no document to replay")
        self.trace = trace
        self.recorded_version = find_version(trace.start.api_version)
        #: Each approval a client made: the replay's time, the EventIds.
        self.approvals: list[tuple[datetime, tuple[str, ...]]] = []

    def shown_at(self, moment: datetime) -> DocumentRecord:
        """The document the recorded VM was shown at ``moment`` (before the trace's first
        document: the first)."""
        return self.trace.document_at(moment) or self.trace.documents[0]

    def respond_again(
        self,
        request: ImdsRequest,
        response: ImdsResponse,
        vm: Vm,
        repeats_under: int,
        *,
        admitted: bool = False,
    ) -> datetime | None:
        return None  # the recording, not the platform, says when the document changes

    def answer(self, request: ImdsRequest, *, admitted: bool = False) -> Answer:
        answer = super().answer(request, admitted=admitted)
        checked = request.checked
        if (
            request.method != "GET"
            or request.path != SCHEDULED_EVENTS_PATH
            or answer.response.status not in (200, 304)
            or not isinstance(checked, Checked)
            or checked.version is None
        ):
            return answer
        response = self._recorded(self.shown_at(answer.at), checked.version, checked.tags)
        return Answer(response, answer.vm, answer.at)

    def _recorded(
        self, document: DocumentRecord, version: ApiVersion, tags: str | None
    ) -> ImdsResponse:
        etag_text = document.header("ETag")
        if version is self.recorded_version:
            body = document.body.encode()
        else:
            events = recorded_events(document, self.trace.source)
            body = encode_document(Document(document.incarnation, events), version)
        if etag_text is None:  # recorded without one: no conditional answer either
            return ImdsResponse(200, body, JSON)
        etag = etag_text.encode()
        tag = etag_text.removeprefix("W/").strip('"')
        if tags is not None:
            not_modified = conditional(tags, tag, etag)
            if not_modified is not None:
                return not_modified
        return ImdsResponse(200, body, JSON, etag=etag)

    def approve(self, vm: Vm, event_ids: tuple[str, ...]) -> None:
        """200 for events the recorded document shows now, as Azure answers; nothing moves."""
        now = self.service.now()
        shown = {str(event.get("EventId", "")).upper() for event in self.shown_at(now).events}
        unknown = tuple(event_id for event_id in event_ids if event_id.upper() not in shown)
        if unknown:
            raise UnknownEventError(unknown)  # echoed as sent
        self.approvals.append((now, tuple(event_id.upper() for event_id in event_ids)))

    def status(self) -> dict[str, Any]:
        """Where the replay is: ``GET /api/v1/replay``."""
        now = self.service.now()
        documents = self.trace.documents
        shown = self.shown_at(now)
        following = next((d for d in documents if d.at > now), None)
        return {
            "trace": self.trace.source,
            "vm": self.trace.vm_name,
            "now": format_time(now),
            "documents": len(documents),
            "shown": {"line": shown.line, "incarnation": shown.incarnation},
            "next": None
            if following is None
            else {
                "line": following.line,
                "at": format_time(following.at),
                "in": (following.at - now).total_seconds(),
            },
            "approvals": [
                {"at": format_time(at), "eventIds": list(ids)} for at, ids in self.approvals
            ],
        }


def replay_service(trace: Trace, clock: Clock) -> ScheduledEventsService:
    """A platform of the recorded VM alone, on ``clock``: its Scheduled Events already on
    (the recorder's requests turned them on long ago), so no first call is held."""
    timing = DOCUMENTED.with_overrides({"first_call_delay": timedelta(0)})
    return service_for_fleet(Fleet((recorded_vm(trace),)), clock, timing=timing)


def replay_clock(trace: Trace, *, manual: bool, speed: float) -> Clock:
    """From the trace's first moment: moved by hand, or running ``speed`` times real time."""
    if manual:
        return ManualClock(trace.start.at)
    return ScaledClock(speed, trace.start.at)


def create_replay_app(endpoint: ReplayEndpoint) -> FastAPI:
    """The replay's control API: its clock (``forewarn clock advance`` moves a manual one)
    and where the replay is (``GET /api/v1/replay``)."""
    app = FastAPI(title="forewarn replay", version=__version__, docs_url=None, redoc_url=None)
    router = APIRouter(prefix=CONTROL_API)
    add_clock_routes(router, endpoint.service)

    @router.get("/replay", tags=["replay"])
    async def replay_status() -> dict[str, Any]:
        return endpoint.status()

    @app.get(HEALTH_PATH, tags=["health"])
    async def healthz() -> JSONResponse:
        """Ready as soon as it answers: a replay has no store to lose, so ``forewarn health``
        (and ``until forewarn health``) can wait on a replay as on ``forewarn serve``."""
        return JSONResponse(
            {"status": "ready", "replaying": endpoint.trace.source},
            headers={"Cache-Control": "no-store"},
        )

    app.include_router(router)
    install_error_handlers(app)
    describe_errors(app, CONTROL_API, ErrorOut)
    app.add_middleware(BodyLimit, max_bytes=MAX_CONTROL_BODY)
    return app


@dataclass(frozen=True)
class ReplaySettings:
    trace: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    control_host: str = DEFAULT_HOST
    control_port: int = DEFAULT_CONTROL_PORT
    manual: bool = False
    speed: float = 1.0
    rate_limit: float = 5.0
    token: str | None = None


def load_replay(settings: ReplaySettings, trace: Trace) -> ReplayEndpoint:
    if settings.speed <= 0:
        raise ReplayError("the speed is a positive factor: 1 is the recorded speed")
    clock = replay_clock(trace, manual=settings.manual, speed=settings.speed)
    return ReplayEndpoint(replay_service(trace, clock), trace, rate_limit=settings.rate_limit)


async def serve_replay(
    settings: ReplaySettings,
    trace: Trace,
    *,
    announce: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve the replay until SIGINT/SIGTERM (or ``stop`` is set)."""
    endpoint = load_replay(settings, trace)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    try:
        server = await start_imds_server(endpoint, settings.host, settings.port)
    except OSError as exc:
        raise listen_refusal(
            "the VM-facing endpoint", settings.host, settings.port, exc, "--bind"
        ) from None
    token = settings.token or new_token()
    control = await start_control(
        create_replay_app(endpoint), settings.control_host, settings.control_port, token
    )
    documents = trace.documents
    pace = "on a manual clock" if settings.manual else f"at {settings.speed:g}x the recorded speed"
    announce(
        f"forewarn replay: {trace.source}: {len(documents)} document(s) of "
        f"{endpoint.trace.vm_name or 'vm0'} from {format_time(trace.start.at)} to "
        f"{format_time(documents[-1].at)}, {pace}, at "
        f"{url_for(settings.host, settings.port)}{SCHEDULED_EVENTS_PATH}"
    )
    announce(f"  control: {control.link} (the token is also in {control.token_path})")
    try:
        await stop.wait()
    finally:
        server.close()
        await control.stop()


def run_replay(
    settings: ReplaySettings, trace: Trace, *, announce: Callable[[str], None] = print
) -> None:
    asyncio.run(serve_replay(settings, trace, announce=announce))


__all__ = [
    "ReplayEndpoint",
    "ReplayError",
    "ReplaySettings",
    "TraceError",
    "create_replay_app",
    "load_replay",
    "recorded_vm",
    "replay_clock",
    "replay_service",
    "run_replay",
    "serve_replay",
]
