"""Writing answers on a connection and ending it: as bytes made once (with a new request id and
the platform's Date), after a refusal with a linger so the client reads the answer rather than
a reset, or with a reset as a VM that is off answers."""

from __future__ import annotations

import asyncio
import socket
import struct
from datetime import datetime

from forewarn.server.http import limits
from forewarn.server.http._response_bytes import _ANSWER, _DateHeader
from forewarn.server.http._shared import _Shared
from forewarn.server.imds import ImdsEndpoint, ImdsResponse, RequestIds
from forewarn.wire.errors import error_body

_RESET_LINGER = struct.pack("ii", 1, 0)


class _AnswerWriter(asyncio.Protocol):
    """The writing half of a connection (:class:`~forewarn.server.http.ImdsProtocol`, which
    sets the state below)."""

    __slots__ = (
        "_closing",
        "_date",
        "_endpoint",
        "_loop",
        "_request_ids",
        "_shared",
        "_timer",
        "_transport",
    )

    _closing: bool
    _date: _DateHeader
    _endpoint: ImdsEndpoint
    _loop: asyncio.AbstractEventLoop
    _request_ids: RequestIds
    _shared: _Shared
    _timer: asyncio.TimerHandle | None
    _transport: asyncio.Transport | None

    def _write(self, response: ImdsResponse, keep_alive: bool, at: datetime) -> None:
        transport = self._transport
        assert transport is not None  # connected: only then is there anything to answer
        if not transport.is_closing():  # closed by a failed write, its loss not yet told
            transport.write(self._encode(response, keep_alive, at))

    def _encode(self, response: ImdsResponse, keep_alive: bool, at: datetime) -> bytes:
        """The response's bytes, with a new request id and the Date of platform time ``at``."""
        key = (id(response) << 1) | keep_alive
        wire = self._shared.wire.get(key)
        if wire is None:  # a kept entry holds its response: no other can have its identity
            wire = self._shared.wire_of(key, response, keep_alive)
        return _ANSWER % (wire[1], self._request_ids.next(), self._date.value(at), wire[2])

    def _reply_and_close(self, status: int, message: str) -> None:
        """Answer with an error and end the connection, lingering: the client may still be
        sending (a long body, pipelined requests), and closing on unread data would reset the
        connection before it reads the answer. So: answer, half-close, drop what still comes
        for up to LINGER_TIMEOUT, then close."""
        if self._closing:
            return
        self._write(ImdsResponse(status, error_body(message)), False, self._endpoint.service.now())
        self._linger()

    def _end(self) -> None:
        """Close after answering the request that ends the connection (RFC 9112 section 9.6).
        A connection not being read (its request was held, or delayed by a fault) may have
        bytes waiting unread behind that request: closing on them would reset the connection
        and lose the answer, so it lingers instead, as after a refusal."""
        transport = self._transport
        assert transport is not None  # connected: only then is there anything to answer
        if transport.is_reading():
            self._close()
        else:
            self._linger()

    def _linger(self) -> None:
        """Half-close, read and drop what still comes for up to LINGER_TIMEOUT, then close."""
        self._closing = True
        transport = self._transport
        if transport is None:  # never: only a connected protocol answers
            return
        try:
            transport.write_eof()  # a TCP transport always can, while connected
        except OSError:  # the client gave up on its held request and went: nothing to linger for
            self._close()
            return
        transport.resume_reading()  # a connection whose request waited was not being read
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(limits.LINGER_TIMEOUT, self._close)

    def _close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """End the connection at once, whatever it has not sent yet: the server is going
        away (a plain close waits for a client that stopped reading, and would outlive it)."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def _reset(self) -> None:
        """Reset the connection (RST), as a VM that is off answers nothing but a refusal."""
        self._closing = True
        transport = self._transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        # Without a socket to linger on, a plain close is the nearest thing. The connection
        # is open while its request is handled, so setting the option cannot fail.
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_LINGER)
        transport.abort()

    def _internal_error(self, cause: BaseException | None) -> None:
        self._loop.call_exception_handler(
            {"message": "error answering a request", "exception": cause, "protocol": self}
        )
        self._reply_and_close(500, "Internal server error")
