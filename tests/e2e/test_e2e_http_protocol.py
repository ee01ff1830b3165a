"""HTTP/1.1 as clients meet it on the VM-facing endpoint of a running ``forewarn serve``.

Clients poll once a second, some on one kept-alive connection, some on a new one each time, a
few pipelined; each must get exactly one well-formed response per request, in order.
"""

from __future__ import annotations

import json
import re
import socket
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
import pytest
import requests
import requests.adapters
from e2e_support import (
    AZURE_ENDPOINT,
    PAIR_HOSTS,
    SCHEDULED_EVENTS,
    ForewarnServer,
    StartServer,
    exchange,
    pair_fleet,
    parse_responses,
    responses_complete,
)

pytestmark = pytest.mark.e2e

JSON = "application/json; charset=utf-8"
TARGET = f"{SCHEDULED_EVENTS}?api-version=2020-07-01"


def _get(target: str = TARGET, *, extra: str = "", metadata: bool = True) -> bytes:
    header = "Metadata: true\r\n" if metadata else ""
    return f"GET {target} HTTP/1.1\r\nHost: {AZURE_ENDPOINT}\r\n{header}{extra}\r\n".encode()


def test_keep_alive_connection_is_reused_by_a_requests_session(pair: ForewarnServer) -> None:
    """SPEC 8: clients "poll about once a second"; a session keeps one connection
    (RFC 9112 section 9.3: HTTP/1.1 connections persist unless one side says close)."""
    with requests.Session() as session:
        session.trust_env = False
        documents = []
        for _ in range(5):
            response = session.get(
                pair.base_url() + SCHEDULED_EVENTS,
                headers={"Metadata": "true"},
                params={"api-version": "2020-07-01"},
                timeout=5,
            )
            assert response.status_code == 200
            assert "close" not in response.headers.get("Connection", "")
            documents.append(response.json())
        adapter = session.get_adapter(pair.base_url())
        assert isinstance(adapter, requests.adapters.HTTPAdapter)
        pools = [adapter.poolmanager.pools[key] for key in adapter.poolmanager.pools.keys()]  # noqa: SIM118 (a container, not a dict)
        assert [(pool.num_connections, pool.num_requests) for pool in pools] == [(1, 5)]
    assert documents[0]["Events"] == []
    assert all(document == documents[0] for document in documents)


def test_keep_alive_connection_is_reused_by_an_httpx_client(pair: ForewarnServer) -> None:
    """As above, with httpx (the control CLI's client): every response arrives on the same
    local port, that is on one connection."""
    with httpx.Client(trust_env=False, timeout=5) as client:
        ports = set()
        for _ in range(5):
            response = client.get(pair.url(), headers={"Metadata": "true"})
            assert response.status_code == 200
            stream = response.extensions["network_stream"]
            ports.add(stream.get_extra_info("client_addr")[1])
    assert len(ports) == 1


def test_sequential_requests_on_one_socket_are_each_answered(pair: ForewarnServer) -> None:
    """RFC 9112 section 9.3: a persistent connection carries request after request."""
    reply = exchange(
        pair.host, pair.port, _get(), _get(), _get(), pause=0.05, until=responses_complete(3)
    )
    assert not reply.closed
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 200, 200]
    assert len({r.body for r in responses}) == 1


def test_connection_close_is_honoured(pair: ForewarnServer) -> None:
    """RFC 9112 section 9.6: after a request with ``Connection: close`` the server answers
    it, says ``Connection: close`` and closes."""
    reply = exchange(pair.host, pair.port, _get(extra="Connection: close\r\n"))
    assert reply.closed
    assert not reply.reset
    (response,) = parse_responses(reply.data)
    assert response.status == 200
    assert response.header("Connection") == "close"


def test_http_1_0_without_keep_alive_is_answered_then_closed(pair: ForewarnServer) -> None:
    """RFC 9112 section 9.3: an HTTP/1.0 request without ``keep-alive`` ends the connection."""
    request = f"GET {TARGET} HTTP/1.0\r\nMetadata: true\r\n\r\n".encode()
    reply = exchange(pair.host, pair.port, request)
    assert reply.closed
    (response,) = parse_responses(reply.data)
    assert response.status == 200
    assert response.body == pair.document_response().body


