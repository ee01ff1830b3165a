"""The socket server's limits at their edge, and how a refused connection ends.

SPEC 1 [doc: IMDS family]: "Request limits: bounded body, header and parameter
lengths, rejected with 400". A request exactly at a limit is served; one byte more is refused
with one 400 that closes the connection. The server runs in this process (``forewarn.testing``'s
socket mode) so that mutation testing sees ``server/http/``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from e2e_support import exchange, parse_responses, responses_complete
from http_wire_support import CLOSE, TARGET, get

from forewarn.server.http import _listener, limits
from forewarn.server.imds import Limits
from forewarn.testing import ForewarnPlatform

MAX_BODY = Limits().max_body
UNKNOWN_EVENT = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with ForewarnPlatform(rate_limit=1000, seed=5) as platform:
        yield platform.port


@pytest.fixture(autouse=True)
def _nothing_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.ERROR):
        yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def _head_of(size: int) -> bytes:
    """A valid GET whose head (request line, headers, blank line) is ``size`` bytes, padded
    with headers of at most 4000 bytes each (under the header value limit)."""
    head = get()[:-2]
    pads = []
    room = size - len(head) - 2
    index = 0
    while room > 0:
        line = b"X-Pad-%02d: " % index
        value = min(4000, room - len(line) - 2)
        assert value > 0
        pads.append(line + b"v" * value + b"\r\n")
        room -= len(pads[-1])
        index += 1
    request = head + b"".join(pads) + b"\r\n"
    assert len(request) == size
    return request


def _only(reply_data: bytes) -> tuple[int, str]:
    (response,) = parse_responses(reply_data)
    return response.status, response.json().get("error", "") if response.body else ""


def test_a_head_at_its_limit_is_answered_and_one_byte_longer_is_refused(port: int) -> None:
    """The request line and headers together are bounded too (64 KiB): the per-header limits
    alone would let a head grow with the number of headers."""
    limit = limits.MAX_HEAD_BYTES
    at_limit = exchange("127.0.0.1", port, _head_of(limit), until=responses_complete(1))
    assert parse_responses(at_limit.data)[0].status == 200
    over = exchange("127.0.0.1", port, _head_of(limit + 1))
    assert over.closed
    assert _only(over.data) == (
        400,
        f"Bad request. The request head is larger than {limit} bytes",
    )


def _padded_approval(size: int) -> bytes:
    """An approval of an event nobody has, padded with JSON whitespace to ``size`` bytes."""
    body = json.dumps({"StartRequests": [{"EventId": UNKNOWN_EVENT}]}).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


@pytest.mark.parametrize("chunked", [False, True], ids=["Content-Length", "chunked"])
def test_a_body_at_its_limit_reaches_the_endpoint_and_one_byte_more_is_refused(
    port: int, chunked: bool
) -> None:
    """A body of MaxBodyLength bytes is read and handled (here: an unknown event, 400, the
    connection kept); one more byte is refused before the endpoint sees it, and the
    connection closes."""

    def request(body: bytes) -> bytes:
        if chunked:
            framing, data = (
                b"Transfer-Encoding: chunked\r\n",
                b"%x\r\n%s\r\n0\r\n\r\n"
                % (
                    len(body),
                    body,
                ),
            )
        else:
            framing, data = b"Content-Length: %d\r\n" % len(body), body
        return b"POST %s HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n%s\r\n%s" % (
            TARGET,
            framing,
            data,
        )

    at_limit = exchange(
        "127.0.0.1", port, request(_padded_approval(MAX_BODY)), until=responses_complete(1)
    )
    assert not at_limit.closed
    status, error = _only(at_limit.data)
    assert status == 400
    assert "MaxBodyLength" not in error
    over = exchange("127.0.0.1", port, request(_padded_approval(MAX_BODY + 1)))
    assert over.closed
    assert _only(over.data) == (400, f"Request body is larger than MaxBodyLength: {MAX_BODY}")


def _cut_off(sock: socket.socket) -> bool:
    """Whether the server refuses (resets) what is sent to it, within a few sends."""
    try:
        for _ in range(3):
            sock.sendall(b"x" * 1000)
            time.sleep(0.05)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


def test_a_refused_client_still_sending_is_read_then_cut_off(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a refusal the server half-closes and drops what the client still sends, so that
    the client reads the 400 rather than a reset; after the linger time (shortened here) the
    connection is closed for good, and what the client sends then is refused (RST)."""
    refused = get(extra=b"X-Long: " + b"v" * 5000 + b"\r\n")
    monkeypatch.setattr(limits, "LINGER_TIMEOUT", 60.0)  # lingering all through this part
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        sock.sendall(refused)
        data = b""
        while chunk := sock.recv(65536):  # the 400, then the server's half-close
            data += chunk
        assert _only(data)[0] == 400
        assert not _cut_off(sock)  # what still comes is dropped: the server still reads
    monkeypatch.setattr(limits, "LINGER_TIMEOUT", 0.2)
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        sock.sendall(refused)
        while sock.recv(65536):
            pass
        deadline = time.monotonic() + 30  # a bound on the wait, not the verdict
        while not _cut_off(sock):
            assert time.monotonic() < deadline, "never closed after the linger"
    answered = exchange("127.0.0.1", port, get(extra=CLOSE))
    assert parse_responses(answered.data)[0].status == 200


