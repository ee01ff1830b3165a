"""The socket server's bookkeeping: what it remembers of parses, its timers, its listeners.

None of this changes an answer, which is the point: ``server/http/`` promises to parse a poll
it has seen byte for byte only once, to keep one timer per listener and one for held requests
(none at all once there is nothing to look at), and to share one set of these per endpoint and
event loop. These tests hold it to those promises, through the parser it creates, the timers
it arms on a stand-in loop, and a second event loop serving the same endpoint.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httptools
import pytest
from e2e_support import exchange, parse_responses, responses_complete
from http_wire_support import CLOSE, TARGET, approval, get, post

from forewarn.domain.vms import Vm
from forewarn.server import http
from forewarn.server.http import (
    _held_requests,
    _idle_connections,
    _listener,
    _parse_cache,
    _shared,
    limits,
)
from forewarn.server.imds import ImdsEndpoint
from forewarn.testing import ForewarnPlatform

# -- the parses remembered -----------------------------------------------------------------


def test_the_parse_cache_is_bounded_in_entry_size_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request over 2 KiB is not remembered; what is remembered holds at most
    ``limits.PARSED_BYTES``, and when full the newest entries make room (one entry per VM's
    poll is the use; a flood of distinct requests must not grow it without bound, nor push
    out the polls already known)."""
    monkeypatch.setattr(limits, "PARSED_BYTES", 64 * 1024)
    cache = _parse_cache._ParsedRequests()
    parsed = _parse_cache._Parsed("GET", "/", "", {}, b"", True)
    cache.put(b"x" * limits.CACHEABLE_REQUEST, parsed)
    cache.put(b"y" * (limits.CACHEABLE_REQUEST + 1), parsed)
    assert cache.get(b"x" * limits.CACHEABLE_REQUEST) is parsed
    assert cache.get(b"y" * (limits.CACHEABLE_REQUEST + 1)) is None
    entry = _parse_cache.held_bytes(b"%05d" % 0, parsed)
    fits = (limits.PARSED_BYTES - cache.held_bytes) // entry
    for index in range(fits):
        cache.put(b"%05d" % index, parsed)
    assert cache.get(b"00000") is parsed
    assert cache.held_bytes + entry > limits.PARSED_BYTES  # full
    last = b"%05d" % (fits - 1)
    cache.put(b"one more", parsed)
    assert (cache.get(b"00000"), cache.get(last), cache.get(b"one more")) == (parsed, None, parsed)
    assert cache.held_bytes <= limits.PARSED_BYTES


class _Sink:
    """A connected transport at 127.0.0.1 that only keeps the last answer written."""

    def __init__(self) -> None:
        self.last = b""

    def write(self, data: bytes) -> None:
        self.last = data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 80) if name in ("sockname", "peername") else default

    def is_closing(self) -> bool:
        return False

    def is_reading(self) -> bool:
        return True


def test_distinct_requests_with_many_headers_hold_no_more_than_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the parse cache holds, measured (tracemalloc), stays within
    ``limits.PARSED_BYTES`` when a VM sends distinct 1.6 KB GETs of sixty short headers
    each: each parses into several times its size (dicts and strings), so a bound in
    entries alone let 20,000 of them hold 192 MiB. Here the bound is lowered to 256 KiB and
    600 of them (6 MiB as entries) are sent."""
    monkeypatch.setattr(limits, "PARSED_BYTES", 256 * 1024)
    platform = ForewarnPlatform(vms=[Vm(name="vm0", vm_id="cache-vm0", address="127.0.0.1")])
    # The endpoint ``forewarn serve`` runs, without the test platform's record of requests.
    endpoint = ImdsEndpoint(platform.service, rate_limit=1e9)
    loop = asyncio.new_event_loop()
    shared = _shared._Shared(endpoint, loop)
    connections = _idle_connections._Connections(loop)
    protocol = http.ImdsProtocol(endpoint, shared, loop, connections)
    sink = _Sink()
    protocol.connection_made(cast(asyncio.Transport, sink))
    padding = b"".join(b"X-H%02d: %s\r\n" % (n, b"v" * 15) for n in range(60))
    requests = [get(extra=b"X-Distinct: %06d\r\n%s" % (index, padding)) for index in range(600)]
    assert 1500 < len(requests[0]) < limits.CACHEABLE_REQUEST
    try:
        tracemalloc.start()
        for request in requests:
            protocol.data_received(request)
        answered = sink.last
        cache = shared.parsed
        # What the cache holds is what emptying it gives back (the connection, which keeps
        # its last request's parse, let go first); unlike the growth since the start, this
        # counts nothing another thread allocated meanwhile.
        del protocol, shared, connections
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        cache._entries.clear()
        gc.collect()
        held = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        loop.close()
        platform.close()
    assert answered.startswith(b"HTTP/1.1 200 OK\r\n")
    assert held <= limits.PARSED_BYTES, f"the cache held {held:,} B"
    entry = cache.held_bytes / len(cache._sizes)
    assert cache.held_bytes > limits.PARSED_BYTES - entry  # it did fill up


@pytest.fixture
def parsers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every HTTP parser the server makes from now on."""
    made: list[object] = []
    real = httptools.HttpRequestParser

    def counted(protocol: object) -> object:
        made.append(protocol)
        return real(protocol)

    monkeypatch.setattr(httptools, "HttpRequestParser", counted)
    return made


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with ForewarnPlatform(rate_limit=10_000, seed=3) as platform:
        yield platform.port


