"""10,000 VMs with a request held during an impact: the memory each costs, and how soon after
the impact's end every one is answered.

The server is the socket server ``forewarn serve`` runs (uvloop), in a process of its own on a
manual clock, driven through its standard input (``python -m bench.held_requests serve N``);
this process is the fleet. One listener on 127.0.0.1 serves every VM, told apart by the
address each connects from (``127.1.0.1``, ``127.1.0.2``, ...): one listener per VM address
would take as many descriptors as the connections themselves, and the hard limit of open
files (often 20,000) could not hold both. Every VM is frozen at once; each sends one poll,
which is held; then the clock is moved past the impact's end.

Figures: the server's resident memory per held request, with and without its connection
(measured before the VMs connect, after each has polled once on its connection, after the
events are made, and once every request is held), the
time from the clock's move to the first and to the last answer, and the spread between them.
Every answer must be a 200 dated the second the impact ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

from bench.fleetgen import addresses, fleet_vms
from bench.tools import raise_open_files, stop

IMPACT_SECONDS = 10
_POLL = (
    b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
    b"Host: 169.254.169.254\r\nMetadata: true\r\n\r\n"
)


class HeldScenarioError(AssertionError):
    """An answer came early, late or wrong: no figure is valid."""


@dataclass(frozen=True)
class HeldResult:
    vms: int
    rss_before_bytes: int
    rss_connected_bytes: int
    rss_frozen_bytes: int
    rss_held_bytes: int
    bytes_per_held_request: float
    bytes_per_held_request_with_connection: float
    first_answer_ms: float
    last_answer_ms: float
    release_spread_ms: float


# -- the server side ----------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def _serve(vms: int) -> None:
    """Answer the fleet on 127.0.0.1; obey one command per line of standard input."""
    import gc

    from forewarn.server.http import start_imds_server
    from forewarn.server.imds import ImdsEndpoint
    from forewarn.testing import ForewarnPlatform

    platform = ForewarnPlatform(vms=fleet_vms(vms), profile="fast", rate_limit=5)
    service = platform.service
    endpoint = ImdsEndpoint(service, rate_limit=5)
    server = await start_imds_server(endpoint, "127.0.0.1", 0)
    names = platform.vm_names
    gc.collect()
    gc.freeze()  # as ``forewarn serve`` does once its fleet is built
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def reply(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def command() -> None:
        line = sys.stdin.readline().split()
        if not line or line[0] == "quit":
            done.set_result(None)
        elif line[0] == "rss":
            reply(str(_rss_bytes()))
        elif line[0] == "freeze":
            for name in names:
                platform.schedule("Freeze", name, duration_seconds=IMPACT_SECONDS, started=True)
            ends = service.now().replace(microsecond=0).timestamp() + IMPACT_SECONDS
            reply(str(ends))
        elif line[0] == "advance":
            service.advance_clock(timedelta(seconds=float(line[1])))
            reply(str(time.monotonic()))

    loop.add_reader(sys.stdin.fileno(), command)
    reply(str(server.sockets[0].getsockname()[1]))
    await done
    server.close()


# -- the fleet side -----------------------------------------------------------------------


class _Server:
    """The server process and its command line."""

    def __init__(self, vms: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.held_requests", "serve", str(vms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.port = int(self._answer())

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 300)
        if not ready:
            raise HeldScenarioError("the server did not answer its command within 300 s")
        line = self.process.stdout.readline()
        if not line:
            raise HeldScenarioError(f"the server exited ({self.process.wait(10)})")
        return line.strip()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(HeldScenarioError, BrokenPipeError):
                self.ask("quit")
        stop(self.process)  # type: ignore[arg-type]


def _connect(vms: int, port: int) -> list[socket.socket]:
    sockets = []
    for address in addresses(vms):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sockets.append(sock)
        sock.bind((address, 0))
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
    return sockets


def _await_answers(sockets: list[socket.socket], deadline: float) -> dict[int, tuple[float, bytes]]:
    """When each socket's answer was whole (by its file descriptor), and the answer."""
    poller = select.epoll()
    waiting: dict[int, bytes] = {}
    for sock in sockets:
        poller.register(sock.fileno(), select.EPOLLIN)
        waiting[sock.fileno()] = b""
    by_fd = {sock.fileno(): sock for sock in sockets}
    answered: dict[int, tuple[float, bytes]] = {}
    try:
        while waiting and time.monotonic() < deadline:
            for fd, _ in poller.poll(0.5):
                now = time.monotonic()
                data = waiting[fd] + by_fd[fd].recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = _content_length(head)
                if length is not None and len(body) >= length:
                    answered[fd] = (now, data)
                    del waiting[fd]
                    poller.unregister(fd)
                else:
                    waiting[fd] = data
    finally:
        poller.close()
    return answered


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


def run_held(vms: int) -> dict[str, Any]:
    """The figures for ``vms`` VMs each with a request held."""
    limit = raise_open_files(vms + 512)
    if limit < vms + 256:
        raise HeldScenarioError(f"{vms} VMs need {vms + 256} open files; the limit is {limit}")
    server = _Server(vms)
    sockets: list[socket.socket] = []
    try:
        before = int(server.ask("rss"))
        sockets = _connect(vms, server.port)
        for sock in sockets:  # each VM polls once before the impact, on the same connection
            sock.send(_POLL)
        polled = _await_answers(sockets, time.monotonic() + 60)
        if len(polled) != vms:
            raise HeldScenarioError(f"{vms - len(polled)} VMs not answered before the impact")
        connected = int(server.ask("rss"))
        ends = float(server.ask("freeze"))
        frozen = int(server.ask("rss"))  # the events' own memory is not the held requests'
        for sock in sockets:
            sock.send(_POLL)  # a hundred bytes into an empty socket buffer: sent whole
        early = _await_answers(sockets, time.monotonic() + 1.0)
        if early:
            raise HeldScenarioError(f"{len(early)} requests answered during the impact")
        held = int(server.ask("rss"))
        moved = float(server.ask(f"advance {IMPACT_SECONDS}"))
        answered = _await_answers(sockets, time.monotonic() + 60)
    finally:
        server.close()
        for sock in sockets:
            sock.close()
    if len(answered) != vms:
        raise HeldScenarioError(f"{vms - len(answered)} held requests never answered")
    date = b"Date: " + format_datetime(datetime.fromtimestamp(ends, UTC), usegmt=True).encode()
    wrong = [data[:200] for _, data in answered.values() if not _ok_at(data, date)]
    if wrong:
        raise HeldScenarioError(f"{len(wrong)} answers not a 200 at {date!r}: {wrong[0]!r}")
    times = sorted(at for at, _ in answered.values())
    result = HeldResult(
        vms=vms,
        rss_before_bytes=before,
        rss_connected_bytes=connected,
        rss_frozen_bytes=frozen,
        rss_held_bytes=held,
        bytes_per_held_request=(held - frozen) / vms,
        bytes_per_held_request_with_connection=(held - frozen + connected - before) / vms,
        first_answer_ms=(times[0] - moved) * 1e3,
        last_answer_ms=(times[-1] - moved) * 1e3,
        release_spread_ms=(times[-1] - times[0]) * 1e3,
    )
    return asdict(result)


def _ok_at(data: bytes, date: bytes) -> bool:
    return data.startswith(b"HTTP/1.1 200 ") and date in data


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        import uvloop

        uvloop.run(_serve(int(sys.argv[2])))
