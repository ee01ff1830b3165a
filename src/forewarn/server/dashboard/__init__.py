"""The live dashboard at ``/`` on the control port: the fleet, the events, each VM's timeline,
and every operation as a form.

Plain HTML, CSS and JavaScript shipped inside the package (no build step, no CDN: it works
offline). The page learns what changed from one server-sent-events stream
(``/api/v1/stream``), which sends a snapshot only when it differs from the last one, so an
open page costs a comparison twice a second rather than a request storm. Its actions are
built from ``GET /api/v1/operations`` (:mod:`forewarn.registry`), so a new operation appears
on the page without touching it. The control guard (:mod:`forewarn.server.control_guard`)
decides who may load it; every call it makes is same-origin, carrying the guard's cookie.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool

from forewarn.defaults import CONTROL_API
from forewarn.domain.errors import InvalidOperationError
from forewarn.errors import InvalidInputError
from forewarn.eventgrid.delivery import EventGrid
from forewarn.faults import FaultKind
from forewarn.scenario.flows import (
    FLOWS,
    Candidate,
    FlowError,
    choose_target,
    described,
    find_flow,
)
from forewarn.scenario.schema import MAX_SCENARIO_BYTES, Scenario, ScenarioFileError, parse_scenario
from forewarn.scenario.steps import MANUAL_CLOCK
from forewarn.server._activity import Activity
from forewarn.server._control_faults import fault_out
from forewarn.server._control_models import campaign_out, clock_out, event_out, vm_out
from forewarn.server.azure.eventgrid import subscription_out
from forewarn.server.dashboard._scenarios import ScenarioRuns
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError

__all__ = ["ScenarioIn", "add_dashboard", "snapshot"]


class ScenarioIn(BaseModel):
    """A scenario file's YAML, or a built-in flow by name (with its VM and timing)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    scenario: str | None = Field(
        default=None, description="A scenario file's YAML text", max_length=1024 * 1024
    )
    builtin: str | None = Field(
        default=None, description="A built-in flow's name (GET /api/v1/flows)", max_length=64
    )
    vm: str | None = Field(
        default=None,
        description="The flow's VM (default: the first it fits that is shown no event)",
        max_length=128,
    )
    dev_timing: bool = Field(
        default=False, alias="devTiming", description="The flow's minutes read as seconds"
    )

    @model_validator(mode="after")
    def _one_of(self) -> ScenarioIn:
        if (self.scenario is None) == (self.builtin is None):
            raise ValueError("give either scenario (YAML) or builtin (a flow's name)")
        if self.builtin is None and (self.vm is not None or self.dev_timing):
            raise ValueError("vm and devTiming go with builtin")
        return self


#: How often, in real time, the stream looks for a change to send.
STREAM_INTERVAL = 0.5
#: A comment line this often keeps proxies and the browser from closing an idle stream.
_KEEPALIVE = 15.0
#: The most VMs a snapshot lists: the page is for people, ``GET /api/v1/vms`` has them all.
SHOWN_VMS = 500
_ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


