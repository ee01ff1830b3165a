"""Many VMs, each at its own address, each polling once a second: what latency does each see?

scheduled-events-linux.txt, "Polling frequency": "we recommend that you poll the service once
per second". The load generator is open-loop: VM ``i`` of ``n`` polls at ``i/n`` s past every
second whatever the server does, so a slow server cannot slow the offered load down. Latency
is measured from the moment a request is sent (for a new connection: from the connect) to the
last byte of the answer. How late the generator itself sent requests is reported beside it,
so a busy generator is not mistaken for a slow server.

The generator drives plain non-blocking sockets from the event loop's reader and writer
callbacks: on a 2-core machine it shares the CPU with the server, and asyncio transports and a
task per connection would cost it several times more per poll than the server spends.

The run is bounded twice: by its duration in seconds, and by a request budget of
``vms * duration``.
"""

from __future__ import annotations

import asyncio
import errno
import math
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import uvloop

from bench.fleetgen import addresses
from bench.servers import PATH, QUERY

_TICK = 0.001
_CONNECTING = (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK, 0)


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


def _request(host: str, close: bool) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (
        f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: {host}\r\nMetadata: true\r\n".encode()
        + connection
        + b"\r\n"
    )


def _complete(buffer: bytes) -> tuple[bool, bool]:
    """(a whole response is in ``buffer``, it is a 200)."""
    head_end = buffer.find(b"\r\n\r\n")
    if head_end < 0:
        return False, False
    head = buffer[:head_end].lower()
    marker = head.find(b"content-length:")
    length = 0
    if marker >= 0:
        line_end = head.find(b"\r\n", marker)
        length = int(head[marker + 15 : line_end if line_end >= 0 else len(head)])
    return len(buffer) >= head_end + 4 + length, buffer.startswith(b"HTTP/1.1 200 ")


class _Poller:
    """Every VM's socket and the bookkeeping of one run."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, hosts: list[str], port: int, *, close: bool
    ) -> None:
        self.loop = loop
        self.hosts = hosts
        self.port = port
        self.close = close
        self.requests = [_request(host, close) for host in hosts]
        self.sockets: list[socket.socket | None] = [None] * len(hosts)
        self.sent_at = [0.0] * len(hosts)
        self.buffers = [b""] * len(hosts)
        self.busy = [False] * len(hosts)
        self.latencies: list[float] = []
        self.lateness: list[float] = []
        self.failed = 0
        self.in_flight = 0

    # -- keep-alive: connect everyone first ------------------------------------------------

    async def connect_all(self) -> None:
        for index, host in enumerate(self.hosts):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            await self.loop.sock_connect(sock, (host, self.port))
            self.sockets[index] = sock
            self.loop.add_reader(sock.fileno(), self._readable, index)

    # -- one poll --------------------------------------------------------------------------

    def poll(self, index: int, due: float) -> None:
        now = time.perf_counter()
        self.lateness.append(now - due)
        if self.busy[index] or (not self.close and self.sockets[index] is None):
            self.failed += 1  # still unanswered a second later, or the server hung up
            return
        self.busy[index] = True
        self.in_flight += 1
        self.sent_at[index] = now
        if not self.close:
            sock = self.sockets[index]
            assert sock is not None  # checked above
            self._send(index, sock)
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        self.sockets[index] = sock
        code = sock.connect_ex((self.hosts[index], self.port))
        if code not in _CONNECTING:
            self._finish(index, ok=False)
            return
        self.loop.add_writer(sock.fileno(), self._connected, index)

    def _connected(self, index: int) -> None:
        sock = self.sockets[index]
        assert sock is not None
        self.loop.remove_writer(sock.fileno())
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self._finish(index, ok=False)
            return
        self.loop.add_reader(sock.fileno(), self._readable, index)
        self._send(index, sock)

    def _send(self, index: int, sock: socket.socket) -> None:
        try:
            sock.send(self.requests[index])  # ~100 bytes: always fits an empty send buffer
        except OSError:
            self._finish(index, ok=False)

    def _readable(self, index: int) -> None:
        sock = self.sockets[index]
        assert sock is not None
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._finish(index, ok=False)
            return
        if not self.busy[index]:
            return  # an answer nobody asked for: ignore it
        self.buffers[index] += data
        done, ok = _complete(self.buffers[index])
        if done:
            self.buffers[index] = b""
            self._finish(index, ok=ok)

    def _finish(self, index: int, *, ok: bool) -> None:
        if self.busy[index]:
            self.busy[index] = False
            self.in_flight -= 1
            if ok:
                self.latencies.append(time.perf_counter() - self.sent_at[index])
            else:
                self.failed += 1
        if self.close or not ok:
            self._hang_up(index)

    def _hang_up(self, index: int) -> None:
        sock = self.sockets[index]
        if sock is None:
            return
        self.sockets[index] = None
        self.loop.remove_reader(sock.fileno())
        self.loop.remove_writer(sock.fileno())
        sock.close()

    def hang_up_all(self) -> None:
        for index in range(len(self.sockets)):
            self._hang_up(index)


async def _run(poller: _Poller, duration: float) -> float:
    if not poller.close:
        await poller.connect_all()
    count = len(poller.hosts)
    budget = int(count * duration)
    began = time.perf_counter()
    sent = 0
    try:
        while sent < budget:
            elapsed = time.perf_counter() - began
            if elapsed > duration + 5:
                break  # the generator could not keep up; what was sent is what counts
            due_count = min(budget, int(elapsed * count) + 1)
            while sent < due_count:
                poller.poll(sent % count, began + sent / count)
                sent += 1
            await asyncio.sleep(_TICK)
        # Let the last answers arrive (bounded), then hang up.
        deadline = time.perf_counter() + 5
        while poller.in_flight and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        poller.failed += poller.in_flight
    finally:
        poller.hang_up_all()
    return time.perf_counter() - began


def run_polling(
    port: int, vms: int, *, close: bool, duration: float, single_host: str | None = None
) -> PollingResult:
    """``vms`` VMs poll ``port``, each at its own address (:func:`bench.fleetgen.addresses`),
    or all at ``single_host``: how a server that does not tell VMs apart (nginx) is polled."""
    hosts = [single_host] * vms if single_host else list(addresses(vms))

    async def main() -> tuple[_Poller, float]:
        poller = _Poller(asyncio.get_running_loop(), hosts, port, close=close)
        return poller, await _run(poller, duration)

    poller, seconds = uvloop.run(main())
    latencies = sorted(value * 1000 for value in poller.latencies)
    lateness = sorted(value * 1000 for value in poller.lateness)
    return PollingResult(
        vms=vms,
        mode="new connection per request" if close else "keep-alive",
        seconds=seconds,
        requests=len(latencies) + poller.failed,
        ok=len(latencies),
        failed=poller.failed,
        p50_ms=percentile(latencies, 0.50),
        p90_ms=percentile(latencies, 0.90),
        p99_ms=percentile(latencies, 0.99),
        p999_ms=percentile(latencies, 0.999),
        max_ms=latencies[-1] if latencies else 0.0,
        send_lateness_p99_ms=percentile(lateness, 0.99),
    )