def test_pipelined_requests_are_answered_in_order(pair: ForewarnServer) -> None:
    """RFC 9112 section 9.3.2: responses to pipelined requests come in request order. The
    statuses are SPEC 1's: 200, 404 unknown path, 400 without the Metadata header,
    405 other methods."""
    burst = (
        _get()
        + _get("/metadata/unknown")
        + _get(metadata=False)
        + f"DELETE {TARGET} HTTP/1.1\r\nMetadata: true\r\n\r\n".encode()
        + _get(extra="Connection: close\r\n")
    )
    reply = exchange(pair.host, pair.port, burst)
    assert reply.closed
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 404, 400, 405, 200]
    assert responses[0].body == responses[4].body
    assert responses[2].json() == {"error": "Bad request. Required metadata header not specified"}


def test_content_length_is_exact_and_content_type_is_json(pair: ForewarnServer) -> None:
    """SPEC 1: "Responses are Content-Type: application/json; charset=utf-8,
    compact JSON"; each response's Content-Length is its body's length to the byte, so the
    next pipelined response starts exactly after it (the parser fails otherwise)."""
    event_id = pair.create_event("Reboot", ["WestNO_1"], source="User")
    body = json.dumps({"StartRequests": [{"EventId": "not-an-event"}]}).encode()
    requests_ = [
        _get(),
        _get("/metadata/unknown"),
        _get(metadata=False),
        _get(f"{SCHEDULED_EVENTS}?api-version=latest"),
        f"POST {TARGET} HTTP/1.1\r\nMetadata: true\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body,
    ]
    reply = exchange(pair.host, pair.port, *requests_, until=responses_complete(5))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 404, 400, 400, 400]
    for response in responses:
        assert response.header("Content-Type") == JSON
        assert int(response.header("Content-Length") or -1) == len(response.body)
        compact = json.dumps(response.json(), separators=(",", ":"), ensure_ascii=False)
        assert response.body == compact.encode()
    assert responses[0].json()["Events"][0]["EventId"] == event_id
    assert "newest-versions" in responses[3].json()

    approval = pair.approve_raw([event_id])
    assert approval.status == 200
    assert approval.header("Content-Length") == "0"
    assert approval.body == b""


def test_date_header_is_present_and_follows_the_platform_clock(pair: ForewarnServer) -> None:
    """RFC 9110 section 6.6.1: an origin server with a clock sends ``Date`` in IMF-fixdate
    form. forewarn dates its responses in platform time (``server/http/``), the same clock
    NotBefore is written in, so a client comparing the two under a manual clock agrees."""
    first = pair.document_response()
    date = first.header("Date")
    assert date is not None
    assert date.endswith(" GMT")
    assert parsedate_to_datetime(date) == datetime.fromisoformat(pair.clock()).replace(
        microsecond=0
    )
    pair.advance(15 * 60)
    later = parsedate_to_datetime(pair.document_response().header("Date") or "")
    assert later - parsedate_to_datetime(date) == timedelta(minutes=15)
    errors = parse_responses(
        exchange(pair.host, pair.port, _get("/x", extra="Connection: close\r\n")).data
    )
    assert errors[0].header("Date") is not None


def test_expect_100_continue_gets_an_interim_response(pair: ForewarnServer) -> None:
    """RFC 9110 section 10.1.1: a client that sends ``Expect: 100-continue`` may wait for
    ``100 Continue`` before the body; curl does so for larger bodies."""
    event_id = pair.create_event("Freeze", ["WestNO_1"], durationInSeconds=0)
    body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
    head = (
        f"POST {TARGET} HTTP/1.1\r\nMetadata: true\r\nExpect: 100-continue\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((pair.host, pair.port), timeout=3) as sock:
        sock.sendall(head)
        interim = sock.recv(1024)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        final = b""
        while not responses_complete(1)(final):
            chunk = sock.recv(65536)
            assert chunk, "closed before the final response"
            final += chunk
    (response,) = parse_responses(final)
    assert response.status == 200
    assert pair.events()[event_id]["EventStatus"] == "Started"


def test_rate_limit_answers_429_per_vm(start_server: StartServer) -> None:
    """SPEC 1 [doc: IMDS overview]: "429 over the rate limit of 5 requests per
    second per VM", with the default limit; another VM has a budget of its own."""
    hosts = PAIR_HOSTS
    server = start_server(fleet=pair_fleet(*hosts), vm_hosts=hosts)
    burst = _get() * 7 + _get(extra="Connection: close\r\n")
    reply = exchange(hosts[0], server.port, burst)
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200] * 5 + [429] * 3
    assert responses[5].json() == {"error": "Too many requests"}
    assert responses[5].header("Content-Type") == JSON
    other = server.document_response(hosts[1])
    assert other.status == 200