def _sent_until_blocked(sock: socket.socket, burst: bytes, limit: int) -> int:
    """How many bytes of ``burst`` repeated could be sent before sending blocked for half a
    second (``limit`` at most), counted exactly: partial sends resume where they stopped."""
    sock.settimeout(0.5)
    sent = 0
    try:
        while sent < limit:
            sent += sock.send(burst[sent % len(burst) :])
    except TimeoutError:
        pass  # held back
    return sent


def test_a_client_that_sends_without_reading_is_held_back_then_answered_in_full() -> None:
    """A client pipelining requests without reading its answers is not buffered without
    bound: once its answers back up, the server stops reading it (so the client's sending
    blocks), and reads on as soon as the client reads, until every request is answered.
    Its VM stays under its rate limit (over it, the 429s come in turns, a few thousand a
    second: test_http_turns_in_process.py), so its answers come as fast as it reads."""
    request = get(extra=b"X-Pad: " + b"v" * 3000 + b"\r\n")
    burst = request * 64
    limit = 64 * 1024 * 1024
    with (
        ForewarnPlatform(rate_limit=1e9, seed=5) as platform,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
    ):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", platform.port))
        sent = _sent_until_blocked(sock, burst, limit)
        assert sent < limit, "the server read everything without its answers read"
        whole = sent // len(request)  # a request cut short is never answered
        sock.settimeout(5)
        data = bytearray()
        while (answered := data.count(b"\r\nServer: ")) < whole:
            chunk = sock.recv(1 << 20)
            assert chunk, f"closed after {answered} answers"
            data += chunk
        assert answered == whole


def _with_headers(count: int, value: bytes = b"v") -> bytes:
    """A GET with ``count`` header lines in all (Host and Metadata among them)."""
    extra = b"".join(b"X-%02d: %s\r\n" % (index, value) for index in range(count - 2))
    request = get(extra=extra)
    assert request.count(b"\r\n") == count + 2  # the request line and the blank line
    return request


def test_headers_at_their_limits_are_answered_and_one_more_is_refused(port: int) -> None:
    """The header limits of ``forewarn.server.imds.Limits``: 64 header lines, and values of
    4096 bytes (IMDS's text: "Parameter header value length is larger than
    MaxHeaderValueLength",
    learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds)."""
    limits = Limits()
    cases = [
        (_with_headers(limits.max_headers), None),
        (
            _with_headers(limits.max_headers + 1),
            f"Bad request. More than {limits.max_headers} headers",
        ),
        (_with_headers(3, b"v" * limits.max_header_value), None),
        (
            _with_headers(3, b"v" * (limits.max_header_value + 1)),
            "Parameter header value length is larger than MaxHeaderValueLength: "
            f"{limits.max_header_value}",
        ),
    ]
    for request, refusal in cases:
        reply = exchange("127.0.0.1", port, request, until=responses_complete(1))
        if refusal is None:
            assert _only(reply.data)[0] == 200
        else:
            assert _only(reply.data) == (400, refusal)


def test_each_request_of_a_connection_has_the_whole_head_limit(port: int) -> None:
    """The head limit counts each request's own head: after a first answer (an unknown
    event's 400, the connection kept), a second request on the same connection may again be
    64 KiB, and one byte more is refused."""
    limit = limits.MAX_HEAD_BYTES
    for size, status in ((limit, 200), (limit + 1, 400)):
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            data = b""
            # A POST first: a GET seen before would be answered without being parsed.
            first = _padded_approval(100)
            first = get(extra=b"Content-Length: 100\r\n").replace(b"GET", b"POST", 1) + first
            for request, answers in ((first, 1), (_head_of(size), 2)):
                sock.sendall(request)
                while not responses_complete(answers)(data):
                    chunk = sock.recv(65536)
                    assert chunk, data
                    data += chunk
            assert [r.status for r in parse_responses(data)] == [400, status]


