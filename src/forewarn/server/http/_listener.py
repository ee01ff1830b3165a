"""A listener of the VM-facing endpoint: every listener of one endpoint on one event loop
shares one :class:`~forewarn.server.http._shared._Shared`, its connections among them (a VM's
are counted together, whichever listener they came to)."""

from __future__ import annotations

import asyncio
import weakref

from forewarn.server.http._connection import ImdsProtocol
from forewarn.server.http._reuseport import steer_by_addresses
from forewarn.server.http._shared import _Shared
from forewarn.server.imds import ImdsEndpoint

_SHARED: weakref.WeakKeyDictionary[ImdsEndpoint, _Shared] = weakref.WeakKeyDictionary()


async def start_imds_server(
    endpoint: ImdsEndpoint,
    host: str,
    port: int,
    *,
    shared_by: int = 1,
) -> asyncio.Server:
    """Listen on ``host:port`` and answer the VM-facing endpoint there; ``shared_by`` > 1:
    beside that many processes in all listening there (``serve --workers``), each VM's
    connections steered to one of them (:mod:`~forewarn.server.http._reuseport`)."""
    loop = asyncio.get_running_loop()
    shared = _SHARED.get(endpoint)
    if shared is None or shared.loop is not loop:
        shared = _SHARED[endpoint] = _Shared(endpoint, loop)
    connections = shared.connections
    server = await loop.create_server(
        lambda: ImdsProtocol(endpoint, shared, loop, connections),
        host,
        port,
        backlog=4096,
        reuse_port=shared_by > 1 or None,
    )
    if shared_by > 1:
        for listener in server.sockets:
            steer_by_addresses(listener, shared_by)
    return server
