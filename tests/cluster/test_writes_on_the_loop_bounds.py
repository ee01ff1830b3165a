"""The loop's writes: where they wait, with what time, and for how long. In process, on the
stand-in journal (``stand_in_journal``), whose monotonic clock is the front-end's.

docs/scale-out.md, "A silent PostgreSQL": "A write waits 2 s at most (`WRITE_SECONDS`) from
when it is asked for ...: its turn behind the writes asked for before it ... A call still
waiting then ... is answered `503` ... saying `nothing was applied`"; "No write waits on the
event loop. A write's database calls are made in a thread of the front-end's writes (one, so
writes keep their order)"; "How front-ends stay one fleet": "A manual clock moved through
any front-end (`clock advance`) is a record too"; "later requests for events ... are
journaled at most once per VM every 5 minutes ..., batched in one `seen` record".
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest

from forewarn.cluster import replica as replica_module
from forewarn.cluster.replica import WRITE_SECONDS, Replica, ReplicaError
from forewarn.commands import ClockMoved, Result, Seen
from forewarn.domain.clock import DEFAULT_START
from forewarn.errors import ForewarnError
from forewarn.storage.errors import ValueTooLargeError
from forewarn.storage.journal import MAX_RECORD_BYTES, encode_record

from .stand_in_journal import StandInJournal
from .test_replica_writes import Answers, _replica, freeze
from .test_writes_off_the_loop import held_commit

KEPT_WAITING = "cannot write now, nothing was applied: the writes before it kept it waiting 2 s"


def test_a_write_on_the_loop_is_made_in_the_writes_thread_with_its_own_time() -> None:
    journal = StandInJournal()
    threads: list[str] = []
    journal.on_begin = lambda began: threads.append(threading.current_thread().name)
    replica = _replica(journal)
    moved = DEFAULT_START + timedelta(hours=1)
    asyncio.run(replica.write_async(ClockMoved(), at=moved, spread=False))
    assert journal.ops() == ["clock"]
    assert journal.kept()[0]["at"] == moved.isoformat()
    assert len(threads) == 1
    assert threads[0].startswith("forewarn-write")


def test_a_write_on_the_loop_with_its_own_time_is_checked_with_that_time_first() -> None:
    """As for a write from a thread: a record too large only as stamped with its own (longer)
    time is refused before anything is applied."""
    journal = StandInJournal()
    replica = _replica(journal)
    at = DEFAULT_START + timedelta(microseconds=1)  # ".000001": seven bytes more
    overhead = len(encode_record(Seen(("",)).to_record(DEFAULT_START)))
    name = "x" * (MAX_RECORD_BYTES - overhead - 3)  # 3 bytes short of the limit
    with pytest.raises(ValueTooLargeError):
        asyncio.run(replica.write_async(Seen((name,)), at=at))
    assert (journal.began, replica.head) == (0, 0)


def test_the_vms_seen_are_journaled_on_the_loop_in_one_sorted_record_waiting_for_nobody() -> None:
    journal = StandInJournal()
    replica = _replica(journal, registered=True)
    replica.unseen.update({"vm1", "vm0"})

    async def scenario() -> tuple[bool, bool]:
        return await replica.flush_seen_async(), await replica.flush_seen_async()

    assert asyncio.run(scenario()) == (True, False)  # the second finds none left
    assert journal.ops() == ["seen"]
    assert journal.kept()[0]["vms"] == ["vm0", "vm1"]
    assert replica.unseen == set()
    assert journal.waits == []


def test_a_blocking_write_is_refused_on_the_loop_the_front_end_serves_or_writes_from() -> None:
    """forewarn.cluster.replica: "never on the thread of the event loop this front-end serves
    from"; it would hold every VM's poll for as long as PostgreSQL takes."""
    for start in ("serve", "write", "catch up"):
        replica = _replica(StandInJournal())

        async def scenario(replica: Replica = replica, start: str = start) -> None:
            if start == "serve":
                replica.serve_from_this_loop()
            elif start == "write":
                await replica.write_async(freeze("vm0"), spread=False)
            else:
                await replica.catch_up_async()
            with pytest.raises(RuntimeError) as refused:
                replica.write(freeze("vm1"))
            assert str(refused.value) == (
                "Replica.write on the event loop's thread: await write_async"
            )

        asyncio.run(scenario())


def _kept_waiting(
    monkeypatch: pytest.MonkeyPatch, behind_by: float
) -> tuple[list[Result | Exception], StandInJournal]:
    """A write asked for in a turn while a write before it holds the turn, its commit held
    until the front-end's clock has moved ``behind_by`` seconds past its asking: what it
    was answered, and the journal."""
    journal = StandInJournal()
    replica = _replica(journal)
    answers = Answers(1)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        before = loop.create_task(replica.write_async(freeze("vm0", "before")))
        await reached
        replica.write_soon(freeze("vm1", "asked"), answers)
        journal.now += behind_by
        if behind_by >= WRITE_SECONDS:  # refused while the write before still holds it
            await asyncio.wait_for(answers.all_in.wait(), 30)  # a guard
            assert journal.ops() == []
        go.set()
        await before
        await asyncio.wait_for(answers.all_in.wait(), 30)  # a guard

    asyncio.run(scenario())
    return answers.outcomes, journal


