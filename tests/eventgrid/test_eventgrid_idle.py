"""The delivery loop with nothing to deliver: it waits for a change rather than ask its store
what is due every poll, since with nothing pending only a change (which wakes it) makes work.
[ours] (docs/azure-side.md, "Event Grid": the store is asked every poll while anything is
pending, once per IDLE_POLL otherwise). In process, on SQLite in memory, the loop's waits
recorded as it makes them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from forewarn.eventgrid import delivery
from forewarn.eventgrid.delivery import IDLE_POLL, EventGrid
from forewarn.eventgrid.store import DeliveryStore, Subscription

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
POLL = 0.001


def _grid(store: DeliveryStore) -> EventGrid:
    return EventGrid(lambda: T0, lambda: 0, store, validation_base="http://x", poll=POLL)


def _subscribed(store: DeliveryStore) -> None:
    store.add(Subscription("ops", "http://127.0.0.1:9/", "eventgrid", "Succeeded", "c", T0, 0))


async def _waits_of(grid: EventGrid, rounds: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The timeouts of the loop's first ``rounds`` waits between rounds."""
    timeouts: list[Any] = []
    stop = asyncio.Event()
    real_wait = asyncio.wait

    async def recorded(tasks: Any, *, timeout: Any = None, return_when: Any = None) -> Any:
        timeouts.append(timeout)
        if len(timeouts) >= rounds:
            stop.set()
        return await real_wait(tasks, timeout=POLL, return_when=return_when)

    monkeypatch.setattr("forewarn.eventgrid.delivery.asyncio.wait", recorded)
    monkeypatch.setattr(delivery, "VIEWS_EVERY", 0.0)  # views read every round
    await grid.run(stop)
    return timeouts


def test_with_nothing_pending_the_loop_waits_for_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first round reads the views (nothing pending), so it polls once more; then it
    waits IDLE_POLL for a change."""
    store = DeliveryStore(None)
    _subscribed(store)
    timeouts = asyncio.run(_waits_of(_grid(store), 4, monkeypatch))
    assert timeouts[-2:] == [IDLE_POLL, IDLE_POLL]


def test_with_a_delivery_pending_the_loop_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delivery pending, even one not due yet (its retry later), keeps the loop polling:
    it falls due with the platform's time, which wakes nothing."""
    store = DeliveryStore(None)
    _subscribed(store)
    store.enqueue([(1, T0, "id-1", {"eventgrid": "{}"})], cursor=1)
    store.failed(
        store.due(T0, 1, ())[0], at=T0, status=503, outcome="", again=T0.replace(hour=13),
        error="503 Service Unavailable",
    )  # fmt: skip
    timeouts = asyncio.run(_waits_of(_grid(store), 4, monkeypatch))
    assert timeouts == [POLL] * 4


def test_a_change_wakes_an_idle_loop_and_it_polls_until_delivered() -> None:
    """What makes ``_idle`` false: a change waiting, and views read before the last change
    to the store's deliveries."""
    store = DeliveryStore(None)
    _subscribed(store)
    grid = _grid(store)

    async def scenario() -> list[bool]:
        seen = [grid._idle()]  # no views read yet
        await grid.step()
        seen.append(grid._idle())  # views read after the start: nothing pending
        store.enqueue([(1, T0, "id-1", {"eventgrid": "{}"})], cursor=1)
        grid._changed_at = float("inf")  # as the loop's own enqueue marks it
        seen.append(grid._idle())
        return seen

    assert asyncio.run(scenario()) == [False, True, False]
