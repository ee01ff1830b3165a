"""Hostile and broken input over real sockets: the endpoint answers 400 (or closes), never
changes anything because of it, and goes on serving.

SPEC 1: "Request limits: bounded body, header and parameter lengths, rejected with
400"; section 3: "400 when the header or payload is malformed" and "An id that is not an event
this VM can see: 400 and no state change". Every case below ends with the same three checks:
the server still answers, WestNO_0's document (and so its DocumentIncarnation) is byte for byte
what it was, and a valid approval afterwards still works.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from e2e_support import (
    AZURE_ENDPOINT,
    OUTSIDER_HOST,
    SCHEDULED_EVENTS,
    USER_REBOOT,
    Exchange,
    ForewarnServer,
    RawResponse,
    exchange,
    parse_responses,
    responses_complete,
)

pytestmark = pytest.mark.e2e

TARGET = f"{SCHEDULED_EVENTS}?api-version=2020-07-01"
#: Well past every limit of ``forewarn.server.imds.Limits`` (body 16 KiB, URL 2 KiB, header
#: value 4 KiB, 64 headers), small enough to send in a blink.
HUGE = 1024 * 1024


@dataclass
class Target:
    """A server with one Scheduled user Reboot on WestNO_1, as WestNO_0 sees it."""

    server: ForewarnServer
    event_id: str
    document: bytes

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    def send(
        self,
        *parts: bytes,
        pause: float = 0.0,
        shutdown_write: bool = False,
        read_timeout: float = 3.0,
        until: Callable[[bytes], bool] | None = None,
    ) -> Exchange:
        return exchange(
            self.host,
            self.port,
            *parts,
            pause=pause,
            shutdown_write=shutdown_write,
            read_timeout=read_timeout,
            until=until,
        )


@pytest.fixture
def target(pair: ForewarnServer) -> Iterator[Target]:
    event_id = pair.create_event("Reboot", ["WestNO_1"], source="User", description=USER_REBOOT)
    document = pair.document_response()
    assert document.status == 200
    assert [e["EventId"] for e in document.json()["Events"]] == [event_id]
    yield Target(pair, event_id, document.body)
    # After whatever the test sent: still serving, nothing changed, approvals still work.
    pair.process.assert_healthy()
    assert pair.document_response().body == document.body, "hostile input changed the document"
    assert pair.events()[event_id]["approvedBy"] == []
    approved = pair.approve_raw([event_id])
    assert approved.status == 200, approved
    after = pair.document()
    assert after["DocumentIncarnation"] > json.loads(document.body)["DocumentIncarnation"]
    assert after["Events"][0]["EventStatus"] == "Started"


def _post(body: bytes, *, extra: str = "", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (
        f"POST {TARGET} HTTP/1.1\r\nHost: {AZURE_ENDPOINT}\r\nMetadata: true\r\n"
        f"Content-Length: {size}\r\n{extra}\r\n"
    ).encode() + body


def _get(target: str = TARGET, extra: str = "") -> bytes:
    return (
        f"GET {target} HTTP/1.1\r\nHost: {AZURE_ENDPOINT}\r\nMetadata: true\r\n{extra}\r\n".encode()
    )


def _approval(*event_ids: str) -> bytes:
    return json.dumps({"StartRequests": [{"EventId": e} for e in event_ids]}).encode()


def _only_error(reply: Exchange, status: int = 400, *, closes: bool = True) -> RawResponse:
    """Exactly one error response in the IMDS style, ``{"error": "..."}`` (SPEC 1)."""
    responses = parse_responses(reply.data)
    assert len(responses) == 1, responses
    (response,) = responses
    assert response.status == status, response
    body = response.json()
    assert isinstance(body.get("error"), str), body
    assert response.header("Content-Type") == "application/json; charset=utf-8"
    if closes:
        assert reply.closed, "the server kept a broken connection open"
        assert not reply.reset, "the client saw a reset instead of the answer"
        assert response.header("Connection") == "close"
    return response


# -- not HTTP, or not HTTP/1.1 as written ---------------------------------------------------

MALFORMED = {
    "not a request line": b"HELLO\r\n\r\n",
    "binary garbage": bytes(range(256)) + b"\r\n\r\n",
    "header without a colon": f"GET {TARGET} HTTP/1.1\r\nMetadata true\r\n\r\n".encode(),
    "unknown HTTP version": f"GET {TARGET} HTTP/7.1\r\nMetadata: true\r\n\r\n".encode(),
    "NUL in a header value": f"GET {TARGET} HTTP/1.1\r\nMetadata: tr\0ue\r\n\r\n".encode(),
    "space before the colon": f"GET {TARGET} HTTP/1.1\r\nMetadata : true\r\n\r\n".encode(),
    "Content-Length and Transfer-Encoding": _post(
        b"0\r\n\r\n", extra="Transfer-Encoding: chunked\r\n"
    ),
    "two Content-Lengths": _post(b"{}", extra="Content-Length: 3\r\n"),
    "negative Content-Length": _post(b"", length=-1),
    "bad chunk size": (
        f"POST {TARGET} HTTP/1.1\r\nMetadata: true\r\nTransfer-Encoding: chunked\r\n\r\n"
        "zz\r\n{}\r\n0\r\n\r\n"
    ).encode(),
}


@pytest.mark.parametrize("request_bytes", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_http_is_refused(target: Target, request_bytes: bytes) -> None:
    """Anything the HTTP/1.1 grammar (RFC 9112) rejects gets one 400 and a closed connection."""
    _only_error(target.send(request_bytes))


@pytest.mark.parametrize(
    "request_bytes",
    [
        _get(extra="Connection: Upgrade\r\nUpgrade: websocket\r\n"),
        b"CONNECT 169.254.169.254:443 HTTP/1.1\r\nHost: 169.254.169.254:443\r\n\r\n",
    ],
    ids=["Upgrade", "CONNECT"],
)
def test_protocol_switches_get_exactly_one_refusal(target: Target, request_bytes: bytes) -> None:
    """The endpoint speaks plain HTTP/1.1 only: a request to switch protocols (RFC 9110
    section 7.8) or tunnel (section 9.3.6) gets one 400, not an answer and then a refusal."""
    response = _only_error(target.send(request_bytes))
    assert "upgrade" in response.json()["error"].lower()


# -- oversized --------------------------------------------------------------------------------

OVERSIZED = {
    "long query value": (_get(f"{TARGET}&x={'a' * 3000}"), "URL"),
    "huge URL": (_get("/" + "a" * HUGE), "URL"),
    "long header value": (_get(extra=f"X-Long: {'v' * 5000}\r\n"), "MaxHeaderValueLength"),
    "huge header name": (_get(extra=f"X-{'n' * HUGE}: v\r\n"), "head"),
    "many headers": (_get(extra="".join(f"X-{i}: v\r\n" for i in range(100))), "headers"),
    "one header repeated": (_get(extra="X-Again: v\r\n" * 10_0000), "headers"),
    "body over the limit": (_post(b"{" + b" " * 20_000 + b"}"), "MaxBodyLength"),
    "chunked body over the limit": (
        (f"POST {TARGET} HTTP/1.1\r\nMetadata: true\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
        + b"".join(b"400\r\n" + b" " * 1024 + b"\r\n" for _ in range(20))
        + b"0\r\n\r\n",
        "MaxBodyLength",
    ),
}


@pytest.mark.parametrize(("request_bytes", "reason"), OVERSIZED.values(), ids=OVERSIZED.keys())
def test_oversized_requests_are_refused_quickly(
    target: Target, request_bytes: bytes, reason: str
) -> None:
    """SPEC 1, "Request limits": bounded lengths, rejected with 400; the client,
    still sending, gets the answer rather than a reset, and without waiting for more: the
    answer names the limit, where a server still reading would end on its request timeout
    (30 s), long after this read gives up (limits protect the one event loop every VM
    shares). That the server half-closes as it answers is pinned in process
    (test_http_limits_in_process.py)."""
    reply = target.send(request_bytes, read_timeout=10.0)
    response = _only_error(reply)
    assert reason in response.json()["error"], response.json()


def test_declared_huge_body_is_refused_before_it_is_sent(target: Target) -> None:
    """A Content-Length over the limit is refused at once: the client need not send (and the
    server need not read) a gigabyte to learn the answer."""
    head = _post(b"", length=10**9)
    _only_error(target.send(head, read_timeout=2.0))


def test_expect_100_continue_with_a_huge_body_is_refused_without_continue(target: Target) -> None:
    """RFC 9110 section 10.1.1: a server that will not accept the body answers with the final
    status instead of ``100 Continue``, so the client never sends it."""
    head = _post(b"", length=10**9, extra="Expect: 100-continue\r\n")
    reply = target.send(head, read_timeout=2.0)
    assert not reply.data.startswith(b"HTTP/1.1 100"), reply.data
    _only_error(reply)


def test_expect_100_continue_then_an_unknown_event_id(target: Target) -> None:
    """``100 Continue``, then the body naming an event nobody has: 400, no change."""
    body = _approval("A8F2D9A0-0000-4000-8000-000000000000")
    head = _post(b"", length=len(body), extra="Expect: 100-continue\r\n")
    reply = target.send(head, body, pause=0.05, until=responses_complete(1))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [100, 400]


# -- bodies that lie, and clients that leave ------------------------------------------------


def test_body_shorter_than_its_content_length_then_eof(target: Target) -> None:
    """The client promises 100 bytes, sends a valid approval's first half, and half-closes:
    nothing is approved on a body that never arrived."""
    body = _approval(target.event_id)
    reply = target.send(_post(body[:20], length=100), shutdown_write=True)
    assert reply.closed
    assert b" 200 " not in reply.data


def test_body_longer_than_its_content_length(target: Target) -> None:
    """Content-Length 10 on a whole approval: the first 10 bytes are the body (not JSON: 400)
    and the rest is no HTTP request (400, closed); the approval in it is never applied."""
    body = _approval(target.event_id)
    reply = target.send(_post(body, length=10))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [400, 400]
    assert reply.closed


def test_body_without_any_length(target: Target) -> None:
    """RFC 9112 section 6.3: a request with neither Content-Length nor Transfer-Encoding has
    no body, so the approval after its head is no body (the empty one is not JSON: 400) but
    the next "request" (not HTTP: 400, closed); nothing is approved."""
    head = f"POST {TARGET} HTTP/1.1\r\nHost: {AZURE_ENDPOINT}\r\nMetadata: true\r\n\r\n"
    reply = target.send(head.encode() + _approval(target.event_id))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [400, 400]
    assert reply.closed


def test_slow_partial_request_then_disconnect(target: Target) -> None:
    """A client trickles half a request head and goes away: no answer, nothing held."""
    parts = [b"GET /metadata/sch", b"eduledevents?api-", b"version=2020-07-01 HT"]
    reply = target.send(*parts, pause=0.05, read_timeout=0.3)
    assert reply.data == b""


def test_slow_partial_approval_then_disconnect(target: Target) -> None:
    """Headers and half the body of a valid approval, slowly, then the client is gone: the
    event must not be approved."""
    body = _approval(target.event_id)
    head = _post(b"", length=len(body))
    reply = target.send(head, body[: len(body) // 2], pause=0.1, read_timeout=0.3)
    assert reply.data == b""


def test_slow_but_complete_request_is_answered(target: Target) -> None:
    """Slow is not hostile: a head sent a few bytes at a time is answered normally."""
    request = _get(extra="Connection: close\r\n")
    parts = [request[i : i + 16] for i in range(0, len(request), 16)]
    reply = target.send(*parts, pause=0.01)
    (response,) = parse_responses(reply.data)
    assert response.status == 200
    assert response.body == target.document


# -- pipelining and old clients -------------------------------------------------------------


def test_valid_request_then_garbage_on_one_connection(target: Target) -> None:
    """RFC 9112 section 9.3.2: the valid request before the garbage is answered, in order."""
    reply = target.send(_get() + b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\r\n\r\n")
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 400]
    assert responses[0].body == target.document
    assert reply.closed


def test_pipelined_refusals_between_reads_leave_the_document_alone(target: Target) -> None:
    unknown = _approval("C7061BAC-AFDC-4513-B24B-AA5F13A16123")
    reply = target.send(_get() + _post(unknown) + _get(), until=responses_complete(3))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 400, 200]
    assert responses[0].body == responses[2].body == target.document


def test_http_1_0_post_of_an_unknown_id_without_keep_alive(target: Target) -> None:
    body = _approval("f020ba2e-3bc0-4c40-a10b-86575a9eabd5")
    request = (
        f"POST {TARGET} HTTP/1.0\r\nMetadata: true\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    _only_error(target.send(request))


# -- bytes that are not UTF-8 ---------------------------------------------------------------


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /metadata/scheduledevents\xff?api-version=2020-07-01 HTTP/1.1\r\nMetadata: true\r\n\r\n",
        _get(f"{SCHEDULED_EVENTS}?api-version=%ff%fe"),
        _get(f"{SCHEDULED_EVENTS}?api-version=2020-07-01&x=%c3%28"),
        b"GET " + TARGET.encode() + b" HTTP/1.1\r\nMetadata: tr\xffue\r\n\r\n",
        _post(b'{"StartRequests": [{"EventId": "\xff\xfe"}]}'),
        _post(_approval("x").replace(b'"x"', b'"\xc3\x28"')),
    ],
    ids=["raw byte in path", "api-version", "other parameter", "header", "body", "EventId"],
)
def test_non_utf8_bytes_are_refused(target: Target, request_bytes: bytes) -> None:
    reply = target.send(request_bytes, until=responses_complete(1))
    _only_error(reply, closes=False)


# -- bodies that are not StartRequests ------------------------------------------------------

NOT_START_REQUESTS = {
    "empty": b"",
    "unterminated": b'{"StartRequests": [',
    "null": b"null",
    "array": b"[]",
    "StartRequests object": b'{"StartRequests": {}}',
    "StartRequests empty": b'{"StartRequests": []}',
    "EventId number": b'{"StartRequests": [{"EventId": 5}]}',
    "EventId missing": b'{"StartRequests": [{}]}',
    "bare ids": b'{"StartRequests": ["id"]}',
    "deep nesting": b"[" * 10_000 + b"]" * 10_000,
    "long EventId": _approval("A" * 10_000),
    "DocumentIncarnation object": b'{"DocumentIncarnation": {}, "StartRequests": [{"EventId": "x"}]}',
    "form encoding": b"StartRequests=x",
    "trailing garbage": _approval("x") + b"}",
}


@pytest.mark.parametrize("body", NOT_START_REQUESTS.values(), ids=NOT_START_REQUESTS.keys())
def test_malformed_payloads_are_refused(target: Target, body: bytes) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "A 400
    error code indicates that the request header or payload was malformed"."""
    reply = target.send(_post(body), until=responses_complete(1))
    _only_error(reply, closes=False)


