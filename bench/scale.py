"""The fleet-scale scenarios, in process on a manual clock: no sockets, no sleeping.

A platform maintenance campaign across the whole fleet: every VM gets an event, reads it,
approves it, and the event runs to its end (Started, then removed after the timing profile's
Started period). Each VM talks to the same :class:`~forewarn.server.imds.ImdsEndpoint` the
socket server calls, so every check of the endpoint runs on every request. Only the platform's
public methods drive it (``schedule``, ``approve`` through the endpoint, ``advance_to``
through the service, ``document``), so the scenario keeps working while the domain grows.

Run at 1k, 10k, 100k and 300k VMs (``--sizes``), the cost per VM shows whether it stays flat.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.fleetgen import fleet_vms
from forewarn.collector import settle_heap
from forewarn.domain.api_versions import find_version
from forewarn.domain.clock import ManualClock
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm
from forewarn.server.imds import (
    SCHEDULED_EVENTS_PATH,
    Checked,
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
)
from forewarn.service import ScheduledEventsService

START = datetime(2024, 4, 11, 22, 0, 0, tzinfo=UTC)
API_VERSION = "2020-07-01"
QUERY = f"api-version={API_VERSION}"
HEADERS = {"host": "169.254.169.254", "metadata": "true"}
#: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties": "Host
#: server is undergoing maintenance."
DESCRIPTION = "Host server is undergoing maintenance."


class ScenarioError(AssertionError):
    """The system did something other than what the scenario requires: no figure is valid."""


@dataclass(frozen=True)
class CampaignResult:
    vms: int
    setup_seconds: float
    campaign_seconds: float
    campaign_cpu_seconds: float
    per_vm_microseconds: float
    requests: int
    documents_rebuilt_after_one_change: int
    peak_open_events: int
    #: Of campaign_seconds, the garbage collector's (what a campaign leaves alive is walked
    #: again by each collection: the part of the cost that grows with the fleet by design)
    collector_seconds: float
    #: Collections of generations 0, 1 and 2 while the campaign ran.
    collections: tuple[int, int, int]
    #: The campaign's steps (CAMPAIGN_PHASES): seconds each, and the collector's of those.
    phase_seconds: dict[str, float]
    phase_collector_seconds: dict[str, float]


@dataclass(frozen=True)
class MemoryResult:
    vms: int
    bytes_total: int
    bytes_per_idle_vm: float


class _Fleet:
    """A platform, its service and endpoint, on a manual clock the scenario moves."""

    def __init__(self, vms: list[Vm]) -> None:
        self.clock = ManualClock(START)
        self.platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(2024))
        for vm in vms:
            self.platform.add_vm(vm)
        self.service = ScheduledEventsService(self.platform, self.clock)
        # The rate limiter runs on the same manual time, so no request is refused for arriving
        # faster than a real second allows.
        self.endpoint = ImdsEndpoint(
            self.service, monotonic=functools.partial(_seconds, self.clock)
        )
        self.vms = vms
        # The socket server parses each distinct request once, for every connection sending
        # its bytes, and keeps what the endpoint decided from them alone with it
        # (ImdsRequest.checked): every VM's poll is the same bytes, so it is checked once.
        self._poll_checked: ImdsResponse | Checked | None = None
        # What forewarn serve does once its state is built, so the figures are its process's.
        # Nothing here may hold a reference cycle: frozen, it would outlive the scenario.
        settle_heap()

    def request(self, vm: Vm, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
        if method != "GET":  # each approval's body is its own: checked as it comes
            return ask(self.endpoint, vm.address or "", method, body)
        request = _request(vm.address or "", method, body, self._poll_checked)
        response = self.endpoint.respond(request).response
        self._poll_checked = request.checked
        return response.status, response.body


def _seconds(clock: ManualClock) -> float:
    return (clock.now() - START).total_seconds()


def ask(
    endpoint: ImdsEndpoint, address: str, method: str = "GET", body: bytes = b""
) -> tuple[int, bytes]:
    """One request of the VM at ``address`` to ``endpoint``, handed over as the socket server
    hands it (:meth:`~forewarn.server.imds.ImdsEndpoint.respond`)."""
    response = endpoint.respond(request(address, method, body)).response
    return response.status, response.body


def request(address: str, method: str = "GET", body: bytes = b"") -> ImdsRequest:
    """The request of the VM at ``address`` as the socket server builds it from its bytes."""
    return _request(address, method, body, None)


def _request(
    address: str, method: str, body: bytes, checked: ImdsResponse | Checked | None
) -> ImdsRequest:
    """The request the socket server builds for these bytes arriving at ``address``, with
    what the endpoint already decided from the same bytes, if anything."""
    return ImdsRequest(
        method=method,
        path=SCHEDULED_EVENTS_PATH,
        query=QUERY,
        headers=HEADERS,
        body=body,
        local_address=address,
        peer_address="127.0.0.1",
        checked=checked,
    )


def _document(fleet: _Fleet, vm: Vm) -> dict[str, Any]:
    status, body = fleet.request(vm)
    if status != 200:
        raise ScenarioError(f"{vm.name}: GET answered {status}: {body!r}")
    document: dict[str, Any] = orjson.loads(body)
    return document


class _CollectorTime:
    """Seconds spent in the garbage collector, and its collections by generation, while it is
    one of :data:`gc.callbacks`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    def stop(self) -> None:
        """Count no more: what is timed ends here."""
        if self in gc.callbacks:
            gc.callbacks.remove(self)