def test_a_body_does_not_count_towards_the_head_limit(port: int) -> None:
    """A head just under 64 KiB followed by a whole 16 KiB body, in one write: the head is
    within its limit and the body within its own, so the endpoint answers (an unknown event:
    400, the connection kept), however the two arrive together."""
    body = _padded_approval(MAX_BODY)
    head = _head_of(limits.MAX_HEAD_BYTES - 100)
    head = head.replace(b"GET ", b"POST ", 1).replace(
        b"\r\n\r\n", b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    reply = exchange("127.0.0.1", port, head + body, until=responses_complete(1))
    assert not reply.closed
    status, error = _only(reply.data)
    assert status == 400
    assert "larger" not in error, error


def test_a_refusal_in_the_middle_of_a_large_read_is_the_only_answer(port: int) -> None:
    """A head that breaks the limit early in a large read (the rest of it arriving in the
    same read, or pipelined behind): one 400, nothing more is read into answers."""
    huge = get(extra=b"".join(b"X-%03d: %s\r\n" % (i, b"v" * 3000) for i in range(60)))
    assert len(huge) > 2 * limits.MAX_HEAD_BYTES
    reply = exchange("127.0.0.1", port, huge + get())
    assert reply.closed
    assert not reply.reset
    assert _only(reply.data) == (
        400,
        f"Bad request. The request head is larger than {limits.MAX_HEAD_BYTES} bytes",
    )


def test_a_burst_of_connections_waits_for_a_busy_server_rather_than_being_dropped() -> None:
    """SPEC 8: VMs poll about once a second, many on a new connection each time;
    a burst of new connections arriving while the server is busy waits in the listen queue
    (4096 deep) instead of being dropped after the default hundred."""
    with ForewarnPlatform(rate_limit=1000) as platform:
        server = platform.serve()
        in_the_loop, burst_done = threading.Event(), threading.Event()

        def hold_the_loop() -> None:  # runs on the server's loop: nothing is accepted meanwhile
            in_the_loop.set()
            burst_done.wait(30)

        busy = threading.Thread(target=lambda: server.call(hold_the_loop))
        busy.start()
        assert in_the_loop.wait(30)
        opened: list[socket.socket] = []
        try:
            for _ in range(300):
                opened.append(socket.create_connection(("127.0.0.1", platform.port), timeout=10))
        finally:
            burst_done.set()
            busy.join()
            for sock in opened:
                sock.close()
        assert len(opened) == 300


def _wait_until_busy(platform: ForewarnPlatform, count: int) -> None:
    """Until the server has ``count`` connections busy (their requests begun, read)."""
    connections = _listener._SHARED[platform.endpoint].connections

    def busy() -> int:
        return sum(c.idle_at() is None for mine in connections._by_caller.values() for c in mine)

    deadline = time.monotonic() + 3
    while platform.serve().call(busy) < count:
        assert time.monotonic() < deadline, "the server did not read the requests begun"
        time.sleep(0.01)


def test_a_vm_at_its_cap_with_every_connection_busy_has_a_new_one_closed_unread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``limits.CONNECTIONS_PER_VM`` (lowered to 4 here): a VM whose every connection is
    busy (a request in progress) has a new connection closed at once, unanswered and unread,
    so that it never holds more; once one of its requests is answered that connection is
    idle, and a new one is served, closing it."""
    monkeypatch.setattr(limits, "CONNECTIONS_PER_VM", 4)
    head = get(extra=CLOSE)
    with ForewarnPlatform(rate_limit=1000) as platform:
        busy = [socket.create_connection(("127.0.0.1", platform.port), timeout=3) for _ in range(4)]
        try:
            for sock in busy:
                sock.sendall(head[:20])  # a request begun
            _wait_until_busy(platform, 4)
            refused = exchange("127.0.0.1", platform.port, head)
            assert (refused.closed, refused.data) == (True, b"")
            busy[0].sendall(get()[20:])  # kept alive once answered: idle
            assert busy[0].recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")
            served = exchange("127.0.0.1", platform.port, head)
            assert parse_responses(served.data)[0].status == 200
            assert busy[0].recv(65536) == b""  # the idle one made room
            for sock in busy[1:]:
                sock.sendall(head[20:])
                assert parse_responses(sock.recv(65536))[0].status == 200
        finally:
            for sock in busy:
                sock.close()