def _target_of(length: int) -> bytes:
    """The poll's target, made ``length`` bytes long with parameters of 100 bytes at most."""
    target, index = TARGET, 0
    while len(target) < length:
        index += 1
        name = b"&k%d=" % index
        target += name + b"v" * min(100, length - len(target) - len(name))
    assert len(target) == length
    return target


def _asked(port: int, *parts: bytes, answers: int = 1) -> list[int]:
    """The statuses of the answers to ``parts`` sent on one new connection."""
    reply = exchange("127.0.0.1", port, *parts, pause=0.05, until=responses_complete(answers))
    return [r.status for r in parse_responses(reply.data)]


def test_a_poll_seen_before_is_answered_without_parsing_it_again(
    port: int, parsers: list[object]
) -> None:
    """The module's promise (server/http/, ``_ParsedRequests``): a read holding exactly one
    whole bodiless GET, arriving between requests, is remembered by its bytes; the same bytes
    again, on any connection, are not parsed again."""
    poll = get(extra=b"X-Case: remembered\r\n")
    assert _asked(port, poll) == [200]
    assert len(parsers) == 1
    assert _asked(port, poll) == [200]
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        for _ in range(2):  # a kept-alive connection polling
            sock.sendall(poll)
            data = b""
            while not responses_complete(1)(data):
                data += sock.recv(65536)
    assert len(parsers) == 1


