"""A subscription receiving every event of a campaign, beside the same campaign without one.

``python -m bench.eventgrid --vms 100000``: two campaigns of the same fleet in one run and one
process, on a manual clock, the steps of :mod:`bench.scale`'s campaign (every VM reads its
event, approves it, is rebooting, is back and shown it Started, then shown none), each
request handed to the same :class:`~forewarn.server.imds.ImdsEndpoint` the socket server
calls, on the event loop as ``forewarn serve`` answers them, giving the loop back every
:data:`YIELD_EVERY` requests. Once no VM publishes and nobody subscribes; once every VM
publishes (``eventGridAndResourceGraph``) and one subscription, validated by the handshake,
receives every change (Scheduled, Started, Completed: three per VM) through Event Grid's
delivery task running beside the campaign, to a receiver that is a process of its own on
loopback, its state in a SQLite file as with ``--data-dir``.

The figures: the campaign's wall time each way and their ratio; the VM-facing CPU per request
(the event loop thread's CPU inside the endpoint's answers, ``time.thread_time``) each way and
their ratio; how long after the campaign's end the last delivery was made, and how many the
receiver counted. The issue's targets: CPU per request < 1.05x, campaign time < 1.2x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson

from bench.fleetgen import fleet_vms
from bench.scale import DESCRIPTION, ScenarioError, _Fleet
from bench.tools import free_port
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.store import DeliveryStore

#: Requests answered between two returns to the event loop (as the socket server's reads
#: interleave with other tasks).
YIELD_EVERY = 64
#: The longest the deliveries may take to drain after the campaign, in seconds.
DRAIN_LIMIT = 1800.0
#: The longest a step around the campaign may take (the subscription's handshake, Event
#: Grid's loop stopping), in seconds: each takes well under one.
STEP_LIMIT = 60.0

T = TypeVar("T")

_RECEIVER = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    count = 0
    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args):
            pass
        def _reply(self, body=b""):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            self._reply(str(count).encode())
        def do_POST(self):
            global count
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("aeg-event-type") == "SubscriptionValidation":
                code = json.loads(body)[0]["data"]["validationCode"]
                self._reply(json.dumps({"validationResponse": code}).encode())
                return
            count += len(json.loads(body))
            self._reply()
    ThreadingHTTPServer.request_queue_size = 128
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
    """
)


@dataclass(frozen=True)
class CampaignRun:
    vms: int
    subscribed: bool
    campaign_seconds: float
    #: The event loop thread's CPU while the campaign ran: its requests, and whatever of
    #: Event Grid's work ran between them.
    campaign_loop_cpu_seconds: float
    requests: int
    cpu_per_request_us: float
    #: Seconds after the campaign's end until the receiver had every change (0 without one).
    drain_seconds: float
    delivered: int


