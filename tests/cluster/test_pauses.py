"""The pauses of a front-end's background work (``cluster.tasks``): after a store failure it
waits before trying again, and a stop request ends the wait at once, so ``forewarn serve``
shuts down promptly even in the middle of a backoff. Driven by events; the asyncio timers are
watched rather than waited out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from forewarn.cluster import tasks
from forewarn.errors import ForewarnError
from forewarn.storage.errors import StoreUnavailableError

T = TypeVar("T")


class _Unbounded:
    """A stand-in journal's :meth:`PostgresJournal.bounded`: here no call ever waits."""

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        yield


def _timeouts(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeouts the pauses ask asyncio for."""
    asked: list[float | None] = []
    wait_for = asyncio.wait_for

    async def watched(awaitable: Awaitable[T], timeout: float | None) -> T:
        asked.append(timeout)
        return await wait_for(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", watched)
    return asked


def _run(make: Callable[[asyncio.Event], Awaitable[Any]], *, stopped: bool) -> bool:
    """Run what ``make`` returns with a stop event (set first when ``stopped``); whether the
    event was set at the end. The bound is only a guard against a pause that never ends."""

    async def main() -> bool:
        stop = asyncio.Event()
        if stopped:
            stop.set()
        await asyncio.wait_for(make(stop), 30)
        return stop.is_set()

    return asyncio.run(main())


def test_a_pause_waits_as_long_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _timeouts(monkeypatch)
    assert _run(lambda stop: tasks._pause(stop, 0.01), stopped=False) is False
    assert asked[-1] == 0.01  # waited out, and no error: a pause that ends is no failure


def test_a_negative_pause_is_none_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _timeouts(monkeypatch)
    _run(lambda stop: tasks._pause(stop, -5), stopped=False)
    assert asked[-1] == 0.0


def test_a_stop_ends_a_pause_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _timeouts(monkeypatch)
    assert _run(lambda stop: tasks._pause(stop, 3600), stopped=True) is True
    assert asked[-1] == 3600

    async def stopped_meanwhile(stop: asyncio.Event) -> None:
        pause = asyncio.create_task(tasks._pause(stop, 3600))
        await asyncio.sleep(0)  # the pause is waiting now
        assert not pause.done()
        stop.set()
        await pause

    assert _run(stopped_meanwhile, stopped=False) is True


def test_a_front_end_that_cannot_open_its_follower_retries_with_doubling_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``run_front_end`` after failed connects: 0.2 s, 0.4 s, 0.8 s ... up to 5 s
    (BACKOFF_SECONDS), each logged with its cause, and it stops trying once asked to stop."""
    pauses: list[float] = []

    async def pause(stop: asyncio.Event, seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 7:
            stop.set()

    class Journal:
        def another(self) -> Any:
            raise StoreUnavailableError("the server is down")

    class Replica:
        journal = Journal()

        def serve_from_this_loop(self) -> None:
            pass

    monkeypatch.setattr(tasks, "_pause", pause)
    with caplog.at_level("WARNING", logger="forewarn.cluster"):
        _run(lambda stop: tasks.run_front_end(Replica(), stop), stopped=False)  # type: ignore[arg-type]
    assert pauses == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert [record.getMessage() for record in caplog.records] == [
        f"opening a follower connection: the server is down; again in {seconds:.1f} s"
        for seconds in pauses
    ]


def test_a_follower_backs_off_doubling_while_the_store_fails_and_starts_over_once_it_reads(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``follow`` after failed reads: waits of 0.2 s, then 0.4 s, each logged with its cause;
    a read that works sets the wait back to 0.2 s for the next failure."""
    script = ["fail", "fail", "read", "fail"]
    pauses: list[float] = []

    class Reader(_Unbounded):
        def wait_for_append(self, after: int, timeout: float) -> int:
            step = script.pop(0)
            if step == "fail":
                raise StoreUnavailableError("the server is down")
            return after

        def records(self, after: int = 0) -> list[tuple[int, dict[str, Any]]]:
            return []

    class Replica:
        head = 0
        diverged = registered = False

        def apply_fetched(self, records: object) -> int:
            return 0

        async def flush_seen_async(self) -> bool:
            return False

    async def pause(stop: asyncio.Event, seconds: float) -> None:
        pauses.append(seconds)
        if not script:
            stop.set()

    monkeypatch.setattr(tasks, "_pause", pause)
    with caplog.at_level("WARNING", logger="forewarn.cluster"):
        _run(lambda stop: tasks.follow(Replica(), Reader(), stop), stopped=False)  # type: ignore[arg-type]
    assert pauses == [0.2, 0.4, 0.2]
    assert [record.getMessage() for record in caplog.records] == [
        f"following the journal: the server is down; again in {seconds:.1f} s" for seconds in pauses
    ]


def test_a_record_this_version_cannot_apply_marks_the_copy_diverged_and_waits_longest(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A record the follower cannot apply (written by a newer forewarn): its copy is marked
    diverged (rebuilt before it writes or serves a change again), the cause logged as an
    error, and it waits the longest backoff, 5 s, before reading again."""
    pauses: list[float] = []

    class Reader(_Unbounded):
        def wait_for_append(self, after: int, timeout: float) -> int:
            return 1  # the last record's number

        def records(self, after: int = 0) -> list[tuple[int, dict[str, Any]]]:
            return [(1, {"op": "from-the-future"})]

    class Replica:
        head = 0
        diverged = registered = False

        def apply_fetched(self, records: object) -> int:
            raise ForewarnError("record 1 cannot be applied")

    async def pause(stop: asyncio.Event, seconds: float) -> None:
        pauses.append(seconds)
        stop.set()

    replica = Replica()
    monkeypatch.setattr(tasks, "_pause", pause)
    with caplog.at_level("ERROR", logger="forewarn.cluster"):
        _run(lambda stop: tasks.follow(replica, Reader(), stop), stopped=False)  # type: ignore[arg-type]
    assert replica.diverged is True
    assert pauses == [5.0]
    assert [record.getMessage() for record in caplog.records] == ["record 1 cannot be applied"]
