"""The socket server's answers byte for byte, and what each leaves of the connection.

``test_e2e_http_protocol.py`` checks the protocol as clients use it (statuses, order, header
presence); this pins the exact bytes of every kind of answer ``server/http/`` writes, as a
client's parser meets them: the status line and reason phrase, the header names and their case
in the order of real captures, ``Connection: close`` exactly on the answers after which the
connection ends, and that a kept-alive connection goes on after each kind of answer. The
server runs in this process (``forewarn.testing``'s socket mode), so mutation testing sees it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from email.utils import format_datetime

import pytest
from e2e_support import exchange, parse_responses, responses_complete
from http_wire_support import (
    CLOSE,
    FAILURE,
    INTERNAL_ERROR,
    TARGET,
    approval,
    fail_from_now_on,
    get,
    post,
)

from forewarn.testing import ForewarnPlatform

JSON_TYPE = b"Content-Type: application/json; charset=utf-8\r\n"
#: SPEC 1 [seen: SDK logs and public captures]: "Response headers seen on the real
#: service, in this order: Content-Type, Server: IMDS/150.870.65.1854 (the build number
#: varies), x-ms-request-id: <GUID> (a new one per response), Date, Content-Length".
SERVED_BY = b"Server: IMDS/150.870.65.1854\r\nx-ms-request-id: <id>\r\nDate: <date>\r\n"
_REQUEST_ID = re.compile(
    rb"x-ms-request-id: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\r\n"
)


LENGTH = b"Content-Length: <len>\r\n"


class Wire:
    """The platform's socket server, spoken to as VM ``vm0`` at 127.0.0.1."""

    def __init__(self, platform: ForewarnPlatform) -> None:
        self.platform = platform
        self.port = platform.port

    def heads(self, *requests: bytes, wait: float = 3.0) -> tuple[list[bytes], bool]:
        """The heads of the answers to ``requests`` sent on one connection (request ids and
        the Date shown as ``<id>`` and ``<date>``), and whether the server closed it within
        ``wait`` seconds of the last."""
        reply = exchange("127.0.0.1", self.port, b"".join(requests), read_timeout=wait)
        responses = parse_responses(reply.data)
        date = format_datetime(self.platform.now, usegmt=True).encode()
        heads = [
            _REQUEST_ID.sub(b"x-ms-request-id: <id>\r\n", r.head + b"\r\n\r\n")
            .replace(b"Date: " + date + b"\r\n", b"Date: <date>\r\n")
            .replace(b"Content-Length: %d\r\n" % len(r.body), LENGTH)
            for r in responses
        ]
        return heads, reply.closed


@pytest.fixture
def served() -> Iterator[ForewarnPlatform]:
    """A platform of the test's own: the ETags the tests expect count from its first
    document, whichever tests ran before on the same worker (a platform shared by the module
    made them depend on how pytest-xdist shared the module's tests out)."""
    with ForewarnPlatform(rate_limit=1000, seed=7) as platform:
        platform.serve()
        yield platform


@pytest.fixture
def wire(served: ForewarnPlatform) -> Iterator[Wire]:
    yield Wire(served)
    served.clear_faults()
    for view in served.events():
        if view.event.status.value == "Scheduled":
            served.cancel(view.event)
    served.advance(15 * 60)


def test_each_kind_of_answer_keeps_the_connection_and_has_the_real_head(wire: Wire) -> None:
    """SPEC 1: the headers of the real service in their order and case, with the
    statuses of the endpoint (200, 304 Not Modified for a current If-None-Match, 404 unknown
    path, 400 without the Metadata header, 405 other methods). RFC 9112 section 9.3: an
    HTTP/1.1 connection persists after each of them, until the request that says close, and
    RFC 9112 section 9.6: that answer says ``Connection: close``."""
    heads, closed = wire.heads(
        get(),
        get(extra=b'If-None-Match: "1"\r\n'),
        get(b"/metadata/unknown"),
        get(metadata=False),
        b"DELETE %s HTTP/1.1\r\nMetadata: true\r\n\r\n" % TARGET,
        post(approval("C7061BAC-AFDC-4513-B24B-AA5F13A16123")),
        get(extra=CLOSE),
    )
    assert closed
    assert heads == [
        b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b'ETag: "1"\r\n\r\n',
        b"HTTP/1.1 304 Not Modified\r\n" + SERVED_BY + b'ETag: "1"\r\n\r\n',
        b"HTTP/1.1 404 Not Found\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b"\r\n",
        b"HTTP/1.1 400 Bad Request\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b"\r\n",
        b"HTTP/1.1 405 Method Not Allowed\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b"\r\n",
        b"HTTP/1.1 400 Bad Request\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b"\r\n",
        b"HTTP/1.1 200 OK\r\n" + JSON_TYPE + SERVED_BY + LENGTH + b'ETag: "1"\r\n' + CLOSE
        + b"\r\n",
    ]  # fmt: skip


