"""The leader's loop (``cluster.tasks.lead``), driven in process on a clock of the test's own.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"): whoever holds the leader lock
journals a Tick when a deadline of the platform falls due, and no other front-end does; the
others ask for the lock every :data:`~forewarn.cluster.tasks.POLL_SECONDS`; a record applied
wakes the leader at once; a stop hands the lock back. The store and the platform are stand-ins
that record what they are asked, so these need no database; asyncio's waits are watched and
time is moved by what each asked to wait, never slept.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from forewarn.cluster import tasks
from forewarn.cluster.replica import Replica as SharedReplica
from forewarn.commands import Command, Tick
from forewarn.domain.clock import DEFAULT_START
from forewarn.storage.errors import StoreUnavailableError

from .stand_in_journal import Builds, StandInJournal, replica_on

START = datetime(2022, 4, 11, 22, 0, tzinfo=UTC)
#: A guard against a loop that never ends, never a verdict.
GUARD_SECONDS = 30


class Time:
    """The monotonic clock and the platform's clock in one: seconds since :data:`START`."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return START + timedelta(seconds=self.seconds)


class Leadership:
    """The leader lock, answering ``acquire`` from a script (True, False, or an error)."""

    def __init__(self, time: Time, script: Iterable[bool | Exception]) -> None:
        self._time = time
        self._script = list(script)
        self.asked_at: list[float] = []
        self.released = 0

    def acquire(self) -> bool:
        self.asked_at.append(self._time.seconds)
        answer = self._script.pop(0) if self._script else False
        if isinstance(answer, Exception):
            raise answer
        return answer

    def release(self) -> None:
        self.released += 1


class Platform:
    def __init__(self, due: datetime | None) -> None:
        self.due = due
        self.looked = 0

    def next_deadline(self) -> datetime | None:
        self.looked += 1
        return self.due


class Replica:
    """What ``lead`` uses of a replica; a Tick written clears the deadline it was due for."""

    front_end = "host/1/abc"
    registered = False
    journal: Any = None

    def __init__(self, time: Time, due: datetime | None, fail: Exception | None = None) -> None:
        self.platform = Platform(due)
        self.clock = time
        self._fail = fail
        self.on_change: Callable[[], None] = lambda: None
        self.leading = False
        self.leading_seen: list[bool] = []
        self.written: list[tuple[float, Command, bool]] = []

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "leading" and "leading_seen" in self.__dict__:
            self.leading_seen.append(value)
        super().__setattr__(name, value)

    def serve_from_this_loop(self) -> None:
        pass

    async def write_async(self, command: Command, *, spread: bool = True) -> tuple[()]:
        if self._fail is not None:
            raise self._fail
        self.written.append((self.clock.seconds, command, spread))
        self.platform.due = None
        return ()


def _watch_waits(
    monkeypatch: pytest.MonkeyPatch, time: Time, rounds: int, stop: asyncio.Event
) -> list[float | None]:
    """The timeouts of the loop's waits; each moves the time on by as much (no record comes
    meanwhile), and the loop is stopped after ``rounds`` of them."""
    asked: list[float | None] = []
    wait = asyncio.wait

    async def watched(aws: Any, *, timeout: float | None = None, return_when: Any) -> Any:
        asked.append(timeout)
        time.seconds += timeout or 0.0
        if len(asked) == rounds:
            stop.set()
        return await wait(aws, timeout=0, return_when=return_when)

    monkeypatch.setattr(asyncio, "wait", watched)
    return asked


def _lead(
    monkeypatch: pytest.MonkeyPatch,
    replica: Replica,
    leadership: Leadership,
    time: Time,
    rounds: int,
) -> list[float | None]:
    """Run ``lead`` for ``rounds`` waits on the test's clock; the waits' timeouts."""
    # the module's own clock only: asyncio's loop keeps the real one
    monkeypatch.setattr(tasks, "time", SimpleNamespace(monotonic=time.monotonic))

    async def main() -> list[float | None]:
        stop = asyncio.Event()
        asked = _watch_waits(monkeypatch, time, rounds, stop)
        run = tasks.lead(replica, leadership, stop)  # type: ignore[arg-type]
        await asyncio.wait_for(run, GUARD_SECONDS)
        return asked

    return asyncio.run(main())


