"""What the endpoint's speed-ups must not change, on a real loopback socket.

The socket server reuses the parse of a request it has seen byte for byte, reuses a 200 answer
while a document's bytes stay the same, and caches the Date header per second. Every check of
the endpoint must still run on every request, and a state change must reach the very next
response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
import uvloop

from forewarn.domain.events import EventSource, EventType
from forewarn.domain.vms import Vm
from forewarn.server.http import start_imds_server
from forewarn.server.imds import Answer, ImdsEndpoint, ImdsRequest
from forewarn.testing import ForewarnPlatform

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
POLL = (
    b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
    b"Host: 169.254.169.254\r\nMetadata: true\r\n\r\n"
)

Client = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class World:
    """A :class:`ForewarnPlatform`'s endpoint, served here by the socket server under test on
    uvloop (as ``forewarn serve`` runs it) in the test's own thread."""

    def __init__(self, rate_limit: float = 1000.0) -> None:
        self.seconds = 0.0
        harness = ForewarnPlatform(
            vms=[Vm(name="vm0", vm_id="id-vm0", address="127.0.0.1")],
            seed=1,
            start=START,
            rate_limit=rate_limit,
            monotonic=lambda: self.seconds,
        )
        self.clock = harness.clock
        self.service = harness.service
        self.platform = self.service._platform  # arranged directly: VMs added after start
        self.endpoint: ImdsEndpoint = harness.endpoint
        self.port = 0


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 5)
    return status, headers, body


def run(world: World, *clients: Client) -> None:
    """Serve ``world`` on a loopback port and run each client on a connection of its own."""

    async def main() -> None:
        server = await start_imds_server(world.endpoint, "127.0.0.1", 0)
        world.port = server.sockets[0].getsockname()[1]
        try:
            for client in clients:
                reader, writer = await asyncio.open_connection("127.0.0.1", world.port)
                try:
                    await client(reader, writer)
                finally:
                    writer.close()
                    await writer.wait_closed()
        finally:
            server.close()
            await server.wait_closed()

    uvloop.run(main())


def test_a_state_change_reaches_the_next_identical_poll() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events" /
    SPEC 2 [doc]: DocumentIncarnation "increases whenever this VM's Events array changes". The third
    poll is byte for byte the second, whose parse is reused, and must still show the new event."""
    world = World()
    seen: list[dict[str, Any]] = []

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for step in range(3):
            if step == 2:
                world.platform.schedule(EventType.FREEZE, ("vm0",), source=EventSource.PLATFORM)
            writer.write(POLL)
            status, _, body = await read_response(reader)
            assert status == 200
            seen.append(orjson.loads(body))

    run(world, client)
    assert seen[0] == seen[1] == {"DocumentIncarnation": 1, "Events": []}
    assert seen[2]["DocumentIncarnation"] == 2
    assert [e["EventType"] for e in seen[2]["Events"]] == ["Freeze"]


def test_every_check_runs_on_a_reused_parse() -> None:
    """SPEC 1 [doc]: over the rate limit -> 429; missing ``Metadata: true`` -> 400.
    Two identical polls in the same instant with a limit of 2 pass; the third, identical
    again and on a new connection, is refused; a poll without the header is refused."""
    world = World(rate_limit=2.0)
    statuses: list[int] = []

    async def poll(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(POLL)
        statuses.append((await read_response(reader))[0])

    async def without_header(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        world.seconds += 10  # a fresh token bucket: only the header is wrong
        writer.write(POLL.replace(b"Metadata: true\r\n", b""))
        statuses.append((await read_response(reader))[0])

    run(world, poll, poll, poll, without_header)
    assert statuses == [200, 200, 429, 400]


def test_split_and_pipelined_polls_are_parsed_in_full() -> None:
    """A known poll split across two reads, or two polls in one read, are not the bytes the
    parse was remembered for: each must still get exactly one answer per request."""
    world = World()
    answers: list[int] = []

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(POLL)
        answers.append((await read_response(reader))[0])
        writer.write(POLL[:20])
        await writer.drain()
        await asyncio.sleep(0.05)  # let the first half arrive as a read of its own
        writer.write(POLL[20:])
        answers.append((await read_response(reader))[0])
        writer.write(POLL + POLL)
        answers.append((await read_response(reader))[0])
        answers.append((await read_response(reader))[0])
        writer.write(POLL)
        answers.append((await read_response(reader))[0])

    run(world, client)
    assert answers == [200] * 5


def test_a_failing_endpoint_is_a_500_on_a_reused_parse_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC 1 [doc]: "410/500 are transient platform errors that clients retry".
    The first poll teaches the server its bytes; the endpoint then fails on the second."""
    world = World()
    original = world.endpoint.respond
    calls = 0

    def failing_after_one(request: ImdsRequest) -> Answer:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("the endpoint failed on purpose")
        return original(request)

    def failing_again(*repeated: object) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the endpoint failed on purpose")

    monkeypatch.setattr(world.endpoint, "respond", failing_after_one)
    # the same poll again is answered through respond_again (ImdsEndpoint.respond_again)
    monkeypatch.setattr(world.endpoint, "respond_again", failing_again)
    logged: list[str] = []
    results: list[int] = []

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: logged.append(str(context.get("message")))
        )
        writer.write(POLL)
        results.append((await read_response(reader))[0])
        writer.write(POLL)
        status, headers, _ = await read_response(reader)
        results.append(status)
        assert headers["connection"] == "close"

    run(world, client)
    assert results == [200, 500]
    assert logged == ["error answering a request"]


def test_the_date_header_follows_the_platform_clock_second_by_second() -> None:
    """RFC 9110 section 6.6.1, Date; SPEC 2 [ours]: the header is in the platform's
    time, so clients compare NotBefore against it, manual clock included."""
    world = World()
    dates: list[str] = []

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for advance in (0.0, 0.5, 0.6, 3600.0):
            world.clock.advance(timedelta(seconds=advance))
            writer.write(POLL)
            dates.append((await read_response(reader))[1]["date"])

    run(world, client)
    assert dates == [
        "Mon, 11 Apr 2022 22:11:58 GMT",
        "Mon, 11 Apr 2022 22:11:58 GMT",
        "Mon, 11 Apr 2022 22:11:59 GMT",
        "Mon, 11 Apr 2022 23:11:59 GMT",
    ]


def test_idle_and_stuck_connections_are_closed_by_the_listener_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """forewarn.server.http, IDLE_TIMEOUT [ours]: a connection idle, or stuck half-way through
    a request, for longer than the timeout is closed, so dead clients cannot pile up. One timer
    per listener does it (the timeouts are shortened here so the test takes a second)."""
    from forewarn.server.http import limits

    monkeypatch.setattr(limits, "IDLE_TIMEOUT", 0.3)
    monkeypatch.setattr(limits, "IDLE_SWEEP", 0.05)
    world = World()
    outcomes: list[bytes] = []

    async def idle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(POLL)
        await read_response(reader)
        outcomes.append(await asyncio.wait_for(reader.read(), 3))  # b"" once closed

    async def stuck(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(POLL[:30])
        outcomes.append(await asyncio.wait_for(reader.read(), 3))

    async def busy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(8):  # a poll every 0.1 s: never idle for 0.3 s
            writer.write(POLL)
            assert (await read_response(reader))[0] == 200
            await asyncio.sleep(0.1)
        outcomes.append(b"still open")

    run(world, idle, stuck, busy)
    assert outcomes == [b"", b"", b"still open"]
