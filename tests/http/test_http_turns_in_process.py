"""A VM over its rate limit still gets IMDS's 429s, but cannot make another VM wait.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate limiting": "requests to
IMDS are limited to 5 requests per second (on a per VM basis). Requests exceeding this threshold
will be rejected with 429 responses." The limit is per VM, so one VM flooding its endpoint must not
delay the others: once a connection's answer is a 429, each request it sends next (later, or
pipelined in the same read) waits for a turn, and a turn answers a few requests in all (a turn every
millisecond), instead of being answered in the same batch as every other ready connection of
the flood or every other request of the same read.

The server runs on an event loop in the test's own thread, stepped one turn at a time, with
real loopback sockets: data a client sends on loopback is readable at once, so what each
turn does is exact. The rate limit's clock stands still, so the flooding VM never earns a
new token.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator

import pytest
import uvloop
from e2e_support import parse_responses
from http_wire_support import CLOSE, get

from forewarn.server.http import _refused_turns, limits, start_imds_server
from forewarn.testing import ForewarnPlatform

FLOOD, OTHER = "127.0.0.2", "127.0.0.3"
#: Connections the flooding VM keeps ready at once, as ``wrk -c40`` does.
FLOOD_CONNECTIONS = 40
TOO_MANY = {"error": "Too many requests"}


class Server:
    """Both VMs' endpoint on one port, on a loop this test turns by hand."""

    def __init__(self, loop: asyncio.AbstractEventLoop, platform: ForewarnPlatform) -> None:
        self.loop = loop
        self.servers = [loop.run_until_complete(start_imds_server(platform.endpoint, FLOOD, 0))]
        self.port: int = self.servers[0].sockets[0].getsockname()[1]
        self.servers.append(
            loop.run_until_complete(start_imds_server(platform.endpoint, OTHER, self.port))
        )
        self.clients: list[Client] = []

    def turn(self) -> None:
        """One turn of the loop: what is ready is read, what is due runs."""
        self.loop.call_soon(self.loop.stop)
        self.loop.run_forever()

    def connect(self, host: str) -> Client:
        client = Client(host, self.port)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.sock.close()
        for server in self.servers:
            server.close()
        for _ in range(5):
            self.turn()


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setblocking(False)
        self.data = b""
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def statuses(self) -> list[int]:
        """The statuses of what has arrived so far."""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                break
            if not chunk:
                self.closed = True
                break
            self.data += chunk
        return [r.status for r in parse_responses(self.data)]


@pytest.fixture(params=["uvloop", "asyncio"])
def new_loop(request: pytest.FixtureRequest) -> Callable[[], asyncio.AbstractEventLoop]:
    """``forewarn serve``'s loop and the standard one ``forewarn.testing`` serves on."""
    return uvloop.new_event_loop if request.param == "uvloop" else asyncio.new_event_loop


@pytest.fixture
def server(
    new_loop: Callable[[], asyncio.AbstractEventLoop], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Server]:
    # A turn for refused connections on every turn of the loop, so that stepping the loop
    # steps them too (their turns are otherwise a millisecond apart).
    monkeypatch.setattr(limits, "REFUSED_TURN", 0.0)
    loop = new_loop()
    # One request per VM per second, on a clock that never moves: the flood's first request
    # is its last 200.
    with ForewarnPlatform(vms=["flood", "other"], rate_limit=1, monotonic=lambda: 0.0) as p:
        started = Server(loop, p)
        try:
            yield started
        finally:
            started.close()
            loop.close()


def _turn_until(server: Server, done: Callable[[], bool], turns: int = 50) -> None:
    for _ in range(turns):
        if done():
            return
        server.turn()
    raise AssertionError(f"not done after {turns} turns of the loop")


def _refused_flood(server: Server) -> list[Client]:
    """The flooding VM's connections, each answered once: one 200, then only 429s."""
    flood = [server.connect(FLOOD) for _ in range(FLOOD_CONNECTIONS)]
    for client in flood:
        client.send(get())
    _turn_until(server, lambda: all(client.statuses() for client in flood))
    firsts = sorted(client.statuses()[0] for client in flood)
    assert firsts == [200] + [429] * (FLOOD_CONNECTIONS - 1)
    return [client for client in flood if client.statuses() == [429]]


def test_another_vm_is_answered_before_the_flood_waiting_with_it(server: Server) -> None:
    """Every refused connection of the flood sends again, with another VM's first request
    at the same moment: that VM is answered while nearly all of the flood still waits, and
    then every flood request gets its 429, with IMDS's text."""
    flood = _refused_flood(server)
    for client in flood:
        client.send(get())
    other = server.connect(OTHER)
    other.send(get())
    _turn_until(server, lambda: other.statuses() == [200])
    answered = sum(len(client.statuses()) == 2 for client in flood)
    # Accepting the other VM's connection and reading its request take a few turns of the
    # loop (two on uvloop; asyncio accepts in a task); each answers a few of the flood's.
    limit = 4 * limits.REFUSED_PER_TURN
    assert answered <= limit, f"{answered} of {len(flood)} flood requests went first"
    _turn_until(server, lambda: all(len(client.statuses()) == 2 for client in flood))
    for client in flood:
        second = parse_responses(client.data)[1]
        assert (second.status, second.json()) == (429, TOO_MANY)


