"""Requests the socket server answers late, cut short or never: held during an impact, delayed,
silenced or truncated by a fault, and what stays of the connection afterwards.

The server runs in this process (``forewarn.testing``'s socket mode) so that mutation testing
sees ``server/http/``; the platform's clock is a manual one, moved by the test. Every test
also checks that the server logged no error: a wait that ends in an exception inside the
server would otherwise pass unseen.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from e2e_support import exchange, parse_responses, responses_complete
from http_wire_support import (
    CLOSE,
    FAILURE,
    INTERNAL_ERROR,
    approval,
    fail_from_now_on,
    get,
    post,
)

from forewarn.server.http import _connection
from forewarn.testing import ForewarnPlatform

READ_TIMEOUT = 3.0
UNKNOWN = b"/metadata/unknown"
SCHEDULED = "/metadata/scheduledevents"


@pytest.fixture
def platform(caplog: pytest.LogCaptureFixture) -> Iterator[ForewarnPlatform]:
    with caplog.at_level(logging.ERROR), ForewarnPlatform(rate_limit=1000, seed=11) as served:
        served.serve()
        yield served
        served.clear_faults()


class Connection:
    """One client connection, read as the test goes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
        self.data = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def quiet_for(self, seconds: float) -> bool:
        """Nothing arrives, and the server does not close, for ``seconds``."""
        self.sock.settimeout(seconds)
        try:
            self.data += self.sock.recv(65536)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(READ_TIMEOUT)
        return False

    def statuses(self, count: int) -> list[int]:
        """The statuses of the first ``count`` answers, once they have come."""
        complete = responses_complete(count)
        while not complete(self.data):
            chunk = self.sock.recv(65536)
            assert chunk, f"closed after {self.data!r}"
            self.data += chunk
        return [r.status for r in parse_responses(self.data)]

    def ends(self) -> bool:
        """The server closes the connection (within the read timeout) after what came."""
        while chunk := self.sock.recv(65536):
            self.data += chunk
        return True


@pytest.fixture
def connect(platform: ForewarnPlatform) -> Iterator[Callable[[], Connection]]:
    opened: list[Connection] = []

    def open_one() -> Connection:
        opened.append(Connection(platform.port))
        return opened[-1]

    yield open_one
    for connection in opened:
        connection.sock.close()


@pytest.fixture(autouse=True)
def _nothing_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def _start_restart(platform: ForewarnPlatform) -> None:
    """vm0's user restart, approved: its impact
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Impact Duration: 7
    seconds") starts now, and vm0's requests are held until it ends (docs/faithfulness.md: a
    paused VM's call "simply takes longer")."""
    (event,) = platform.restart("vm0")
    reply = exchange("127.0.0.1", platform.port, post(approval(event.event_id), CLOSE))
    assert parse_responses(reply.data)[0].status == 200


def test_requests_behind_a_held_one_keep_their_order_through_a_second_pause(
    platform: ForewarnPlatform, connect: Callable[[], Connection]
) -> None:
    """RFC 9112 section 9.3.2: answers come in request order. A request held by an impact
    holds what is pipelined behind it; when the VM is paused again at its release (a Freeze
    started meanwhile), all of them wait for that pause too, and the connection then reads
    on."""
    _start_restart(platform)
    client = connect()
    client.send(get() + get(UNKNOWN) + get(metadata=False))
    assert client.quiet_for(0.2)
    platform.advance(3)
    platform.schedule("Freeze", "vm0", duration_seconds=10, started=True)
    platform.advance(5)  # the reboot's 7 s are over; the Freeze's 10 s are not
    assert client.quiet_for(0.2)
    platform.advance(10)
    assert client.statuses(3) == [200, 404, 400]
    client.send(get(extra=CLOSE))
    assert client.statuses(4) == [200, 404, 400, 200]
    assert client.ends()


