"""A VM flooding its endpoint cannot delay the others: once a connection's answer is a 429,
each request it sends next, later or pipelined in the same read, is answered in turns, a few
at a time (:data:`~forewarn.server.http.limits.REFUSED_PER_TURN` answers every
:data:`~forewarn.server.http.limits.REFUSED_TURN`), and so is the first request of each new
connection of its VM, until one of its answers in a turn is not a 429."""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

from forewarn.server.http import limits

if TYPE_CHECKING:
    from forewarn.server.http._connection import ImdsProtocol
    from forewarn.server.http._held_requests import _Caller


class _RefusedTurns:
    """Requests on connections just refused with a 429, answered a few per turn.

    A VM flooding its endpoint keeps every one of its connections ready at once, and may
    pipeline hundreds of requests in each read. Answered as they arrive, each turn of the
    loop would answer all of them (50 connections of 16 requests: 800 answers, milliseconds
    of work) before it reads anyone else, and the loop would spend all its time on them, so
    every other VM's request would wait behind a batch of the flood's answers, or for the
    process to be scheduled again on a busy machine. Once a connection's answer is a 429,
    each request it sends next waits here instead and is then handled as any other, in turns
    of at most ``limits.REFUSED_PER_TURN`` answers every ``limits.REFUSED_TURN``: one request
    per connection, which waits again at the back while it has more. The answers are
    counted, not the reads: however many requests a read holds, the connections answered 429
    get at most 4,000 answers a second between them, IMDS's answers still, and another VM's
    request waits behind at most one turn of them.

    A VM flooding on a new connection for each request would have none answered 429 twice,
    so the VMs answered 429 are remembered (``callers``): each new connection of theirs
    starts waiting for its turn, until one of their answers in a turn is not a 429.
    """

    __slots__ = ("_loop", "_timer", "_waiting", "callers")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: collections.deque[ImdsProtocol] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self.callers: set[_Caller] = set()

    def refused(self, caller: _Caller) -> None:
        """``caller`` (a VM) was answered 429: its new connections wait for turns."""
        if len(self.callers) >= limits.AGAIN_ADDRESSES:  # never, but for a forged crowd
            self.callers.clear()
        self.callers.add(caller)

    def answered(self, caller: _Caller) -> None:
        """``caller`` was answered in a turn, not with a 429: within its rate again."""
        self.callers.discard(caller)

    def wait(self, connection: ImdsProtocol) -> None:
        self._waiting.append(connection)
        if self._timer is None:
            self._timer = self._loop.call_later(limits.REFUSED_TURN, self._turn)

    def _turn(self) -> None:
        """Answer up to ``limits.REFUSED_PER_TURN`` requests, one per connection in the order
        they came to wait (a connection with more waits again at the back, so with fewer
        connections waiting than that, one may be answered more than once), then wait for
        the next turn."""
        waiting = self._waiting
        for _ in range(limits.REFUSED_PER_TURN):
            if not waiting:
                break
            waiting.popleft().take_turn()
        self._timer = self._loop.call_later(limits.REFUSED_TURN, self._turn) if waiting else None
