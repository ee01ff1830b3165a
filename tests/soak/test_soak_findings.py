"""What the soak (test_soak.py) found, each pinned by the smallest test that shows it.

A finding not yet fixed is marked ``xfail(strict=True)`` with the bug as its reason: the day
a fix lands, the test passes, strict turns that into a failure, and the mark is removed.
All below were fixed since they were found.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from e2e_support import free_port, wait_until
from fault_tier import HEADERS, URL, Front, Witness
from tcp_proxy import TcpProxy

from forewarn.cluster.replica import Replica, ReplicaError
from forewarn.commands import Approve, Group, ScheduleEvent, Tick
from forewarn.config.fleet import parse_fleet
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.events import EventType
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.payloads import Schema
from forewarn.eventgrid.store import DeliveryStore, Subscription
from forewarn.service import ScheduledEventsService, platform_for_fleet
from forewarn.storage import open_journal
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.memory import MemoryJournal
from forewarn.testing import ForewarnPlatform
from forewarn.writer import QUIET_SECONDS, JournalWriter, NotJournaledError

from .fleet_soak import ADDRESSES, POLL_BOUND, fleet_text, journaled_approvals


class StoreThatFailsOnce(DeliveryStore):
    """Event Grid's store in memory, whose next :meth:`enqueue` fails as PostgreSQL cut away
    fails it (StoreUnavailableError, which the delivery loop waits out) once ``failing``."""

    failing = False

    def enqueue(
        self, changes: Sequence[tuple[int, datetime, str, dict[Schema, str]]], cursor: int
    ) -> int:
        if self.failing:
            self.failing = False
            raise StoreUnavailableError("Event Grid's state in PostgreSQL: connection lost")
        return super().enqueue(changes, cursor)


def test_a_change_whose_recording_failed_is_delivered_once_the_store_works() -> None:
    """At least once (learn.microsoft.com/azure/event-grid/delivery-and-retry; docs/azure-side.md,
    "Event Grid": deliveries "wait in the store" while it fails): a store failure delays a
    change's delivery, never drops it. The soak saw states of events that were shown to VMs
    and listed by Resource Graph never reach the receiver after PostgreSQL was cut: the
    delivery loop took a batch off its queue before the store had recorded it."""
    with ForewarnPlatform(fleet=fleet_text()) as platform:
        store = StoreThatFailsOnce(None)
        subscription = Subscription(
            "soak", "http://127.0.0.1:9/", "eventgrid", "Succeeded", "code", platform.now, 0
        )
        store.add(subscription)
        grid = EventGrid(platform.service.now, lambda: 0, store, validation_base="http://x")
        platform.service.on_published(grid.on_change)
        platform.restart("soak0")  # Scheduled: one change to deliver

        async def two_rounds() -> None:
            store.failing = True
            with pytest.raises(StoreUnavailableError):
                await grid.step()  # the store fails while the change is recorded
            await grid.step()  # and works again
            await grid.settle()

        asyncio.run(two_rounds())
        (view,) = asyncio.run(grid.list())
        store.close()
    assert view.pending + view.subscription.delivered == 1, view


@pytest.mark.e2e
def test_a_vm_is_answered_while_a_write_waits_on_a_silent_postgresql(
    tmp_path: Path, soak_store: str
) -> None:
    """docs/scale-out.md: "reads never wait on the database"; a VM's poll is a read, and a
    write waiting on a database that neither answers nor hangs up must not hold it. The soak
    saw every front-end's polls time out while PostgreSQL was silent for 7 s: a control write
    waiting on the database held the event loop."""
    parts = urlsplit(soak_store)
    assert parts.hostname is not None
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text())
    front = Front(free_port(["127.0.0.1"]), free_port(["127.0.0.1"]), ADDRESSES, Witness())
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        store = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        with front.serving(tmp_path, ("--store", store, "--fleet", str(fleet))):
            assert front.poll("soak0").status_code == 200
            proxy.silence()
            writer = threading.Thread(target=front.call, args=("POST", "/vms/soak1/restart"))
            try:
                writer.start()
                # the write is on its way to the database before the VM asks
                wait_until(lambda: proxy.held() > 0, what="the restart on its way to PostgreSQL")
                url = URL.format(ADDRESSES["soak0"], front.port)
                answer = httpx.get(url, headers=HEADERS, timeout=POLL_BOUND, trust_env=False)
            finally:
                proxy.resume()
                writer.join(30)
    assert answer.status_code == 200, answer.text


# -- a change undone by a rebuild: never delivered, and no real change passed over ----------


def _new_platform() -> tuple[Platform, NewEventId]:
    ids = EventIdFactory(1)
    fleet = parse_fleet(fleet_text(), "fleet")
    return platform_for_fleet(fleet, DEFAULT_START, timing=DOCUMENTED, ids=ids), ids


class JournalLosingACommit:
    """What a front-end uses of the shared journal, in memory, whose next commit can be lost
    as a PostgreSQL cut or silenced at that moment loses it: the front-end is never told
    whether it happened (``lose`` is "applied" or "unapplied", which the journal then holds)."""

    namespace = "soak"
    expired = False

    def __init__(self) -> None:
        self.memory = MemoryJournal()
        self.lose = ""
        #: Whether the server stays gone once it lost the commit (the rebuild then waits for
        #: the follower), and whether it is gone now.
        self.stays_gone = False
        self.unreadable = False

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        yield

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        if self.unreadable:
            raise StoreUnavailableError("the server is gone")
        return self.memory.records(after)

    @contextmanager
    def exclusive(self) -> Iterator[JournalLosingACommit]:
        yield self

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        lose, self.lose = self.lose, ""
        if lose != "unapplied":
            self.memory.append_if(expected_last, records)
        if lose:
            self.unreadable = self.stays_gone
            raise StoreUnavailableError("the server went away during the commit")
        return expected_last + len(records)


def _subscribed(now: datetime) -> tuple[EventGrid, DeliveryStore]:
    """Event Grid with one subscription, its deliveries kept in memory (never sent here)."""
    store = DeliveryStore(None)
    store.add(Subscription("soak", "http://127.0.0.1:9/", "eventgrid", "Succeeded", "c", now, 0))
    return EventGrid(lambda: now, lambda: 0, store, validation_base="http://x"), store


def _turned_into_deliveries(grid: EventGrid) -> None:
    """One round of Event Grid's loop turning the changes told into deliveries (the store's
    cursor moves past them), as it runs between two writes."""

    async def pump() -> None:
        await grid._pump(1000)  # the round's first half: nothing is sent

    asyncio.run(pump())


def _deliveries(store: DeliveryStore) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each delivery made, in order: its scheduled event's id, the state it reports and the
    VMs it impacts."""
    made = []
    for delivery in store.due(DEFAULT_START + timedelta(days=2), 100):
        shown = json.loads(delivery.payload)["data"]["resourceInfo"]["properties"]
        made.append((shown["EventId"], shown["EventStatus"], tuple(shown["Resources"])))
    return made


