"""A write acknowledged through one front-end is in every live front-end's next response.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"): the writer answers once every
other live front-end has applied its record, or after a bound when one lags. Each front-end
here runs on an event loop of its own, in a thread, with its follower, as ``forewarn serve``
runs it; every call on a front-end is made on its loop, and no read waits or retries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

from forewarn.cluster import replica as replica_module
from forewarn.cluster.replica import Replica
from forewarn.cluster.tasks import run_front_end
from forewarn.commands import Approve, Restart
from forewarn.domain.events import EventStatus
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, open_state

from .front_ends import silence

T = TypeVar("T")


class LoopFrontEnd:
    """One front-end: its service, its replica (registered), and its loop's thread."""

    def __init__(self, store: str, fleet: Path, *, follow: bool = True) -> None:
        settings = ServeSettings(fleet=fleet, store=store, clock="manual", seed=3)
        self.state: OpenedState = open_state(settings)
        self.replica.register()
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, args=(follow,), daemon=True)
        self._thread.start()

    @property
    def replica(self) -> Replica:
        assert self.state.replica is not None
        return self.state.replica

    def _run(self, follow: bool) -> None:
        asyncio.set_event_loop(self.loop)
        if follow:
            self.loop.run_until_complete(run_front_end(self.replica, self.stop))
        else:  # registered, then silent: a front-end killed with SIGKILL
            self.loop.run_until_complete(self.stop.wait())

    def call(self, function: Callable[[], T]) -> T:
        """``function()`` run on this front-end's loop, as a request's handler runs."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return future.result(timeout=10)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """``coroutine`` run to its end on this front-end's loop, as a change's handler
        runs (the service's ``*_async`` methods)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(10)
        self.loop.close()
        self.state.service.close()


@pytest.fixture
def open_front_ends(shared_store: str, fleet_file: Path) -> Iterator[list[LoopFrontEnd]]:
    opened: list[LoopFrontEnd] = []
    yield opened
    for front_end in opened:
        front_end.close()


def _status(front_end: LoopFrontEnd, event_id: str) -> EventStatus | None:
    views = front_end.call(front_end.state.service.events)
    return next((v.event.status for v in views if v.event.event_id == event_id), None)


def test_an_operation_through_one_is_in_the_others_next_read_and_an_approval_too(
    open_front_ends: list[LoopFrontEnd], shared_store: str, fleet_file: Path
) -> None:
    open_front_ends.extend(LoopFrontEnd(shared_store, fleet_file) for _ in range(3))
    a, b, c = open_front_ends
    for vm in ("WestNO_0", "WestNO_1", "WestNO_2"):
        (event,) = a.run(a.state.service.execute_async(Restart(vm)))
        for other in (b, c):  # at once: no sleep, no retry
            assert _status(other, event.event_id) is EventStatus.SCHEDULED
            document = other.call(partial(other.state.service.document, vm))
            assert event.event_id in {shown.event_id for shown in document.events}
    c.run(c.state.service.execute_async(Approve("WestNO_0", (event.event_id,))))
    assert _status(a, event.event_id) is EventStatus.STARTED
    assert _status(b, event.event_id) is EventStatus.STARTED


def test_a_silent_front_end_delays_writes_by_the_bound_until_its_heartbeat_expires(
    open_front_ends: list[LoopFrontEnd], shared_store: str, fleet_file: Path
) -> None:
    open_front_ends.extend(LoopFrontEnd(shared_store, fleet_file) for _ in range(2))
    a, b = open_front_ends
    silent = LoopFrontEnd(shared_store, fleet_file, follow=False)
    open_front_ends.append(silent)
    behind = {a: _lagging(a), b: _lagging(b)}
    bound = replica_module.SPREAD_SECONDS
    started = time.monotonic()
    (event,) = a.run(a.state.service.execute_async(Restart("WestNO_0")))
    assert time.monotonic() - started >= bound  # waited the whole bound ...
    assert behind[a] == [(silent.replica.front_end,)]  # ... for the silent one, then answered
    assert _status(b, event.event_id) is EventStatus.SCHEDULED  # the live one has it
    silence(shared_store, silent.replica.front_end, replica_module.LIVE_SECONDS + 1)
    (event,) = b.run(b.state.service.execute_async(Restart("WestNO_1")))
    assert behind[b] == [()]  # the silent one's registration has expired: nobody waited for
    assert _status(a, event.event_id) is EventStatus.SCHEDULED


def _lagging(front_end: LoopFrontEnd) -> list[tuple[str, ...]]:
    """The front-ends each write through ``front_end`` waited for in vain, write by write."""
    seen: list[tuple[str, ...]] = []
    journal = front_end.replica.journal
    wait_applied = journal.wait_applied

    def recorded(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        lagging = wait_applied(*args, **kwargs)
        seen.append(lagging)
        return lagging

    journal.wait_applied = recorded  # type: ignore[method-assign]
    return seen