@contextlib.contextmanager
def _collector_timed() -> Iterator[_CollectorTime]:
    timer = _CollectorTime()
    gc.callbacks.append(timer)
    try:
        yield timer
    finally:
        timer.stop()


@contextlib.contextmanager
def collector_restored() -> Iterator[None]:
    """The garbage collector as it was before a scenario settled the heap as serve does, so
    the process running the scenario (a test run, the next scenario) is left as it was."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def run_campaign(count: int) -> CampaignResult:
    """Every VM of a ``count``-VM fleet gets, approves and finishes one Reboot event."""
    with collector_restored():
        started = time.perf_counter()
        fleet = _Fleet(fleet_vms(count))
        setup = time.perf_counter() - started
        with _collector_timed() as collector:
            return _campaign(fleet, setup, collector)


#: The steps of a campaign, timed apart: where its time per VM goes.
CAMPAIGN_PHASES = (
    "schedule every VM's event",
    "each VM reads it, approves it, is rebooting (3 requests)",
    "each VM back, shown it Started (1 request)",
    "events removed, each VM shown none (1 request)",
)


def _campaign(fleet: _Fleet, setup: float, collector: _CollectorTime) -> CampaignResult:
    count = len(fleet.vms)
    platform, clock, service = fleet.platform, fleet.clock, fleet.service
    timing = platform.timing
    requests = 0
    # (perf_counter, the collector's seconds) as each phase ends
    marks: list[tuple[float, float]] = []

    began = time.perf_counter()
    began_cpu = time.process_time()
    # Kept in the fleet's order rather than by name: one list, not another table of every VM.
    event_ids = [
        platform.schedule(
            EventType.REBOOT, (vm.name,), source=EventSource.PLATFORM, description=DESCRIPTION
        ).event_id
        for vm in fleet.vms
    ]
    peak = len(platform.events())
    marks.append((time.perf_counter(), collector.seconds))

    for vm, event_id in zip(fleet.vms, event_ids, strict=True):
        document = _document(fleet, vm)
        events = document["Events"]
        if [e["EventId"] for e in events] != [event_id]:
            raise ScenarioError(f"{vm.name} was shown {events}, not its own event")
        if events[0]["EventStatus"] != "Scheduled":
            raise ScenarioError(f"{vm.name}: event is {events[0]['EventStatus']} before approval")
        body = orjson.dumps({"StartRequests": [{"EventId": events[0]["EventId"]}]})
        status, answer = fleet.request(vm, "POST", body)
        if status != 200:
            raise ScenarioError(f"{vm.name}: approval answered {status}: {answer!r}")
        # Approved by its only party, the Reboot starts at once: the very next request finds
        # the VM rebooting, so nothing inside it gets an answer.
        status, _ = fleet.request(vm)
        if status != 0:
            raise ScenarioError(f"{vm.name}: answered {status} while rebooting")
        requests += 3
    marks.append((time.perf_counter(), collector.seconds))

    # Back from the reboot every VM is shown its event Started, NotBefore "".
    clock.advance(timing.impact)
    for vm in fleet.vms:
        events = _document(fleet, vm)["Events"]
        if [(e["EventStatus"], e["NotBefore"]) for e in events] != [("Started", "")]:
            raise ScenarioError(f"{vm.name}: after its reboot it is shown {events}")
        requests += 1
    marks.append((time.perf_counter(), collector.seconds))

    # After the Started period every event is removed on the clock alone.
    clock.advance(timing.started_period)
    service.catch_up()
    if platform.events():
        raise ScenarioError(f"{len(platform.events())} events outlived their Started period")
    bodies: list[bytes] = []
    for vm in fleet.vms:
        status, body = fleet.request(vm)
        if status != 200 or orjson.loads(body)["Events"] != []:
            raise ScenarioError(f"{vm.name}: after the campaign it is shown {status} {body!r}")
        bodies.append(body)
        requests += 1
    campaign = time.perf_counter() - began
    campaign_cpu = time.process_time() - began_cpu
    collector.stop()
    marks.append((began + campaign, collector.seconds))
    starts = [(began, 0.0), *marks[:-1]]

    # One more change for one VM: only that VM's document may be encoded again.
    first = fleet.vms[0]
    platform.schedule(EventType.FREEZE, (first.name,), source=EventSource.PLATFORM)
    rebuilt = 0
    for vm, before in zip(fleet.vms, bodies, strict=True):
        status, body = fleet.request(vm)
        if body is not before:
            rebuilt += 1
    if rebuilt != 1:
        raise ScenarioError(f"{rebuilt} documents were encoded again after one VM's change")
    return CampaignResult(
        vms=count,
        setup_seconds=setup,
        campaign_seconds=campaign,
        campaign_cpu_seconds=campaign_cpu,
        per_vm_microseconds=campaign / count * 1e6,
        requests=requests,
        documents_rebuilt_after_one_change=rebuilt,
        peak_open_events=peak,
        collector_seconds=collector.seconds,
        collections=(collector.collections[0], collector.collections[1], collector.collections[2]),
        phase_seconds={
            phase: end[0] - start[0]
            for phase, start, end in zip(CAMPAIGN_PHASES, starts, marks, strict=True)
        },
        phase_collector_seconds={
            phase: end[1] - start[1]
            for phase, start, end in zip(CAMPAIGN_PHASES, starts, marks, strict=True)
        },
    )


def measure_idle_memory(count: int) -> MemoryResult:
    """Bytes the process holds per VM that exists and polls, but has no events.

    Each VM makes one request first, so what a polling VM costs (its rate-limit bucket, its
    cached encoded document) is counted along with the VM itself.
    """
    with collector_restored():
        return _idle_memory(count)


def _idle_memory(count: int) -> MemoryResult:
    version = find_version(API_VERSION)
    assert version is not None
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fleet = _Fleet(fleet_vms(count))
        for vm in fleet.vms:
            status, _ = fleet.request(vm)
            if status != 200:
                raise ScenarioError(f"{vm.name}: GET answered {status}")
        gc.collect()
        total = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del fleet
    return MemoryResult(vms=count, bytes_total=total, bytes_per_idle_vm=total / count)


def grouped_schedule_cost(count: int, events: int = 200) -> float:
    """CPU microseconds to schedule one event when VMs are in availability sets of 10.

    Everyone in a set sees its members' events
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "All the VMs
    in an availability set"), so a campaign over a grouped fleet schedules events there; their cost
    must not grow with the size of the fleet.
    """
    with collector_restored():
        return _grouped_schedule_cost(count, events)


def _grouped_schedule_cost(count: int, events: int) -> float:
    vms = [
        replace(vm, availability_set=f"set{index // 10:06d}")
        for index, vm in enumerate(fleet_vms(count))
    ]
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(7))
    for vm in vms:
        platform.add_vm(vm)
    settle_heap()  # as forewarn serve does once its fleet is built
    events = min(events, count)
    step = count // events
    began = time.process_time()
    for index in range(events):
        platform.schedule(
            EventType.REBOOT,
            (vms[index * step].name,),
            source=EventSource.PLATFORM,
            description=DESCRIPTION,
        )
    return (time.process_time() - began) / events * 1e6


#: VMs' worth of campaigns run at each size at least, in rounds of the size: a campaign of
#: 1,000 VMs lasts some 50 ms, where one interruption moves its figure by a tenth.
CAMPAIGN_VMS_PER_SIZE = 30_000
#: Rounds at most of a size's campaign, and of scheduling events in availability sets.
MOST_ROUNDS = 9
GROUPED_ROUNDS = 5


def campaign_rounds(count: int) -> int:
    """How many campaigns of ``count`` VMs make one figure (its median): an odd number, so
    the median is a round that ran."""
    rounds = max(1, min(MOST_ROUNDS, CAMPAIGN_VMS_PER_SIZE // count))
    return rounds if rounds % 2 else rounds - 1


def _without_collector(result: CampaignResult) -> float:
    """Microseconds per VM of a campaign, less the collector's."""
    return (result.campaign_seconds - result.collector_seconds) / result.vms * 1e6