def _freeze(vm: str) -> ScheduleEvent:
    return ScheduleEvent(EventType.FREEZE.value, (vm,))


@pytest.mark.parametrize("rebuilt_by", ["the write", "the follower"])
@pytest.mark.parametrize("lost", ["unapplied", "applied"])
def test_a_change_whose_commit_is_lost_is_delivered_only_if_the_journal_holds_it(
    lost: str, rebuilt_by: str
) -> None:
    """At least once, and nothing that never happened (docs/azure-side.md, "Event Grid";
    docs/scale-out.md, "A silent PostgreSQL": after a write whose commit could not
    be confirmed, the front-end rebuilds its copy from the journal, "which says which").

    The soak saw an event's Started never delivered: a write applied ahead of its commit
    made a change numbered N, which Event Grid was told of and turned into a delivery; the
    commit was lost, the rebuilt platform numbered its next real change N again, and Event
    Grid, past N already, passed over it for good, while the change undone was delivered."""
    journal = JournalLosingACommit()
    replica = Replica(
        journal,  # type: ignore[arg-type]
        ManualClock(DEFAULT_START),
        _new_platform,
        touch_every=timedelta(minutes=5),
    )
    service = ScheduledEventsService(replica.platform, replica.clock, replica=replica)
    grid, store = _subscribed(DEFAULT_START)
    service.on_published(grid.on_change)
    service.replay()
    first = service.create_event(_freeze("soak0")).event.event_id
    journal.lose = lost
    journal.stays_gone = rebuilt_by == "the follower"
    with pytest.raises(ReplicaError, match="may or may not have been applied"):
        service.create_event(_freeze("soak1"))
    _turned_into_deliveries(grid)  # Event Grid's loop runs between the two writes
    if rebuilt_by == "the follower":  # replayed in a worker thread, then served
        assert replica.diverged
        journal.unreadable = False
        assert replica.install(replica.replayed(journal))  # type: ignore[arg-type]
        _turned_into_deliveries(grid)
    # the journal says whether the lost write happened, the rebuilt copy shows what it says,
    # and Event Grid delivers what it shows, without waiting for the next change
    shown = {view.event.resources[0].name: view.event.event_id for view in service.events()}
    assert sorted(shown) == (["soak0", "soak1"] if lost == "applied" else ["soak0"])
    assert shown["soak0"] == first
    expected = [(shown[vm], "Scheduled", (vm,)) for vm in sorted(shown)]
    assert _deliveries(store) == expected
    last = service.create_event(_freeze("soak2")).event.event_id
    _turned_into_deliveries(grid)
    made = _deliveries(store)
    store.close()
    assert made == [*expected, (last, "Scheduled", ("soak2",))]


