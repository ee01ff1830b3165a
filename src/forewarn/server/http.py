"""The VM-facing HTTP/1.1 server: an asyncio protocol around the httptools parser.

Why not a framework: every VM polls once a second, often on a new connection each time, so
this endpoint's throughput decides how many VMs one process can serve (see the benchmarks in
``bench/``). httptools (the parser uvicorn uses) does the HTTP parsing; this module only keeps
connections, applies the size limits before buffering anything, and writes pre-formatted
responses. The request handling itself is :class:`forewarn.server.imds.ImdsEndpoint`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from datetime import datetime
from email.utils import format_datetime
from typing import Any

import httptools

from forewarn.server.imds import ImdsEndpoint, ImdsRequest, ImdsResponse, Limits, split_target
from forewarn.wire.errors import error_body

_REASONS = {
    100: b"Continue",
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    410: b"Gone",
    413: b"Payload Too Large",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
IDLE_TIMEOUT = 75.0
#: After refusing a request, what the client is still sending is read and dropped for this
#: long, so that it reads the answer instead of a connection reset.
LINGER_TIMEOUT = 2.0
#: The request line and headers together. The per-header limits alone would not bound them:
#: httptools buffers a header name until it ends, however long it is.
MAX_HEAD_BYTES = 64 * 1024
#: Large reads are parsed in slices of this size, so the head limit is checked as they go.
_FEED_SLICE = 16 * 1024
_UPGRADE_REFUSED = "Bad request. Protocol upgrades are not supported"
_NOT_HTTP = "Bad request. The request is not valid HTTP/1.1"


class _RefusedError(Exception):
    """Raised in a parser callback to stop parsing a request that breaks a limit."""


class _DateHeader:
    """The Date header, in the platform's time so clients compare NotBefore against it."""

    __slots__ = ("_clock", "_second", "_value")

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._second = -1
        self._value = b""

    def value(self) -> bytes:
        now = self._clock()
        second = int(now.timestamp())
        if second != self._second:
            self._second = second
            self._value = format_datetime(now, usegmt=True).encode()
        return self._value