def test_headers_are_those_of_real_responses_in_their_order(pair: ForewarnServer) -> None:
    """SPEC 1 [seen: SDK logs and public captures]: "Response headers seen on the
    real service, in this order: Content-Type, Server: IMDS/150.870.65.1854 (the build number
    varies), x-ms-request-id: <GUID> (a new one per response), Date, Content-Length"; "Some
    SDKs reject a metadata response whose Server does not contain 'IMDS'". Errors too."""
    reply = exchange(pair.host, pair.port, _get(), _get(), _get("/x"), until=responses_complete(3))
    responses = parse_responses(reply.data)
    assert [r.status for r in responses] == [200, 200, 404]
    guid = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    for response in responses:
        names = [name for name, _ in response.headers]
        expected = ["Content-Type", "Server", "x-ms-request-id", "Date", "Content-Length"]
        assert names[:5] == expected, names
        assert "IMDS" in (response.header("Server") or "")
        assert guid.match(response.header("x-ms-request-id") or ""), response.headers
    ids = {response.header("x-ms-request-id") for response in responses}
    assert len(ids) == 3


def test_if_none_match_answers_304_until_the_document_changes(pair: ForewarnServer) -> None:
    """SPEC 1 [seen]: "documents carry an ETag; a GET with If-None-Match equal to
    the current tag answers 304 Not Modified with no body"; Microsoft's sample service
    (Azure/vm-scheduled-events, node/src/index.ts) sends ``If-None-Match`` with its last tag on
    GETs and on its approval POST, and "only treats a 200 as a new document". The tag is the
    DocumentIncarnation ("The DocumentIncarnation is an ETag",
    the scale sets' terminate-notification page, SPEC 1.4)."""
    first = pair.document_response()
    etag = first.header("ETag")
    assert etag == f'"{first.json()["DocumentIncarnation"]}"'
    for sent in (etag, etag.strip('"'), f"W/{etag}", f'"0", {etag}', "*"):
        (unchanged,) = parse_responses(
            exchange(
                pair.host,
                pair.port,
                _get(extra=f"If-None-Match: {sent}\r\n"),
                until=responses_complete(1),
            ).data
        )
        assert unchanged.status == 304, sent
        assert unchanged.body == b""
        assert unchanged.header("ETag") == etag
        assert unchanged.header("Content-Length") is None
    event_id = pair.create_event("Reboot", ["WestNO_1"], source="User")
    (changed,) = parse_responses(
        exchange(
            pair.host,
            pair.port,
            _get(extra=f"If-None-Match: {etag}\r\n"),
            until=responses_complete(1),
        ).data
    )
    assert changed.status == 200
    assert changed.json()["Events"][0]["EventId"] == event_id
    assert changed.header("ETag") == f'"{changed.json()["DocumentIncarnation"]}"'
    # The approval POST carries the tag too, as the sample sends it: it still approves.
    body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
    post = (
        f"POST {TARGET} HTTP/1.1\r\nMetadata: true\r\nIf-None-Match: {changed.header('ETag')}"
        f"\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    (approved,) = parse_responses(
        exchange(pair.host, pair.port, post, until=responses_complete(1)).data
    )
    assert approved.status == 200
    assert pair.events()[event_id]["EventStatus"] == "Started"


def test_a_url_at_its_limit_is_answered_and_one_byte_longer_is_refused(
    pair: ForewarnServer,
) -> None:
    """SPEC 1: bounded lengths, 400 beyond (the socket server's 2048-byte URL limit)."""
    limit = 2048

    def target(length: int) -> str:
        """``TARGET`` with distinct parameters of at most 200 bytes each, ``length`` long."""
        url, index = TARGET, 0
        while len(url) < length:
            index += 1
            head = f"&k{index:03d}="
            url += head + "v" * min(200, length - len(url) - len(head))
        return url

    at_limit, over = target(limit), target(limit + 1)
    assert (len(at_limit), len(over)) == (limit, limit + 1)
    (answered,) = parse_responses(
        exchange(pair.host, pair.port, _get(at_limit), until=responses_complete(1)).data
    )
    assert answered.status == 200, answered.body
    (refused,) = parse_responses(
        exchange(pair.host, pair.port, _get(over), until=responses_complete(1)).data
    )
    assert refused.status == 400
    assert refused.json()["error"] == f"Bad request. The URL is longer than {limit} bytes"
