"""The background work of a front-end sharing its journal: following, and leading.

Both run on the event loop as asyncio tasks; every blocking database call goes to a worker
thread (their writes too: :meth:`~forewarn.cluster.replica.Replica.write_async`), and records
are applied back on the loop's thread, so VM polls and control reads are answered from the
last applied state and never wait on the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from forewarn.cluster.replica import WRITE_SECONDS, Replica
from forewarn.commands import Tick
from forewarn.errors import ForewarnError
from forewarn.storage.errors import StorageError

if TYPE_CHECKING:
    from forewarn.storage.postgres import Leadership, PostgresJournal

_LOG = logging.getLogger("forewarn.cluster")

#: How long a follower waits on LISTEN before reading anyway (the safety net), and how
#: often a front-end that is not the leader asks for the leader lock: a leader killed with
#: SIGKILL is replaced within about this long.
POLL_SECONDS = 1.0
#: How long the follower's read of what was appended may take before it is given up.
READ_SECONDS = 10.0
#: Reconnecting waits double from the first to the last after each failure.
BACKOFF_SECONDS = (0.2, 5.0)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(seconds, 0.0))


async def follow(replica: Replica, reader: PostgresJournal, stop: asyncio.Event) -> None:
    """Apply what other front-ends append, as it is committed (LISTEN), with a read of the
    namespace's counter on every (re)connect and at least every :data:`POLL_SECONDS`, and of
    the records once it has moved; journal the VMs seen meanwhile;
    rebuild a diverged copy. ``reader`` is a journal of its own, so a slow or dead server
    holds up this task only."""
    backoff = BACKOFF_SECONDS[0]
    while not stop.is_set():
        try:
            last = await asyncio.to_thread(reader.wait_for_append, replica.head, POLL_SECONDS)
            if last > replica.head:  # read only what there is: nothing, most seconds
                replica.apply_fetched(await asyncio.to_thread(_read_after, reader, replica.head))
            if replica.diverged:  # replayed in a thread: the loop never waits on it
                replica.install(await asyncio.to_thread(replica.replayed, reader))
            if replica.registered:  # what it applied, and that it is alive: once a batch
                await asyncio.to_thread(_report, reader, replica.front_end, replica.head)
            await replica.flush_seen_async()
            backoff = BACKOFF_SECONDS[0]
        except StorageError as exc:
            _LOG.warning("following the journal: %s; again in %.1f s", exc, backoff)
            await _pause(stop, backoff)
            backoff = min(backoff * 2, BACKOFF_SECONDS[1])
        except ForewarnError as exc:  # a record this version cannot apply
            _LOG.error("%s", exc)
            replica.diverged = True
            await _pause(stop, BACKOFF_SECONDS[1])


def _read_after(reader: PostgresJournal, after: int) -> list[tuple[int, dict[str, Any]]]:
    """What was appended after ``after``; :data:`READ_SECONDS` at most, so a server that
    stops answering holds the follower (and a shutdown waiting for it) that long only."""
    with reader.bounded(READ_SECONDS):
        return list(reader.records(after=after))


def _report(reader: PostgresJournal, front_end: str, head: int) -> None:
    with reader.bounded(WRITE_SECONDS):
        reader.report_applied(front_end, head)


def _forget(reader: PostgresJournal, front_end: str) -> None:
    with reader.bounded(WRITE_SECONDS):
        reader.forget_front_end(front_end)


async def lead(replica: Replica, leadership: Leadership, stop: asyncio.Event) -> None:
    """Whoever holds the leader lock writes a :class:`~forewarn.commands.Tick` whenever a
    deadline of the platform falls due, so time-driven transitions (NotBefore passing, an
    impact's end, a removal, a campaign's next step, enablement after the first-call delay)
    come from the journal; the others ask for the lock every :data:`POLL_SECONDS`."""
    changed = asyncio.Event()
    replica.on_change = changed.set  # records are applied on this loop's thread
    leading = False
    next_ask = 0.0  # woken by every record applied, it asks the server once a second at most
    try:
        while not stop.is_set():
            if time.monotonic() >= next_ask:
                next_ask = time.monotonic() + POLL_SECONDS
                try:
                    now_leading = await asyncio.to_thread(leadership.acquire)
                except StorageError as exc:
                    now_leading = False
                    _LOG.warning("asking for the leader lock: %s", exc)
                if now_leading != leading:
                    state = "is now" if now_leading else "is no longer"
                    _LOG.info("this front-end %s the leader", state)
                    leading = replica.leading = now_leading
            wait = POLL_SECONDS
            if leading:
                wait = await _tick_if_due(replica)
            changed.clear()
            waiter = asyncio.create_task(changed.wait())
            stopper = asyncio.create_task(stop.wait())
            _done, pending = await asyncio.wait(
                {waiter, stopper}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
            for task in pending:
                task.cancel()
    finally:
        replica.leading = False
        await asyncio.to_thread(leadership.release)


async def _tick_if_due(replica: Replica) -> float:
    """Write a Tick when the next deadline has come; how long to wait before looking again."""
    due = replica.platform.next_deadline()
    if due is None:
        return POLL_SECONDS
    remaining = (due - replica.clock.now()).total_seconds()
    if remaining > 0:
        return min(POLL_SECONDS, remaining)
    try:
        await replica.write_async(Tick(), spread=False)
    except StorageError as exc:
        _LOG.warning("cannot journal the time: %s", exc)
        return POLL_SECONDS
    return 0.0


async def run_front_end(replica: Replica, stop: asyncio.Event, *, leads: bool = True) -> None:
    """Follow and (when elected) lead until ``stop`` is set, on connections of their own;
    ``leads=False``: follow only, never asking for the leader lock (a worker of ``serve
    --workers``, whose supervising process leads)."""
    replica.serve_from_this_loop()
    reader: PostgresJournal | None = None
    backoff = BACKOFF_SECONDS[0]
    while reader is None and not stop.is_set():
        try:
            reader = await asyncio.to_thread(replica.journal.another)
        except StorageError as exc:
            _LOG.warning("opening a follower connection: %s; again in %.1f s", exc, backoff)
            await _pause(stop, backoff)
            backoff = min(backoff * 2, BACKOFF_SECONDS[1])
    if reader is None:
        return
    try:
        if leads:
            await asyncio.gather(
                follow(replica, reader, stop), lead(replica, replica.journal.leadership(), stop)
            )
        else:
            await follow(replica, reader, stop)
    finally:
        if replica.registered:  # writers stop waiting for it now, not when it goes silent
            with contextlib.suppress(StorageError):
                await asyncio.to_thread(_forget, reader, replica.front_end)
        await asyncio.to_thread(reader.close)


__all__ = [
    "BACKOFF_SECONDS",
    "POLL_SECONDS",
    "READ_SECONDS",
    "follow",
    "lead",
    "run_front_end",
]