class JournalRefusingOnce(MemoryJournal):
    """A journal this process alone writes, whose next append is refused once ``refusing``
    (a full disk): the record is not kept."""

    refusing = False

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        if self.refusing:
            self.refusing = False
            raise StoreUnavailableError("database or disk is full")
        return super().append_if(expected_last, records)


def test_a_change_the_journal_refused_is_never_delivered_nor_the_next_passed_over() -> None:
    """The same with one ``forewarn serve`` and its own journal (README, "State that survives
    restarts": a change the journal cannot record is undone by a rebuild from the journal,
    its EventIds drawn again by the next change): Event Grid is told of the next change,
    numbered as the one undone was, and never of the one undone."""
    journal = JournalRefusingOnce()
    stopwatch = [0.0]
    clock = ManualClock(DEFAULT_START)
    writer = JournalWriter(journal, clock, _new_platform, monotonic=lambda: stopwatch[0])
    service = ScheduledEventsService(writer.platform, clock, writer=writer)
    grid, store = _subscribed(DEFAULT_START)
    service.on_published(grid.on_change)
    service.replay()
    first = service.create_event(_freeze("soak0")).event.event_id
    journal.refusing = True
    with pytest.raises(NotJournaledError):
        service.create_event(_freeze("soak1"))
    _turned_into_deliveries(grid)
    stopwatch[0] += QUIET_SECONDS  # the quiet period after a refusal passes
    last = service.create_event(_freeze("soak2")).event.event_id
    _turned_into_deliveries(grid)
    made = _deliveries(store)
    store.close()
    assert made == [(first, "Scheduled", ("soak0",)), (last, "Scheduled", ("soak2",))]


def test_the_soak_reads_approvals_journaled_alone_and_in_a_group(soak_store: str) -> None:
    """A soak (seed 906460) judged three acknowledged approvals lost: they were journaled,
    with other approvals of their transaction, in one ``group`` record (docs/scale-out.md),
    which its reading of the journal passed over. The rule it checks stands as written
    (docs/serve.md, "State that survives restarts": nothing acknowledged lost)."""
    at = datetime(2024, 5, 1, 10, tzinfo=UTC)
    journal = open_journal(soak_store)
    try:
        journal.append_many(
            [
                Approve("soak0", ("E1",)).to_record(at),
                Group((Approve("soak1", ("E2",)), Approve("soak2", ("E2", "E3")))).to_record(at),
                Tick().to_record(at),
            ]
        )
    finally:
        journal.close()
    assert journaled_approvals(soak_store) == {
        ("soak0", "E1"),
        ("soak1", "E2"),
        ("soak2", "E2"),
        ("soak2", "E3"),
    }
