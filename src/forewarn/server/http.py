"""The VM-facing HTTP/1.1 server: an asyncio protocol around the httptools parser.

Why not a framework: every VM polls once a second, often on a new connection each time, so
this endpoint's throughput decides how many VMs one process can serve (see the benchmarks in
``bench/``). httptools (the parser uvicorn uses) does the HTTP parsing; this module only keeps
connections, applies the size limits before buffering anything, reuses the parse of a poll it
has seen byte for byte, Host aside (:class:`_ParsedRequests`), and writes pre-formatted
responses. The request handling itself is :class:`forewarn.server.imds.ImdsEndpoint`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import heapq
import itertools
import re
import socket
import struct
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import format_datetime

import httptools

from forewarn.domain.vms import Vm
from forewarn.faults import FaultKind, FaultRule
from forewarn.server.fault_hook import error_response, fault_for
from forewarn.server.imds import (
    JSON,
    SERVER,
    TEXT,
    Answer,
    Checked,
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
    Limits,
    RequestIds,
    split_target,
)
from forewarn.wire.errors import HEADER_VALUE_TOO_LONG, TOO_MANY_REQUESTS, error_body

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
#: Header names and values as bytes, one character each (RFC 9110 section 5.5: field values
#: were historically ISO-8859-1, so any byte the parser lets through has a character).
_FIELD_ENCODING = "latin-1"


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
#: Distinct answers remembered as written: a few per document shown (200 and 304, each with
#: and without keep-alive), documents shared by the VMs shown the same events.
_WIRE_ENTRIES = 4096
#: How a poll was answered, to answer its repeat the same while nothing it met changes
#: (ImdsEndpoint.respond_again): the shared parse it was, the answer's bytes as written (with
#: its response), the VM, the change count.
_Again = tuple["_Parsed", _Wire, Vm, int]
#: Addresses whose last poll's answer is kept (_Shared.again_at): one per VM polling at its
#: own address, so this bound is only reached by a fleet this large.
_AGAIN_ADDRESSES = 1 << 20
#: Who a connection is: the address it called and the address it came from, which is how the
#: endpoint tells VMs apart.
_Caller = tuple[str, str]
#: Requests kept waiting behind one that waits (held by an impact, delayed by a fault) on
#: one connection. A client pipelining more has those answered, the last with
#: ``Connection: close``, and what it sent after them is not read: a client retries the
#: requests a closed connection left unanswered (RFC 9112 section 9.3.2).
MAX_WAITING_BEHIND = 16
_TOO_MANY = ImdsResponse(429, error_body(TOO_MANY_REQUESTS))
#: ``tcpi_state`` of a connection whose peer has closed its side (Linux ``TCP_CLOSE_WAIT``).
_TCP_CLOSE_WAIT = 8
#: How often held requests are looked at (in real time) to release those whose pause is over;
#: the clock may be the system's, a scaled one or a manual one moved by the control API.
_HOLD_TICK = 0.05
_RESET_LINGER = struct.pack("ii", 1, 0)
IDLE_TIMEOUT = 75.0
#: A request whose head and body take longer than this to arrive is closed, however steadily
#: its bytes trickle in (a client sending a byte a minute never looks idle).
REQUEST_TIMEOUT = 30.0
#: How often a listener looks for idle connections: one is closed 75 to 94 s after its last
#: byte.
_IDLE_SWEEP = IDLE_TIMEOUT / 4
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


class _ReadingEndedError(Exception):
    """Raised once a request that ends its connection (it says close, or is HTTP/1.0 without
    keep-alive) is answered or held, to stop parsing right after it: the server "MUST NOT
    process any further requests received on that connection" (RFC 9112 section 9.6), so what
    follows in the same read is neither answered nor refused, even while that request waits
    for its answer."""


#: Requests longer than this are parsed every time; a poll is about a hundred bytes.
_CACHEABLE_URL = 512
_SECOND = timedelta(seconds=1)
_CACHEABLE_REQUEST = 2048
#: One entry per distinct request, Host aside (a fleet's pollers are a few); at most a few
#: MiB however many distinct requests arrive.
_PARSED_ENTRIES = 16384


@dataclass(slots=True, eq=False)
class _Parsed:
    """What httptools made of one whole request: a pure function of its bytes, shared by
    every connection that sends them, and so is what the endpoint decided from them alone
    (:attr:`ImdsRequest.checked`), once it has."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool
    checked: ImdsResponse | Checked | None = None
    #: The parse shared by every connection sending these bytes but for their Host
    #: (:class:`_ParsedRequests`), which this one is a copy of with its Host put back; None
    #: when this is no such copy.
    shared: _Parsed | None = None


