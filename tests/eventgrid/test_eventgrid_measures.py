"""The delivery loop's own measures of real time, on a clock stepped by hand: how busy the
event loop is, the busy rate, the views' age, when a failing dead-letter folder is said
again, and how long the loop waits between rounds.

docs/azure-side.md, "Event Grid", "Never in a VM's way, nor another subscription's": a
change is only queued on the VM's request; deliveries run in a task of their own, 16 at
once per subscription; while anything is pending the store is asked every 50 ms, with
nothing pending the loop waits for a change, and a front-end that is not the leader looks
once a second. How the task gives way to the VMs' requests is the loop's own ([ours], the
constants' comments in src/forewarn/eventgrid/delivery.py): while the event loop is busy
(it comes back to the task more than ``BUSY_LAG`` late, measured every ``MEASURE_EVERY``
seconds), deliveries start at ``BUSY_RATE`` a second after a burst of ``BUSY_BURST``, and a
busy loop is given back for a whole poll. The clock is the loop's ``monotonic``; the
platform's clock (retries, time to live) is another and stays at T0 here.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from forewarn.eventgrid import delivery
from forewarn.eventgrid.delivery import BUSY_LAG, IDLE_POLL, MEASURE_EVERY, VIEWS_EVERY, EventGrid
from forewarn.eventgrid.payloads import Schema
from forewarn.eventgrid.store import DeliveryStore, Subscription
from forewarn.storage.errors import StoreUnavailableError

from .test_eventgrid_loop import T0, Holding, Hook, change

#: A lag the loop notices (more than BUSY_LAG), exact in binary.
LAG = 2.0**-10


class Ticks:
    """Real time for the loop's measures, moved by hand; ``lag`` is how far it moves while
    the event loop runs other work (the VMs' requests) once the task gives way."""

    def __init__(self, at: float = 0.0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at

    def lag(self, seconds: float) -> None:
        """Other work ready to run: it takes ``seconds`` when the task next gives way."""

        def work() -> None:
            self.at += seconds

        asyncio.get_running_loop().call_soon(work)


def _subscribe(store: DeliveryStore, *names: str) -> None:
    for name in names:
        store.add(Subscription(name, f"http://hook.example/{name}", "eventgrid", "Succeeded",
                               "c", T0, 0))  # fmt: skip


def _grid(ticks: Ticks, exchange: Any, *names: str, events: int = 0, **options: Any) -> EventGrid:
    store = DeliveryStore(None)
    _subscribe(store, *names)
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", monotonic=ticks,
                     **options)  # fmt: skip
    grid._exchange = exchange  # type: ignore[method-assign]
    for n in range(1, events + 1):
        grid.on_change(change(n, event_id=f"E{n}"))
    return grid


async def _round(grid: EventGrid) -> bool:
    """One round as the leading loop runs it: its business measured, then its step."""
    busy = await grid._loop_busy()
    await grid.step(busy)
    return busy


# -- the loop's business ------------------------------------------------------------------


def test_the_loop_is_busy_when_it_comes_back_more_than_busy_lag_late() -> None:
    """A lag of exactly ``BUSY_LAG`` is not busy, a longer one is; the measure is taken at
    once on a clock that starts at zero, then holds for ``MEASURE_EVERY`` seconds from the
    end of the last one, and is taken again at that very instant."""
    ticks = Ticks(0.0)
    grid = _grid(ticks, Hook(200))

    async def scenario() -> list[bool]:
        seen = []
        ticks.lag(BUSY_LAG)
        seen.append(await grid._loop_busy())  # at 0.0: exactly BUSY_LAG late
        ticks.at = BUSY_LAG + MEASURE_EVERY  # the next measure's instant
        ticks.lag(LAG)
        seen.append(await grid._loop_busy())
        measured = ticks.at
        ticks.at = measured + MEASURE_EVERY - LAG  # not yet: the last measure holds
        seen.append(await grid._loop_busy())
        ticks.at = measured + MEASURE_EVERY  # quiet now
        seen.append(await grid._loop_busy())
        return seen

    assert asyncio.run(scenario()) == [False, True, True, False]


def test_no_measure_while_a_delivery_started_within_the_last_measure_still_runs() -> None:
    """A delivery started less than ``MEASURE_EVERY`` ago and still running makes
    callbacks that would make a quiet loop look busy: the loop does not measure then, and
    starts nothing new until it has; a delivery answered (even before its outcome is
    recorded) or running for ``MEASURE_EVERY`` no longer stands in the way."""
    ticks = Ticks(100.0)
    hook = Holding("ops")
    grid = _grid(ticks, hook, "ops", events=1)

    async def scenario() -> list[int]:
        asked = []
        await grid.step()  # E1 starts at 100.0, held
        await asyncio.sleep(0)
        grid.on_change(change(2, event_id="E2"))
        ticks.at = 100.0 + MEASURE_EVERY - LAG
        await _round(grid)  # E1 young and running: no measure, nothing starts
        await asyncio.sleep(0)
        asked.append(len(hook.asked))
        ticks.at = 100.0 + MEASURE_EVERY  # E1 as old as MEASURE_EVERY: measured
        await _round(grid)
        await asyncio.sleep(0)
        asked.append(len(hook.asked))
        hook.release.set()
        await grid.settle()
        return asked

    assert asyncio.run(scenario()) == [1, 2]


def test_an_answered_delivery_not_yet_recorded_does_not_hold_the_measure_up() -> None:
    """The attempt over, its outcome waits for the next round's record; its callbacks are
    done, so the loop measures (and starts the next delivery) though it started just
    now."""
    ticks = Ticks(100.0)
    hook = Hook(200)
    grid = _grid(ticks, hook, "ops", events=1)

    async def scenario() -> int:
        await grid.step()  # E1 starts at 100.0 and is answered
        await grid.settle()
        grid.on_change(change(2, event_id="E2"))
        ticks.at = 100.0 + LAG
        await _round(grid)
        await grid.settle()
        return len(hook.asked)

    assert asyncio.run(scenario()) == 2


# -- the busy rate -------------------------------------------------------------------------


def test_while_busy_deliveries_start_at_200_a_second_after_a_burst_of_16() -> None:
    """``BUSY_BURST`` at once, then one more per 1/``BUSY_RATE`` second of real time (a
    fraction of one waits), and never more than the burst however long the loop waited."""
    ticks = Ticks(0.0)
    hook = Hook(200)
    grid = _grid(ticks, hook, "ops", events=100)

    async def scenario() -> list[int]:
        asked = []
        for moment in (0.0, 0.0, 2.0**-5, 2.0**-5 + 2.0**-7, 10.0):
            ticks.at = moment
            await grid.step(busy=True)
            await grid.settle()
            asked.append(len(hook.asked))
        return asked

    # 16; none more at once; 1/32 s is 6.25 starts: 6; 1/128 s more, 1.5625 with the
    # quarter left: 1; ten seconds later the burst again, not 2,000
    assert asyncio.run(scenario()) == [16, 16, 22, 23, 39]


@pytest.mark.parametrize("held", [10, 15])
def test_each_subscription_counts_its_own_deliveries_in_flight(held: int) -> None:
    """docs/azure-side.md: 16 calls at once of its own per subscription: with some of its
    deliveries held (15: its last place), the rest of its 16 start, and no more."""
    hook = Holding("ops")
    grid = _grid(Ticks(), hook, "ops", events=held)

    async def scenario() -> int:
        await grid.step()
        await asyncio.sleep(0)
        for n in range(held + 1, held + 21):
            grid.on_change(change(n, event_id=f"E{n}"))
        await grid.step()
        await asyncio.sleep(0)
        hook.release.set()
        await grid.settle()
        return len(hook.asked)

    assert asyncio.run(scenario()) == 16


def test_a_round_asks_the_store_only_for_what_may_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is asked for a subscription's due deliveries only while something may
    start (``IN_FLIGHT`` made 24, then 100 here): not for one removed since the round read
    what is due (its deliveries went with it), not once the round's room is used up, not
    for one whose own 16 are in flight. A round that used its room up still refreshes the
    dashboard's views."""
    monkeypatch.setattr(delivery, "IN_FLIGHT", 24)
    hook = Holding("a", "b", "c", "d")
    grid = _grid(Ticks(), hook, "a", "b", "c", "d", events=20)
    store = grid.store
    asked: list[tuple[str | None, int]] = []
    due, due_subscriptions = store.due, store.due_subscriptions

    def counted(now: datetime, limit: int, busy: Any = (), *, subscription: str | None = None
                ) -> Any:  # fmt: skip
        asked.append((subscription, limit))
        return due(now, limit, busy, subscription=subscription)

    def removing(now: datetime) -> list[str]:
        waiting = due_subscriptions(now)
        if store.get("a") is not None:
            store.remove("a")  # by the control API, between the round's two reads
        return waiting

    monkeypatch.setattr(store, "due", counted)
    monkeypatch.setattr(store, "due_subscriptions", removing)

    async def scenario() -> None:
        await grid.step()  # a removed; b's 16, then c's 8: the room of 24 used up
        await asyncio.sleep(0)
        assert asked == [("b", 16), ("c", 8)]
        assert [(v.subscription.name, v.pending) for v in grid.views] == [
            ("b", 20),
            ("c", 20),
            ("d", 20),
        ]
        monkeypatch.setattr(delivery, "IN_FLIGHT", 100)
        await grid.step()  # the next turn: c's 8 more, d's 16; b's own 16 in flight
        await asyncio.sleep(0)
        assert asked[2:] == [("c", 8), ("d", 16)]
        hook.release.set()
        await grid.settle()

    asyncio.run(scenario())


def test_a_delivery_being_sent_is_not_taken_again() -> None:
    """Until its outcome is recorded a delivery is never sent a second time (the store's
    due deliveries skip those in flight), though its subscription has room."""
    hook = Holding("ops")
    grid = _grid(Ticks(), hook, "ops", events=1)

    async def scenario() -> list[str]:
        await grid.step()
        await asyncio.sleep(0)
        await grid.step()
        await asyncio.sleep(0)
        hook.release.set()
        await grid.settle()
        return hook.asked

    assert asyncio.run(scenario()) == ["ops"]


# -- the views ----------------------------------------------------------------------------


def test_the_views_are_read_at_once_then_every_half_second() -> None:
    """The dashboard's views (what is pending) are read by the loop's first round, on a
    clock that starts at zero, then again once ``VIEWS_EVERY`` has passed, at that very
    instant, not before."""
    ticks = Ticks(0.0)
    hook = Holding("ops")
    grid = _grid(ticks, hook, "ops")

    def pending() -> list[int]:
        return [view.pending for view in grid.views]

    async def scenario() -> list[list[int]]:
        seen = [pending()]
        await grid.step()
        seen.append(pending())
        grid.on_change(change(1))
        ticks.at = VIEWS_EVERY - LAG
        await grid.step()
        seen.append(pending())
        ticks.at = VIEWS_EVERY
        await grid.step()
        seen.append(pending())
        hook.release.set()
        await grid.settle()
        return seen

    assert asyncio.run(scenario()) == [[], [0], [0], [1]]


# -- the waits between rounds -------------------------------------------------------------


async def _waits(grid: EventGrid, rounds: int, monkeypatch: pytest.MonkeyPatch,
                 between: Any = None) -> list[tuple[int, float]]:  # fmt: skip
    """How many tasks the loop's first ``rounds`` waits wait for (1: only the stop; 2: a
    kick too) and their timeouts; ``between`` runs after each."""
    waits: list[tuple[int, float]] = []
    stop = asyncio.Event()
    real_wait = asyncio.wait

    async def recorded(tasks: Any, *, timeout: Any = None, return_when: Any = None) -> Any:
        waits.append((len(tasks), timeout))
        if between is not None:
            between()
        if len(waits) >= rounds:
            stop.set()
        return await real_wait(tasks, timeout=0.001, return_when=return_when)

    monkeypatch.setattr("forewarn.eventgrid.delivery.asyncio.wait", recorded)
    await grid.run(stop)
    return waits


def test_a_front_end_not_leading_looks_once_a_second_whatever_changes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/azure-side.md: a front-end that is not the leader looks at the store once a
    second at most (``IDLE_POLL``): a change does not wake it. Once leading, it looks
    again at the next poll, whatever the views it read as a follower showed (read at the
    same instant, they may predate the leader's last changes); nothing fails on the way."""
    ticks = Ticks(5.0)
    leading = [False]
    grid = _grid(ticks, Hook(200), "ops", poll=0.002, active=lambda: leading[0])
    store = grid.store
    count = [0]

    def between() -> None:
        count[0] += 1
        n = count[0]
        if n < 3:  # a change here, which the leader elsewhere delivers
            grid.on_change(change(n, event_id=f"E{n}"))
            store.enqueue([(n, T0, f"id-{n}", {"eventgrid": "{}"})], cursor=n)
            store.delivered_all(store.due(T0, 10, ()))
        else:
            leading[0] = True

    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")
    waits = asyncio.run(_waits(grid, 4, monkeypatch, between))
    assert waits == [(1, IDLE_POLL)] * 3 + [(2, 0.002)]
    assert [r.getMessage() for r in caplog.records] == []


def test_the_loop_polls_until_views_read_after_its_last_change_show_nothing_pending(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/azure-side.md: while anything is pending the store is asked every poll; with
    nothing pending the loop waits ``IDLE_POLL`` for a change. Nothing pending is known
    from views read strictly after the loop last changed the store (a change queued, an
    outcome recorded): read at the same instant, they may predate it."""
    ticks = Ticks(4.0)
    store = DeliveryStore(None)
    # after change 1: that change makes no delivery to it
    store.add(Subscription("ops", "http://hook.example/ops", "eventgrid", "Succeeded", "c", T0, 1))
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", poll=0.002,
                     monotonic=ticks)  # fmt: skip
    grid._exchange = Hook(200)  # type: ignore[method-assign]
    plan = {1: (1, 5.25), 2: (None, 5.5), 3: (2, 6.0), 4: (None, 6.5), 5: (None, 7.0)}
    count = [0]

    def between() -> None:
        count[0] += 1
        queued, moment = plan.get(count[0], (None, ticks.at))
        if queued is not None:
            grid.on_change(change(queued, event_id=f"E{queued}"))
        ticks.at = moment

    ticks.at = 5.0
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")
    waits = asyncio.run(_waits(grid, 6, monkeypatch, between))
    # 5.0 views read, nothing; 5.25 a change queued (no delivery), views of 5.0: poll;
    # 5.5 views read after it: idle; 6.0 a delivery started; 6.5 its outcome recorded
    # and views read at that instant: poll; 7.0 views read after: idle
    assert [timeout for _, timeout in waits] == [IDLE_POLL, 0.002, IDLE_POLL, 0.002, 0.002,
                                                 IDLE_POLL]  # fmt: skip
    assert [tasks for tasks, _ in waits] == [2] * 6
    assert store.get("ops").delivered == 1  # type: ignore[union-attr]
    assert [r.getMessage() for r in caplog.records] == []


def test_a_quiet_loop_waits_for_a_kick_or_50_ms_a_busy_one_a_whole_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/azure-side.md: while anything is pending the store is asked every 50 ms (the
    default poll); a quiet loop is woken at once by a change or a finished delivery, a busy
    one (here every measure sees the loop late) is given back for the whole poll."""
    store_rows: list[tuple[int, datetime, str, dict[Schema, str]]] = [
        (1, T0, "id-1", {"eventgrid": "{}"})
    ]

    def pending_grid(ticks: Ticks) -> EventGrid:
        grid = _grid(ticks, Hook(503), "ops")
        grid.store.enqueue(store_rows, cursor=1)
        grid.store.failed(
            grid.store.due(T0, 1, ())[0], at=T0, status=503, outcome="",
            again=T0.replace(hour=13), error="503 Service Unavailable",
        )  # fmt: skip
        return grid

    quiet = asyncio.run(_waits(pending_grid(Ticks(5.0)), 3, monkeypatch))
    assert quiet == [(2, 0.05)] * 3

    class Late(Ticks):
        def __call__(self) -> float:
            self.at += LAG  # each reading later than the last: every measure busy
            return self.at

    busy = asyncio.run(_waits(pending_grid(Late(5.0)), 3, monkeypatch))
    assert busy == [(1, 0.05)] * 3


@pytest.mark.parametrize(
    "failure", [StoreUnavailableError("disk full"), RuntimeError("boom")], ids=["store", "own"]
)
def test_a_failing_round_is_tried_again_after_a_whole_poll(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, failure: Exception
) -> None:
    """docs/azure-side.md, "Durability": a store that fails stops nothing; deliveries wait
    and the round is tried again at the next poll, not at every change (a quiet loop would
    be woken at once)."""
    grid = _grid(Ticks(5.0), Hook(200), "ops", poll=0.002)

    def fails(now: datetime) -> list[str]:
        raise failure

    monkeypatch.setattr(grid.store, "due_subscriptions", fails)
    caplog.set_level(logging.CRITICAL, logger="forewarn.eventgrid")
    waits = asyncio.run(_waits(grid, 3, monkeypatch))
    assert waits == [(1, 0.002)] * 3


# -- the duplicate fault ------------------------------------------------------------------


def test_a_duplicate_fault_the_store_cannot_count_sends_the_delivery_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/azure-side.md, "Double notifications": the fault is best effort; a store that
    cannot count it down sends the delivery once, as without the fault, and delivers it."""
    hook = Hook(200)
    grid = _grid(Ticks(), hook, "ops", events=1)
    grid.store.add_duplicates("ops", 1)

    def cannot(name: str) -> bool:
        raise StoreUnavailableError("disk full")

    monkeypatch.setattr(grid.store, "take_duplicate", cannot)

    async def scenario() -> None:
        await grid.step()
        await grid.settle()
        await grid.step()

    asyncio.run(scenario())
    ops = grid.store.get("ops")
    assert ops is not None
    assert (len(hook.asked), ops.delivered, ops.failed) == (1, 1, 0)


# -- a dead-letter folder that keeps failing ----------------------------------------------


def test_a_failing_dead_letter_folder_is_said_again_a_minute_later_to_the_instant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/azure-side.md, "Dead-lettering": a folder that cannot be written is said once
    per minute of real time (``LETTER_LOG_EVERY``), not once per event: again at the very
    instant a minute after it was last said, not a moment before."""
    blocked = tmp_path / "letters"
    blocked.write_text("a file where the folder should be")
    ticks = Ticks(0.0)
    grid = _grid(ticks, Hook(400), "ops", dead_letters=blocked)
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def scenario() -> list[int]:
        said = []
        for n, moment in enumerate((0.0, 60.0 - LAG, 60.0, 61.0), start=1):
            ticks.at = moment
            grid.on_change(change(n, event_id=f"E{n}"))
            await grid.step()
            await grid.settle()
            await grid.step()
            said.append(sum("cannot be written" in r.getMessage() for r in caplog.records))
        return said

    assert asyncio.run(scenario()) == [1, 1, 2, 2]