def _answers_per_turn(
    server: Server, clients: list[Client], expected: int, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """Step the loop until ``clients`` have ``expected`` answers between them; how many
    were written during each turn of the refused connections (``_RefusedTurns._turn``),
    counted on the clients' sockets before and after it runs (loopback: an answer written
    is readable at once)."""
    counts: list[int] = []
    real_turn = _refused_turns._RefusedTurns._turn

    def counted(turns: _refused_turns._RefusedTurns) -> None:
        before = sum(len(client.statuses()) for client in clients)
        real_turn(turns)
        counts.append(sum(len(client.statuses()) for client in clients) - before)

    monkeypatch.setattr(_refused_turns._RefusedTurns, "_turn", counted)
    answered = lambda: sum(len(c.statuses()) for c in clients) >= expected  # noqa: E731
    _turn_until(server, answered, turns=10 * expected)
    return counts


def test_a_turn_answers_its_few_requests_however_many_each_read_holds(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``limits.REFUSED_PER_TURN`` counts answers, not reads: the flood's refused
    connections each pipeline 8 requests in one write, and no turn answers more than 4 of
    them in all (a turn answering every request of a read gave a pipelining flood 13-23k
    answers a second). Each connection still gets all 8, as 429s, in order."""
    flood = _refused_flood(server)
    for client in flood:
        client.send(get() * 8)
    counts = _answers_per_turn(server, flood, len(flood) * 9, monkeypatch)
    assert max(counts) <= limits.REFUSED_PER_TURN, counts
    assert sum(counts) == len(flood) * 8  # every one of them in a turn
    for client in flood:
        assert client.statuses() == [429] * 9


def test_requests_pipelined_behind_a_429_in_the_same_read_wait_for_turns(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM within its rate limit (one request, here) pipelines 8 requests in one write: the
    first is answered 200 and the second 429 as they are read, the others in turns after
    them (the only connection waiting, it is answered a turn's few), in order."""
    client = server.connect(OTHER)
    client.send(get() * 8)
    counts = _answers_per_turn(server, [client], 8, monkeypatch)
    assert (max(counts, default=0), sum(counts)) == (limits.REFUSED_PER_TURN, 6), counts
    assert client.statuses() == [200] + [429] * 7


def test_a_vm_over_its_rate_limit_has_its_new_connections_answered_in_turns(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM flooding on a new connection for every request (curl in a loop, ``Connection:
    close``) has no connection answered 429 twice: once the VM is answered 429, the first
    request of each of its new connections waits for a turn too, at most 4 answered a turn,
    while another VM's new connection is answered as it comes."""
    _refused_flood(server)
    fresh = [server.connect(FLOOD) for _ in range(12)]
    for client in fresh:
        client.send(get(extra=CLOSE))
    other = server.connect(OTHER)
    other.send(get())
    counts = _answers_per_turn(server, fresh, len(fresh), monkeypatch)
    assert max(counts, default=0) <= limits.REFUSED_PER_TURN, counts
    assert sum(counts) == len(fresh)
    assert all(client.statuses() == [429] for client in fresh)
    assert other.statuses() == [200]


def test_a_refused_connection_pipelining_many_has_every_one_answered_in_turns(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a refused connection pipelines is parsed a slice at a time as its turns come
    (``limits.TURN_SLICE``), so however many requests a write holds, each is answered, in
    order, a turn's few at a time, and the connection is read on afterwards."""
    client = _refused_flood(server)[0]
    many = 3 * limits.MAX_WAITING_BEHIND
    client.send(get() * many)
    counts = _answers_per_turn(server, [client], 1 + many, monkeypatch)
    assert (max(counts), sum(counts)) == (limits.REFUSED_PER_TURN, many)
    client.send(get(extra=CLOSE))
    _turn_until(server, lambda: client.statuses() == [429] * (many + 2) and client.closed)


def test_a_read_pipelining_too_many_behind_a_429_has_those_kept_answered(server: Server) -> None:
    """As for a request held (``limits.MAX_WAITING_BEHIND``): of the requests a read holds
    behind its 429, 16 behind the first are kept and answered in turns, the last with
    ``Connection: close``; what it sent after them is not read (RFC 9112 section 9.3.2: a
    client retries the requests a closed connection left unanswered)."""
    client = server.connect(OTHER)
    client.send(get() * (limits.MAX_WAITING_BEHIND + 10))
    answers = 2 + limits.MAX_WAITING_BEHIND + 1  # its 200, its 429, the kept
    _turn_until(server, lambda: len(client.statuses()) == answers and client.closed, turns=200)
    last = parse_responses(client.data)[-1]
    assert (last.status, last.header("Connection")) == (429, "close")


def test_a_refused_connection_is_answered_in_order_and_read_again(server: Server) -> None:
    """RFC 9112 section 9.3.2: answers come in request order. What a refused connection
    pipelines is answered, 429s in order, once its turn comes; it is then read again, and a
    request that ends it ends it."""
    client = _refused_flood(server)[0]
    client.send(get() + get(b"/metadata/unknown"))
    _turn_until(server, lambda: len(client.statuses()) == 3)
    assert client.statuses() == [429, 429, 404]
    client.send(get(extra=CLOSE))
    _turn_until(server, lambda: client.statuses() == [429, 429, 404, 429] and client.closed)


def test_a_refused_connection_that_goes_away_while_it_waits_is_forgotten(
    server: Server,
) -> None:
    """A client that closes while its request waits for its turn gets nothing written, and
    the others' turns go on."""
    gone, *rest = _refused_flood(server)
    gone.send(get())
    for client in rest:
        client.send(get())
    gone.sock.close()
    server.clients.remove(gone)
    _turn_until(server, lambda: all(len(client.statuses()) == 2 for client in rest))