def test_a_connection_repeating_its_poll_needs_no_shared_entry(
    port: int, parsers: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet whose VMs each send their own Host has more distinct polls than the shared
    cache holds; a kept connection still answers its repeated poll without parsing it again,
    from its own last poll, and a new connection finds it in the shared cache."""
    poll = get(extra=b"X-Case: own connection\r\n")
    looked_up: list[bytes] = []
    real_get = _parse_cache._ParsedRequests.get

    def get_counted(cache: _parse_cache._ParsedRequests, data: bytes) -> object:
        looked_up.append(data)
        return real_get(cache, data)

    monkeypatch.setattr(_parse_cache._ParsedRequests, "get", get_counted)
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        for _ in range(3):
            sock.sendall(poll)
            data = b""
            while not responses_complete(1)(data):
                data += sock.recv(65536)
            assert parse_responses(data)[0].status == 200
    assert len(parsers) == 1  # parsed once, on the first poll
    assert looked_up == [poll]  # and looked up in the shared cache only then
    assert _asked(port, poll) == [200]  # a new connection: the shared cache knows it
    assert (len(parsers), looked_up) == (1, [poll, poll])


def test_polls_differing_only_in_their_host_share_one_parse(
    port: int, parsers: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """VMs at their own addresses each send their own Host (``_ParsedRequests``): their
    polls are one parse, each request still carrying its own Host. A Host that is not one
    plain name is only found again in the same bytes, and a Host folded from two lines is not
    shared at all."""
    seen: list[str | None] = []
    real_answer = http.ImdsProtocol._answer

    def answer(protocol: http.ImdsProtocol, parsed: _parse_cache._Parsed) -> None:
        seen.append(parsed.headers.get("host"))
        real_answer(protocol, parsed)

    monkeypatch.setattr(http.ImdsProtocol, "_answer", answer)
    poll = get(extra=b"X-Case: own host\r\n")
    for host in (b"127.1.0.1:80", b"127.1.0.2", b"[::1]:8080"):
        assert _asked(port, poll.replace(b"169.254.169.254", host)) == [200]
    assert (len(parsers), seen) == (1, ["127.1.0.1:80", "127.1.0.2", "[::1]:8080"])
    odd = poll.replace(b"169.254.169.254", b"a b")
    twice = poll.replace(b"X-Case", b"Host: 127.1.0.3\r\nX-Case")
    for request in (odd, odd, twice, twice):
        assert _asked(port, request) == [200]
    assert len(parsers) == 4
    assert seen[3:] == ["a b", "a b", "169.254.169.254, 127.1.0.3", "169.254.169.254, 127.1.0.3"]


def test_the_host_left_out_of_a_shared_parse_is_one_plain_line() -> None:
    """Only a head's one ``Host:`` line whose value is a plain name or address is left out."""
    head = b"GET / HTTP/1.1\r\nHost: %s\r\nMetadata: true\r\n\r\n"
    for value in (b"169.254.169.254", b"vm-1.example:8080", b"[fe80::1]:80"):
        assert _parse_cache._host_free(head % value) == (
            b"GET / HTTP/1.1\r\nMetadata: true\r\n\r\n",
            value.decode(),
        )
    for value in (b"", b"a b", b"a\tb", b"x" * 256, "\u00e9".encode()):
        assert _parse_cache._host_free(head % value) == (head % value, None)
    after_head = b"GET / HTTP/1.1\r\nMetadata: true\r\n\r\nHost: a\r\n"
    assert _parse_cache._host_free(after_head) == (after_head, None)


@pytest.mark.parametrize(
    ("parts", "answers"),
    [
        ((get(extra=b"X-Case: two\r\n") * 2,), 2),
        ((get(extra=b"X-Case: body\r\nContent-Length: 2\r\n") + b"{}",), 1),
        ((get(extra=b"X-Case: post\r\n").replace(b"GET", b"POST", 1),), 1),
        ((get(_target_of(limits.CACHEABLE_URL + 1)),), 1),
    ],
    ids=["two in one read", "GET with a body", "POST", "long URL"],
)
def test_other_requests_are_parsed_every_time(
    port: int, parsers: list[object], parts: tuple[bytes, ...], answers: int
) -> None:
    """Not remembered: a read of two requests, a GET with a body, another method, a URL
    longer than 512 bytes."""
    first = _asked(port, *parts, answers=answers)
    assert len(first) == answers
    assert _asked(port, *parts, answers=answers) == first
    assert len(parsers) == 2


def test_a_url_of_512_bytes_is_remembered(port: int, parsers: list[object]) -> None:
    poll = get(_target_of(limits.CACHEABLE_URL))
    assert _asked(port, poll) == _asked(port, poll) == [200]
    assert len(parsers) == 1


def test_the_end_of_a_split_request_is_not_taken_for_a_request(port: int) -> None:
    """The second read of a request split in two is not between requests: its bytes alone,
    sent later on a connection of their own, are no request (400), whatever was parsed."""
    poll = get(extra=b"X-Case: halves\r\n" + CLOSE)
    assert _asked(port, poll[:20], poll[20:]) == [200]
    assert _asked(port, poll[20:]) == [400]


# -- timers, on a stand-in loop ------------------------------------------------------------


class _Loop:
    """The two things the server's timers use of a loop: its time, and call_later."""

    def __init__(self) -> None:
        self.now = 0.0
        self.armed: list[tuple[float, Callable[..., Any]]] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[..., Any]) -> object:
        self.armed.append((delay, callback))
        return object()  # a handle: the server only keeps it

    def fire(self) -> None:
        """Run the one armed timer."""
        ((_, callback),) = self.armed
        self.armed.clear()
        callback()