def test_the_leader_ticks_when_a_deadline_falls_due_and_asks_for_the_lock_once_a_second(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A deadline 2.5 s away: the leader looks at least every second, then waits exactly
    until it is due, journals one Tick then (answering nobody, so waiting for no other
    front-end), and looks again at once; it asks for the lock again only once a second has
    passed since it last asked."""
    time = Time()
    replica = Replica(time, due=START + timedelta(seconds=2.5))
    leadership = Leadership(time, [True] * 10)
    with caplog.at_level(logging.INFO, logger="forewarn.cluster"):
        waits = _lead(monkeypatch, replica, leadership, time, rounds=6)
    assert waits == [1.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    assert leadership.asked_at == [0.0, 1.0, 2.0, 3.5]
    assert [(at, type(command), spread) for at, command, spread in replica.written] == [
        (2.5, Tick, False)
    ]
    assert [record.getMessage() for record in caplog.records] == [
        "this front-end is now the leader"
    ]
    # stopped: it no longer leads, and the lock is handed back for another to take
    assert replica.leading is False
    assert leadership.released == 1


def test_only_the_leader_ticks_and_a_lost_lock_is_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A deadline already due: a front-end without the lock writes nothing and asks again a
    second later; once it holds the lock it ticks; an error asking for the lock counts as
    not holding it (the cause logged), and a change of role is logged once, not at every
    answer."""
    time = Time()
    replica = Replica(time, due=START)
    failure = StoreUnavailableError("the server is down")
    leadership = Leadership(time, [False, False, True, failure, True])
    with caplog.at_level(logging.INFO, logger="forewarn.cluster"):
        waits = _lead(monkeypatch, replica, leadership, time, rounds=6)
    assert leadership.asked_at == [0.0, 1.0, 2.0, 3.0, 4.0]
    # a follower waits a second; the leader ticks (its Tick clears the deadline: 0 s, then
    # a second); at 4 s it leads again with nothing due
    assert waits == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert [(at, type(command)) for at, command, _ in replica.written] == [(2.0, Tick)]
    assert replica.leading_seen == [True, False, True, False]
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("INFO", "this front-end is now the leader"),
        ("WARNING", "asking for the leader lock: the server is down"),
        ("INFO", "this front-end is no longer the leader"),
        ("INFO", "this front-end is now the leader"),
    ]
    assert leadership.released == 1