def test_a_write_kept_waiting_for_its_turn_to_its_bound_is_refused_at_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (answer,), journal = _kept_waiting(monkeypatch, WRITE_SECONDS)
    assert isinstance(answer, ReplicaError)
    assert str(answer) == KEPT_WAITING
    assert journal.ops() == ["schedule"]  # the write before it's alone


def test_a_write_whose_turn_comes_before_its_bound_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (answer,), journal = _kept_waiting(monkeypatch, WRITE_SECONDS - 0.5)
    assert isinstance(answer, tuple)
    assert journal.ops() == ["schedule", "schedule"]


@pytest.mark.parametrize(("left", "written"), [(0.0, False), (0.5, True)])
def test_a_write_whose_bound_ran_out_while_it_waited_for_the_writes_thread_is_refused(
    monkeypatch: pytest.MonkeyPatch, left: float, written: bool
) -> None:
    """Its turn on the loop came in time, but the thread's turn (held by a write from another
    thread, ``Replica.write``) only once its bound was spent: refused, nothing applied; one
    that reaches the thread with time left is written."""
    journal = StandInJournal()
    replica = _replica(journal)

    async def scenario() -> Result:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=False)
        other = threading.Thread(target=replica.write, args=(freeze("vm1", "other"),))
        other.start()  # a write from another thread: its commit held, the thread's turn too
        await reached
        write = loop.create_task(replica.write_async(freeze("vm0"), spread=False))
        for _ in range(5):  # its turn on the loop taken: it waits for the thread's
            await asyncio.sleep(0)
        journal.now += WRITE_SECONDS - left
        go.set()
        try:
            return await write
        finally:
            other.join(30)  # a guard

    if written:
        assert isinstance(asyncio.run(scenario()), tuple)
        assert journal.ops() == ["schedule", "schedule"]
    else:
        with pytest.raises(ReplicaError) as refused:
            asyncio.run(scenario())
        assert str(refused.value) == KEPT_WAITING
        assert (journal.began, journal.ops()) == (1, ["schedule"])


def test_a_record_this_version_cannot_apply_fails_the_loops_write_with_its_error() -> None:
    """A write catches up with what others appended, on the loop's thread: a record it
    cannot apply fails the write with that error, in the loop's caller, nothing appended."""
    journal = StandInJournal()
    replica = _replica(journal)
    journal.memory.append({"op": "from-a-newer-version", "at": DEFAULT_START.isoformat()})

    async def scenario() -> Result:
        return await asyncio.wait_for(replica.write_async(freeze("vm0")), 30)  # a guard

    with pytest.raises(ForewarnError, match="from-a-newer-version"):
        asyncio.run(scenario())
    assert journal.appends == []


def test_a_step_for_a_loop_that_stopped_is_refused_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """forewarn.cluster.replica: a write's steps on the platform run on the loop's thread;
    when the loop has stopped (shutting down) before running one, the write is refused
    rather than wait for it for ever, and the step never runs."""
    monkeypatch.setattr(replica_module, "WRITE_SECONDS", 0.01)
    loop = asyncio.new_event_loop()  # never run: stopped
    ran: list[int] = []
    refused: list[BaseException] = []

    def step() -> None:
        try:
            replica_module._OnLoop(loop)(lambda: ran.append(1))
        except ReplicaError as exc:
            refused.append(exc)

    writes = threading.Thread(target=step, daemon=True)  # (a step waited for forever)
    writes.start()
    writes.join(30)  # a guard
    loop.close()
    assert [str(exc) for exc in refused] == ["the event loop stopped before the write's step"]
    assert ran == []


def test_a_step_for_a_busy_loop_runs_in_its_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop busy for longer than a write's bound still runs the step, in its turn: a busy
    loop is no stopped one."""
    monkeypatch.setattr(replica_module, "WRITE_SECONDS", 0.01)
    loop = asyncio.new_event_loop()
    running = threading.Thread(target=loop.run_forever)
    running.start()
    try:
        started = threading.Event()

        def busy() -> None:
            started.set()
            time.sleep(0.05)  # the loop busy for five bounds

        loop.call_soon_threadsafe(busy)
        started.wait(30)  # a guard
        assert replica_module._OnLoop(loop)(lambda: 42) == 42
    finally:
        loop.call_soon_threadsafe(loop.stop)
        running.join(30)  # a guard
        loop.close()
