"""The fleet-wide campaign of :mod:`bench.scale`, with three front-ends sharing one fleet.

The same scenario (every VM gets one Reboot, reads it, approves it, and the event runs to its
end), but the fleet is served by three front-ends on one PostgreSQL namespace
(docs/scale-out.md), each opened as ``forewarn serve --store postgresql://...`` opens it, in
this process: VM ``i`` talks to front-end ``i mod 3``'s endpoint. Every state change is then a
transaction under the namespace's lock, so the figure is what sharing a fleet costs per VM;
:func:`bench.scale.run_campaign` at the same size runs beside it, so the two are a ratio
measured in one run. The front-ends read each other's records explicitly (their background
followers are not running), before each VM's turn.

Run: ``python -m bench --only cluster-campaign`` (``--sizes`` picks the fleet sizes).
"""

from __future__ import annotations

import secrets
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from bench.fleetgen import fleet_vms, write_fleet
from bench.propagation import forget_namespace
from bench.scale import DESCRIPTION, ScenarioError, ask, run_campaign
from forewarn.commands import ScheduleEvent
from forewarn.domain.events import EventSource, EventType
from forewarn.server.imds import ImdsEndpoint
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, open_state

FRONT_ENDS = 3


@dataclass(frozen=True)
class ClusterCampaignResult:
    vms: int
    front_ends: int
    campaign_seconds: float
    per_vm_microseconds: float
    journal_records: int
    single_process_seconds: float
    #: The shared fleet's time over one process's, for the same campaign.
    ratio_to_single_process: float


class _FrontEnd:
    def __init__(self, state: OpenedState) -> None:
        self.state = state
        started = time.monotonic()
        # the rate limit on the scenario's own time: no request refused for coming too fast
        self.endpoint = ImdsEndpoint(state.service, monotonic=lambda: time.monotonic() - started)

    def follow(self) -> None:
        assert self.state.replica is not None
        self.state.replica.catch_up()

    def request(self, address: str, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
        return ask(self.endpoint, address, method, body)


def _events(front_end: _FrontEnd, address: str) -> list[dict[str, Any]]:
    status, body = front_end.request(address)
    if status != 200:
        raise ScenarioError(f"{address}: GET answered {status}: {body!r}")
    events: list[dict[str, Any]] = orjson.loads(body)["Events"]
    return events


def run_cluster_campaign(count: int, postgres_url: str) -> ClusterCampaignResult:
    """Every VM of a ``count``-VM fleet shared by three front-ends gets, approves and
    finishes one Reboot event; the same campaign in one process runs beside it."""
    single = run_campaign(count).campaign_seconds
    namespace = f"bench_cluster_{secrets.token_hex(6)}"
    store = f"{postgres_url}?namespace={namespace}"
    vms = fleet_vms(count)
    with tempfile.TemporaryDirectory() as work:
        fleet = Path(work) / "fleet.yaml"
        write_fleet(count, fleet)
        states = [
            open_state(ServeSettings(fleet=fleet, clock="manual", store=store, seed=2024))
            for _ in range(FRONT_ENDS)
        ]
        try:
            front_ends = [_FrontEnd(state) for state in states]
            first = front_ends[0]
            began = time.perf_counter()
            event_of: dict[str, str] = {}
            for vm in vms:
                command = ScheduleEvent(
                    EventType.REBOOT.value,
                    (vm.name,),
                    source=EventSource.PLATFORM.value,
                    description=DESCRIPTION,
                )
                (event,) = first.state.service.execute(command)
                event_of[vm.name] = event.event_id
            for index, vm in enumerate(vms):
                serving = front_ends[index % FRONT_ENDS]
                serving.follow()
                address = vm.address or ""
                events = _events(serving, address)
                if [e["EventId"] for e in events] != [event_of[vm.name]]:
                    raise ScenarioError(f"{vm.name} was shown {events}, not its own event")
                body = orjson.dumps({"StartRequests": [{"EventId": events[0]["EventId"]}]})
                status, answer = serving.request(address, "POST", body)
                if status != 200:
                    raise ScenarioError(f"{vm.name}: approval answered {status}: {answer!r}")
            # past every reboot and every Started period: the events are gone everywhere
            first.state.service.advance_clock(timedelta(hours=1))
            for front_end in front_ends:
                front_end.follow()
                if front_end.state.service.events():
                    raise ScenarioError("events outlived their Started period")
            campaign = time.perf_counter() - began
            assert states[0].replica is not None
            records = states[0].replica.head
        finally:
            for state in states:
                state.service.close()
            forget_namespace(postgres_url, namespace)
    return ClusterCampaignResult(
        vms=count,
        front_ends=FRONT_ENDS,
        campaign_seconds=campaign,
        per_vm_microseconds=campaign / count * 1e6,
        journal_records=records,
        single_process_seconds=single,
        ratio_to_single_process=campaign / single,
    )
