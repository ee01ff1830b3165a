"""Requests held while their VM is paused (an impact, the first-call delay), released in order
of the pause's end."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from forewarn.server.http import limits

if TYPE_CHECKING:
    from forewarn.server.http._connection import ImdsProtocol

#: Who a connection is: the address it called and the address it came from, which is how the
#: endpoint tells VMs apart.
_Caller = tuple[str, str]


class _HeldRequests:
    """Connections whose request waits for its VM's pause to end (the ``hold`` policy of
    :mod:`forewarn.domain.impact`), released in order of that end.

    One timer for the whole server while anything is held: the platform clock decides, and
    a manual clock moves only when the control API moves it, so the held requests are looked
    at every ``limits.HOLD_TICK`` of real time rather than timed once. Requests whose pause ends at
    the same instant are released in the same look, in no particular order; the connection's
    id only keeps the heap from comparing connections (one is held once at a time).

    Nothing here bounds how many one VM has held: each is a connection of its own, and a VM's
    connections are bounded (``limits.CONNECTIONS_PER_VM``, :class:`._Connections`), those
    whose client has left while held being the first closed to make room. Each was counted
    against the rate limit when it came, so however many are released at once, none is
    refused for it (:meth:`forewarn.server.imds.ImdsEndpoint.answer`).
    """

    __slots__ = ("_clock", "_heap", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], datetime]) -> None:
        self._loop = loop
        self._clock = clock
        self._heap: list[tuple[datetime, int, ImdsProtocol]] = []
        self._timer: asyncio.TimerHandle | None = None

    def hold(self, until: datetime, connection: ImdsProtocol) -> None:
        """Hold ``connection`` until the platform time ``until``."""
        heapq.heappush(self._heap, (until, id(connection), connection))
        if self._timer is None:
            self._timer = self._loop.call_later(limits.HOLD_TICK, self._tick)

    def __len__(self) -> int:
        return len(self._heap)

    def _tick(self) -> None:
        now = self._clock()
        heap = self._heap
        due: list[ImdsProtocol] = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        self._timer = self._loop.call_later(limits.HOLD_TICK, self._tick) if heap else None
        for connection in due:
            connection.release()