def test_a_tick_the_store_refuses_is_logged_and_tried_again_a_second_later(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store failing the Tick must not make the leader spin on a deadline that stays due."""
    time = Time()
    replica = Replica(time, due=START, fail=StoreUnavailableError("the server is down"))
    leadership = Leadership(time, [True] * 5)
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        waits = _lead(monkeypatch, replica, leadership, time, rounds=3)
    assert waits == [1.0, 1.0, 1.0]
    assert replica.written == []
    assert [record.getMessage() for record in caplog.records] == [
        "cannot journal the time: the server is down"
    ] * 3


async def _until(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (bounded by the guard only)."""
    async with asyncio.timeout(GUARD_SECONDS):
        while not condition():
            await asyncio.sleep(0)


def test_a_record_applied_wakes_the_leader_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's wait is as long as an hour here: only the replica's change callback,
    called as records are applied, can wake it, and a record that made a deadline due is
    followed by its Tick. A stop ends the wait too, and hands the lock back."""
    monkeypatch.setattr(tasks, "POLL_SECONDS", 3600.0)
    time = Time()
    replica = Replica(time, due=None)
    leadership = Leadership(time, [True])

    async def main() -> None:
        stop = asyncio.Event()
        run = asyncio.create_task(tasks.lead(replica, leadership, stop))  # type: ignore[arg-type]
        await _until(lambda: replica.platform.looked == 1)
        replica.on_change()  # a record applied, due nothing
        await _until(lambda: replica.platform.looked == 2)
        replica.platform.due = START  # a record applied made a deadline due
        replica.on_change()
        await _until(lambda: len(replica.written) == 1)
        stop.set()
        await asyncio.wait_for(run, GUARD_SECONDS)

    asyncio.run(main())
    assert leadership.asked_at == [0.0]  # the time never moved: asked once
    assert [type(command) for _, command, _ in replica.written] == [Tick]
    assert (replica.leading, leadership.released) == (False, 1)


def test_a_stop_while_asking_ends_the_loop_and_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped before its first round: no lock is asked for, none is held, and the release
    (idempotent) is still made."""
    time = Time()
    replica = Replica(time, due=START)
    leadership = Leadership(time, [True])

    async def main() -> None:
        stop = asyncio.Event()
        stop.set()
        await asyncio.wait_for(tasks.lead(replica, leadership, stop), GUARD_SECONDS)  # type: ignore[arg-type]

    asyncio.run(main())
    assert leadership.asked_at == []
    assert replica.written == []
    assert (replica.leading, leadership.released) == (False, 1)


class Reader:
    """The follower's own journal, on which a stopping front-end takes itself off the list."""

    def __init__(self, forgetting: Exception | None) -> None:
        self._forgetting = forgetting
        self.forgotten: list[str] = []
        self.closed = False

    def forget_front_end(self, front_end: str) -> None:
        self.forgotten.append(front_end)
        if self._forgetting is not None:
            raise self._forgetting

    def close(self) -> None:
        self.closed = True

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Calls made in the block are bounded (here, none ever waits)."""
        yield


@pytest.mark.parametrize("forgetting", [None, StoreUnavailableError("the server is down")])
def test_a_stopping_front_end_leaves_the_list_then_closes_its_reader(
    forgetting: Exception | None,
) -> None:
    """Writers stop waiting for a front-end as it stops, not once its heartbeat is old; a
    store that cannot take that any more does not keep the front-end from stopping."""
    time = Time()
    reader = Reader(forgetting)
    leadership = Leadership(time, [])
    replica = Replica(time, due=None)
    replica.registered = True

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def another() -> Reader:
            loop.call_soon_threadsafe(stop.set)  # stopped as soon as it has its reader
            return reader

        replica.journal = SimpleNamespace(another=another, leadership=lambda: leadership)
        await asyncio.wait_for(tasks.run_front_end(replica, stop), GUARD_SECONDS)  # type: ignore[arg-type]

    asyncio.run(main())
    assert reader.forgotten == ["host/1/abc"]
    assert reader.closed
    assert leadership.released == 1


def test_a_worker_follows_the_journal_and_never_asks_for_the_leader_lock() -> None:
    """docs/scale-out.md, "Workers": each worker is "a front-end of this page's kind": it
    follows the journal on a connection of its own; [ours] ``run_front_end(...,
    leads=False)`` never asks for the leader lock (its supervising process leads)."""
    journal = FollowedJournal([Tick().to_record(DEFAULT_START)] * 2)
    replica = replica_on(journal, Builds(FOLLOWED_FLEET))

    _follow_as_a_worker(journal, replica)
    assert replica.head == 2  # what it read, applied
    assert (journal.closed, replica.leading) == (True, False)


def _follow_as_a_worker(journal: FollowedJournal, replica: SharedReplica) -> None:
    """``replica`` follows ``journal`` as a worker does, until the journal says stop."""

    async def main() -> None:
        stop = asyncio.Event()
        journal.stop_after_read = functools.partial(
            asyncio.get_running_loop().call_soon_threadsafe, stop.set
        )
        await asyncio.wait_for(tasks.run_front_end(replica, stop, leads=False), GUARD_SECONDS)

    asyncio.run(main())


FOLLOWED_FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2}\n"


class FollowedJournal(StandInJournal):
    """A stand-in that is its own follower's connection, and has no leader lock to ask."""

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(records)
        self.closed = False
        self.stop_after_read: Callable[[], object] = lambda: None

    def another(self) -> FollowedJournal:
        return self

    def wait_for_append(self, after: int, timeout: float) -> int:
        return self.memory.last_sequence()

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        read = list(super().records(after))
        self.stop_after_read()
        return iter(read)

    def close(self) -> None:
        self.closed = True

    def leadership(self) -> Leadership:
        raise AssertionError("a worker asked for the leader lock")


def test_a_follower_reads_the_records_only_once_the_counter_has_moved() -> None:
    """[ours] docs/scale-out.md, "How front-ends stay one fleet": a follower's wait on LISTEN
    reads the namespace's counter; the records are read only when it is past what this
    front-end applied, not after every wait (a query, a thread's turn and a bound a second
    for every idle front-end)."""

    class Counted(FollowedJournal):
        asked = read = 0

        def wait_for_append(self, after: int, timeout: float) -> int:
            self.asked += 1
            if self.asked == 4:
                self.stop_after_read()
            return super().wait_for_append(after, timeout)

        def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
            self.read += 1
            return self.memory.records(after)

    journal = Counted([Tick().to_record(DEFAULT_START)] * 2)
    replica = replica_on(journal, Builds(FOLLOWED_FLEET))

    _follow_as_a_worker(journal, replica)
    assert replica.head == 2
    assert (journal.asked, journal.read) == (4, 1)
