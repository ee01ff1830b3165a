"""One client connection of the VM-facing server: what it reads is answered in order, from the
shared parse of a known poll, as a repeat of its last answer while nothing it met changed
(``ImdsEndpoint.respond_again``), or by the endpoint; a request of a paused VM is held, an
injected fault carried out. Reading and writing are the layers below
(:mod:`._parsing`, :mod:`._writing`)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import socket
import time
from collections.abc import Callable
from datetime import datetime

import httptools

from forewarn.faults import FaultKind, FaultRule
from forewarn.server.fault_hook import error_response
from forewarn.server.http import limits
from forewarn.server.http._held_requests import _Caller
from forewarn.server.http._idle_connections import _Connections
from forewarn.server.http._parse_cache import _Parsed
from forewarn.server.http._parsing import _ReadingEndedError, _RequestParsing
from forewarn.server.http._response_bytes import _ANSWER
from forewarn.server.http._shared import _Again, _Shared
from forewarn.server.imds import Answer, ImdsEndpoint, ImdsRequest, ImdsResponse, Limits, Reply

#: ``tcpi_state`` of a connection whose peer has closed its side (Linux ``TCP_CLOSE_WAIT``).
_TCP_CLOSE_WAIT = 8


class ImdsProtocol(_RequestParsing):
    """One client connection; requests are answered in order as soon as each is complete."""

    __slots__ = (
        "_admitted",
        "_again",
        "_connections",
        "_fault_passed",
        "_held",
        "_last_active",
        "_last_poll",
        "_local",
        "_parsed",
        "_peer",
        "_refused",
        "_request",
        "_turns",
        "_unanswered",
        "_writing_paused",
    )  # fmt: skip

    def __init__(
        self,
        endpoint: ImdsEndpoint,
        shared: _Shared,
        loop: asyncio.AbstractEventLoop,
        connections: _Connections,
    ) -> None:
        self._endpoint = endpoint
        self._shared = shared
        self._parsed = shared.parsed
        self._request_ids = shared.request_ids
        self._held: list[_Parsed] | None = None
        # The held request counted against the rate limit when it came, answered without
        # counting it again when its VM's pause ends (ImdsEndpoint.answer).
        self._admitted: _Parsed | None = None
        # Its request is never answered (a gone VM's): held with no end.
        self._unanswered = False
        # The bytes of the last poll on this connection whose parse is known, and that parse.
        self._last_poll: tuple[bytes, _Parsed] | None = None
        # The last request made of a parse: a poller repeats the same bytes on a connection.
        self._request: tuple[_Parsed | None, ImdsRequest | None] = (None, None)
        # How that request was answered, when its repeat is answered the same while nothing
        # it met changes (ImdsEndpoint.respond_again), or how the same poll was last answered
        # at this connection's address.
        self._again: _Again | None = None
        self._fault_passed: _Parsed | None = None
        self._limits: Limits = endpoint.limits
        self._date = shared.date
        # Made at the first request that is not a known poll: most connections never need it.
        self._parser: httptools.HttpRequestParser | None = None
        self._connections = connections
        self._transport: asyncio.Transport | None = None
        # The bytes of the current request's head so far; None once its head is complete.
        self._head_bytes: int | None = 0
        self._closing = False
        # The last answer was a 429: what comes next waits for its turn (_RefusedTurns);
        # what has come meanwhile, unparsed, None when nothing has; and the requests parsed
        # that wait for turns of their own, one answered a turn, None when none waits.
        self._refused = False
        self._waiting_data: bytes | None = None
        self._turns: list[_Parsed] | None = None
        self._writing_paused = False
        self._loop = loop
        self._last_active = self._loop.time()
        # When the current request began; None between requests.
        self._request_started: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        # Set per request by the parser's callbacks, and per read by data_received:
        self._url: bytearray
        self._body: bytearray
        self._headers: dict[str, str]
        self._header_count: int
        self._completed: int
        self._cacheable: _Parsed | None

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        # The address the VM called (one listener per VM address, or one for all).
        self._local: str = transport.get_extra_info("sockname")[0]
        # A peer gone before its connection is made has no name left to give.
        peername = transport.get_extra_info("peername")
        self._peer: str = peername[0] if peername else ""
        self._connections.add(self)
        refused = self._shared.refused.callers
        if refused and self.caller() in refused:  # its VM was answered 429: wait for turns
            self._refused = True

    def connection_lost(self, exc: Exception | None) -> None:
        # Nothing reaches this protocol afterwards: no data, no timer (cancelled here), and
        # no release (a held connection is not read, so only the server can have closed it,
        # which set _closing already).
        self._connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        # The parser holds this protocol's callbacks: dropping it frees the connection at
        # once, instead of leaving a cycle per connection for the garbage collector.
        del self._parser

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return  # answered for good: whatever else arrives is dropped
        self._last_active = self._loop.time()
        if self._refused or self._turns is not None:
            # After a 429: what comes waits for a turn, unparsed (a request or more).
            if self._waiting_data is None and self._turns is None:
                self._waiting_data = data
                self._shared.refused.wait(self)
            else:  # more before its turn (pipelined): kept unread until then
                self._waiting_data = (self._waiting_data or b"") + data
                assert self._transport is not None  # only a connected transport reads
                self._transport.pause_reading()
            return
        last = self._last_poll
        if last is not None and last[0] == data and self._request_started is None:
            # A poller repeating its poll on its connection, as every kept-alive VM does
            # every second: known from its last one, without the shared cache (however many
            # other VMs' polls it holds) or _receive's call.
            try:
                self._answer(last[1])
            except Exception as exc:  # the same 500 as when the parser calls the endpoint
                self._internal_error(exc)
            return
        self._receive(data)

    def take_turn(self) -> None:
        """Answer one request that came after a 429, its turn come (:class:`_RefusedTurns`):
        what came meanwhile is parsed first, each whole request joining those waiting, and
        the first of them is answered. The others wait for turns of their own, unread behind
        them; with none left, reading goes on unless the connection ended, waits for an
        impact or a delay, or cannot write. Reading was paused only if more came while it
        waited, which a client waiting for each answer before asking again never does."""
        data, self._waiting_data = self._waiting_data, None
        transport = self._transport
        assert transport is not None  # connected: its data was received
        if self._closing or transport.is_closing():  # ended while it waited
            return
        waiting = self._turns
        if waiting is None:
            waiting = self._turns = []
        while data and not waiting:
            # Parsed a slice at a time, each whole request joining the waiting (_answer):
            # a read of many small requests is not parsed all at once, nor kept as parses.
            piece, data = data[: limits.TURN_SLICE], data[limits.TURN_SLICE :]
            self._receive(piece)
            if self._closing:
                return
        if data:
            self._waiting_data = (self._waiting_data or b"") + data
        self._turns = None
        if waiting:
            self._refused = False
            try:
                self._answer(waiting[0])
            except Exception as exc:  # the same 500 as anywhere else
                self._internal_error(exc)
                return
            if not self._refused:
                self._shared.refused.answered(self.caller())
            if self._closing:
                return
            if self._held is not None:  # held (an impact) or delayed (a fault): the rest after
                self._held.extend(waiting[1:])
                return
            if len(waiting) > 1:
                self._turns = waiting[1:]
        if self._turns is not None or self._waiting_data is not None:
            if self._turns is None:
                self._turns = []
            self._shared.refused.wait(self)
            return
        if self._held is None and not self._writing_paused:
            transport.resume_reading()

    def _receive(self, data: bytes) -> None:
        if self._request_started is None:  # between requests
            # A poll repeated on its connection is answered by data_received already.
            parsed = self._parsed.get(data)
            if parsed is not None:
                self._last_poll = (data, parsed)
                try:
                    self._answer(parsed)
                except Exception as exc:  # the same 500 as when the parser calls the endpoint
                    self._internal_error(exc)
                return
            self._completed = 0
            self._cacheable = None
            self._slow_path(data)
            if (
                self._completed == 1
                and self._request_started is None
                and self._cacheable is not None
                and self._waiting_data is None  # not left to wait for turns
            ):
                self._parsed.put(data, self._cacheable)
                self._last_poll = (data, self._cacheable)
            return
        self._slow_path(data)

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        # Not while a request waits (held, delayed, or for its turn after a 429): what
        # follows it stays unread until then. A closed transport ignores it; one lingering
        # after a refusal reads on.
        self._writing_paused = False
        if (
            self._transport is not None
            and self._held is None
            and self._turns is None
            and self._waiting_data is None
        ):
            self._transport.resume_reading()

    def _answer(self, parsed: _Parsed) -> None:
        held = self._held
        if held is None:
            held = self._turns
            if held is None and self._refused:
                # Pipelined behind a 429 in the same read: it waits for a turn (a read may
                # hold hundreds of requests, and a turn answers a few in all).
                held = self._turns = []
                self._shared.refused.wait(self)
                assert self._transport is not None  # connected: its data was received
                self._transport.pause_reading()
        if held is not None:  # pipelined behind a waiting request: answered after it
            if len(held) > limits.MAX_WAITING_BEHIND:
                # Enough kept: the last one kept ends the connection, nothing more is read.
                # No longer a copy of a shared parse but for its Host: its answer differs.
                held[-1] = dataclasses.replace(held[-1], keep_alive=False, shared=None)
                raise _ReadingEndedError
            held.append(parsed)
            return
        last, request = self._request
        if parsed is not last or request is None:
            # Positional: a new connection's every poll makes one (keywords cost a tenth more).
            request = ImdsRequest(
                parsed.method,
                parsed.path,
                parsed.query,
                parsed.headers,
                parsed.body,
                self._local,
                self._peer,
                parsed.checked,
            )
            self._request = (parsed, request)
            # Not this connection's last request (a new connection's first, above all): how
            # the same poll was last answered at this address, when it is the same but for
            # its Host, which no answer depends on.
            again = self._shared.again_at.get(self._local)
            self._again = again if again is not None and again[0] is parsed.shared else None
        if parsed is not self._fault_passed:
            fault = self._shared.fault_for(self._local, self._peer, time.monotonic)
            if fault is not None:
                self._endpoint.faulted(request, fault.kind.value)
                self._inject(fault, parsed, request)
                return
        self._fault_passed = None
        admitted = parsed is self._admitted
        if admitted:
            self._admitted = None
        again = self._again
        if again is not None:  # the request answered last here (connection or address), again
            _, kept, caller, count = again
            if admitted:
                at = self._endpoint.respond_again(request, kept[0], caller, count, admitted=True)
            else:
                at = self._endpoint.respond_again(request, kept[0], caller, count)
            if at is not None:  # kept alive: a request that was not ended the connection
                transport = self._transport
                assert transport is not None  # connected: its data was received
                if not transport.is_closing():
                    transport.write(
                        _ANSWER % (kept[1], self._request_ids.next(), self._date.value(at), kept[2])
                    )
                return
        if admitted:
            response, vm, at, repeats_under = self._endpoint.respond(request, admitted=True)
        else:
            response, vm, at, repeats_under = self._endpoint.respond(request)
        parsed.checked = request.checked
        self._refused = response.status == 429
        if self._refused:
            self._shared.refused.refused(self.caller())
        if response.status == 0:  # the VM cannot answer now: hold, reset or close
            if response.later is not None:
                self._await_write(response.later, functools.partial(self._written, parsed))
            elif response.held_until is not None:
                self._hold(parsed, response.held_until)
            elif response.unanswered:
                self._keep_unanswered(parsed)
            elif response.reset:
                self._reset()
            else:
                self._close()
            return
        keep_alive = parsed.keep_alive
        self._write(response, keep_alive, at)
        if not keep_alive:
            self._end()
        elif repeats_under is not None and vm is not None:
            # Its bytes as written (kept with the response, however many the cache holds).
            shared = self._shared
            written = shared.wire.get((id(response) << 1) | True)
            if written is not None:
                # By its shared parse, which a new connection's same poll is a copy of (one
                # parsed here, on this connection only, is found by no other).
                self._again = (parsed.shared or parsed, written, vm, repeats_under)
                if len(shared.again_at) >= limits.AGAIN_ADDRESSES:
                    shared.again_at.clear()
                shared.again_at[self._local] = self._again

    def _await_write(self, later: Callable[[Reply], None], reply: Reply) -> None:
        """Wait, unread, for the write the request asked for to be committed with the others
        of this turn of the event loop (group commit), or for the write it must not see
        before its commit (:class:`~forewarn.vm_requests.AnswerLaterError`); ``reply`` is then
        told the answer."""
        self._held = []
        if self._transport is not None:
            self._transport.pause_reading()
        later(reply)

    def _written(self, parsed: _Parsed, outcome: ImdsResponse | Exception) -> None:
        """The write a request waited for is committed or refused: answer it, then what
        was pipelined behind it."""
        transport = self._transport
        if self._closing or transport is None or transport.is_closing():
            return  # the client left meanwhile: nobody to answer
        if isinstance(outcome, Exception):
            self._internal_error(outcome)
            return
        if outcome.status == 0:  # AFRESH: what it waited for is done, it is handled anew
            self._held = [parsed, *(self._held or ())]
            self.release()
            return
        self._write(outcome, parsed.keep_alive, self._endpoint.service.now())
        if not parsed.keep_alive:
            self._end()
            return
        self.release()

    def _hold(self, parsed: _Parsed, until: datetime) -> None:
        """Wait, unread, for the VM's pause to end (:class:`_HeldRequests`). The request was
        within the VM's rate when it came (ImdsEndpoint.answer), so it is answered then
        without being counted again. How many a VM has held is bounded by the connections
        it may hold (``limits.CONNECTIONS_PER_VM``), one held request each."""
        self._shared.held.hold(until, self)
        self._held = [parsed]
        self._admitted = parsed
        if self._transport is not None:
            self._transport.pause_reading()

    def _keep_unanswered(self, parsed: _Parsed) -> None:
        """Never answer: the VM is gone. The request waits, unread behind it, until its
        client gives up (it is then closed by the idle sweep, or to make room for another
        of the caller's connections), as nothing answers at the address of a VM that no
        longer exists; the caller's connections are bounded as any VM's."""
        self._held = [parsed]
        self._unanswered = True
        if self._transport is not None:
            self._transport.pause_reading()

    def client_left(self) -> bool:
        """The client has closed its side (seen from the socket's TCP state, since a held
        connection is not read), or the connection is closed already; False where the state
        cannot be asked."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return True
        sock = transport.get_extra_info("socket")
        tcp_info = getattr(socket, "TCP_INFO", None)
        if sock is None or tcp_info is None:
            return False
        try:
            state = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 1)
        except OSError:  # closed meanwhile: gone too
            return True
        return bool(state[0] == _TCP_CLOSE_WAIT)

    def _inject(self, fault: FaultRule, parsed: _Parsed, request: ImdsRequest) -> None:
        """Carry out an injected fault (:mod:`forewarn.faults`) on this connection."""
        kind = fault.kind
        error = error_response(fault)
        if error is not None:
            self._write(error, parsed.keep_alive, self._endpoint.service.now())
            if not parsed.keep_alive:
                self._end()
        elif kind is FaultKind.RESET:
            self._reset()
        elif kind is FaultKind.TRUNCATE:
            self._truncated(self._endpoint.respond(request))
        else:  # latency and timeout: nothing now; what is pipelined behind waits
            self._held = []
            if self._transport is not None:
                self._transport.pause_reading()
            if self._timer is not None:
                self._timer.cancel()
            if kind is FaultKind.LATENCY:
                self._timer = self._loop.call_later(fault.delay or 0.0, self._late, parsed)
            else:  # silent until the client gives up, or for the rule's delay
                silence = limits.IDLE_TIMEOUT if fault.delay is None else fault.delay
                self._timer = self._loop.call_later(silence, self._close)

    def _late(self, parsed: _Parsed) -> None:
        """A latency fault's wait is over: the request is answered as it would have been."""
        self._timer = None
        self._held = [parsed, *(self._held or ())]
        self._fault_passed = parsed
        self.release()

    def _truncated(self, answer: Answer) -> None:
        """Half the answer's body under its full Content-Length (half its head when it has
        no body), then a close: a client reads an incomplete message."""
        transport = self._transport
        response = answer.response
        if response.later is not None:  # truncated once its write is committed
            self._await_write(response.later, functools.partial(self._truncated_later, answer))
            return
        if response.status == 0 or transport is None:
            self._close()
            return
        data = self._encode(response, False, answer.at)
        body = len(response.body)
        transport.write(data[: len(data) - (body - body // 2)] if body else data[: len(data) // 2])
        self._close()

    def _truncated_later(self, answer: Answer, outcome: ImdsResponse | Exception) -> None:
        transport = self._transport
        if self._closing or transport is None or transport.is_closing():
            return
        if isinstance(outcome, Exception):
            self._internal_error(outcome)
            return
        self._truncated(Answer(outcome, answer.vm, self._endpoint.service.now()))

    def release(self) -> None:
        """The pause a held request waited for is over: handle it (and what queued behind it)
        again, as a paused VM's call completes once the VM runs again."""
        held, self._held = self._held, None
        if held is None or self._closing:
            return
        for index, parsed in enumerate(held):
            try:
                self._answer(parsed)
            except Exception as exc:  # the same 500 as anywhere else
                self._internal_error(exc)
                return
            if self._closing:
                return
            if self._held is not None:  # paused again (another impact): keep the order
                self._held.extend(held[index + 1 :])
                return
        if self._transport is not None and self._turns is None:  # none waits for a turn
            self._transport.resume_reading()

    def idle_since(self, now: float) -> float:
        """Seconds idle; a request stuck past REQUEST_TIMEOUT counts as idle for good, and a
        held one (its VM paused) not at all."""
        if self._held is not None:
            # Held until its pause ends, or for ever (a gone VM's) until its client leaves.
            return limits.IDLE_TIMEOUT if self._unanswered and self.client_left() else 0.0
        if self._turns is not None:
            return 0.0
        started = self._request_started
        if started is not None and now - started >= limits.REQUEST_TIMEOUT:
            return limits.IDLE_TIMEOUT
        return now - self._last_active

    def caller(self) -> _Caller:
        """Who this connection is: the address it called and the address it came from, as
        the endpoint tells VMs apart (a VM at its own address, or one listener for all)."""
        return (self._local, self._peer)

    def idle_at(self) -> float | None:
        """When its last bytes came, while it is idle: between requests, none held or
        waiting for a turn, not closing; None while it is busy. A client that stopped
        reading its answers is idle too: nothing it sends is read meanwhile; so is one that
        left while its request was held."""
        if (
            self._closing
            or self._request_started is not None
            or self._turns is not None
            or self._waiting_data is not None
        ):
            return None
        if self._held is not None:
            # A waiting request whose client has gone (a timed-out call, retried) is answered
            # to nobody: its connection is as good as idle, the first to close for room.
            return self._last_active if self.client_left() else None
        return self._last_active

    def close_idle(self) -> None:
        """Close, at once when answers wait unsent: a plain close waits until the client has
        read them, and one that stopped reading would keep the connection for good."""
        transport = self._transport
        if transport is not None and transport.get_write_buffer_size():
            self.abort()
        else:
            self._close()
