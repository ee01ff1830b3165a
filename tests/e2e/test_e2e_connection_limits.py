"""One VM cannot take every descriptor: ``forewarn serve`` caps each VM's connections, keeps
the VMs' connections within a share of the descriptor limit (closing the longest-idle ones of
the VMs holding the most first) and raises its soft limit to the hard one at start-up; out of
descriptors all the same, it neither spins nor loses its listener.

Each server here runs with a low ``ulimit -n`` (set in the child before it starts), so that a
few hundred connections are enough to reach it. Before these bounds, 1,100 idle connections
to one VM under a limit of 1,024 made every poll of another VM fail and the control API
unreachable: past the limit, accepting fails, and uvloop then closes every waiting connection
at once, on every listener.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from e2e_support import ForewarnServer, StartServer, exchange, parse_responses, wait_for
from http_wire_support import CLOSE

from forewarn.server.http import limits

pytestmark = pytest.mark.e2e

POLITE = "127.0.0.3"
GREEDY = ("127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7")
FLEET = "vms:\n" + "".join(
    f"  - {{name: vm{index}, address: {address}}}\n"
    for index, address in enumerate((POLITE, *GREEDY))
)
POLL = (
    b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
    b"Host: 169.254.169.254\r\nMetadata: true\r\n\r\n"
)


def _server(start_server: StartServer, open_files: tuple[int, int]) -> ForewarnServer:
    return start_server(
        fleet=FLEET, vm_hosts=(POLITE, *GREEDY), rate_limit=1000, open_files=open_files
    )


@contextlib.contextmanager
def _connections(host: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``host``, opened in turn and left idle (nothing sent)."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            opened.append(socket.create_connection((host, port), timeout=3))
            opened[-1].setblocking(False)  # only looked at (_still_open)
        yield opened
    finally:
        for sock in opened:
            sock.close()


def _still_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (it has neither closed nor reset it)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionError:
        return False


def _open_count(socks: Sequence[socket.socket]) -> int:
    return sum(map(_still_open, socks))


def _descriptors_of(server: ForewarnServer) -> int:
    return len(os.listdir(f"/proc/{server.process.process.pid}/fd"))


def _poll_kept(sock: socket.socket) -> int:
    """A poll on a kept connection; the status answered."""
    sock.sendall(POLL)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return int(data.split(b" ", 2)[1])


def _others_answered(server: ForewarnServer, kept: socket.socket | None = None) -> None:
    """Another VM's polls (on new connections, and on its kept one) and the control API are
    answered."""
    for _ in range(20):
        assert server.document_response(POLITE).status == 200
    if kept is not None:
        assert _poll_kept(kept) == 200
    assert server.control.get("/clock").status_code == 200
    assert server.control.get("/events").status_code == 200


def test_one_vm_holding_many_idle_connections_keeps_only_its_cap(
    start_server: StartServer,
) -> None:
    """``limits.CONNECTIONS_PER_VM`` (README, "Security"): one VM opens 300 idle connections
    under a descriptor limit of 256. Each one past its cap closes its longest-idle one, so it
    holds its newest 64; another VM's polls and the control API are answered throughout."""
    server = _server(start_server, (256, 256))
    cap = limits.CONNECTIONS_PER_VM
    with _connections(GREEDY[0], server.port, 300) as greedy:
        wait_for(
            lambda: _open_count(greedy) == cap,
            what=f"{cap} connections left",
            server=server.process,
        )
        _others_answered(server)
        assert [_still_open(sock) for sock in greedy] == [False] * (300 - cap) + [True] * cap
        assert _descriptors_of(server) < 256 - limits.RESERVED_DESCRIPTORS
    server.process.assert_healthy()