class _ParsedRequests:
    """Requests already parsed, by their bytes, shared by every connection.

    A VM polls with the same bytes every second, so parsing each poll again would only redo
    work whose outcome is known. Only a read holding exactly one whole bodiless GET, arriving
    between requests, is remembered, so skipping the parser leaves it where it was. The
    endpoint still runs every check on every request: only the HTTP parsing is reused.

    VMs at their own addresses each send their own Host, and nothing the endpoint decides
    reads it, so a request whose Host is one plain name or address is kept by its bytes
    without that line (:func:`_host_free`): a fleet's polls are one entry, found by a VM's
    first poll on each new connection too, and the Host is put back for each request.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[bytes, _Parsed] = {}

    def get(self, data: bytes) -> _Parsed | None:
        key, host = _host_free(data)
        parsed = self._entries.get(key)
        if parsed is None or host is None:
            return parsed
        return _Parsed(
            parsed.method,
            parsed.path,
            parsed.query,
            {"host": host, **parsed.headers},
            parsed.body,
            parsed.keep_alive,
            parsed.checked,
            parsed,
        )

    def put(self, data: bytes, parsed: _Parsed) -> None:
        """Remember ``data``'s parse. When full, the newest entry makes room: a fleet with
        more distinct polls than entries cycles through them, and starting afresh, or
        dropping the oldest, would drop each before it came round again, so that none was
        ever found; this way all but the overflow are."""
        if len(data) > _CACHEABLE_REQUEST:
            return
        key, host = _host_free(data)
        if host is not None:
            if parsed.headers.get("host") != host:  # another Host header folded into it
                return
            headers = {name: value for name, value in parsed.headers.items() if name != "host"}
            parsed = dataclasses.replace(parsed, headers=headers)
        if len(self._entries) >= _PARSED_ENTRIES:
            self._entries.popitem()
        self._entries[key] = parsed


_HOST_LINE = b"\r\nHost: "
#: A Host that is a plain name, address or [IPv6] address, with an optional port.
_PLAIN_HOST = re.compile(rb"[A-Za-z0-9.:\[\]-]{1,255}")


def _host_free(data: bytes) -> tuple[bytes, str | None]:
    """``data`` without its Host line, and that Host; ``data`` itself and None when its head
    has no ``Host:`` line (spelled as clients send it) or its value is not plain: a value the
    parser could refuse, or that is too long, must reach the parser, so it is kept whole."""
    start = data.find(_HOST_LINE)
    head_end = data.find(b"\r\n\r\n")
    if start < 0 or start >= head_end:
        return data, None
    begin = start + len(_HOST_LINE)
    end = data.find(b"\r\n", begin)
    if _PLAIN_HOST.fullmatch(data, begin, end) is None:
        return data, None
    return data[:start] + data[end:], data[begin:end].decode("ascii")


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


class _Connections:
    """The open connections of one listener, checked for idleness all at once.

    One timer per listener rather than one per connection: arming and cancelling a timer
    costs 2.5 us on uvloop, a twentieth of a whole connection-per-request exchange.
    """

    __slots__ = ("_loop", "_open", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._open: set[ImdsProtocol] = set()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, connection: ImdsProtocol) -> None:
        self._open.add(connection)
        if self._timer is None:
            self._timer = self._loop.call_later(_IDLE_SWEEP, self._sweep)

    def discard(self, connection: ImdsProtocol) -> None:
        self._open.discard(connection)

    def _sweep(self) -> None:
        """Close connections idle (or stuck mid-request) for longer than the timeout."""
        now = self._loop.time()
        for connection in [c for c in self._open if c.idle_since(now) >= IDLE_TIMEOUT]:
            connection.close_idle()
        self._timer = self._loop.call_later(_IDLE_SWEEP, self._sweep) if self._open else None


class _HeldRequests:
    """Connections whose request waits for its VM's pause to end (the ``hold`` policy of
    :mod:`forewarn.domain.impact`), released in order of that end.

    One timer for the whole server while anything is held: the platform clock decides, and
    a manual clock moves only when the control API moves it, so the held requests are looked
    at every ``_HOLD_TICK`` of real time rather than timed once. Requests whose pause ends at
    the same instant are released in the same look, in no particular order; the connection's
    id only keeps the heap from comparing connections (one is held once at a time).

    Each caller (VM) has at most ``limit`` connections held, the burst of the rate limit:
    they are all answered at the same moment when the pause ends, where the rate limit lets
    no more than a burst through, so any further one would only be held to be answered 429.
    It gets that 429 at once instead, after the caller's held connections whose client has
    gone away meanwhile (a timed-out call, retried) are closed to make room: a held
    connection is not read, so its client's leaving is not otherwise seen until the answer.
    """

    __slots__ = ("_by_caller", "_clock", "_heap", "_limit", "_loop", "_timer")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, clock: Callable[[], datetime], limit: int
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._limit = limit
        self._heap: list[tuple[datetime, int, ImdsProtocol, _Caller]] = []
        self._by_caller: dict[_Caller, list[ImdsProtocol]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def hold(self, until: datetime, connection: ImdsProtocol, caller: _Caller) -> bool:
        """Hold ``connection`` until ``until``; False (not held) when ``caller`` already has
        ``limit`` connections held whose clients still wait."""
        held = self._by_caller.get(caller)
        if held is None:
            held = self._by_caller[caller] = []
        elif len(held) >= self._limit:
            for gone in [c for c in held if c.client_left()]:
                held.remove(gone)
                gone.close_idle()
            if len(held) >= self._limit:
                return False
        held.append(connection)
        heapq.heappush(self._heap, (until, id(connection), connection, caller))
        if self._timer is None:
            self._timer = self._loop.call_later(_HOLD_TICK, self._tick)
        return True

    def __len__(self) -> int:
        return len(self._heap)

    def _tick(self) -> None:
        now = self._clock()
        heap = self._heap
        due: list[ImdsProtocol] = []
        while heap and heap[0][0] <= now:
            _, _, connection, caller = heapq.heappop(heap)
            self._forget(connection, caller)
            due.append(connection)
        self._timer = self._loop.call_later(_HOLD_TICK, self._tick) if heap else None
        for connection in due:
            connection.release()

    def _forget(self, connection: ImdsProtocol, caller: _Caller) -> None:
        """``connection`` no longer counts for ``caller``. One closed to make room was
        already left out, and its caller may have nothing held any more."""
        held = self._by_caller.get(caller)
        if held is None or connection not in held:
            return
        held.remove(connection)
        if not held:
            del self._by_caller[caller]

    def held_by(self, caller: _Caller) -> int:
        """How many of ``caller``'s connections are held now."""
        return len(self._by_caller.get(caller, ()))


