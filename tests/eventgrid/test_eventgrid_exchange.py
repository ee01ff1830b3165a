"""The one HTTP exchange Event Grid makes with a webhook, byte for byte, in process.

Sources: learn.microsoft.com, "Webhook event delivery" (webhook-event-delivery): events are
delivered by an HTTP POST to the endpoint, the CloudEvents handshake is an HTTP OPTIONS
request; "Event Grid message delivery and retry" (delivery-and-retry, "Retry schedule"):
"Event Grid waits 30 seconds for a response after delivering a message", after which the
attempt failed; docs/azure-side.md, "Event Grid" ("at most 64 KiB of an answer is read").
The request itself is HTTP/1.1 as RFC 9112 writes it (request line, then the header fields;
``Host`` is the URL's authority without its user information, RFC 9110 section 7.2),
one connection per exchange (``Connection: close``) [ours]; the outcome of an exchange
that got no answer is what the list shows as ``lastError`` (docs/azure-side.md).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trustme

from forewarn.eventgrid._http import Answer, ExchangeError, exchange

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> bytes:
    """A request read whole: its head, then as many bytes as its Content-Length says."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


@asynccontextmanager
async def serving(
    reply: bytes | Reply, context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A server on loopback answering each connection with ``reply`` (bytes sent after the
    request was read whole, then the connection closed, or a coroutine of its own): its port
    and what each connection received, the request and then anything sent after it."""
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if isinstance(reply, bytes):
                received.append(await _request(reader))
                writer.write(reply)
                await writer.drain()
                received.append(await reader.read())  # b"": the client closed its side
            else:
                await reply(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1], received
    finally:
        server.close()


async def _until(done: Callable[[], bool]) -> None:
    while not done():
        await asyncio.sleep(0.01)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def test_a_delivery_is_one_http_1_1_request_on_a_connection_of_its_own() -> None:
    """The request line with the URL's path and query, ``Host`` the authority without the
    user information, the body's length, ``Connection: close``, forewarn's ``User-Agent``,
    then the delivery's own headers in their order and the body; once answered, the
    connection is closed from forewarn's side."""

    async def run() -> None:
        async with serving(OK) as (port, received):
            answer = await exchange(
                "POST", f"http://user:secret@127.0.0.1:{port}/api/events?code=a%20b&x=1",
                body=b'[{"id":"1"}]',
                headers={"Content-Type": "application/json", "aeg-event-type": "Notification"},
                timeout=5, limit=1024,
            )  # fmt: skip
            assert answer == Answer(200, "OK", {"content-length": "0"}, b"")
            await asyncio.wait_for(_until(lambda: len(received) == 2), 5)
            assert received == [
                b"POST /api/events?code=a%20b&x=1 HTTP/1.1\r\n"
                + f"Host: 127.0.0.1:{port}\r\n".encode()
                + b"Content-Length: 12\r\n"
                b"Connection: close\r\n"
                b"User-Agent: forewarn-eventgrid\r\n"
                b"Content-Type: application/json\r\n"
                b"aeg-event-type: Notification\r\n"
                b"\r\n"
                b'[{"id":"1"}]',
                b"",
            ]

    asyncio.run(run())


def test_a_handshake_without_a_path_asks_for_the_root() -> None:
    """The CloudEvents handshake's OPTIONS (webhook-event-delivery, "Endpoint validation with
    CloudEvents v1.0") to an endpoint that names no path nor query: ``/``, no ``?``, no body."""

    async def run() -> None:
        async with serving(OK) as (port, received):
            await exchange("OPTIONS", f"http://127.0.0.1:{port}", timeout=5, limit=1024)
            assert received[0] == (
                b"OPTIONS / HTTP/1.1\r\n"
                + f"Host: 127.0.0.1:{port}\r\n".encode()
                + b"Content-Length: 0\r\nConnection: close\r\nUser-Agent: forewarn-eventgrid"
                b"\r\n\r\n"
            )

    asyncio.run(run())


def test_the_answer_is_read_status_reason_headers_and_body() -> None:
    """What the list shows of a failed attempt is the status and its reason phrase as the
    receiver said it; header names compare without regard to case (RFC 9110 section 5.1),
    so they are kept in lower case, their values as sent; the body whole within the limit."""
    answer = (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n"
        b"WebHook-Allowed-Origin: eventgrid.azure.net\r\nX-Odd: A b\xe9\r\n\r\nbusy!"
    )

    async def run() -> Answer:
        async with serving(answer) as (port, _):
            return await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1024)

    assert asyncio.run(run()) == Answer(
        503,
        "Service Unavailable",
        {
            "content-length": "5",
            "webhook-allowed-origin": "eventgrid.azure.net",
            "x-odd": "A b\xe9",  # a value's bytes as latin-1 reads them
        },
        b"busy!",
    )


def test_at_most_a_hundred_headers_of_an_answer_are_kept() -> None:
    """A receiver's answer cannot make forewarn keep what it likes [ours]: the first 100
    header fields, in order, and no more."""
    fields = b"".join(b"X-%d: %d\r\n" % (n, n) for n in range(150))
    answer = b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 0\r\n\r\n"

    async def run() -> Answer:
        async with serving(answer) as (port, _):
            return await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1024)

    got = asyncio.run(run())
    assert got.status == 200
    assert got.headers == {f"x-{n}": str(n) for n in range(100)}


