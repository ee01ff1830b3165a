"""Requests held while their VM is paused (an impact, the first-call delay), released in order
of the pause's end, at most a burst of the rate limit per VM; and those of a VM that is gone,
never released, under the same bound."""

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
        if not self._admit(connection, caller):
            return False
        heapq.heappush(self._heap, (until, id(connection), connection, caller))
        if self._timer is None:
            self._timer = self._loop.call_later(limits.HOLD_TICK, self._tick)
        return True

    def keep_unanswered(self, connection: ImdsProtocol, caller: _Caller) -> bool:
        """Keep ``connection`` with no end: its VM is gone, and nothing will answer. Under
        the same bound as held ones; False when ``caller`` has as many kept already."""
        return self._admit(connection, caller)

    def _admit(self, connection: ImdsProtocol, caller: _Caller) -> bool:
        """Count ``connection`` for ``caller``, after closing those whose client has left
        when the caller has ``limit`` already; False when there is still no room."""
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
        self._timer = self._loop.call_later(limits.HOLD_TICK, self._tick) if heap else None
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
