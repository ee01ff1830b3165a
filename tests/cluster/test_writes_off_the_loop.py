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
import gc
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from forewarn.cluster import replica as replica_module
from forewarn.cluster.replica import Replica, ReplicaError
from forewarn.commands import Result
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.server.imds import AFRESH, SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError

from .stand_in_journal import StandInJournal, Transaction
from .test_replica_writes import Answers, _replica, freeze


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


class CountedSilence(SilentJournal):
    """A silent stand-in that answers its probe from the ``answers_at``-th ping on, noting
    at each ping whether writes were being refused then."""

    def __init__(self, replica_of: list[Replica], answers_at: int) -> None:
        super().__init__()
        self._replica_of = replica_of
        self._answers_at = answers_at
        self.broken_at_ping: list[bool] = []

    def ping(self) -> None:
        self.broken_at_ping.append(self._replica_of[0].broken)
        if self.pings + 1 >= self._answers_at:
            self.answers.set()
        super().ping()


def test_the_probe_asks_again_until_postgresql_answers_and_the_breaker_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/scale-out.md, "A silent PostgreSQL": writes are refused "while a probe ... asks
    PostgreSQL every 0.5 s (`PROBE_SECONDS`) until it answers"; the operator reads why the
    writes are refused, each unanswered probe (debug) and when writes are tried again."""
    monkeypatch.setattr(replica_module, "PROBE_SECONDS", 0.01)
    replica_of: list[Replica] = []
    journal = CountedSilence(replica_of, answers_at=3)
    replica = _replica(journal)
    replica_of.append(replica)

    async def scenario() -> None:
        journal.dropped, journal.expired = 1, True  # its bound ran out before it began
        with pytest.raises(ReplicaError, match="nothing was applied"):
            await replica.write_async(freeze("vm0"))
        journal.expired = False
        for _ in range(3000):  # a guard: the probe asks every PROBE_SECONDS
            if not replica.broken:
                break
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.DEBUG, logger="forewarn.cluster"):
        asyncio.run(scenario())
    assert journal.broken_at_ping == [True, True, True]  # closed by the third, which answered
    assert not replica.broken
    assert [
        (record.levelno, record.getMessage())
        for record in caplog.records
        if record.name == "forewarn.cluster"
    ] == [
        (
            logging.WARNING,
            "refusing writes until PostgreSQL answers again: cannot write now, nothing was "
            "applied: the server closed the connection",
        ),
        (logging.DEBUG, "PostgreSQL still does not answer: no answer within 1 s"),
        (logging.DEBUG, "PostgreSQL still does not answer: no answer within 1 s"),
        (logging.WARNING, "PostgreSQL answers again: writes are tried again"),
    ]


def test_a_turns_writes_asked_while_the_breaker_is_open_are_refused_untried() -> None:
    """docs/scale-out.md, "A silent PostgreSQL": "After a write runs out of time, writes are
    refused at once (`503`, `nothing was applied: ...; writes are refused until PostgreSQL
    answers again`)", the writes of a turn (VMs' approvals, grouped) too."""
    journal = SilentJournal()
    replica = _replica(journal)

    async def scenario() -> list[Result | Exception]:
        journal.dropped, journal.expired = 1, True
        with pytest.raises(ReplicaError):
            await replica.write_async(freeze("vm0"))
        journal.expired = False
        answers = Answers(2)

        replica.write_soon(freeze("vm0"), answers)
        replica.write_soon(freeze("vm1"), answers)
        await answers.all_in.wait()
        return answers.outcomes

    answers = asyncio.run(scenario())
    assert isinstance(answers[0], ReplicaError)
    assert answers[1] is answers[0]
    assert str(answers[0]).endswith("; writes are refused until PostgreSQL answers again")
    assert journal.began == 1  # the first write's, which found the server gone
    assert journal.ops() == []