def test_a_huge_answer_is_read_up_to_the_limit_and_no_further() -> None:
    """docs/azure-side.md: "at most 64 KiB of an answer is read": an answer announcing
    10 MB, of which more than the limit was sent before the receiver stalls, is cut at the
    limit and the exchange ends there, not at the timeout; the limit holds across reads."""

    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 10000000\r\n\r\n")
        for n in range(8):  # several reads' worth, in pieces
            writer.write(bytes([65 + n]) * 1000)
            await writer.drain()
            await asyncio.sleep(0.01)
        await asyncio.sleep(30)  # the rest never comes

    async def run() -> Answer:
        async with serving(huge) as (port, _):
            return await exchange("POST", f"http://127.0.0.1:{port}/", timeout=10, limit=2500)

    got = asyncio.run(asyncio.wait_for(run(), 5))
    assert (got.status, got.reason) == (500, "Internal Server Error")
    assert got.body == b"A" * 1000 + b"B" * 1000 + b"C" * 500


def test_a_body_within_the_limit_is_read_whole_after_long_headers() -> None:
    """The limit is on the body kept: headers longer than it do not cut a short body."""
    answer = b"HTTP/1.1 200 OK\r\nX-Long: " + b"h" * 3000 + b"\r\nContent-Length: 10\r\n\r\n0123"

    async def rest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"456789")
        await writer.drain()

    async def run() -> Answer:
        async with serving(rest) as (port, _):
            return await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1000)

    assert asyncio.run(run()).body == b"0123456789"


def test_a_receiver_that_does_not_answer_in_time_timed_out() -> None:
    """delivery-and-retry: "Event Grid waits 30 seconds for a response" (shortened here),
    then the attempt failed, ``TimedOut`` as Event Grid names the outcome."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        await asyncio.sleep(30)

    async def run() -> None:
        async with serving(silent) as (port, _):
            with pytest.raises(ExchangeError) as failed:
                await exchange("POST", f"http://127.0.0.1:{port}/", timeout=0.2, limit=1024)
            assert failed.value.outcome == "TimedOut"
            assert str(failed.value) == "TimedOut"

    asyncio.run(asyncio.wait_for(run(), 5))


def test_answers_that_are_not_answers_are_said_so() -> None:
    """A connection closed before any answer, and bytes that are not HTTP, are failures
    with their own words, not a status."""

    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)

    async def run() -> list[str]:
        outcomes = []
        for reply in (closing, b"SSH-2.0-OpenSSH_9.6\r\n"):
            async with serving(reply) as (port, _):
                with pytest.raises(ExchangeError) as failed:
                    await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1024)
                outcomes.append(failed.value.outcome)
        return outcomes

    closed, garbage = asyncio.run(run())
    assert closed == "the connection closed without an answer"
    assert garbage.startswith("an answer that is not HTTP: ")
    assert len(garbage) > len("an answer that is not HTTP: ")  # the parser's reason


def test_a_receiver_that_cannot_be_reached_is_named_by_its_error() -> None:
    """A receiver that cannot be reached: the error's kind and text, as the list shows it,
    the kind first."""

    async def refused() -> str:
        async with serving(OK) as (port, _):
            pass  # the port free again: nothing listens there now
        with pytest.raises(ExchangeError) as failed:
            await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1024)
        return failed.value.outcome

    assert asyncio.run(refused()).startswith("ConnectionRefusedError: ")


def test_a_long_error_is_cut_at_300_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error as the list shows it is at most 300 characters (an operating system's
    error of any length: made here by the connection's opening)."""

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise OSError("x" * 400)

    monkeypatch.setattr(asyncio, "open_connection", failing)
    with pytest.raises(ExchangeError) as failed:
        asyncio.run(exchange("POST", "http://127.0.0.1:9/", timeout=5, limit=1024))
    assert failed.value.outcome == ("OSError: " + "x" * 400)[:300]


def test_the_scheme_s_default_port_is_dialled(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint without a port is reached on its scheme's (RFC 9110 sections 4.2.1 and
    4.2.2: 80 for http, 443 for https), over TLS for https only; a port given is used."""
    dialled: list[tuple[str, int, bool]] = []

    async def dial(host: str, port: int, *, ssl: ssl.SSLContext | None = None) -> Any:
        dialled.append((host, port, ssl is not None))
        raise ConnectionRefusedError("not here")

    monkeypatch.setattr(asyncio, "open_connection", dial)
    for url in ("http://h.example/x", "https://h.example/x", "https://h.example:8443/x"):
        with pytest.raises(ExchangeError, match=r"^ConnectionRefusedError: not here$"):
            asyncio.run(exchange("POST", url, timeout=5, limit=1024))
    assert dialled == [
        ("h.example", 80, False),
        ("h.example", 443, True),
        ("h.example", 8443, True),
    ]


def test_an_https_endpoint_is_verified_against_the_trusted_authorities() -> None:
    """An ``https://`` endpoint is reached over TLS, its certificate verified: by the
    system's authorities when none is given (a certificate from an authority of the test's
    own is refused), by those given otherwise."""
    authority = trustme.CA()
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_side)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)

    async def run() -> tuple[Answer, str]:
        async with serving(OK, server_side) as (port, _):
            url = f"https://127.0.0.1:{port}/"
            answer = await exchange("POST", url, timeout=5, limit=1024, context=trusting)
            with pytest.raises(ExchangeError) as refused:
                await exchange("POST", url, timeout=5, limit=1024)
            return answer, refused.value.outcome

    answer, refused = asyncio.run(run())
    assert answer.status == 200
    assert refused.startswith("SSLCertVerificationError: ")


def test_a_reason_phrase_split_across_reads_is_read_whole() -> None:
    """The reason phrase as the receiver said it, however its bytes arrive."""

    async def split(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 503 Service Unav")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"ailable\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async def run() -> Answer:
        async with serving(split) as (port, _):
            return await exchange("POST", f"http://127.0.0.1:{port}/", timeout=5, limit=1024)

    assert asyncio.run(run()).reason == "Service Unavailable"