class _Connection:
    """What the server's bookkeeping asks of a connection (``ImdsProtocol``)."""

    def __init__(
        self,
        connections: _idle_connections._Connections,
        idle: float,
        vm: str = "127.0.0.2",
        *,
        last_byte: float | None = 0.0,
    ) -> None:
        self.connections = connections
        self.idle = idle
        self.vm = vm
        self.last_byte = last_byte  # when its last bytes came, None while busy
        self.released = 0
        self.closed = False
        self.aborted = False
        self.left = False  # its client closed its side while the request was held

    def caller(self) -> tuple[str, str]:
        return (self.vm, "127.0.0.1")

    def client_left(self) -> bool:
        return self.left

    def idle_since(self, now: float) -> float:
        return self.idle

    def idle_at(self) -> float | None:
        return None if self.closed or self.aborted else self.last_byte

    def close_idle(self) -> None:
        self.closed = True
        self.connections.discard(self)  # type: ignore[arg-type]  # as connection_lost does

    def abort(self) -> None:
        self.aborted = True
        self.connections.discard(self)  # type: ignore[arg-type]  # as connection_lost does

    def release(self) -> None:
        self.released += 1


def test_one_timer_and_none_once_every_connection_is_gone() -> None:
    """One idle sweep per endpoint, however many connections; connections idle for the idle
    timeout are closed at a sweep, and with none left no timer is armed (an idle server
    wakes nothing)."""
    loop = _Loop()
    connections = _idle_connections._Connections(loop)  # type: ignore[arg-type]
    busy, idle = _Connection(connections, 1.0), _Connection(connections, limits.IDLE_TIMEOUT)
    for connection in (busy, idle):
        connections.add(connection)  # type: ignore[arg-type]
    assert [delay for delay, _ in loop.armed] == [limits.IDLE_SWEEP]
    loop.fire()
    assert (busy.closed, idle.closed, len(loop.armed)) == (False, True, 1)
    busy.idle = limits.IDLE_TIMEOUT + 1
    loop.fire()
    assert (busy.closed, loop.armed) == (True, [])


def test_a_vm_at_its_cap_loses_its_longest_idle_connection_or_the_new_one() -> None:
    """``limits.CONNECTIONS_PER_VM``: a VM's connection beyond its cap closes that VM's
    longest-idle one (HTTP lets a server close an idle kept connection at any time, RFC 9112
    section 9.5); when none of its connections is idle, the new one is closed at once.
    Another VM's connections are never touched."""
    loop = _Loop()
    connections = _idle_connections._Connections(loop)  # type: ignore[arg-type]
    cap = limits.CONNECTIONS_PER_VM
    mine = [_Connection(connections, 0.0, last_byte=float(index)) for index in range(cap)]
    other = _Connection(connections, 0.0, "127.0.0.3", last_byte=-1.0)
    for connection in [other, *mine]:
        connections.add(connection)  # type: ignore[arg-type]
    newer = _Connection(connections, 0.0, last_byte=float(cap))
    connections.add(newer)  # type: ignore[arg-type]
    assert [c.closed for c in mine] == [True] + [False] * (cap - 1)
    assert (newer.aborted, other.closed, len(connections)) == (False, False, cap + 1)
    for connection in [*mine[1:], newer]:
        connection.last_byte = None  # busy: a request in progress, held or waiting
    refused = _Connection(connections, 0.0, last_byte=101.0)
    connections.add(refused)  # type: ignore[arg-type]
    assert (refused.aborted, other.closed, len(connections)) == (True, False, cap + 1)
    mine[3].last_byte = 7.0  # idle again
    accepted = _Connection(connections, 0.0, last_byte=102.0)
    connections.add(accepted)  # type: ignore[arg-type]
    assert (mine[3].closed, accepted.aborted, len(connections)) == (True, False, cap + 1)
    assert sum(c.closed for c in mine) == 2


