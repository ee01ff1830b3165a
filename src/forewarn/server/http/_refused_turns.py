"""A VM flooding its endpoint cannot delay the others: once a connection's answer is a 429,
what it sends next is answered in turns, a few at a time
(:data:`~forewarn.server.http.limits.REFUSED_PER_TURN` every
:data:`~forewarn.server.http.limits.REFUSED_TURN`)."""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

from forewarn.server.http import limits

if TYPE_CHECKING:
    from forewarn.server.http._connection import ImdsProtocol


class _RefusedTurns:
    """Requests on connections just refused with a 429, answered a few per turn.

    A VM flooding its endpoint keeps every one of its connections ready at once. Answered as
    they arrive, each turn of the loop would answer all of them (50 connections: 50 answers,
    milliseconds of work) before it reads anyone else, and the loop would spend all its time
    on them, so every other VM's request would wait behind a batch of the flood's answers, or
    for the process to be scheduled again on a busy machine. Once a connection's answer is a
    429, what it sends next waits here instead and is then handled as any other, in turns of
    at most ``limits.REFUSED_PER_TURN`` every ``limits.REFUSED_TURN``: the flooding VM still
    gets IMDS's answers, only not faster than that, and another VM's request waits behind at
    most one turn of them.
    """

    __slots__ = ("_loop", "_timer", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: collections.deque[ImdsProtocol] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def wait(self, connection: ImdsProtocol) -> None:
        self._waiting.append(connection)
        if self._timer is None:
            self._timer = self._loop.call_later(limits.REFUSED_TURN, self._turn)

    def _turn(self) -> None:
        """Handle the oldest waiting connections' data, then wait for the next turn."""
        waiting = self._waiting
        for _ in range(min(limits.REFUSED_PER_TURN, len(waiting))):
            waiting.popleft().take_turn()
        self._timer = self._loop.call_later(limits.REFUSED_TURN, self._turn) if waiting else None
