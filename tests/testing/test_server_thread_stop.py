"""Stopping the test server leaves no socket for the garbage collector: the plugin's users run
with warnings as errors (as this suite does), and an unclosed socket collected during one of
their tests fails that test for something another one did (docs/testing.md)."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

from forewarn.testing import ForewarnPlatform

#: Connections in one burst: asyncio accepts a listener's whole queue in one turn.
BURST = 50


def test_connections_accepted_in_the_last_turn_are_closed_at_stop() -> None:
    """The race staged: the burst is accepted in the loop's turn just before stopping begins,
    so the transports of those connections are still to be made by tasks not yet run."""
    clients: list[socket.socket] = []
    with ForewarnPlatform() as platform:
        server = platform.serve()

        async def stop_just_after_the_accept() -> int:
            for _ in range(BURST):
                clients.append(socket.create_connection(("127.0.0.1", platform.port), 10))
            await asyncio.sleep(0)  # the next turn selects the listener and accepts the burst
            await asyncio.sleep(0)  # and this step runs before the tasks that make transports
            pending = sum(1 for task in asyncio.all_tasks() if _making_transport(task))
            await server._close_all()
            return pending

        staged = server.call_async(stop_just_after_the_accept())
    for client in clients:
        client.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert staged == BURST  # the race was there to lose
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []


def _making_transport(task: asyncio.Task[object]) -> bool:
    return getattr(task.get_coro(), "__name__", "") == "_accept_connection2"
