"""A VM's first request on the event loop a front-end serves from: journaled off the loop,
once however many of that VM's requests wait for it, and each answered once it is committed
or refused. In process, on the stand-in journal (``stand_in_journal``).

docs/scale-out.md, "The 24 h idle rule is judged from the journal": "A VM's first request
(the one that turns Scheduled Events on) is journaled at once (`touch`)"; "A silent
PostgreSQL": "No write waits on the event loop ... (starting a campaign, a VM's first
request, `seen` batches, ticks, clock moves) are made one at a time, each in a transaction
of its own, as before (off the loop too)"; "Writes nobody waits on, a VM's first request
(`touch`) ... do not wait"; "What a VM sees when PostgreSQL restarts": "after a refused one,
the next are refused without trying for 5 s".
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

from forewarn.cluster.replica import QUIET_SECONDS, WRITE_SECONDS, Replica, ReplicaError
from forewarn.commands import Command, Result, Tick, Touch
from forewarn.errors import ForewarnError
from forewarn.vm_requests import AnswerLaterError

from .stand_in_journal import Builds, StandInJournal, replica_on

#: VMs that have not asked yet: a first request turns Scheduled Events on (SPEC 7).
FLEET = """
vms:
  - {name: vm0, address: 127.0.0.2, scheduledEventsEnabled: false}
  - {name: vm1, address: 127.0.0.3, scheduledEventsEnabled: false}
"""
NOT_READY = object()


def _replica(journal: StandInJournal, *, registered: bool = False) -> Replica:
    return replica_on(
        journal, Builds(FLEET), touch_every=timedelta(minutes=5), registered=registered
    )


async def first_requests(replica: Replica, vm_name: str, count: int) -> list[object]:
    """``count`` requests of ``vm_name`` made on the loop the replica serves from, each
    told to wait; what each was told once it can be answered or must be refused."""
    replica.serve_from_this_loop()
    outcomes: list[object] = [NOT_READY] * count
    told = asyncio.Event()

    def ready(index: int, outcome: Exception | None) -> None:
        outcomes[index] = outcome
        if NOT_READY not in outcomes:
            told.set()

    for index in range(count):
        with pytest.raises(AnswerLaterError) as later:
            replica.requested(vm_name)
        later.value.wait(functools.partial(ready, index))
    assert outcomes == [NOT_READY] * count  # nothing answered before the write
    await asyncio.wait_for(told.wait(), 30)  # a guard
    return outcomes


def test_a_first_request_on_the_loop_is_journaled_once_for_every_request_that_waits() -> None:
    journal = StandInJournal()
    replica = _replica(journal, registered=True)
    outcomes = asyncio.run(first_requests(replica, "vm0", 3))
    assert outcomes == [None, None, None]  # each answered, as things now stand
    assert journal.ops() == ["touch"]
    assert journal.kept()[0]["vm"] == "vm0"
    assert journal.waits == []  # a registered front-end waits for no other on it
    assert replica.requested("vm0") is None  # its first request is journaled: no other
    assert journal.ops() == ["touch"]
    assert replica.requested("vm1") is None  # off the loop: written at once
    assert journal.ops() == ["touch", "touch"]


def test_a_first_request_the_store_refuses_on_the_loop_refuses_each_waiting_request() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    journal.now = 10.0
    journal.dropped = 2  # the connection, and the one opened again
    outcomes = asyncio.run(first_requests(replica, "vm0", 2))
    assert isinstance(outcomes[0], ReplicaError)
    assert outcomes[1] is outcomes[0]
    assert "nothing was applied" in str(outcomes[0])
    assert journal.ops() == []
    journal.now = 10.0 + QUIET_SECONDS - 0.001
    with pytest.raises(ReplicaError, match="the store failed a moment ago"):
        replica.requested("vm0")
    assert journal.began == 2
    journal.now = 10.0 + QUIET_SECONDS
    assert replica.requested("vm0") is None  # off the loop now: tried, and written
    assert journal.ops() == ["touch"]


def test_a_first_request_the_fleet_refuses_on_the_loop_is_answered_once_then_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The domain refusing the record is no store failure: the requests waiting are
    answered as things stand (logged), the VM's next request is answered so without a try,
    and the one after tries again."""
    journal = StandInJournal()
    replica = _replica(journal)
    tried: list[tuple[Command, bool]] = []

    async def refused(command: Command, *, spread: bool = True) -> Result:
        tried.append((command, spread))
        raise ForewarnError("vm0 is being deleted")

    monkeypatch.setattr(replica, "write_async", refused)

    async def scenario() -> list[object]:
        outcomes = await first_requests(replica, "vm0", 2)
        assert replica.requested("vm0") is None  # as things stand, untried
        assert len(tried) == 1
        return outcomes + await first_requests(replica, "vm0", 1)  # the next tries again

    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        assert asyncio.run(scenario()) == [None, None, None]
    assert tried == [(Touch("vm0"), False)] * 2
    assert [record.getMessage() for record in caplog.records] == [
        "cannot journal vm0's first request: vm0 is being deleted"
    ] * 2
    assert journal.ops() == []


def test_a_request_that_fails_to_take_its_answer_is_logged_and_the_others_still_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    answered: list[Exception | None] = []

    def gone(outcome: Exception | None) -> None:
        raise ConnectionResetError("the VM hung up")

    async def scenario() -> None:
        replica.serve_from_this_loop()
        told = asyncio.Event()

        def answer(outcome: Exception | None) -> None:
            answered.append(outcome)
            told.set()

        for ready in (gone, answer):
            with pytest.raises(AnswerLaterError) as later:
                replica.requested("vm0")
            later.value.wait(ready)
        await told.wait()

    with caplog.at_level(logging.ERROR, logger="forewarn.cluster"):
        asyncio.run(scenario())
    assert [record.getMessage() for record in caplog.records] == ["answering a first request"]
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], ConnectionResetError)
    assert answered == [None]
    assert journal.ops() == ["touch"]


# -- reading what others appended, on the loop ----------------------------------------------


class ThreadsSeen(StandInJournal):
    """A stand-in naming the thread each read of the records is made in, and the bound of
    each bounded block."""

    def __init__(self) -> None:
        super().__init__()
        self.read_in: list[str] = []
        self.bounds: list[float] = []

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        self.bounds.append(seconds)
        yield

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, object]]]:
        self.read_in.append(threading.current_thread().name)
        return super().records(after)


def test_catching_up_on_the_loop_reads_in_the_writes_thread_and_applies_on_the_loop() -> None:
    """forewarn.cluster.replica: a write's waits are made in the writes' thread; a manual
    clock's move (``advance_clock_async``) first reads what others appended there, then
    applies it on the loop's thread, which owns the platform. docs/scale-out.md: "Reads
    ... wait on one for 2 s at most"."""
    journal = ThreadsSeen()
    replica = _replica(journal)
    at = replica.platform.now.isoformat()
    journal.memory.append_many([Tick().to_record(replica.platform.now)] * 2)

    async def scenario() -> tuple[int, int, str]:
        first = await replica.catch_up_async()
        journal.memory.append(Tick().to_record(replica.platform.now))
        return first, await replica.catch_up_async(), threading.current_thread().name

    first, second, loop_thread = asyncio.run(scenario())
    assert (first, second, replica.head) == (2, 1, 3)
    assert len(journal.read_in) == 2
    assert journal.bounds == [WRITE_SECONDS, WRITE_SECONDS]
    assert all(name.startswith("forewarn-write") for name in journal.read_in)
    assert loop_thread not in journal.read_in
    assert journal.kept()[0]["at"] == at
