"""An answer's bytes as written on the wire: the status line and headers in the order of real
captures, made once per status, Content-Type and keep-alive, and the Date header shared by
every answer of the same second. Only the request id is new in every answer."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from email.utils import format_datetime

from forewarn.server.imds import SERVER, ImdsResponse

#: The reason phrase of every status the endpoint and the fault plan answer with.
_REASONS = {
    200: b"OK",
    304: b"Not Modified",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    410: b"Gone",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    503: b"Service Unavailable",
}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: What ends a response head, by whether the connection is kept alive after it.
_HEAD_END = {True: b"\r\n", False: b"Connection: close\r\n\r\n"}


def _head(status: int, content_type: bytes | None, keep_alive: bool) -> tuple[bytes, bytes]:
    """The fixed parts of a response head, in the order of real captures (SPEC 1:
    Content-Type, Server, x-ms-request-id, Date, Content-Length): up to the request id's
    value, and what follows the length."""
    before = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])
    if content_type is not None:
        before += b"Content-Type: %s\r\n" % content_type
    before += b"Server: %s\r\nx-ms-request-id: " % SERVER
    return before, _HEAD_END[keep_alive]


_HeadKey = tuple[int, bytes | None, bool]
#: A response (held, so that its identity stays its own), and its bytes before the request
#: id and after the Date.
_Wire = tuple[ImdsResponse, bytes, bytes]
#: An answer: its head up to the request id, the id, the Date, the rest (_Shared.wire_of).
_ANSWER = b"%s%s\r\nDate: %s\r\n%s"
_SECOND = timedelta(seconds=1)


class _DateHeader:
    """The Date header, in the platform's time so clients compare NotBefore against it: the
    time the endpoint answered at, so a request reads the platform's clock once."""

    __slots__ = ("_from", "_until", "_value")

    def __init__(self, now: datetime) -> None:
        self._start_second(now)

    def value(self, now: datetime) -> bytes:
        # Comparing with the current second's bounds costs less than a timestamp per answer.
        if not self._from <= now < self._until:
            self._start_second(now)
        return self._value

    def _start_second(self, now: datetime) -> None:
        self._from = now.replace(microsecond=0)
        self._until = self._from + _SECOND
        self._value = _http_date(self._from)


@functools.lru_cache(maxsize=8)
def _http_date(second: datetime) -> bytes:
    """A whole second as an HTTP date. Every VM address has a listener of its own, each
    polled once a second, so without sharing this each poll would format the date anew
    (4.5 us, a tenth of a poll's CPU with 10,000 VMs)."""
    return format_datetime(second, usegmt=True).encode()