def test_a_held_request_the_endpoint_fails_on_is_a_500(
    platform: ForewarnPlatform,
    connect: Callable[[], Connection],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same logged 500 as for any request the endpoint fails on (SPEC 1:
    "410/500 are transient platform errors that clients retry")."""
    _start_restart(platform)
    client = connect()
    client.send(get() + get())
    assert client.quiet_for(0.1)
    fail_from_now_on(platform, monkeypatch)
    platform.advance(8)
    assert client.statuses(1) == [500]
    assert client.ends()
    assert parse_responses(client.data)[0].body == INTERNAL_ERROR
    (record,) = caplog.records
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == FAILURE
    caplog.clear()


def test_a_held_connection_is_not_idle(
    platform: ForewarnPlatform, connect: Callable[[], Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle timeout closes connections a client forgot; a VM paused by an impact has not
    forgotten its request, however long the pause (the timeouts are shortened here)."""
    from forewarn.server.http import limits

    monkeypatch.setattr(limits, "IDLE_TIMEOUT", 0.2)
    monkeypatch.setattr(limits, "IDLE_SWEEP", 0.05)
    _start_restart(platform)
    client = connect()
    client.send(get(extra=CLOSE))
    assert client.quiet_for(0.5)
    platform.advance(8)
    assert client.statuses(1) == [200]
    assert client.ends()


#: What a client may still have sent after a request that ends its connection: another
#: request, and bytes that are no HTTP at all.
_AFTER_CLOSE = pytest.mark.parametrize(
    "after", [get(UNKNOWN), b"not HTTP at all\r\n\r\n"], ids=["a request", "not HTTP"]
)


def _handled(platform: ForewarnPlatform) -> list[tuple[str, int]]:
    """The path and status of each GET that reached the platform, in order (0: held)."""
    return [(r.path, r.status) for r in platform.requests(method="GET")]


@_AFTER_CLOSE
def test_what_follows_a_held_request_that_says_close_is_never_read(
    platform: ForewarnPlatform, connect: Callable[[], Connection], after: bytes
) -> None:
    """RFC 9112 section 9.6: a server that receives a "close" connection option "MUST
    initiate closure of the connection ... after it sends the final response to the request
    that contained the "close" connection option" and "MUST NOT process any further requests
    received on that connection". Held by an impact (README,
    "Faithfulness": a paused VM's call "simply takes longer"), that request is answered once
    the impact is over, and what was pipelined behind it is neither answered nor refused."""
    _start_restart(platform)
    client = connect()
    client.send(get(extra=CLOSE) + after)
    assert client.quiet_for(0.2)
    platform.advance(8)
    assert client.statuses(1) == [200]
    assert client.ends()
    (answer,) = parse_responses(client.data)
    assert answer.header("Connection") == "close"
    # Handled once as it came (held: 0) and once at the impact's end; the next never.
    assert _handled(platform) == [(SCHEDULED, 0), (SCHEDULED, 200)]


@_AFTER_CLOSE
def test_a_held_request_that_says_close_is_answered_whatever_the_client_sends_meanwhile(
    platform: ForewarnPlatform, connect: Callable[[], Connection], after: bytes
) -> None:
    """RFC 9112 section 9.6 again, with the client sending more while its request is held
    (the server reads nothing of a connection whose request waits): the answer still comes
    once the impact is over, followed by the close. Closing on the unread bytes would reset
    the connection instead, the answer lost ("a significant risk that the client will not be
    able to read the last HTTP response", ibid.)."""
    _start_restart(platform)
    client = connect()
    client.send(get(extra=CLOSE))
    assert client.quiet_for(0.1)
    client.send(after)
    assert client.quiet_for(0.1)
    platform.advance(8)
    assert client.statuses(1) == [200]
    assert client.ends()
    assert len(parse_responses(client.data)) == 1
    assert _handled(platform) == [(SCHEDULED, 0), (SCHEDULED, 200)]


@_AFTER_CLOSE
def test_what_follows_a_request_that_says_close_behind_a_held_one_is_never_read(
    platform: ForewarnPlatform, connect: Callable[[], Connection], after: bytes
) -> None:
    """RFC 9112 section 9.3.2 and 9.6: the held request and the one pipelined behind it
    that says close are answered in order once the impact is over, then the connection
    ends; what came after the close is neither answered nor refused."""
    _start_restart(platform)
    client = connect()
    client.send(get() + get(extra=CLOSE) + after)
    assert client.quiet_for(0.2)
    platform.advance(8)
    assert client.statuses(2) == [200, 200]
    assert client.ends()
    assert len(parse_responses(client.data)) == 2
    assert _handled(platform) == [(SCHEDULED, 0), (SCHEDULED, 200), (SCHEDULED, 200)]


@_AFTER_CLOSE
def test_what_follows_a_request_that_says_close_is_never_read(
    platform: ForewarnPlatform, connect: Callable[[], Connection], after: bytes
) -> None:
    """RFC 9112 section 9.6, without an impact: the request that says close is answered at
    once, the connection ends, and nothing pipelined behind it reaches the platform."""
    client = connect()
    client.send(get(extra=CLOSE) + after)
    assert client.statuses(1) == [200]
    assert client.ends()
    assert len(parse_responses(client.data)) == 1
    assert _handled(platform) == [(SCHEDULED, 200)]


# -- faults on the wire (docs/faults.md, "Kinds") --------------------------------------------


def _whole(platform: ForewarnPlatform, request: bytes) -> tuple[bytes, bytes]:
    """The head (request id blanked) and body of the answer to ``request``, uncut."""
    (response,) = parse_responses(exchange("127.0.0.1", platform.port, request).data)
    return _blank_id(response.head + b"\r\n\r\n"), response.body


def _blank_id(data: bytes) -> bytes:
    """``data`` with the request id (a new one per answer), or what came of it, as dashes."""
    start = data.index(b"x-ms-request-id: ") + len(b"x-ms-request-id: ")
    end = min(start + 36, len(data))
    return data[:start] + b"-" * (end - start) + data[end:]


def test_a_truncated_answer_is_its_whole_head_and_the_first_half_of_its_body(
    platform: ForewarnPlatform, connect: Callable[[], Connection]
) -> None:
    """docs/faults.md, ``truncate``: "the real answer's head with its full Content-Length,
    half its body ..., then a close", even on a kept-alive connection (the head then says
    ``Connection: close``: the server is about to close it). The document here is 37 bytes:
    the first 18 come."""
    head, body = _whole(platform, get(extra=CLOSE))
    assert len(body) == 37
    platform.fault("truncate", count=1)
    client = connect()
    client.send(get())
    assert client.ends()
    assert _blank_id(client.data) == head + body[:18]


def test_a_truncated_answer_without_a_body_is_the_first_half_of_its_head(
    platform: ForewarnPlatform, connect: Callable[[], Connection]
) -> None:
    """docs/faults.md, ``truncate``: "half the head when it has none" (a 304)."""
    conditional = get(extra=b'If-None-Match: "1"\r\n' + CLOSE)
    head, body = _whole(platform, conditional)
    assert (head.split(b" ", 2)[1], body) == (b"304", b"")
    platform.fault("truncate", count=1)
    client = connect()
    client.send(conditional)
    assert client.ends()
    assert _blank_id(client.data) == head[: len(head) // 2]


def test_a_truncate_fault_during_an_impact_closes_without_a_byte(
    platform: ForewarnPlatform, connect: Callable[[], Connection]
) -> None:
    """A VM paused by an impact has no answer to cut: the connection just closes."""
    _start_restart(platform)
    platform.fault("truncate", count=1)
    client = connect()
    client.send(get())
    assert client.ends()
    assert client.data == b""


def test_a_latency_of_zero_answers_at_once_and_spends_one_use(
    platform: ForewarnPlatform, connect: Callable[[], Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/faults.md, ``latency``: "the real answer, ``delay`` seconds late"; a delay of 0
    is allowed, and each request it strikes counts once towards ``count``. The answer is
    timed on the server's loop, whose timers are watched here: the request's is of 0 s."""
    delays = _loop_timers(monkeypatch)
    fault = platform.fault("latency", count=3, delay=0)
    client = connect()
    client.send(get(extra=CLOSE))
    assert client.statuses(1) == [200]
    assert delays[0] == 0  # the answer's timer; closing may set one of its own later
    assert client.ends()
    (left,) = platform.faults()
    assert (left.id, left.remaining, left.hits) == (fault.id, 2, 1)


def _loop_timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays of the timers connections made from now on set on the server's loop."""
    delays: list[float] = []
    made = _connection.ImdsProtocol.__init__

    class Watched:
        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self._loop = loop

        def call_later(self, delay: float, *args: Any) -> asyncio.TimerHandle:
            delays.append(delay)
            return self._loop.call_later(delay, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._loop, name)

    def watched(self: _connection.ImdsProtocol, *args: Any) -> None:
        endpoint, shared, loop, connections = args
        made(self, endpoint, shared, cast(asyncio.AbstractEventLoop, Watched(loop)), connections)

    monkeypatch.setattr(_connection.ImdsProtocol, "__init__", watched)
    return delays


def test_a_timeout_without_a_delay_stays_silent(
    platform: ForewarnPlatform, connect: Callable[[], Connection]
) -> None:
    """docs/faults.md, ``timeout``: "the connection stays open and silent until the client
    gives up" (75 s, the idle timeout, when no delay is given)."""
    platform.fault("timeout", count=1)
    client = connect()
    client.send(get())
    assert client.quiet_for(0.3)


@pytest.mark.parametrize("policy", ["drop", "refuse"])
def test_what_is_pipelined_behind_a_dropped_or_reset_request_is_never_handled(
    policy: str,
) -> None:
    """The ``drop`` and ``refuse`` impact policies (docs/faithfulness.md) end the
    connection at the request that meets the impact: a request pipelined behind it on the
    same connection never reaches the platform (its record shows the first one only)."""
    with ForewarnPlatform(impact={"Reboot": policy}, rate_limit=1000) as platform:
        _start_restart(platform)
        reply = exchange("127.0.0.1", platform.port, get() + get(UNKNOWN))
        assert (reply.closed, reply.data) == (True, b"")
        assert [(r.path, r.status) for r in platform.requests(method="GET")] == [
            ("/metadata/scheduledevents", 0)
        ]


def test_the_request_timeout_bounds_a_request_not_the_wait_between_two(
    platform: ForewarnPlatform, connect: Callable[[], Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request must arrive whole within the request timeout (``REQUEST_TIMEOUT``, 30 s,
    shortened here); a request that does is answered however it trickles, and a kept-alive
    connection may then wait longer than that for its next request (up to the idle timeout)
    without being closed."""
    from forewarn.server.http import limits

    monkeypatch.setattr(limits, "REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(limits, "IDLE_SWEEP", 0.05)
    client = connect()
    assert client.quiet_for(0.15)  # connected, not yet asking: neither idle nor late
    request = get(extra=b"X-Case: trickled\r\n")
    for start in range(0, len(request), 40):  # in about 0.2 s
        client.send(request[start : start + 40])
        time.sleep(0.05)
    assert client.statuses(1) == [200]
    assert client.quiet_for(1.3)  # longer than the request timeout, idle between requests
    client.send(get(extra=CLOSE))
    assert client.statuses(2) == [200, 200]
    assert client.ends()


def _blocks_before(sock: socket.socket, limit: int, request: bytes) -> int:
    """How much of ``limit`` bytes of pipelined ``request``s could be sent before sending
    blocked (half a second without progress); ``limit`` if it never did."""
    burst = request * 64
    sent = 0
    sock.settimeout(0.5)
    try:
        while sent < limit:
            sock.sendall(burst)
            sent += len(burst)
    except TimeoutError:
        pass
    finally:
        sock.settimeout(READ_TIMEOUT)
    return sent


@pytest.mark.parametrize("wait", ["impact", "latency"])
def test_a_connection_waiting_for_its_answer_is_not_read_meanwhile(
    platform: ForewarnPlatform, connect: Callable[[], Connection], wait: str
) -> None:
    """What a client pipelines behind a request that waits (held by an impact, or delayed by
    a latency fault) waits unread in the connection, so that a client cannot make the server
    buffer without bound: its sending blocks."""
    if wait == "impact":
        _start_restart(platform)
    else:
        platform.fault("latency", count=1, delay=5)
    client = connect()
    client.send(get())
    assert client.quiet_for(0.1)
    limit = 64 * 1024 * 1024
    assert _blocks_before(client.sock, limit, get(extra=b"X-Pad: " + b"v" * 3000 + b"\r\n")) < limit