def test_a_turns_later_group_is_refused_untried_once_a_write_between_opened_the_breaker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/scale-out.md, "A silent PostgreSQL": more writes than a group holds go in
    transactions one after another, and writes of other turns may go between them; once a
    write between runs out of time, the turn's later groups are refused at once ("writes
    are refused until PostgreSQL answers again"), nothing of theirs applied."""
    monkeypatch.setattr(replica_module, "MAX_GROUP", 1)
    journal = SilentJournal()
    replica = _replica(journal)

    async def scenario() -> list[Result | Exception]:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        answers = Answers(2)

        replica.write_soon(freeze("vm0", "a"), answers)
        replica.write_soon(freeze("vm1", "b"), answers)
        await reached  # the first group's commit held; another write asks for the turn
        between = loop.create_task(replica.write_async(freeze("vm0", "c")))
        for _ in range(5):  # its turn asked for, before the second group's
            await asyncio.sleep(0)
        journal.dropped, journal.expired = 1, True  # it finds the server gone, its bound spent
        go.set()
        with pytest.raises(ReplicaError, match="nothing was applied"):
            await between
        await answers.all_in.wait()
        return answers.outcomes

    first, second = asyncio.run(scenario())
    assert isinstance(first, tuple)
    assert isinstance(second, ReplicaError)
    assert str(second).endswith("; writes are refused until PostgreSQL answers again")
    assert journal.began == 2  # the first group's and the write between: not the second's
    assert journal.ops() == ["schedule"]


def test_waiting_for_the_commit_of_a_write_applied_here_ends_with_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """forewarn.service: a control operation "returns once no write is waiting for its
    commit, so what the caller reads next is what the journal holds"
    (``Replica.committed``)."""
    journal = StandInJournal()
    replica = _replica(journal)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        write = loop.create_task(replica.write_async(freeze("vm0")))
        await reached
        waiter = loop.create_task(replica.committed())
        for _ in range(5):
            await asyncio.sleep(0)
        assert replica.committing
        assert not waiter.done()  # the commit is held: so is the wait
        go.set()
        await asyncio.wait_for(waiter, 30)  # a guard
        assert not replica.committing
        assert journal.ops() == ["schedule"]  # what the next read shows is journaled
        await write
        await replica.committed()  # none pending: at once

    asyncio.run(scenario())


def test_the_tasks_of_a_turns_writes_a_first_request_and_a_probe_are_let_go_once_done() -> None:
    """Python's asyncio documentation (asyncio.create_task, https://docs.python.org/3/library/
    asyncio-task.html#creating-tasks): "The event loop only keeps weak references to tasks
    ... To avoid a task disappearing mid-execution", keep it in a set and
    "task.add_done_callback(background_tasks.discard)". [ours] The tasks a front-end starts
    (a turn's writes, the breaker's probe) are let go once done: one a turn must not pile
    up over a long run."""
    journal = SilentJournal()
    replica = _replica(journal)
    started: list[weakref.ref[asyncio.Task[Any]]] = []

    async def scenario() -> None:
        before = asyncio.all_tasks()
        answered = asyncio.Event()
        replica.write_soon(freeze("vm0"), lambda outcome: answered.set())
        journal.dropped, journal.expired = 1, True
        with pytest.raises(ReplicaError):
            await replica.write_async(freeze("vm1"))  # opens the breaker: a probe starts
        journal.expired = False
        journal.answers.set()
        started.extend(
            weakref.ref(task)
            for task in asyncio.all_tasks() - before
            if getattr(task.get_coro(), "__qualname__", "")
            in ("Replica._write_soon", "Replica._probe")
        )
        await answered.wait()
        for _ in range(3000):  # a guard: the probe asks every PROBE_SECONDS
            if not replica.broken:
                break
            await asyncio.sleep(0.01)
        for _ in range(5):  # their done callbacks run
            await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert len(started) == 2  # the turn's writes, and the probe
    assert [task() for task in started if task() is not None] == []


def test_a_request_that_fails_to_take_its_answer_after_a_commit_is_logged_others_answered(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The requests that waited for a commit's answer are each answered; one that fails to
    take it (its VM gone) is logged, and is not the others' failure."""
    journal = StandInJournal()
    replica = _replica(journal)
    answered: list[str] = []

    def gone() -> None:
        raise ConnectionResetError("the VM hung up")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        write = loop.create_task(replica.write_async(freeze("vm0")))
        await reached
        replica.when_committed(gone)
        replica.when_committed(lambda: answered.append("next"))
        go.set()
        await write

    with caplog.at_level(logging.ERROR, logger="forewarn.cluster"):
        asyncio.run(scenario())
    assert answered == ["next"]
    assert [record.getMessage() for record in caplog.records] == [
        "answering a request that waited for a commit"
    ]
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], ConnectionResetError)
