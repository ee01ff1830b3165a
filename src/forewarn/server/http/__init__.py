"""The VM-facing HTTP/1.1 server: an asyncio protocol around the httptools parser.

Why not a framework: every VM polls once a second, often on a new connection each time, so
this endpoint's throughput decides how many VMs one process can serve (see the benchmarks in
``bench/``). httptools (the parser uvicorn uses) does the HTTP parsing; this package only keeps
connections, applies the size limits before buffering anything, reuses the parse of a poll it
has seen byte for byte, Host aside, and writes pre-formatted responses. The request handling
itself is :class:`forewarn.server.imds.ImdsEndpoint`.

Its parts, by concern:

- ``limits``: every bound a client meets (connections per VM, descriptors, timeouts, head
  size, waiting requests, cache sizes);
- ``_listener``: ``start_imds_server``, a listener per address, sharing ``_shared``; with
  ``_reuseport``, each VM's connections steered to one of several processes' listeners;
- ``_connection``: ``ImdsProtocol``, one connection: answering in order, repeats, holds,
  injected faults; ``_parsing`` (reading requests within the limits) and ``_writing``
  (answers' bytes, lingering closes, resets) are its two halves;
- ``_parse_cache``: parses shared by every connection, by the request's bytes, Host aside;
- ``_response_bytes``: status lines and headers made once, the shared Date header;
- ``_shared``: what all listeners of one endpoint share;
- ``_held_requests``: requests of a paused VM, released when the pause ends;
- ``_refused_turns``: a flooding VM's requests answered a few at a time after a 429;
- ``_idle_connections``: the open connections, counted per VM and in all: idle and stuck
  ones closed, one timer for all; a VM's longest-idle closed at its cap, and the VMs holding
  the most lose theirs first when descriptors run short;
- ``_descriptors``: the process's descriptor limit and use, the limit raised at start-up.
"""

from __future__ import annotations

from forewarn.server.http._connection import ImdsProtocol
from forewarn.server.http._descriptors import raise_descriptor_limit
from forewarn.server.http._listener import start_imds_server

__all__ = ["ImdsProtocol", "raise_descriptor_limit", "start_imds_server"]