def test_short_of_descriptors_the_vms_holding_most_lose_their_longest_idle_first(
    start_server: StartServer,
) -> None:
    """``limits.RESERVED_DESCRIPTORS`` (README, "Security"): four VMs open 50 idle
    connections each (within their cap) under a descriptor limit of 200, more than the VMs'
    share of it. The longest-idle connections of the VMs holding the most are closed, so the
    VM polling on its one kept connection, the oldest of all, keeps it; its polls and the
    control API are answered, and the server keeps its reserve of descriptors."""
    server = _server(start_server, (200, 200))
    with socket.create_connection((POLITE, server.port), timeout=3) as kept:
        assert _poll_kept(kept) == 200
        with contextlib.ExitStack() as stack:
            greedy = [
                stack.enter_context(_connections(address, server.port, 50)) for address in GREEDY
            ]
            share = 200 - limits.RESERVED_DESCRIPTORS
            seen: list[int] = []

            def settled() -> bool:
                """Within the share, and unchanged since the last look (50 ms before):
                every connection made has been accepted and counted."""
                seen.append(sum(_open_count(socks) for socks in greedy))
                return seen[-1] < share and seen[-2:-1] == seen[-1:]

            wait_for(settled, what=f"the VMs' connections within {share}", server=server.process)
            _others_answered(server, kept)
            left = [_open_count(socks) for socks in greedy]
            assert max(left) - min(left) <= 2, left  # taken from the VMs holding the most
            for socks in greedy:  # each VM's oldest went
                states = [_still_open(sock) for sock in socks]
                assert states == sorted(states), states
            assert _descriptors_of(server) <= 200 - limits.RESERVED_DESCRIPTORS // 2
    server.process.assert_healthy()


def test_serve_raises_its_soft_descriptor_limit_to_the_hard_one(
    start_server: StartServer,
) -> None:
    """A VM's kept connection is a descriptor, and services start with a soft limit of
    1,024 however high the hard one: ``forewarn serve`` raises the soft limit to the hard
    one as it starts, and says so."""
    server = _server(start_server, (256, 1024))
    limits_text = Path(f"/proc/{server.process.process.pid}/limits").read_text()
    match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", limits_text, re.MULTILINE)
    assert match is not None, limits_text
    assert (int(match[1]), int(match[2])) == (1024, 1024)
    assert "open files: soft limit raised from 256 to 1024" in server.process.output()


def _cpu_seconds(server: ForewarnServer) -> float:
    fields = Path(f"/proc/{server.process.process.pid}/stat").read_text().rsplit(")", 1)[1]
    user, system = fields.split()[11:13]
    return (int(user) + int(system)) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_the_endpoint_neither_spins_nor_stops_listening(
    start_server: StartServer,
) -> None:
    """When the process has no descriptor left for reasons of its own (here, connections
    to the control API, which the VMs' share does not count), accepting a VM's connection
    fails (EMFILE): the connection is dropped, the server does not spin trying again (it
    uses next to no CPU meanwhile), and once descriptors are free again the endpoint answers
    as before: its listener was not lost."""
    server = _server(start_server, (256, 256))
    host, port = server.control_address.rsplit(":", 1)
    hogs: list[socket.socket] = []
    try:
        while _descriptors_of(server) < 256:  # each accepted by the control API
            assert len(hogs) < 512, f"{_descriptors_of(server)} descriptors at most"
            hogs += [socket.create_connection((host, int(port)), timeout=3) for _ in range(8)]
            time.sleep(0.02)
        before = _cpu_seconds(server)
        dropped = [socket.create_connection((POLITE, server.port), timeout=3) for _ in range(20)]
        for sock in dropped:
            sock.sendall(POLL)
        time.sleep(2)  # what a server retrying its accepts would spin through
        spent = _cpu_seconds(server) - before
        assert spent < 0.5, f"{spent:.2f} s of CPU in 2 s"
        for sock in dropped:
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(65536) == b""  # closed unanswered
            sock.close()
    finally:
        for sock in hogs:
            sock.close()

    def answered() -> bool:  # dropped while the control API has not yet let go of them
        reply = exchange(POLITE, server.port, POLL[:-2] + CLOSE + b"\r\n")
        return [r.status for r in parse_responses(reply.data)] == [200]

    wait_for(answered, what="the endpoint answering again", server=server.process)
    server.process.assert_healthy()