def test_short_of_descriptors_the_vms_holding_most_lose_their_longest_idle_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``limits.RESERVED_DESCRIPTORS``: the VMs' connections may use what the descriptor
    limit leaves after the process's other descriptors and the reserve (here 200 - 36 - 64:
    100). Past that, idle connections are closed one at a time from the VM holding the most
    at that point, its longest-idle one, so a VM polling on its one kept connection (the
    oldest of all here) keeps it; a new connection finding none idle is closed at once."""
    loop = _Loop()
    connections = _idle_connections._Connections(loop)  # type: ignore[arg-type]
    monkeypatch.setattr(_idle_connections, "descriptor_limit", lambda: 200)
    monkeypatch.setattr(_idle_connections, "open_descriptors", lambda: 36 + len(connections))
    polite = _Connection(connections, 0.0, "127.0.0.9", last_byte=0.0)
    connections.add(polite)  # type: ignore[arg-type]
    greedy: dict[str, list[_Connection]] = {}
    for index in range(120):
        vm = f"127.0.1.{index % 4}"
        connection = _Connection(connections, 0.0, vm, last_byte=1.0 + index)
        greedy.setdefault(vm, []).append(connection)
        connections.add(connection)  # type: ignore[arg-type]
        assert len(connections) <= 100
    assert not polite.closed
    left = {vm: [c for c in mine if not c.closed] for vm, mine in greedy.items()}
    assert max(map(len, left.values())) - min(map(len, left.values())) <= 1
    for mine in greedy.values():  # the oldest went
        assert [c.closed for c in mine] == sorted((c.closed for c in mine), reverse=True)
    for mine in left.values():
        for connection in mine:
            connection.last_byte = None  # busy
    polite.last_byte = None
    while len(connections) < 100:
        connections.add(_Connection(connections, 0.0, "127.0.2.1", last_byte=None))  # type: ignore[arg-type]
    refused = _Connection(connections, 0.0, "127.0.2.2", last_byte=500.0)
    connections.add(refused)  # type: ignore[arg-type]
    assert (refused.aborted, polite.closed, len(connections)) == (True, False, 100)


def test_held_requests_are_released_in_order_of_their_end_by_one_timer() -> None:
    """docs/faithfulness.md, hold: a paused VM's call completes once the VM runs again;
    the server looks at all held requests with one timer, releases those whose pause is
    over (several may end at the same instant), and stops looking when none is left."""
    clock = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
    now = [clock]
    loop = _Loop()
    held = _held_requests._HeldRequests(loop, lambda: now[0])  # type: ignore[arg-type]
    connections = _idle_connections._Connections(loop)  # type: ignore[arg-type]
    late, first, second = (_Connection(connections, 0.0) for _ in range(3))
    held.hold(clock + timedelta(seconds=9), late)  # type: ignore[arg-type]
    held.hold(clock + timedelta(seconds=7), first)  # type: ignore[arg-type]
    held.hold(clock + timedelta(seconds=7), second)  # type: ignore[arg-type]
    assert [delay for delay, _ in loop.armed] == [limits.HOLD_TICK]
    loop.fire()
    assert [c.released for c in (late, first, second)] == [0, 0, 0]
    now[0] = clock + timedelta(seconds=7)
    loop.fire()
    assert [c.released for c in (late, first, second)] == [0, 1, 1]
    assert len(held) == 1
    now[0] = clock + timedelta(seconds=60)
    loop.fire()
    assert [c.released for c in (late, first, second)] == [1, 1, 1]
    assert (len(held), loop.armed) == (0, [])


def test_held_connections_of_a_vm_at_its_cap_make_room_only_once_their_client_left() -> None:
    """A VM at its cap of connections (``limits.CONNECTIONS_PER_VM``), each holding a call:
    a new connection is refused while every client still waits, and closes the held one
    whose client has left once one has (``ImdsProtocol.idle_at`` counts it idle); that one
    is still looked at when its pause ends, and nothing is left held after."""
    clock = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
    now = [clock]
    loop = _Loop()
    held = _held_requests._HeldRequests(loop, lambda: now[0])  # type: ignore[arg-type]
    connections = _idle_connections._Connections(_Loop())  # type: ignore[arg-type]
    cap = limits.CONNECTIONS_PER_VM
    waiting = [_Connection(connections, 0.0, last_byte=None) for _ in range(cap)]
    for connection in waiting:
        connections.add(connection)  # type: ignore[arg-type]
        held.hold(clock + timedelta(seconds=7), connection)  # type: ignore[arg-type]
    refused = _Connection(connections, 0.0)
    connections.add(refused)  # type: ignore[arg-type]
    gone = waiting[0]
    gone.last_byte = 0.0  # its client left: idle (ImdsProtocol.idle_at)
    retry = _Connection(connections, 0.0)
    connections.add(retry)  # type: ignore[arg-type]
    assert (refused.aborted, gone.closed, retry.aborted, len(connections)) == (
        True,
        True,
        False,
        cap,
    )
    now[0] = clock + timedelta(seconds=7)
    loop.fire()
    assert [c.released for c in waiting] == [1] * cap
    assert (len(held), loop.armed) == (0, [])


# -- listeners -----------------------------------------------------------------------------


def test_an_endpoint_served_again_on_a_new_event_loop_still_holds_and_releases() -> None:
    """What the listeners of one endpoint share (its held requests' timer first) belongs to
    the event loop that serves them: serving the same endpoint again on another loop (a
    second ``asyncio.run``) must not use the first loop's, which is closed."""
    platform = ForewarnPlatform(rate_limit=1000, seed=9)

    async def serve(client: Callable[[int], Any]) -> Any:
        server = await http.start_imds_server(platform.endpoint, "127.0.0.1", 0)
        try:
            return await client(server.sockets[0].getsockname()[1])
        finally:
            server.close()
            await server.wait_closed()

    async def ask(port: int, request: bytes, advance: float = 0.0) -> list[int]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        if advance:
            await asyncio.sleep(0.1)
            platform.advance(advance)
        data = await asyncio.wait_for(reader.read(), 3)
        writer.close()
        return [r.status for r in parse_responses(data)]

    (event,) = platform.restart("vm0")
    assert asyncio.run(serve(lambda p: ask(p, post(approval(event.event_id), CLOSE)))) == [200]
    held = asyncio.run(serve(lambda p: ask(p, get(extra=CLOSE), advance=8)))
    assert held == [200]
    platform.close()


PEERS = """
vms:
  - {name: left, address: 127.0.0.5}
  - {name: right, address: 127.0.0.6}
"""


def test_a_vm_is_known_by_the_address_it_calls_from_on_a_shared_listener() -> None:
    """SPEC 1: forewarn binds wherever it is told; a listener that is no VM's
    address (one address for a whole namespace of VMs) knows each VM by the address its
    request comes from, for its document and for the faults aimed at it."""
    platform = ForewarnPlatform(fleet=PEERS, rate_limit=1000, seed=4)
    platform.fault("gone", vm="right", count=1)

    async def ask_from(source: str, port: int) -> int:
        with socket.socket() as sock:
            sock.bind((source, 0))
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock.dup())
        writer.write(get(extra=CLOSE))
        data = await asyncio.wait_for(reader.read(), 3)
        writer.close()
        (response,) = parse_responses(data)
        return response.status

    async def main() -> list[int]:
        server = await http.start_imds_server(platform.endpoint, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return [await ask_from(source, port) for source in ("127.0.0.5", "127.0.0.6")]
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == [200, 410]
    assert [r.vm for r in platform.requests()] == ["left"]
    platform.close()


def test_a_closed_connection_is_freed_without_the_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """server/http/, ``connection_lost``: a connection leaves nothing behind once closed
    (not its parser's reference cycle, not its place among the listener's connections), so
    10,000 VMs polling on a new connection each second do not wait for the collector."""
    platform = ForewarnPlatform(rate_limit=1000, seed=8)
    made: list[weakref.ref[http.ImdsProtocol]] = []

    class Watched(http.ImdsProtocol):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(weakref.ref(self))

    monkeypatch.setattr(_listener, "ImdsProtocol", Watched)

    async def main() -> list[int]:
        server = await http.start_imds_server(platform.endpoint, "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.sockets[0].getsockname()[1]
            )
            writer.write(get(extra=b"X-Case: freed\r\n" + CLOSE))
            data = await asyncio.wait_for(reader.read(), 3)
            writer.close()
            for _ in range(5):  # the transport tells the protocol on a later iteration
                await asyncio.sleep(0)
            return [r.status for r in parse_responses(data)]
        finally:
            server.close()
            await server.wait_closed()

    gc.disable()
    try:
        assert asyncio.run(main()) == [200]
        assert len(made) == 1
        assert made[0]() is None
    finally:
        gc.enable()
        platform.close()
