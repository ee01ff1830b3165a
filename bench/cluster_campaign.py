"""The fleet-wide campaign of :mod:`bench.scale`, with three front-ends sharing one fleet.

The same scenario (every VM gets one Reboot, reads it, approves it, and the event runs to its
end), but the fleet is served by three front-ends on one PostgreSQL namespace
(docs/scale-out.md), each opened as ``forewarn serve --store postgresql://...`` opens it, in
this process: VM ``i`` talks to front-end ``i mod 3``'s endpoint, made as serve makes it
(approvals answered later, once committed with the others of their turn of the event loop).
Every state change is then a transaction under the namespace's lock, so the figure is what
sharing a fleet costs per VM; :func:`bench.scale.run_campaign` at the same size runs beside
it, so the two are a ratio measured in one run, phase by phase too (:data:`CAMPAIGN_PHASES`).

How the phases reach the journal, as they reach it in serve:

- **schedule**: one operation of the control plane per VM (``POST /events`` naming that VM),
  all asked for at once, through the first front-end, which journals them as it journals the
  control API's concurrent operations: together, at most
  :data:`~forewarn.cluster.replica.MAX_GROUP` to a transaction and one ``group`` record each
  (``ScheduledEventsService.execute_soon``); the other two apply the records (what their
  followers do meanwhile in serve). The control plane has no one operation for this
  campaign: ``events create`` for a set makes one event for all its VMs, and a maintenance
  campaign goes one fault domain at a time, each step one job whose events start together;
  here each VM gets a Reboot of its own that starts on its own approval, as in
  :func:`bench.scale.run_campaign`, so the scenario asks for one per VM.
- **read and approve**: VMs arrive :data:`APPROVALS_PER_TURN` to a front-end and a turn. Each
  reads its document (its own event, Scheduled); then their approvals are handed to the
  endpoint as serve's connection layer hands the requests read in one turn of its event loop
  (:meth:`~forewarn.server.imds.ImdsEndpoint.respond`, whose answer comes
  :attr:`~forewarn.server.imds.ImdsResponse.later`), so they are journaled in one transaction
  and one record per front-end once that turn's callbacks have run (``Replica.write_soon``),
  and each VM is
  answered ``200`` only once it committed; each is then found rebooting.
- **Started**, then **gone**: one clock move each (a journaled record), then one request a VM.

Before each turn every front-end reads what the others appended (their background followers
are not running, and they are not registered as live front-ends, so a write does not wait for
the others to apply it: in serve that is one query more per transaction when they have,
measured by ``python -m bench --only propagation``).

Run: ``python -m bench --only cluster-campaign`` (``--cluster-sizes`` picks the fleet sizes,
``--approvals-per-turn`` the group).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench.fleetgen import fleet_vms, write_fleet
from bench.propagation import forget_namespace
from bench.scale import (
    CAMPAIGN_PHASES,
    DESCRIPTION,
    CampaignResult,
    ScenarioError,
    ask,
    collector_restored,
    request,
    run_campaign,
)
from forewarn.collector import settle_heap
from forewarn.commands import Result, ScheduleEvent
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.vms import Vm
from forewarn.server.imds import ImdsEndpoint, ImdsResponse
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, open_state

FRONT_ENDS = 3

#: The VMs whose approvals one front-end reads in one turn of its event loop, and so commits
#: in one transaction. A front-end reads, in each turn, every request that arrived while the
#: last turn ran, and a turn with a group in it waits on PostgreSQL for the group's commit
#: (milliseconds: the flush to disk). A campaign reaching a 100,000-VM fleet on three
#: front-ends gives each about 33,000 VMs, polling once a second and spread over the second,
#: so about 33 approvals arrive a millisecond, and the 2 to 3 ms one group's write waits on
#: PostgreSQL (three round trips and the commit's flush: the schedule step's cost per VM is
#: one such write alone) gathers 66 to 100.
#: A smaller fleet, or a campaign spread over more time, makes smaller groups (1: the VMs
#: arrive one after another, each approval its own transaction).
APPROVALS_PER_TURN = 100


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
    #: The approvals each front-end read in one turn of its event loop (APPROVALS_PER_TURN).
    approvals_per_turn: int
    #: The transactions that wrote the campaign's records (one per MAX_GROUP scheduled
    #: events, one per front-end and turn of approvals, one per clock move).
    journal_transactions: int
    #: The campaign's steps (bench.scale.CAMPAIGN_PHASES): seconds each, shared and in one
    #: process.
    phase_seconds: dict[str, float]
    single_process_phase_seconds: dict[str, float]


class _FrontEnd:
    def __init__(self, state: OpenedState) -> None:
        self.state = state
        started = time.monotonic()
        # as forewarn serve makes it on a shared journal; the rate limit on the scenario's
        # own time: no request refused for coming too fast
        self.endpoint = ImdsEndpoint(
            state.service,
            monotonic=lambda: time.monotonic() - started,
            group_writes=state.replica is not None,
        )

    def follow(self) -> None:
        """Apply what the others appended, a page read at a time as serve's follower reads
        them, not in one read bounded as a write (``Replica.catch_up``): 100,000 records
        take longer than a write's bound to decode on a loaded core."""
        replica = self.state.replica
        assert replica is not None
        replica.apply_fetched(replica.journal.records(after=replica.head))

    def request(self, address: str, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
        return ask(self.endpoint, address, method, body)

    def approve_later(
        self, vm: Vm, event_id: str, loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[ImdsResponse | Exception]:
        """``vm``'s approval handed over as serve's connection hands a request whose answer
        waits for a write: its answer, once its group committed."""
        body = orjson.dumps({"StartRequests": [{"EventId": event_id}]})
        response = self.endpoint.respond(request(vm.address or "", "POST", body)).response
        answered: asyncio.Future[ImdsResponse | Exception] = loop.create_future()
        if response.later is None:  # answered now (refused before any write)
            answered.set_result(response)
        else:
            response.later(answered.set_result)
        return answered


def _events(front_end: _FrontEnd, vm: Vm) -> list[dict[str, Any]]:
    status, body = front_end.request(vm.address or "")
    if status != 200:
        raise ScenarioError(f"{vm.name}: GET answered {status}: {body!r}")
    events: list[dict[str, Any]] = orjson.loads(body)["Events"]
    return events


async def _approve_in_turns(
    front_ends: list[_FrontEnd], vms: Sequence[Vm], event_of: dict[str, str], per_turn: int
) -> None:
    """Each VM reads its event and approves it, ``per_turn`` approvals to a front-end and a
    turn of the event loop; each is answered 200 once committed, then found rebooting."""
    loop = asyncio.get_running_loop()
    stride = per_turn * len(front_ends)
    for first in range(0, len(vms), stride):
        turn = [
            (front_ends[index % len(front_ends)], vms[index])
            for index in range(first, min(first + stride, len(vms)))
        ]
        for front_end in front_ends:
            front_end.follow()
        for front_end, vm in turn:
            events = _events(front_end, vm)
            if [e["EventId"] for e in events] != [event_of[vm.name]]:
                raise ScenarioError(f"{vm.name} was shown {events}, not its own event")
            if events[0]["EventStatus"] != "Scheduled":
                raise ScenarioError(f"{vm.name}: event is {events[0]['EventStatus']} before")
        # one turn: every approval handed over before any is written
        answers = [front_end.approve_later(vm, event_of[vm.name], loop) for front_end, vm in turn]
        for (front_end, vm), answered in zip(turn, answers, strict=True):
            answer = await answered
            if isinstance(answer, Exception) or answer.status != 200:
                raise ScenarioError(f"{vm.name}: approval answered {answer!r}")
            # Approved by its only party, the Reboot starts at once: nothing inside answers.
            status, _ = front_end.request(vm.address or "")
            if status != 0:
                raise ScenarioError(f"{vm.name}: answered {status} while rebooting")


async def _schedule(front_end: _FrontEnd, vms: Sequence[Vm]) -> dict[str, str]:
    """Every VM's Reboot, asked of the control plane at once, as the platform schedules a
    campaign: handed to the service as the control API's handlers hand concurrent
    operations (``execute_soon``), so they are journaled together, ``MAX_GROUP`` to a
    transaction. The EventId each VM was answered."""
    service = front_end.state.service
    answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    event_of: dict[str, str] = {}

    def done(vm: Vm, outcome: Result | Exception) -> None:
        if isinstance(outcome, Exception):
            if not answered.done():
                answered.set_exception(ScenarioError(f"{vm.name}: not scheduled: {outcome!r}"))
            return
        (event,) = outcome
        event_of[vm.name] = event.event_id
        if len(event_of) == len(vms) and not answered.done():
            answered.set_result(None)

    for vm in vms:
        command = ScheduleEvent(
            EventType.REBOOT.value,
            (vm.name,),
            source=EventSource.PLATFORM.value,
            description=DESCRIPTION,
        )
        service.execute_soon(command, functools.partial(done, vm))
    await answered
    return event_of


def _transactions(postgres_url: str, namespace: str) -> int:
    """The transactions that wrote the namespace's records."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT xmin::text) FROM public.forewarn_records WHERE namespace = %s",
            [namespace],
        ).fetchone()
    assert row is not None
    return int(row[0])


def run_cluster_campaign(
    count: int, postgres_url: str, approvals_per_turn: int = APPROVALS_PER_TURN
) -> ClusterCampaignResult:
    """Every VM of a ``count``-VM fleet shared by three front-ends gets, approves and
    finishes one Reboot event, ``approvals_per_turn`` approvals to a front-end and a turn of
    its event loop; the same campaign in one process runs beside it."""
    if approvals_per_turn < 1:
        raise ValueError("at least one approval a turn")
    single = run_campaign(count)
    with collector_restored():
        return _run_shared(count, postgres_url, approvals_per_turn, single)


def _run_shared(
    count: int, postgres_url: str, approvals_per_turn: int, single: CampaignResult
) -> ClusterCampaignResult:
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
            # what forewarn serve does once its state is built (each front-end's process
            # would), so no collection walks the fleets during a write (collector_restored
            # gives the process its collector back after)
            settle_heap()
            first = front_ends[0]
            assert first.state.replica is not None
            timing = first.state.replica.platform.timing
            marks: list[float] = []
            began = time.perf_counter()
            event_of = asyncio.run(_schedule(first, vms))
            for front_end in front_ends:  # as their followers apply the records meanwhile
                front_end.follow()
            marks.append(time.perf_counter())
            asyncio.run(_approve_in_turns(front_ends, vms, event_of, approvals_per_turn))
            marks.append(time.perf_counter())
            # Back from the reboot every VM is shown its event Started, NotBefore "".
            first.state.service.advance_clock(timing.impact)
            for front_end in front_ends:
                front_end.follow()
            for index, vm in enumerate(vms):
                events = _events(front_ends[index % FRONT_ENDS], vm)
                if [(e["EventStatus"], e["NotBefore"]) for e in events] != [("Started", "")]:
                    raise ScenarioError(f"{vm.name}: after its reboot it is shown {events}")
            marks.append(time.perf_counter())
            # past every Started period: the events are gone everywhere
            first.state.service.advance_clock(timing.started_period)
            for front_end in front_ends:
                front_end.follow()
                if front_end.state.service.events():
                    raise ScenarioError("events outlived their Started period")
            for index, vm in enumerate(vms):
                if events := _events(front_ends[index % FRONT_ENDS], vm):
                    raise ScenarioError(f"{vm.name}: after the campaign it is shown {events}")
            marks.append(time.perf_counter())
            campaign = marks[-1] - began
            records = first.state.replica.head
            transactions = _transactions(postgres_url, namespace)
        finally:
            for state in states:
                state.service.close()
            forget_namespace(postgres_url, namespace)
    starts = [began, *marks[:-1]]
    return ClusterCampaignResult(
        vms=count,
        front_ends=FRONT_ENDS,
        campaign_seconds=campaign,
        per_vm_microseconds=campaign / count * 1e6,
        journal_records=records,
        single_process_seconds=single.campaign_seconds,
        ratio_to_single_process=campaign / single.campaign_seconds,
        approvals_per_turn=approvals_per_turn,
        journal_transactions=transactions,
        phase_seconds={
            phase: end - start
            for phase, start, end in zip(CAMPAIGN_PHASES, starts, marks, strict=True)
        },
        single_process_phase_seconds=single.phase_seconds,
    )
