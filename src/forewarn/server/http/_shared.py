"""What every listener of one endpoint shares, however many VM addresses it listens on: one
Date, one parse cache, one request-id sequence, the open connections, one set of held
requests, one queue of refused connections' requests, the response heads, the answers as
written, and how each address's last poll was answered."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from forewarn.domain.vms import Vm
from forewarn.faults import FaultRule
from forewarn.server.http import limits
from forewarn.server.http._held_requests import _HeldRequests
from forewarn.server.http._idle_connections import _Connections
from forewarn.server.http._parse_cache import _Parsed, _ParsedRequests
from forewarn.server.http._refused_turns import _RefusedTurns
from forewarn.server.http._response_bytes import _REASONS, _DateHeader, _head, _HeadKey, _Wire
from forewarn.server.imds import JSON, TEXT, ImdsEndpoint, ImdsResponse, RequestIds

#: How a poll was answered, to answer its repeat the same while nothing it met changes
#: (ImdsEndpoint.respond_again): the shared parse it was, the answer's bytes as written (with
#: its response), the VM, the change count.
_Again = tuple[_Parsed, _Wire, Vm, int]


class _Shared:
    """What every listener of one endpoint shares: one Date, one parse cache, one request-id
    sequence, the open connections (counted per VM and in all), one set of held requests,
    one queue of refused connections' requests and the response heads (one per status,
    Content-Type and keep-alive, made once), however many VM addresses it listens on."""

    __slots__ = (
        "again_at",
        "connections",
        "date",
        "fault_for",
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
        # The fault a request meets (fault_hook.fault_for), the service's own bound once:
        # asked on every request, nearly always of an empty plan.
        self.fault_for: Callable[[str, str, Callable[[], float]], FaultRule | None] = (
            endpoint.service.fault_for
        )
        self.connections = _Connections(loop)
        self.held = _HeldRequests(loop, clock)
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
            if len(self.wire) >= limits.WIRE_ENTRIES:
                self.wire.clear()
            self.wire[key] = wire
        return wire
