"""Every bound the VM-facing server puts on a client, in one place: how many connections a VM
may hold and how many descriptors all VMs together may, how long a connection may idle or take
over a request, how large a request head may be, how many requests may wait on one connection,
how fast a flooding VM is answered, and how much the server remembers of what it has answered.
The other modules read these as attributes of this module when they need them
(``limits.IDLE_TIMEOUT``), so a test may lower one for a run.

The endpoint's own request limits (URL, header values, body, the number of headers) are
:class:`forewarn.server.imds.Limits`; these are the socket server's.
"""

from __future__ import annotations

#: Connections one VM may hold open at once, told apart as the endpoint tells VMs apart: by the
#: address called and the address called from. A VM polling once a second needs one (two with
#: Go's idle pool); the documented clients never hold more than a few: ``requests.get`` and
#: curl open one per poll and close it, a ``requests.Session``, Node's agent and Go's
#: transport reuse one kept connection for polls made one after another, a client that starts
#: calls without waiting for the last (a metrics exporter's scrapes) holds one per call it has
#: not given up on while its VM is paused (the first-call delay, an impact; a call whose
#: client left counts as idle, ``ImdsProtocol.idle_at``), and a client pipelining keeps its
#: waiting requests (``MAX_WAITING_BEHIND``) on one connection. At the cap, a new connection
#: makes the VM's longest-idle one close (HTTP lets a server close an idle kept connection at
#: any time, RFC 9112 section 9.5, and every client retries on a new one); when none of them
#: is idle (each has a request in progress, held or waiting), the new one is closed at once,
#: unread.
CONNECTIONS_PER_VM = 64
#: Descriptors (RLIMIT_NOFILE's soft limit) the VMs' connections leave to everything else: the
#: control API and its dashboard streams, the store's files or connections, impact hooks' pipes.
#: When the VMs' connections would use more, the longest-idle connections of the VMs holding
#: the most are closed first (a VM polling on its one kept connection is the last to lose it);
#: a new connection finding none idle is closed at once, unread.
RESERVED_DESCRIPTORS = 64
#: How often (seconds, at most) the descriptors the process holds beside the VMs' connections
#: are counted again while the VMs' connections are past their share (they are counted at the
#: first connection): a count lists them all, about 2 ms a thousand, time the loop is not
#: answering. What the rest of the process opens meanwhile comes out of the reserve.
DESCRIPTORS_RECOUNT = 10.0
#: A connection idle this long (seconds) is closed.
IDLE_TIMEOUT = 75.0
#: A request whose head and body take longer than this to arrive is closed, however steadily
#: its bytes trickle in (a client sending a byte a minute never looks idle).
REQUEST_TIMEOUT = 30.0
#: How often a listener looks for idle connections: one is closed 75 to 94 s after its last
#: byte.
IDLE_SWEEP = IDLE_TIMEOUT / 4
#: After refusing a request, what the client is still sending is read and dropped for this
#: long, so that it reads the answer instead of a connection reset.
LINGER_TIMEOUT = 2.0
#: The request line and headers together. The per-header limits alone would not bound them:
#: httptools buffers a header name until it ends, however long it is.
MAX_HEAD_BYTES = 64 * 1024
#: Large reads are parsed in slices of this size, so the head limit is checked as they go.
FEED_SLICE = 16 * 1024
#: Requests kept waiting behind one that waits (held by an impact, delayed by a fault) on
#: one connection. A client pipelining more has those answered, the last with
#: ``Connection: close``, and what it sent after them is not read: a client retries the
#: requests a closed connection left unanswered (RFC 9112 section 9.3.2).
MAX_WAITING_BEHIND = 16
#: How often held requests are looked at (in real time) to release those whose pause is over;
#: the clock may be the system's, a scaled one or a manual one moved by the control API.
HOLD_TICK = 0.05
#: After a 429, each further request on that connection (pipelined in the same read, or sent
#: later), and the first of each new connection of that VM, waits for a turn until an answer
#: in a turn is not a 429; a turn answers this many requests in all, one per connection in
#: turn, ...
REFUSED_PER_TURN = 4
#: ... one turn every this many seconds while any wait: a VM over its rate limit is answered
#: at most 4,000 times a second (with every other VM over its own), a small share of the loop
#: (``python -m bench --only cheap-paths`` measures it), however many connections it opens and
#: however many requests each read holds; only the 429 that puts it over is answered as it
#: comes.
REFUSED_TURN = 0.001
#: What a connection waiting for turns sent is parsed this much at a time, up to its next whole
#: request: fewer than ``MAX_WAITING_BEHIND`` requests fit, so a client pipelining after a 429
#: still has every request answered, in turns, and a read of thousands of small requests is
#: neither parsed at once nor kept as parses.
TURN_SLICE = 256
#: Requests whose target is longer than this are parsed every time; a poll's is about a
#: hundred bytes.
CACHEABLE_URL = 512
#: Reads longer than this are parsed every time.
CACHEABLE_REQUEST = 2048
#: The parses kept of distinct requests (Host aside: a fleet's pollers are a few), counted in
#: bytes held: the request's bytes, the parse, its headers' names and values.
PARSED_BYTES = 4 * 1024 * 1024
#: Distinct answers remembered as written: a few per document shown (200 and 304, each with
#: and without keep-alive), documents shared by the VMs shown the same events.
WIRE_ENTRIES = 4096
#: Addresses whose last poll's answer is kept (``_Shared.again_at``), and VMs remembered as
#: answered 429 (``_RefusedTurns.callers``): one per VM at most, so this bound is only reached
#: by a fleet this large.
AGAIN_ADDRESSES = 1 << 20

__all__ = [
    "AGAIN_ADDRESSES",
    "CACHEABLE_REQUEST",
    "CACHEABLE_URL",
    "CONNECTIONS_PER_VM",
    "DESCRIPTORS_RECOUNT",
    "FEED_SLICE",
    "HOLD_TICK",
    "IDLE_SWEEP",
    "IDLE_TIMEOUT",
    "LINGER_TIMEOUT",
    "MAX_HEAD_BYTES",
    "MAX_WAITING_BEHIND",
    "PARSED_BYTES",
    "REFUSED_PER_TURN",
    "REFUSED_TURN",
    "REQUEST_TIMEOUT",
    "RESERVED_DESCRIPTORS",
    "TURN_SLICE",
    "WIRE_ENTRIES",
]
