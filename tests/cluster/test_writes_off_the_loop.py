"""A write made on the event loop waits on the shared journal in a thread of its own, and no
VM is shown what it applied before its commit is answered.

docs/scale-out.md, "A silent PostgreSQL": "A VM's request arriving while a write applied on
this front-end waits for its commit's answer ... waits, without holding the loop, and is
answered once the commit is confirmed (then showing it) or refused (then from the journal's
state ...): no VM is shown a change that is then rolled back." In process, on the stand-in
journal (``stand_in_journal``) whose append is held until the test lets it go: the event
loop runs the poll while the write's thread is held there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from forewarn.cluster import replica as replica_module
from forewarn.cluster.replica import ReplicaError
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.server.imds import AFRESH, SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError

from .stand_in_journal import StandInJournal, Transaction
from .test_replica_writes import _replica, freeze


def poll(vm_address: str) -> ImdsRequest:
    return ImdsRequest(
        method="GET",
        path=SCHEDULED_EVENTS_PATH,
        query=f"api-version={CURRENT_VERSION.name}",
        headers={"metadata": "true"},
        body=b"",
        local_address=vm_address,
        peer_address="127.0.0.1",
    )


def events_shown(endpoint: ImdsEndpoint) -> list[str]:
    response = endpoint.handle(poll("127.0.0.2"))  # vm0's
    assert response.status == 200, response
    return [event["EventType"] for event in orjson.loads(response.body)["Events"]]


def held_commit(
    monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop, *, lost: bool
) -> tuple[asyncio.Future[None], threading.Event]:
    """Hold every append (sent with the commit) in the writes' thread until the returned
    event is set; the future is done once one is held. ``lost``: the append then fails as
    a commit whose answer never came."""
    reached: asyncio.Future[None] = loop.create_future()
    go = threading.Event()
    append_if = Transaction.append_if

    def reach() -> None:
        if not reached.done():
            reached.set_result(None)

    def held(self: Transaction, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        loop.call_soon_threadsafe(reach)
        go.wait(30)  # a guard: the test sets it
        if lost:
            raise StoreUnavailableError("the server went away during the commit")
        return append_if(self, expected_last, records)

    monkeypatch.setattr(Transaction, "append_if", held)
    return reached, go


@pytest.mark.parametrize("lost", [False, True], ids=["confirmed", "lost"])
def test_a_poll_during_a_commit_waits_for_its_answer_without_holding_the_loop(
    monkeypatch: pytest.MonkeyPatch, lost: bool
) -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    service = ScheduledEventsService(replica.platform, replica.clock, replica=replica)
    endpoint = ImdsEndpoint(service, group_writes=True)
    assert events_shown(endpoint) == []

    async def scenario() -> tuple[list[str], list[object]]:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=lost)
        write = loop.create_task(service.execute_async(freeze("vm0")))
        await reached  # applied here, its commit held: the loop runs on meanwhile
        assert replica.committing
        response = endpoint.handle(poll("127.0.0.2"))
        assert response.status == 0
        assert response.later is not None  # not answered from the platform now
        replies: list[object] = []
        answered: asyncio.Future[None] = loop.create_future()

        def reply(outcome: object) -> None:
            replies.append(outcome)
            answered.set_result(None)

        response.later(reply)
        assert replies == []  # waits for the commit's answer
        go.set()
        outcomes = await asyncio.gather(write, return_exceptions=True)
        await answered
        assert not replica.committing
        return [type(outcome).__name__ for outcome in outcomes], replies

    outcomes, replies = asyncio.run(scenario())
    assert replies == [AFRESH]  # handled afresh, now that the commit was answered
    if lost:
        assert outcomes == [ReplicaError.__name__]
        assert events_shown(endpoint) == []  # rebuilt from the journal: never shown
        assert journal.ops() == []
    else:
        assert outcomes == ["tuple"]
        assert events_shown(endpoint) == ["Freeze"]
        assert journal.ops() == ["schedule"]


class SilentJournal(StandInJournal):
    """A stand-in whose server stops answering: its health probe fails until ``answers``."""

    def __init__(self) -> None:
        super().__init__()
        self.answers = threading.Event()
        self.pings = 0

    def ping(self) -> None:
        self.pings += 1
        if not self.answers.is_set():
            raise StoreUnavailableError("no answer within 1 s")


def test_after_a_write_runs_out_of_time_writes_are_refused_at_once_until_a_probe_answers() -> None:
    """docs/scale-out.md, "A silent PostgreSQL": "After a write runs out of time, writes are
    refused at once ... while a probe, in a thread and on a connection of its own, asks
    PostgreSQL ... until it answers"."""
    journal = SilentJournal()
    replica = _replica(journal)

    async def scenario() -> None:
        journal.dropped, journal.expired = 1, True  # its bound ran out before it began
        with pytest.raises(ReplicaError, match="nothing was applied"):
            await replica.write_async(freeze("vm0"))
        assert (replica.broken, journal.began) == (True, 1)
        with pytest.raises(ReplicaError, match="refused until PostgreSQL answers again"):
            await replica.write_async(freeze("vm1"))
        assert journal.began == 1  # refused without reaching the store
        assert replica.refusing()  # /readyz says so
        journal.expired = False
        journal.answers.set()
        for _ in range(600):  # a guard: the probe asks every PROBE_SECONDS
            if not replica.broken:
                break
            await asyncio.sleep(0.05)
        assert not replica.broken
        await replica.write_async(freeze("vm1"))

    asyncio.run(scenario())
    assert journal.pings >= 1
    assert journal.ops() == ["schedule"]
    assert [view.event.resources[0].name for view in replica.platform.events()] == ["vm1"]


def test_a_turns_grouped_writes_wait_off_the_loop_a_group_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/scale-out.md, "How front-ends stay one fleet": the control API's writes of one
    turn go "in one transaction (100 at most, `MAX_GROUP` ...; more go in transactions of
    100, one after another)"; "A silent PostgreSQL": "No write waits on the event loop." The
    turn's first group is applied and its commit held in the writes' thread while the loop
    runs on; the next group is tried only after it, in a transaction of its own."""
    monkeypatch.setattr(replica_module, "MAX_GROUP", 2)
    journal = StandInJournal()
    replica = _replica(journal)
    service = ScheduledEventsService(replica.platform, replica.clock, replica=replica)
    asked = [freeze("vm0", "a"), freeze("vm1", "b"), freeze("vm0", "c")]

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        writes = [loop.create_task(service.execute_grouped(command)) for command in asked]
        await reached  # the loop runs while the first group's commit is held
        assert replica.committing
        assert sorted(v.event.description for v in replica.platform.events()) == ["a", "b"]
        assert journal.appends == []  # the second group waits for the first's answer
        go.set()
        created = await asyncio.gather(*writes)
        assert not replica.committing
        return [events[0].description for events in created]

    assert asyncio.run(scenario()) == ["a", "b", "c"]
    assert journal.appends == [["schedule", "schedule"], ["schedule"]]