async def _campaign(fleet: _Fleet) -> tuple[float, float, int, float]:
    """The campaign of :func:`bench.scale.run_campaign`, on the event loop: its wall time,
    the loop thread's CPU meanwhile, its requests and the loop thread's CPU inside them."""
    platform, clock, service = fleet.platform, fleet.clock, fleet.service
    requests = 0
    cpu = 0.0

    async def answered(vm: Any, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
        nonlocal requests, cpu
        began = time.thread_time()
        result = fleet.request(vm, method, body)
        cpu += time.thread_time() - began
        requests += 1
        if requests % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        return result

    began = time.perf_counter()
    began_cpu = time.thread_time()
    for vm in fleet.vms:
        platform.schedule(
            EventType.REBOOT, (vm.name,), source=EventSource.PLATFORM, description=DESCRIPTION
        )
    for vm in fleet.vms:
        status, body = await answered(vm)
        (event,) = orjson.loads(body)["Events"]
        approval = orjson.dumps({"StartRequests": [{"EventId": event["EventId"]}]})
        status, _ = await answered(vm, "POST", approval)
        if status != 200:
            raise ScenarioError(f"{vm.name}: approval answered {status}")
        await answered(vm)  # rebooting: held
    clock.advance(platform.timing.impact)
    for vm in fleet.vms:
        status, body = await answered(vm)
        if orjson.loads(body)["Events"][0]["EventStatus"] != "Started":
            raise ScenarioError(f"{vm.name} is not shown its event Started")
    clock.advance(platform.timing.started_period)
    service.catch_up()
    for vm in fleet.vms:
        status, body = await answered(vm)
        if orjson.loads(body)["Events"] != []:
            raise ScenarioError(f"{vm.name} is still shown an event")
    return time.perf_counter() - began, time.thread_time() - began_cpu, requests, cpu


async def _run(
    count: int, subscribed: bool, workdir: Path, drain_limit: float = DRAIN_LIMIT
) -> CampaignRun:
    vms = fleet_vms(count)
    if subscribed:
        vms = [replace(vm, policy=ScheduledEventsPolicy(publish=True)) for vm in vms]
    fleet = _Fleet(vms)
    if not subscribed:
        seconds, loop_cpu, requests, cpu = await _campaign(fleet)
        return CampaignRun(count, False, seconds, loop_cpu, requests, cpu / requests * 1e6, 0.0, 0)
    port = free_port()
    receiver = subprocess.Popen([sys.executable, "-c", _RECEIVER, str(port)])
    store = DeliveryStore(Path(tempfile.mkdtemp(dir=workdir)) / "eventgrid.sqlite3")
    grid = EventGrid(
        fleet.service.now,
        lambda: fleet.service.published().sequence,
        store,
        validation_base="http://127.0.0.1:1",
    )
    fleet.service.on_published(grid.on_change)
    stop = asyncio.Event()
    try:
        url = f"http://127.0.0.1:{port}/"
        async with httpx.AsyncClient() as probe:
            for _ in range(100):
                try:
                    await probe.get(url)
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
            view = await _within(grid.subscribe("bench", url, "eventgrid"), "subscribing")
            if view.subscription.state != "Succeeded":
                raise ScenarioError(f"the subscription is {view.subscription.state}")
            task = asyncio.create_task(grid.run(stop))
            seconds, loop_cpu, requests, cpu = await _campaign(fleet)
            ended = time.perf_counter()
            wanted = 3 * count
            delivered = 0
            while delivered < wanted and time.perf_counter() - ended < drain_limit:
                await asyncio.sleep(0.2)
                delivered = int((await probe.get(url)).text)
            drain = time.perf_counter() - ended
        stop.set()
        await _within(task, "Event Grid's loop stopping")
    finally:
        receiver.terminate()
        receiver.wait(10)
        store.close()
    if delivered != wanted:
        raise ScenarioError(f"the receiver counted {delivered} of {wanted} changes")
    return CampaignRun(
        count, True, seconds, loop_cpu, requests, cpu / requests * 1e6, drain, delivered
    )


async def _within(step: Awaitable[T], what: str, seconds: float = STEP_LIMIT) -> T:
    """``step`` awaited for ``seconds`` at most: a step that never ends fails the run,
    naming itself, rather than hanging it."""
    try:
        return await asyncio.wait_for(step, seconds)
    except TimeoutError:
        raise ScenarioError(f"{what} took more than {seconds:g} s") from None


def _median(runs: list[CampaignRun], field: str) -> float:
    return float(statistics.median(getattr(run, field) for run in runs))


def run_eventgrid(count: int, rounds: int = 3, drain_limit: float = DRAIN_LIMIT) -> dict[str, Any]:
    """``rounds`` pairs of campaigns of ``count`` VMs, without then with a subscription,
    interleaved so a machine's other load falls on both alike; each figure a median. A run
    whose deliveries have not all arrived ``drain_limit`` seconds after its campaign fails,
    saying how many did."""
    without: list[CampaignRun] = []
    with_one: list[CampaignRun] = []
    with tempfile.TemporaryDirectory(prefix="forewarn-bench-eventgrid-") as scratch:
        for _ in range(rounds):
            without.append(asyncio.run(_run(count, False, Path(scratch))))
            with_one.append(asyncio.run(_run(count, True, Path(scratch), drain_limit)))
    figures: dict[str, Any] = {
        "vms": count,
        "rounds": rounds,
        "without": [asdict(run) for run in without],
        "with_subscription": [asdict(run) for run in with_one],
    }
    for field in ("campaign_seconds", "campaign_loop_cpu_seconds", "cpu_per_request_us"):
        figures[f"{field}_ratio"] = _median(with_one, field) / _median(without, field)
        figures[f"{field}_ratio_rounds"] = [
            late.__getattribute__(field) / early.__getattribute__(field)
            for early, late in zip(without, with_one, strict=True)
        ]
    figures["drain_seconds"] = _median(with_one, "drain_seconds")
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.eventgrid", description=__doc__)
    parser.add_argument("--vms", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    figures = run_eventgrid(options.vms, options.rounds)
    text = json.dumps(figures, indent=2)
    print(text)
    if options.json is not None:
        options.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