def _asset(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()


def snapshot(
    service: ScheduledEventsService,
    activity: Activity,
    runs: ScenarioRuns | None = None,
    eventgrid: EventGrid | None = None,
) -> dict[str, Any]:
    """Everything the page shows but the timelines, as one JSON-ready value."""
    moment = time.monotonic()  # faults count real time: clients retry in real time
    overview = service.overview(SHOWN_VMS, moment)
    vms = []
    for shown_vm in overview.vms:
        name = shown_vm.state.vm.name
        shown = vm_out(shown_vm.state).model_dump(by_alias=True, mode="json", exclude={"compute"})
        shown["incarnation"] = shown_vm.incarnation
        shown["requests"] = activity.requests(name)
        vms.append(shown)
    return {
        "clock": clock_out(overview.clock).model_dump(by_alias=True, mode="json"),
        "vmCount": overview.vm_count,
        "vms": vms,
        "events": [
            event_out(view.event, view).model_dump(by_alias=True, mode="json")
            for view in overview.events
        ],
        "campaigns": [
            campaign_out(view).model_dump(by_alias=True, mode="json") for view in overview.campaigns
        ],
        "scenarios": [] if runs is None else runs.views(),
        "faultKinds": [kind.value for kind in FaultKind],
        "faults": [fault_out(fault, moment).model_dump(mode="json") for fault in overview.faults],
        "eventGrid": []
        if eventgrid is None
        else [
            subscription_out(view).model_dump(by_alias=True, mode="json")
            for view in eventgrid.views
        ],
    }


def _flow(service: ScheduledEventsService, body: ScenarioIn) -> Scenario:
    """The built-in flow ``body`` names, for its VM of this service's fleet."""
    assert body.builtin is not None
    try:
        flow = find_flow(body.builtin)
        candidates = [Candidate.from_vm(vm) for vm in service.vms()]

        def shown(name: str) -> list[str]:
            events = service.document(name).events
            return described((e.event_type.value, e.status.value, e.event_id) for e in events)

        target = choose_target(flow, candidates, body.vm, shown)
        exact = service.clock_status().kind == MANUAL_CLOCK
        return flow.scenario(target, dev_timing=body.dev_timing, exact=exact)
    except FlowError as exc:
        raise InvalidInputError(str(exc)) from None


def add_dashboard(
    app: FastAPI,
    service: ScheduledEventsService,
    activity: Activity,
    *,
    runs: ScenarioRuns | None = None,
    eventgrid: EventGrid | None = None,
) -> None:
    """The page, its assets, its stream and the timelines, on ``app``."""

    page = APIRouter(include_in_schema=False)

    @page.get("/")
    async def dashboard() -> Response:
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8")

    @page.get("/dashboard/{name}")
    async def asset(name: str) -> Response:
        media_type = _ASSETS.get(name)
        if media_type is None:
            return Response(status_code=404)
        return Response(_asset(name), media_type=media_type)

    api = APIRouter(prefix=CONTROL_API, tags=["dashboard"])

    @api.get("/vms/{name}/activity")
    async def vm_activity(name: str) -> dict[str, Any]:
        """The VM's last requests and the documents it was shown, oldest first."""
        service.vm(name)  # 404 for an unknown VM
        return {"vm": name, "entries": [entry.to_json() for entry in activity.of(name)]}

    scenario_runs = runs or ScenarioRuns(None)

    @api.get("/flows")
    async def list_flows() -> dict[str, Any]:
        """The built-in flows (``forewarn scenario list``), which ``POST /scenarios`` runs by
        name."""
        return {"flows": [flow.describe() for flow in FLOWS]}

    @api.post("/scenarios", status_code=202)
    async def run_scenario_file(body: ScenarioIn) -> dict[str, Any]:
        """Run a scenario (the YAML of a scenario file, or a built-in flow by name) against
        this server; its progress is in the dashboard's stream."""
        if not scenario_runs.available:
            raise InvalidOperationError("scenarios run from here only under forewarn serve")
        if body.builtin is not None:
            return scenario_runs.start(_flow(service, body))
        assert body.scenario is not None
        if len(body.scenario.encode()) > MAX_SCENARIO_BYTES:
            raise InvalidInputError(f"the scenario is larger than {MAX_SCENARIO_BYTES} bytes")
        try:  # on a worker thread: this loop answers every VM, and a file takes a while
            scenario = await run_in_threadpool(parse_scenario, body.scenario, "<dashboard>")
        except ScenarioFileError as exc:
            raise InvalidInputError(str(exc)) from None
        return scenario_runs.start(scenario)

    @api.get("/stream", include_in_schema=False)
    async def stream(request: Request) -> StreamingResponse:
        """Server-sent events: a ``snapshot`` event whenever what the page shows changes."""

        async def snapshots() -> AsyncIterator[str]:
            last = ""
            quiet = 0.0
            while not await request.is_disconnected():
                try:
                    shown = snapshot(service, activity, scenario_runs, eventgrid)
                except StoreUnavailableError:  # being rebuilt from its journal: the last stays
                    data = last
                else:
                    data = json.dumps(shown, separators=(",", ":"))
                if data != last:
                    last, quiet = data, 0.0
                    yield f"event: snapshot\ndata: {data}\n\n"
                elif quiet >= _KEEPALIVE:
                    quiet = 0.0
                    yield ": still here\n\n"
                await asyncio.sleep(STREAM_INTERVAL)
                quiet += STREAM_INTERVAL

        return StreamingResponse(
            snapshots(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    app.include_router(page)
    app.include_router(api)
