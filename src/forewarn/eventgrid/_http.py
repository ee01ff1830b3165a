"""The one HTTP exchange Event Grid makes with a webhook: a request, an answer, a close.

A connection per exchange (``Connection: close``), the answer parsed by httptools (the parser
the VM-facing endpoint and uvicorn use), at most ``limit`` bytes of it kept, the whole bounded
by ``timeout``. httpx's asynchronous client was measured first: about 2.7 ms of the event
loop's CPU per delivery on a 2-core machine, where this costs a small fraction of it, and
every millisecond here is one the VMs' requests wait behind while a campaign's events go out.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from forewarn.errors import ForewarnError


class ExchangeError(ForewarnError):
    """No answer: ``outcome`` says why (``TimedOut``, a refused connection, a bad answer)."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


@dataclass
class Answer:
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class _Reading:
    """httptools' callbacks: the headers, and the body up to the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.done = False
        self.reason = ""

    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) < 100:
            self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body += body[: self.limit - len(self.body)]  # nothing once at the limit

    def on_message_complete(self) -> None:
        self.done = True


async def exchange(
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float,
    limit: int,
    context: ssl.SSLContext | None = None,
) -> Answer:
    """``method url`` with ``body``; the answer, or :class:`ExchangeError`."""
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [
        f"{method} {target} HTTP/1.1",
        f"Host: {parts.netloc.rpartition('@')[2]}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        "User-Agent: forewarn-eventgrid",
    ]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    try:
        async with asyncio.timeout(timeout):
            return await _exchange(host, port, secure, context, request, limit)
    except TimeoutError:
        raise ExchangeError("TimedOut") from None
    except (OSError, ssl.SSLError) as exc:
        raise ExchangeError(f"{type(exc).__name__}: {exc}"[:300]) from None


async def _exchange(
    host: str, port: int, secure: bool, context: ssl.SSLContext | None, request: bytes, limit: int
) -> Answer:
    tls = (context or ssl.create_default_context()) if secure else None
    reader, writer = await asyncio.open_connection(host, port, ssl=tls)
    try:
        writer.write(request)
        await writer.drain()
        reading = _Reading(limit)
        parser = httptools.HttpResponseParser(reading)
        while not reading.done:
            chunk = await reader.read(65536)
            if not chunk:
                break
            try:
                parser.feed_data(chunk)
            except httptools.HttpParserError as exc:
                raise ExchangeError(f"an answer that is not HTTP: {exc}") from None
            if len(reading.body) >= limit:
                break  # enough read of a huge answer: the connection is dropped
        status = parser.get_status_code()  # 0 until a status line was read
        if not status:
            raise ExchangeError("the connection closed without an answer")
        return Answer(status, reading.reason, reading.headers, bytes(reading.body))
    finally:
        writer.close()


__all__ = ["Answer", "ExchangeError", "exchange"]