def test_an_approval_is_an_empty_200_and_a_304_can_end_the_connection(wire: Wire) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": the
    approval POST; forewarn answers it 200 with an empty body, so no Content-Type. A 304 has no body
    and so no Content-Length (RFC 9110 section 8.6), with ``Connection: close`` when it is the
    last."""
    event = wire.platform.schedule("Freeze", "vm0", duration_seconds=0)
    heads, closed = wire.heads(
        post(approval(event.event_id)),
        get(extra=b'If-None-Match: "3"\r\n' + CLOSE),
    )
    assert closed
    assert heads == [
        b"HTTP/1.1 200 OK\r\n" + SERVED_BY + LENGTH + b"\r\n",
        b"HTTP/1.1 304 Not Modified\r\n" + SERVED_BY + b'ETag: "3"\r\n' + CLOSE + b"\r\n",
    ]


@pytest.mark.parametrize(
    ("kind", "status_line"),
    [
        ("gone", b"HTTP/1.1 410 Gone\r\n"),
        ("error", b"HTTP/1.1 500 Internal Server Error\r\n"),
        ("throttle", b"HTTP/1.1 429 Too Many Requests\r\n"),
        ("unavailable", b"HTTP/1.1 503 Service Unavailable\r\n"),
    ],
)
def test_an_error_fault_has_the_real_head_and_ends_the_connection_only_when_asked(
    wire: Wire, kind: str, status_line: bytes
) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging":
    410, 500 and 429 as IMDS answers them; the fault's answer keeps a kept-alive connection, and
    closes one that said close."""
    wire.platform.fault(kind, count=2)
    error = status_line + JSON_TYPE + SERVED_BY + LENGTH
    heads, closed = wire.heads(get(), get(extra=CLOSE))
    assert closed
    assert heads == [error + b"\r\n", error + CLOSE + b"\r\n"]
    reply = exchange("127.0.0.1", wire.port, get(extra=CLOSE))
    assert parse_responses(reply.data)[0].status == 200


@pytest.mark.parametrize("after", [0, 1], ids=["parsed", "parse reused"])
def test_an_endpoint_failure_is_a_500_that_closes_and_logs_the_exception(
    wire: Wire, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, after: int
) -> None:
    """SPEC 1: "410/500 are transient platform errors that clients retry"; the
    server's log shows the exception and the connection it happened on. The second case
    fails on a poll whose bytes the server has parsed before."""
    poll = get(b"/metadata/scheduledevents?api-version=2020-07-01&case=%d" % after)
    if after:
        taught = exchange("127.0.0.1", wire.port, poll, until=responses_complete(1))
        assert parse_responses(taught.data)[0].status == 200
    fail_from_now_on(wire.platform, monkeypatch)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        # The reused parse is of exactly these bytes; a request pipelined behind the failing
        # one (parsed afresh) is not answered.
        reply = exchange("127.0.0.1", wire.port, poll if after else poll + get())
    assert reply.closed
    assert not reply.reset
    (response,) = parse_responses(reply.data)
    assert response.head.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert response.head.endswith(b"\r\n" + CLOSE.rstrip())
    assert response.body == INTERNAL_ERROR
    (record,) = caplog.records
    assert record.getMessage().startswith("error answering a request")
    assert "protocol: <forewarn.server.http._connection.ImdsProtocol" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == FAILURE


def test_repeated_headers_are_read_as_one_comma_separated_value(wire: Wire) -> None:
    """RFC 9110 section 5.3: a recipient may combine repeated header lines into one value,
    in order, separated by commas; so a second If-None-Match adds a tag, and the combined
    list ``"<current>", "0"`` names the current one (SPEC 1, conditional GET)."""
    (current,) = parse_responses(exchange("127.0.0.1", wire.port, get(extra=CLOSE)).data)
    tag = (current.header("ETag") or "").encode()
    assert tag != b'"0"'
    heads, closed = wire.heads(
        get(extra=b'If-None-Match: %s\r\nIf-None-Match: "0"\r\n' % tag + CLOSE)
    )
    assert closed
    assert heads[0].startswith(b"HTTP/1.1 304 Not Modified\r\n")


def test_every_request_expecting_100_continue_gets_it(wire: Wire) -> None:
    """RFC 9110 section 10.1.1: the server sends ``100 Continue`` to a request with
    ``Expect: 100-continue`` (here even when the body, or a bodiless GET, came at once); the
    same bytes again get it again: what is remembered of a parse never skips it."""
    event = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
    for request, approving in (
        (get(extra=b"Expect: 100-continue\r\n" + CLOSE), False),
        (post(approval(event), b"Expect: 100-Continue\r\n" + CLOSE), True),
    ):
        for _ in range(2):
            reply = exchange("127.0.0.1", wire.port, request)
            assert reply.data.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 "), reply.data
            assert [r.status for r in parse_responses(reply.data)] == [
                100,
                400 if approving else 200,
            ]


def test_the_date_moves_to_the_next_second_exactly_when_the_clock_does(wire: Wire) -> None:
    """RFC 9110 section 6.6.1: Date is the time the answer was made, to the second; the
    platform's clock (SPEC 2 [ours]) passing a whole second changes it."""
    start = wire.platform.now
    assert start.microsecond == 0
    dates = []
    for step in (0, 1, 1):
        wire.platform.advance(step)
        (response,) = parse_responses(exchange("127.0.0.1", wire.port, get(extra=CLOSE)).data)
        dates.append(response.header("Date"))
    assert dates == [
        format_datetime(start + timedelta(seconds=second), usegmt=True) for second in range(3)
    ]


@pytest.mark.parametrize(
    "ending",
    [get(extra=CLOSE), b"HELLO\r\n\r\n"],
    ids=["Connection: close", "a refused request"],
)
def test_nothing_after_the_answer_that_ends_a_connection_is_acted_on(
    wire: Wire, ending: bytes
) -> None:
    """RFC 9112 section 9.6: a server that receives "close" "MUST NOT process any further
    requests received on that connection"; nor after a request it refuses. An approval
    pipelined behind either is not applied."""
    event = wire.platform.schedule("Reboot", "vm0", source="User")
    reply = exchange("127.0.0.1", wire.port, ending + post(approval(event.event_id)))
    assert reply.closed
    assert len(parse_responses(reply.data)) == 1
    view = wire.platform.event(event)
    assert view is not None
    assert (view.event.status.value, set(view.approvals)) == ("Scheduled", set())