def test_valid_id_inside_a_malformed_payload_is_not_approved(target: Target) -> None:
    """Half-valid is malformed: the event named in a broken body stays unapproved."""
    body = _approval(target.event_id)[:-1] + b", }"
    _only_error(target.send(_post(body), until=responses_complete(1)), closes=False)


# -- event ids this VM cannot approve -------------------------------------------------------


def test_unknown_event_ids_are_refused_and_change_nothing(target: Target) -> None:
    """SPEC 3 [ours]: "An id that is not an event this VM can see: 400 and no
    state change", for the whole request: the valid id beside an unknown one is not
    approved either."""
    outsider = target.server.create_event("Freeze", ["Outsider"], durationInSeconds=0)
    bodies = [
        _approval("A8F2D9A0-0000-4000-8000-000000000000"),
        _approval("f020ba2e-3bc0-4c40-a10b-86575a9eabd5"),  # the documents' example
        _approval(outsider),  # exists, but the Outsider is not in WestNO_0's availability set
        _approval(target.event_id, "A8F2D9A0-0000-4000-8000-000000000000"),
        _approval(target.event_id + " "),
    ]
    for body in bodies:
        reply = target.send(_post(body), until=responses_complete(1))
        _only_error(reply, closes=False)
    assert target.server.events()[outsider]["approvedBy"] == []
    assert target.server.document(OUTSIDER_HOST)["Events"][0]["EventId"] == outsider
