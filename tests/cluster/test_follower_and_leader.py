"""The background work of front-ends sharing a journal, run on an event loop in-process.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"): others' records are applied as
they are committed, with no read on the request path, and time-driven transitions (here a
NotBefore passing, SPEC 4) come from the one leader's ticks, applied by everyone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from forewarn.cluster.tasks import run_front_end
from forewarn.commands import Restart
from forewarn.domain.events import EventStatus
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, open_state
from forewarn.service import ScheduledEventsService


def _open(store: str, fleet: Path) -> OpenedState:
    return open_state(ServeSettings(fleet=fleet, store=store, profile="fast", seed=1))


async def _until(condition: Callable[[], bool], seconds: float) -> float:
    """How long ``condition`` took to hold, polling the loop (never blocking it)."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "not within the time allowed"
        await asyncio.sleep(0.01)
    return time.monotonic() - start


def _started(service: ScheduledEventsService, event_id: str) -> Callable[[], bool]:
    return lambda: service.event(event_id).event.status is EventStatus.STARTED


def test_followers_apply_records_and_the_leader_journals_time(
    shared_store: str, fleet_file: Path
) -> None:
    a, b = _open(shared_store, fleet_file), _open(shared_store, fleet_file)
    assert a.replica is not None
    assert b.replica is not None
    replica_a, replica_b = a.replica, b.replica

    async def scenario() -> None:
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(run_front_end(replica_a, stop)),
            asyncio.create_task(run_front_end(replica_b, stop)),
        ]
        try:
            (event,) = a.service.execute(Restart("WestNO_0"))
            # B applies A's record without reading on its own request path
            await _until(lambda: len(b.service.events()) == 1, 5)
            # the fast profile's Reboot notice is 3 s: the leader's tick starts it for both
            for service in (a.service, b.service):
                await _until(_started(service, event.event_id), 10)
            ticks = [r for _, r in replica_a.journal.records() if r["op"] == "tick"]
            assert ticks, "the Started came from a journaled tick"
            assert replica_a.head == replica_b.head
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    try:
        asyncio.run(scenario())
    finally:
        replica_a.journal.close()
        replica_b.journal.close()
