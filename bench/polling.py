"""Many VMs, each at its own address, each polling once a second: what latency does each see?

scheduled-events-linux.txt, "Polling frequency": "we recommend that you poll the service once
per second". The load generator is open-loop: VM ``i`` of ``n`` polls at ``i/n`` s past every
second whatever the server does, so a slow server cannot slow the offered load down. Latency
is measured from the moment a request is sent (for a new connection: from the connect) to the
last byte of the answer. How late the generator itself sent requests is reported beside it,
so a busy generator is not mistaken for a slow server.

The run is bounded twice: by its duration in seconds, and by a request budget of
``vms * duration``.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import uvloop

from bench.fleetgen import addresses
from bench.servers import PATH, QUERY

_TICK = 0.001


@dataclass(frozen=True)
class PollingResult:
    vms: int
    mode: str
    seconds: float
    requests: int
    ok: int
    failed: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    send_lateness_p99_ms: float

    def summary(self) -> dict[str, Any]:
        return asdict(self)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 when there are none)."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


class _Recorder:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.lateness: list[float] = []
        self.failed = 0
        self.in_flight = 0


def _request(host: str, close: bool) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (
        f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: {host}\r\nMetadata: true\r\n".encode()
        + connection
        + b"\r\n"
    )


class _Client(asyncio.Protocol):
    """One VM's connection; reads one response at a time by its Content-Length."""

    def __init__(self, recorder: _Recorder, request: bytes, close: bool) -> None:
        self.recorder = recorder
        self.request = request
        self.close = close
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.sent_at = 0.0
        self.busy = False
        self.connected = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        if not self.connected.done():
            self.connected.set_result(None)

    def send(self, started: float) -> None:
        assert self.transport is not None
        self.busy = True
        self.sent_at = started
        self.recorder.in_flight += 1
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, separator, body = self.buffer.partition(b"\r\n\r\n")
        if not separator:
            return
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(body) < length:
            return
        self.buffer = body[length:]
        self._done(ok=head.startswith(b"HTTP/1.1 200 "))

    def _done(self, *, ok: bool) -> None:
        if not self.busy:
            return
        self.busy = False
        recorder = self.recorder
        recorder.in_flight -= 1
        if ok:
            recorder.latencies.append(time.perf_counter() - self.sent_at)
        else:
            recorder.failed += 1
        if self.close and self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(exc or ConnectionError("closed"))
        if self.busy:
            self._done(ok=False)


async def _poll(
    hosts: list[str], port: int, *, close: bool, duration: float, recorder: _Recorder
) -> float:
    loop = asyncio.get_running_loop()
    count = len(hosts)
    requests = [_request(host, close) for host in hosts]
    clients: list[_Client | None] = [None] * count
    if not close:
        # Keep-alive: every VM connects first, then polls on its own connection.
        for start in range(0, count, 500):
            batch = range(start, min(count, start + 500))
            made = await asyncio.gather(
                *(
                    loop.create_connection(
                        functools.partial(_Client, recorder, requests[i], False), hosts[i], port
                    )
                    for i in batch
                )
            )
            for i, (_, protocol) in zip(batch, made, strict=True):
                clients[i] = protocol
    budget = int(count * duration)
    began = time.perf_counter()
    sent = 0
    pending: set[asyncio.Task[Any]] = set()

    async def connect_and_send(index: int, due: float) -> None:
        started = time.perf_counter()
        recorder.lateness.append(started - due)
        try:
            _, protocol = await loop.create_connection(
                functools.partial(_Client, recorder, requests[index], True), hosts[index], port
            )
        except OSError:
            recorder.failed += 1
            return
        protocol.send(started)

    while sent < budget:
        now = time.perf_counter()
        elapsed = now - began
        if elapsed > duration + 5:
            break  # the generator could not keep up; what was sent is what counts
        due_count = min(budget, int(elapsed * count) + 1)
        while sent < due_count:
            index = sent % count
            due = began + sent / count
            if close:
                task = loop.create_task(connect_and_send(index, due))
                pending.add(task)
                task.add_done_callback(pending.discard)
            else:
                client = clients[index]
                assert client is not None
                if client.busy:
                    recorder.failed += 1  # the last poll has not been answered a second later
                else:
                    recorder.lateness.append(now - due)
                    client.send(now)
            sent += 1
        await asyncio.sleep(_TICK)
    # Let the last answers arrive (bounded), then hang up.
    deadline = time.perf_counter() + 5
    while (recorder.in_flight or pending) and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    for task in list(pending):
        task.cancel()
    for client in clients:
        if client is not None and client.transport is not None:
            client.transport.close()
    await asyncio.sleep(0)
    return time.perf_counter() - began


def run_polling(port: int, vms: int, *, close: bool, duration: float) -> PollingResult:
    """Poll ``vms`` addresses (from :func:`bench.fleetgen.addresses`) on ``port``."""
    hosts = list(addresses(vms))
    recorder = _Recorder()
    seconds = uvloop.run(_poll(hosts, port, close=close, duration=duration, recorder=recorder))
    latencies = sorted(value * 1000 for value in recorder.latencies)
    lateness = sorted(value * 1000 for value in recorder.lateness)
    return PollingResult(
        vms=vms,
        mode="new connection per request" if close else "keep-alive",
        seconds=seconds,
        requests=len(latencies) + recorder.failed,
        ok=len(latencies),
        failed=recorder.failed,
        p50_ms=percentile(latencies, 0.50),
        p90_ms=percentile(latencies, 0.90),
        p99_ms=percentile(latencies, 0.99),
        p999_ms=percentile(latencies, 0.999),
        max_ms=latencies[-1] if latencies else 0.0,
        send_lateness_p99_ms=percentile(lateness, 0.99),
    )