class ImdsProtocol(asyncio.Protocol):
    """One client connection; requests are answered in order as soon as each is complete."""

    __slots__ = (
        "_body",
        "_closing",
        "_date",
        "_endpoint",
        "_head_bytes",
        "_header_count",
        "_headers",
        "_in_head",
        "_in_request",
        "_last_active",
        "_limits",
        "_local",
        "_loop",
        "_parser",
        "_peer",
        "_timer",
        "_transport",
        "_url",
    )  # fmt: skip

    def __init__(self, endpoint: ImdsEndpoint, date: _DateHeader) -> None:
        self._endpoint = endpoint
        self._limits: Limits = endpoint.limits
        self._date = date
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._local = ""
        self._peer = ""
        self._url = bytearray()
        self._headers: dict[str, str] = {}
        self._header_count = 0
        self._head_bytes = 0
        self._in_head = True
        self._body = bytearray()
        self._closing = False
        self._in_request = False
        self._loop = asyncio.get_running_loop()
        self._last_active = self._loop.time()
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sockname = transport.get_extra_info("sockname")
        peername = transport.get_extra_info("peername")
        self._local = sockname[0] if sockname else ""
        self._peer = peername[0] if peername else ""
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._timer = self._loop.call_later(IDLE_TIMEOUT, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return  # answered for good: whatever else arrives is dropped
        self._last_active = self._loop.time()
        try:
            if len(data) <= _FEED_SLICE:
                self._feed(data)
            else:
                view = memoryview(data)
                for start in range(0, len(data), _FEED_SLICE):
                    if self._closing:
                        return
                    self._feed(view[start : start + _FEED_SLICE])
        except httptools.HttpParserUpgrade:
            self._reply_and_close(400, _UPGRADE_REFUSED)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _RefusedError):
                self._reply_and_close(400, str(cause))
            else:
                self._loop.call_exception_handler(
                    {"message": "error answering a request", "exception": cause, "protocol": self}
                )
                self._reply_and_close(500, "Internal server error")
        except httptools.HttpParserError:
            self._reply_and_close(400, _NOT_HTTP)

    def _feed(self, data: bytes | memoryview) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._reply_and_close(
                    400, f"Bad request. The request head is larger than {MAX_HEAD_BYTES} bytes"
                )
                return
        self._parser.feed_data(data)

    def pause_writing(self) -> None:
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._closing:
            self._transport.resume_reading()

    # -- httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_request = True
        self._url.clear()
        self._headers = {}
        self._header_count = 0
        self._body.clear()

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._limits.max_url:
            raise _RefusedError(f"Bad request. The URL is longer than {self._limits.max_url} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self._limits
        if len(value) > limits.max_header_value:
            raise _RefusedError(
                f"Header value length is larger than MaxHeaderValueLength: "
                f"{limits.max_header_value}"
            )
        # Every header line counts, repeated ones too: folding thousands of them would cost
        # quadratic time on the loop every VM shares.
        self._header_count += 1
        if self._header_count > limits.max_headers:
            raise _RefusedError(f"Bad request. More than {limits.max_headers} headers")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        # Repeated headers fold into one comma-separated value (RFC 9110 5.3).
        self._headers[key] = text if previous is None else previous + ", " + text

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._parser.should_upgrade():
            raise _RefusedError(_UPGRADE_REFUSED)
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._limits.max_body:
            # Refused before the body is sent: a client waiting for 100 Continue gets this.
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )
        if self._headers.get("expect", "").lower() == "100-continue":
            assert self._transport is not None
            self._transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limits.max_body:
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )

    def on_message_complete(self) -> None:
        self._in_request = False
        self._in_head = True  # what follows is the next request's head
        self._head_bytes = 0
        if self._closing:
            return
        parser = self._parser
        try:
            target = self._url.decode("utf-8")
        except UnicodeDecodeError:
            self._reply_and_close(400, "Bad request. The URL is not valid UTF-8")
            return
        path, query = split_target(target)
        request = ImdsRequest(
            method=parser.get_method().decode("ascii", "replace"),
            path=path,
            query=query,
            headers=self._headers,
            body=bytes(self._body),
            local_address=self._local,
            peer_address=self._peer,
        )
        response = self._endpoint.handle(request)
        if response.status == 0:  # the VM is down: no answer at all
            self._close()
            return
        keep_alive = parser.should_keep_alive()
        self._write(response, keep_alive)
        if not keep_alive:
            self._close()

    # -- writing ---------------------------------------------------------------------------

    def _write(self, response: ImdsResponse, keep_alive: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        body = response.body
        parts = [
            b"HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Length: %d\r\n"
            % (response.status, _REASONS.get(response.status, b""), self._date.value(), len(body))
        ]
        if response.content_type is not None:
            parts.append(b"Content-Type: %s\r\n" % response.content_type)
        if not keep_alive:
            parts.append(b"Connection: close\r\n")
        parts.append(b"\r\n")
        parts.append(body)
        transport.write(b"".join(parts))

    def _reply_and_close(self, status: int, message: str) -> None:
        """Answer with an error and end the connection, lingering: the client may still be
        sending (a long body, pipelined requests), and closing on unread data would reset the
        connection before it reads the answer. So: answer, half-close, drop what still comes
        for up to LINGER_TIMEOUT, then close."""
        if self._closing:
            return
        self._write(ImdsResponse(status, error_body(message)), keep_alive=False)
        self._closing = True
        transport = self._transport
        if transport is None or not transport.can_write_eof():
            self._close()
            return
        transport.write_eof()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(LINGER_TIMEOUT, self._close)

    def _close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def _check_idle(self) -> None:
        """Close connections idle (or stuck mid-request) for longer than the timeout."""
        idle = self._loop.time() - self._last_active
        if idle >= IDLE_TIMEOUT:
            self._timer = None
            self._close()
            return
        self._timer = self._loop.call_later(IDLE_TIMEOUT - idle, self._check_idle)


async def start_imds_server(
    endpoint: ImdsEndpoint,
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
    **kwargs: Any,
) -> asyncio.Server:
    """Listen on ``host:port`` and answer the VM-facing endpoint there."""
    loop = asyncio.get_running_loop()
    date = _DateHeader(endpoint.service.clock.now)
    return await loop.create_server(
        lambda: ImdsProtocol(endpoint, date),
        host,
        port,
        reuse_port=reuse_port,
        backlog=4096,
        **kwargs,
    )