def scale_results(sizes: list[int]) -> dict[str, Any]:
    """Campaign and memory at each fleet size, plus how the cost per VM grows; each cost the
    median of its rounds, every round's figure kept beside it."""
    campaigns = []
    campaign_rounds_us: dict[str, list[float]] = {}
    for size in sizes:
        rounds = sorted(
            (run_campaign(size) for _ in range(campaign_rounds(size))),
            key=lambda result: result.per_vm_microseconds,
        )
        campaigns.append(rounds[len(rounds) // 2])
        campaign_rounds_us[str(size)] = [result.per_vm_microseconds for result in rounds]
    memory = [measure_idle_memory(size) for size in sizes]
    grouped_rounds = {
        str(size): sorted(grouped_schedule_cost(size) for _ in range(GROUPED_ROUNDS))
        for size in sizes
    }
    grouped = [statistics.median(rounds) for rounds in grouped_rounds.values()]
    smallest, largest = campaigns[0], campaigns[-1]
    return {
        "campaigns": [asdict(c) for c in campaigns],
        "campaign_rounds_us": campaign_rounds_us,
        "memory": [asdict(m) for m in memory],
        "grouped_schedule_us": dict(zip(map(str, sizes), grouped, strict=True)),
        "grouped_schedule_rounds_us": grouped_rounds,
        "time_per_vm_growth": largest.per_vm_microseconds / smallest.per_vm_microseconds,
        # The same, the collector's time taken out of both: how much of the growth is its.
        "time_per_vm_growth_without_collector": _without_collector(largest)
        / _without_collector(smallest),
        "memory_per_vm_growth": memory[-1].bytes_per_idle_vm / memory[0].bytes_per_idle_vm,
        "grouped_schedule_growth": grouped[-1] / grouped[0],
    }