#: A refused connection's next request is answered in a turn, up to this many per turn, ...
_REFUSED_PER_TURN = 4
#: ... one turn every this many seconds while any wait: a VM flooding its endpoint gets at
#: most 4,000 answers a second, a few percent of the loop, however fast it sends.
_REFUSED_TURN = 0.001


class _RefusedTurns:
    """Requests on connections just refused with a 429, answered a few per turn.

    A VM flooding its endpoint keeps every one of its connections ready at once. Answered as
    they arrive, each turn of the loop would answer all of them (50 connections: 50 answers,
    milliseconds of work) before it reads anyone else, and the loop would spend all its time
    on them, so every other VM's request would wait behind a batch of the flood's answers, or
    for the process to be scheduled again on a busy machine. Once a connection's answer is a
    429, what it sends next waits here instead and is then handled as any other, in turns of
    at most ``_REFUSED_PER_TURN`` every ``_REFUSED_TURN``: the flooding VM still gets IMDS's
    answers, only not faster than that, and another VM's request waits behind at most one
    turn of them.
    """

    __slots__ = ("_loop", "_timer", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: collections.deque[ImdsProtocol] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def wait(self, connection: ImdsProtocol) -> None:
        self._waiting.append(connection)
        if self._timer is None:
            self._timer = self._loop.call_later(_REFUSED_TURN, self._turn)

    def _turn(self) -> None:
        """Handle the oldest waiting connections' data, then wait for the next turn."""
        waiting = self._waiting
        for _ in range(min(_REFUSED_PER_TURN, len(waiting))):
            waiting.popleft().take_turn()
        self._timer = self._loop.call_later(_REFUSED_TURN, self._turn) if waiting else None


class _Shared:
    """What every listener of one endpoint shares: one Date, one parse cache, one request-id
    sequence, one set of held requests, one queue of refused connections' requests and the
    response heads (one per status, Content-Type and keep-alive, made once), however many VM
    addresses it listens on."""

    __slots__ = (
        "again_at",
        "date",
        "heads",
        "held",
        "loop",
        "parsed",
        "refused",
        "request_ids",
        "wire",
    )

    def __init__(self, endpoint: ImdsEndpoint, loop: asyncio.AbstractEventLoop) -> None:
        clock = endpoint.service.now
        self.loop = loop
        self.date = _DateHeader(clock())
        self.parsed = _ParsedRequests()
        self.request_ids = RequestIds()
        self.held = _HeldRequests(loop, clock, endpoint.rate_limiter.burst)
        self.refused = _RefusedTurns(loop)
        self.heads: dict[_HeadKey, tuple[bytes, bytes]] = {
            key: _head(*key)
            for key in itertools.product(_REASONS, (JSON, TEXT, None), (True, False))
        }
        # Documents' answers as written, by the answer's identity and keep-alive.
        self.wire: dict[int, _Wire] = {}
        # By the address a connection arrived at, how its last shared poll was answered: a
        # VM polling on a new connection each time (the documentation's sample) repeats the
        # poll of its last connection, and is answered as a kept connection's repeat is.
        self.again_at: dict[str, _Again] = {}

    def wire_of(self, key: int, response: ImdsResponse, keep_alive: bool) -> _Wire:
        """What is written around the request id and the Date for ``response``, kept under
        ``key`` (the response's identity and keep-alive, as ImdsProtocol looks it up): made once
        for a document's 200 or 304, which every poll of the VMs shown it repeats (the
        endpoint answers an unchanged document with the same response object), and
        remembered with the response, so its identity cannot be another's meanwhile."""
        status = response.status
        before, end = self.heads[status, response.content_type, keep_alive]
        etag = b"" if response.etag is None else b"ETag: %s\r\n" % response.etag
        if status == 304:  # no body, so no length (RFC 9110 8.6)
            after = etag + end
        else:
            after = b"Content-Length: %d\r\n%s%s%s" % (len(response.body), etag, end, response.body)
        wire = (response, before, after)
        if status in (200, 304):  # error answers are mostly built per request
            if len(self.wire) >= _WIRE_ENTRIES:
                self.wire.clear()
            self.wire[key] = wire
        return wire


_SHARED: weakref.WeakKeyDictionary[ImdsEndpoint, _Shared] = weakref.WeakKeyDictionary()


class ImdsProtocol(asyncio.Protocol):
    """One client connection; requests are answered in order as soon as each is complete."""

    __slots__ = (
        "_again",
        "_body",
        "_cacheable",
        "_closing",
        "_completed",
        "_connections",
        "_date",
        "_endpoint",
        "_fault_passed",
        "_head_bytes",
        "_header_count",
        "_headers",
        "_held",
        "_last_active",
        "_last_poll",
        "_limits",
        "_local",
        "_loop",
        "_parsed",
        "_parser",
        "_peer",
        "_refused",
        "_request",
        "_request_ids",
        "_request_started",
        "_shared",
        "_timer",
        "_transport",
        "_url",
        "_waiting_data",
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
        # what has come meanwhile, None when nothing waits.
        self._refused = False
        self._waiting_data: bytes | None = None
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
        if self._refused:
            if self._waiting_data is None:
                self._waiting_data = data
                self._shared.refused.wait(self)
            else:  # more before its turn (pipelined): kept unread until then
                self._waiting_data += data
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
        """Handle what came after a 429, its turn come (:class:`_RefusedTurns`), then read
        on unless the connection ended, waits for an impact or a delay, or cannot write.
        Reading was paused only if more came while it waited, which a client waiting for
        each answer before asking again never does."""
        data, self._waiting_data = self._waiting_data, None
        transport = self._transport
        assert data is not None  # only a connection with data waits for a turn
        assert transport is not None  # connected: its data was received
        if self._closing or transport.is_closing():  # ended while it waited
            return
        self._refused = False
        self._receive(data)
        if not self._closing and self._held is None and not self._writing_paused:
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
            ):
                self._parsed.put(data, self._cacheable)
                self._last_poll = (data, self._cacheable)
            return
        self._slow_path(data)

    def _slow_path(self, data: bytes) -> None:
        # A request to switch protocols is refused as its head completes (on_headers_complete),
        # so the parser never gets as far as reporting the upgrade.
        try:
            view = memoryview(data)
            for start in range(0, len(data), _FEED_SLICE):
                if self._closing:
                    return
                self._feed(view[start : start + _FEED_SLICE])
        except httptools.HttpParserCallbackError as exc:
            # Not kept in a local of this frame: the cause's traceback leads back to this
            # frame, a cycle that would keep the connection until the garbage collector runs.
            self._parser_stopped(exc.__context__)
        except httptools.HttpParserError:
            self._reply_and_close(400, _NOT_HTTP)

    def _parser_stopped(self, cause: BaseException | None) -> None:
        """A parser callback raised ``cause``: refuse the request, end reading quietly, or
        answer the 500 of an unexpected failure."""
        if isinstance(cause, _RefusedError):
            self._reply_and_close(400, str(cause))
        elif not isinstance(cause, _ReadingEndedError):
            self._internal_error(cause)

    def _internal_error(self, cause: BaseException | None) -> None:
        self._loop.call_exception_handler(
            {"message": "error answering a request", "exception": cause, "protocol": self}
        )
        self._reply_and_close(500, "Internal server error")

    def _feed(self, data: memoryview) -> None:
        if self._head_bytes is not None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._reply_and_close(
                    400, f"Bad request. The request head is larger than {MAX_HEAD_BYTES} bytes"
                )
                return
        parser = self._parser
        if parser is None:
            parser = self._parser = httptools.HttpRequestParser(self)
        parser.feed_data(data)

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        # Not while a request waits (held, delayed, or for its turn after a 429): what
        # follows it stays unread until then. A closed transport ignores it; one lingering
        # after a refusal reads on.
        self._writing_paused = False
        if self._transport is not None and self._held is None and self._waiting_data is None:
            self._transport.resume_reading()

    # -- httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._request_started = self._loop.time()
        # Made per parsed request, not per connection: most connections only repeat a poll
        # whose parse is known (_ParsedRequests) and never need them.
        self._url = bytearray()
        self._headers = {}
        self._header_count = 0
        self._body = bytearray()

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._limits.max_url:
            raise _RefusedError(f"Bad request. The URL is longer than {self._limits.max_url} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self._limits
        if len(value) > limits.max_header_value:
            raise _RefusedError(HEADER_VALUE_TOO_LONG.format(limits.max_header_value))
        # Every header line counts, repeated ones too: folding thousands of them would cost
        # quadratic time on the loop every VM shares.
        self._header_count += 1
        if self._header_count > limits.max_headers:
            raise _RefusedError(f"Bad request. More than {limits.max_headers} headers")
        key = name.decode(_FIELD_ENCODING).lower()
        text = value.decode(_FIELD_ENCODING)
        previous = self._headers.get(key)
        # Repeated headers fold into one comma-separated value (RFC 9110 5.3).
        self._headers[key] = text if previous is None else previous + ", " + text

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        parser = self._parser
        assert parser is not None  # only the parser calls this
        if parser.should_upgrade():
            raise _RefusedError(_UPGRADE_REFUSED)
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._limits.max_body:
            # Refused before the body is sent: a client waiting for 100 Continue gets this.
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )
        expect = self._headers.get("expect")
        if expect is not None and expect.lower() == "100-continue":
            assert self._transport is not None
            self._transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limits.max_body:
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )

    def on_message_complete(self) -> None:
        self._request_started = None
        self._head_bytes = 0  # what follows is the next request's head
        if self._closing:
            return
        parser = self._parser
        assert parser is not None  # only the parser calls this
        # The parser lets no byte outside ASCII into the target (RFC 9112 section 3.2) nor
        # the method (a known one), so neither decoding can fail.
        path, query = split_target(self._url.decode())
        parsed = _Parsed(
            parser.get_method().decode(),
            path,
            query,
            self._headers,
            bytes(self._body),
            parser.should_keep_alive(),
        )
        self._completed += 1
        if (
            parsed.method == "GET"
            and not parsed.body
            and len(self._url) <= _CACHEABLE_URL
            and "expect" not in parsed.headers
        ):
            self._cacheable = parsed
        self._answer(parsed)
        if not parsed.keep_alive:
            raise _ReadingEndedError

    def _answer(self, parsed: _Parsed) -> None:
        held = self._held
        if held is not None:  # pipelined behind a waiting request: answered after it
            if len(held) > MAX_WAITING_BEHIND:
                # Enough kept: the last one kept ends the connection, nothing more is read.
                # No longer a copy of a shared parse but for its Host: its answer differs.
                held[-1] = dataclasses.replace(held[-1], keep_alive=False, shared=None)
                raise _ReadingEndedError
            held.append(parsed)
            return
        last, request = self._request
        if parsed is not last or request is None:
            request = ImdsRequest(
                method=parsed.method,
                path=parsed.path,
                query=parsed.query,
                headers=parsed.headers,
                body=parsed.body,
                local_address=self._local,
                peer_address=self._peer,
                checked=parsed.checked,
            )
            self._request = (parsed, request)
            # Not this connection's last request (a new connection's first, above all): how
            # the same poll was last answered at this address, when it is the same but for
            # its Host, which no answer depends on.
            again = self._shared.again_at.get(self._local)
            self._again = again if again is not None and again[0] is parsed.shared else None
        if parsed is not self._fault_passed:
            fault = fault_for(self._endpoint, self._local, self._peer)
            if fault is not None:
                self._inject(fault, parsed, request)
                return
        self._fault_passed = None
        again = self._again
        if again is not None:  # the request answered last here (connection or address), again
            _, kept, caller, count = again
            at = self._endpoint.respond_again(request, kept[0], caller, count)
            if at is not None:  # kept alive: a request that was not ended the connection
                transport = self._transport
                assert transport is not None  # connected: its data was received
                if not transport.is_closing():
                    transport.write(
                        _ANSWER % (kept[1], self._request_ids.next(), self._date.value(at), kept[2])
                    )
                return
        response, vm, at, repeats_under = self._endpoint.respond(request)
        parsed.checked = request.checked
        self._refused = response.status == 429
        if response.status == 0:  # the VM cannot answer now: hold, reset or close
            if response.held_until is not None:
                self._hold(parsed, response.held_until, at)
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
                if len(shared.again_at) >= _AGAIN_ADDRESSES:
                    shared.again_at.clear()
                shared.again_at[self._local] = self._again

    def _hold(self, parsed: _Parsed, until: datetime, at: datetime) -> None:
        """Wait, unread, for the VM's pause to end; or answer 429 when the VM already has as
        many requests held as the pause's end can answer (:class:`_HeldRequests`)."""
        if self._shared.held.hold(until, self, (self._local, self._peer)):
            self._held = [parsed]
            if self._transport is not None:
                self._transport.pause_reading()
            return
        self._refused = True
        self._write(_TOO_MANY, parsed.keep_alive, at)
        if not parsed.keep_alive:
            self._end()

    def client_left(self) -> bool:
        """The client has closed its side (seen from the socket's TCP state, since a held
        connection is not read); False where the state cannot be asked."""
        transport = self._transport
        sock = None if transport is None else transport.get_extra_info("socket")
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
                silence = IDLE_TIMEOUT if fault.delay is None else fault.delay
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
        if response.status == 0 or transport is None:
            self._close()
            return
        data = self._encode(response, False, answer.at)
        body = len(response.body)
        transport.write(data[: len(data) - (body - body // 2)] if body else data[: len(data) // 2])
        self._close()

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
        if self._transport is not None:
            self._transport.resume_reading()

    # -- writing ---------------------------------------------------------------------------

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
        transport.write_eof()  # a TCP transport always can
        transport.resume_reading()  # a connection whose request waited was not being read
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(LINGER_TIMEOUT, self._close)

    def _close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def idle_since(self, now: float) -> float:
        """Seconds idle; a request stuck past REQUEST_TIMEOUT counts as idle for good, and a
        held one (its VM paused) not at all."""
        if self._held is not None:
            return 0.0
        started = self._request_started
        if started is not None and now - started >= REQUEST_TIMEOUT:
            return IDLE_TIMEOUT
        return now - self._last_active

    def close_idle(self) -> None:
        self._close()

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


async def start_imds_server(
    endpoint: ImdsEndpoint,
    host: str,
    port: int,
) -> asyncio.Server:
    """Listen on ``host:port`` and answer the VM-facing endpoint there."""
    loop = asyncio.get_running_loop()
    shared = _SHARED.get(endpoint)
    if shared is None or shared.loop is not loop:
        shared = _SHARED[endpoint] = _Shared(endpoint, loop)
    connections = _Connections(loop)
    return await loop.create_server(
        lambda: ImdsProtocol(endpoint, shared, loop, connections),
        host,
        port,
        backlog=4096,
    )


__all__ = [
    "IDLE_TIMEOUT",
    "LINGER_TIMEOUT",
    "MAX_HEAD_BYTES",
    "REQUEST_TIMEOUT",
    "ImdsProtocol",
    "start_imds_server",
]
