"""The one shape of ``forewarn serve``'s background parts: work that runs beside the
listeners from start-up until told to stop.

The event log, a shared journal's follower and leader, Event Grid's deliveries, the impact
hooks and the workers' supervision are each a :class:`BackgroundPart`, a coroutine function
of the stop event, entered with :func:`running` in the exit stack that ``serve`` builds
(``contextlib.AsyncExitStack``). Leaving the stack, whether the server is stopping or a later
part of the start failed, sets the stop event and waits for each part in the reverse order of
their start, so nothing that was started outlives a start that failed, and everything opened
before a part is still open while it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from forewarn.server._serve_logging import log

__all__ = ["BackgroundPart", "running"]

LOGGER = logging.getLogger("forewarn.server")


class BackgroundPart(Protocol):
    """Work that runs until ``stop`` is set, then returns."""

    def __call__(self, stop: asyncio.Event, /) -> object:
        """A coroutine (the part's whole life) given the event that ends it."""
        ...


@asynccontextmanager
async def running(name: str, part: BackgroundPart, stop: asyncio.Event) -> AsyncIterator[None]:
    """``part`` as a task from entering until leaving, where ``stop`` is set (it ends the
    server anyway) and the task awaited. A part that failed is logged once, with its name,
    and never hides the reason the server is stopping."""
    work = part(stop)
    if not asyncio.iscoroutine(work):
        raise TypeError(f"the background part {name} is not a coroutine function")
    task: asyncio.Task[object] = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        stop.set()
        try:
            await task
        except Exception as exc:  # logged once; the other parts still stop in turn
            log(LOGGER, logging.ERROR, f"{name} failed: {type(exc).__name__}: {exc}")
