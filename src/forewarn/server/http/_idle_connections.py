"""The VM-facing connections of one endpoint, and which of them to close: those idle or stuck
over one request too long (:data:`~forewarn.server.http.limits.IDLE_TIMEOUT`,
:data:`~forewarn.server.http.limits.REQUEST_TIMEOUT`, one timer for them all), the
longest-idle of a VM at its cap (:data:`~forewarn.server.http.limits.CONNECTIONS_PER_VM`),
and, when the process's descriptors run short, the longest-idle of the VMs holding the most
(:data:`~forewarn.server.http.limits.RESERVED_DESCRIPTORS` are left to everything else)."""

from __future__ import annotations

import asyncio
import heapq
from typing import TYPE_CHECKING

from forewarn.server.http import limits
from forewarn.server.http._descriptors import descriptor_limit, open_descriptors

if TYPE_CHECKING:
    from forewarn.server.http._connection import ImdsProtocol
    from forewarn.server.http._held_requests import _Caller


class _Connections:
    """The open connections of one endpoint (every listener's), by the VM they come from
    (:meth:`ImdsProtocol.caller`), checked for idleness all at once.

    One timer for all rather than one per connection: arming and cancelling a timer costs
    2.5 us on uvloop, a twentieth of a whole connection-per-request exchange.

    Each VM may hold ``limits.CONNECTIONS_PER_VM``: one more closes its longest-idle one,
    which its client, like any HTTP client whose kept connection the server closed, replaces
    when it next asks (RFC 9112 section 9.5); with none of them idle, the new one is closed at
    once, unread, so that one VM can never hold more. All VMs together may hold what the
    descriptor limit leaves after the process's other descriptors and
    ``limits.RESERVED_DESCRIPTORS``: past that, the longest-idle connections of the VMs
    holding the most are closed, a few at once, so that a VM polling on one kept connection
    keeps it while any VM holds more; and a new connection finding none idle is closed.
    """

    __slots__ = ("_by_caller", "_count", "_counted_at", "_loop", "_room", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._by_caller: dict[_Caller, list[ImdsProtocol]] = {}
        self._count = 0
        # How many connections all VMs together may hold, from the descriptors the process
        # held beside them when last counted, and when that was (loop time; None before the
        # first connection).
        self._room = 0
        self._counted_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return self._count

    def add(self, connection: ImdsProtocol) -> None:
        """Count a new connection, or close it at once when its VM, or all VMs together,
        hold all they may and none of theirs is idle."""
        caller = connection.caller()
        mine = self._by_caller.get(caller)
        if mine is None:
            self._by_caller[caller] = [connection]
        else:
            if len(mine) >= limits.CONNECTIONS_PER_VM and not self._close_longest_idle(mine):
                connection.abort()
                return
            mine.append(connection)
        self._count += 1
        if self._count > self._room or self._counted_at is None:
            self._relieve(connection)
        if self._timer is None:
            self._timer = self._loop.call_later(limits.IDLE_SWEEP, self._sweep)

    def discard(self, connection: ImdsProtocol) -> None:
        """The connection is gone, or is closed for good (counted no more from now on, though
        its descriptor is given back only when the loop has closed it, a moment later)."""
        caller = connection.caller()
        mine = self._by_caller.get(caller)
        if mine is None:
            return
        try:
            mine.remove(connection)
        except ValueError:  # closed at once when it came, or closed to make room
            return
        self._count -= 1
        if not mine:
            del self._by_caller[caller]

    def _close_longest_idle(self, mine: list[ImdsProtocol]) -> bool:
        """Close the longest-idle of one VM's connections; False when none is idle."""
        idle = [(at, index) for index, c in enumerate(mine) if (at := c.idle_at()) is not None]
        if not idle:
            return False
        _, index = min(idle)
        self._close(mine[index])
        return True

    def _close(self, connection: ImdsProtocol) -> None:
        self.discard(connection)
        connection.close_idle()

    # -- descriptors ---------------------------------------------------------------------

    def _relieve(self, new: ImdsProtocol) -> None:
        """Count the process's other descriptors (at the first connection, then at most every
        ``DESCRIPTORS_RECOUNT`` while the VMs' connections are past their share: a count
        lists them all) and, with the VMs' connections still past it, close the longest-idle
        connections of the VMs holding the most, a few more than needed so that the next
        connections need no such look; close ``new`` itself when none is idle."""
        now = self._loop.time()
        if self._counted_at is None or now - self._counted_at >= limits.DESCRIPTORS_RECOUNT:
            self._recount(now)
        room = self._room
        over = self._count - room
        if over <= 0:
            return
        for connection in self._longest_idle(over + room // 32, new):
            self._close(connection)
        if self._count > room:
            self.discard(new)
            new.abort()

    def _recount(self, now: float) -> None:
        self._counted_at = now
        held = open_descriptors()
        others = 0 if held is None else max(0, held - self._count)
        self._room = descriptor_limit() - limits.RESERVED_DESCRIPTORS - others

    def _longest_idle(self, wanted: int, new: ImdsProtocol) -> list[ImdsProtocol]:
        """Up to ``wanted`` idle connections, ``new`` aside: one at a time from the VM
        holding the most at that point, its longest-idle one."""
        idle: dict[_Caller, list[tuple[float, int, ImdsProtocol]]] = {}
        for caller, mine in self._by_caller.items():
            found = [
                (at, index, c)
                for index, c in enumerate(mine)
                if c is not new and (at := c.idle_at()) is not None
            ]
            if found:
                found.sort(reverse=True)  # the longest idle last, to pop
                idle[caller] = found
        most = [(-len(self._by_caller[caller]), caller) for caller in idle]
        heapq.heapify(most)
        chosen: list[ImdsProtocol] = []
        while most and len(chosen) < wanted:
            held, caller = heapq.heappop(most)
            found = idle[caller]
            chosen.append(found.pop()[2])
            if found:
                heapq.heappush(most, (held + 1, caller))
        return chosen

    # -- idle and stuck connections --------------------------------------------------------

    def _sweep(self) -> None:
        """Close connections idle (or stuck mid-request) for longer than the timeout."""
        now = self._loop.time()
        for connection in [
            c
            for mine in self._by_caller.values()
            for c in mine
            if c.idle_since(now) >= limits.IDLE_TIMEOUT
        ]:
            connection.close_idle()
        self._timer = (
            self._loop.call_later(limits.IDLE_SWEEP, self._sweep) if self._by_caller else None
        )
