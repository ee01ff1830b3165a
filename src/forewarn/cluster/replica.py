"""One front-end's copy of a fleet whose journal several front-ends share.

The copy is a function of the journal alone: records are applied in sequence order
(``advance_to(record.at)``, then the command), and nothing else ever moves the platform, so
every front-end, and every replay, holds the same platform after the same record.

A write happens in one transaction holding the namespace's write lock
(:meth:`forewarn.storage.postgres.PostgresJournal.exclusive`): catch up with what others
appended, stamp ``at = max(clock, head's at)``, apply the command locally (the domain's
checks), append the record at exactly head + 1, commit, and only then answer. Applying moves
the local platform before the commit; if the commit fails or cannot be known to have
happened, the copy is *diverged* and is rebuilt from the journal before it writes again.
Writes asked for together go in one transaction (group commit, :meth:`Replica.write_group`):
one lock, one append and one commit for all, :data:`MAX_GROUP` writes at most. On the event
loop, :meth:`Replica.write_soon` gathers those of one turn of the loop (VMs' approvals, the
control API's operations); from several threads, :meth:`Replica.write` gathers those made
while a transaction runs.

Where the waits happen. ``forewarn serve`` answers every VM from one event loop, so a write
made there (:meth:`Replica.write_async`, :meth:`Replica.write_soon`, a VM's first request) runs
its transaction in a thread of its own (one for every write, so they keep their order), and
the loop never waits on PostgreSQL: only the steps that read or move the platform (applying
what others appended, the domain's checks and the command, then releasing what the commit
confirmed) are handed back to the loop's thread, which owns the platform. Between the step
that applies a write here and the answer to its commit (one round trip; at most
:data:`WRITE_SECONDS` when PostgreSQL goes silent just then) the platform is ahead of the
journal (:attr:`Replica.committing`): a VM's request arriving then is not answered from it but
waits, without holding the loop, until the commit is confirmed or refused
(:class:`~forewarn.vm_requests.AnswerLaterError`), and is answered from what the journal holds.
Waiting was chosen over answering from a copy of the platform as the journal has it: a second
platform per front-end would double the memory of a fleet and the work of applying every
record, for a window that is one round trip long but when the server falls silent exactly
inside it. After a write runs out of time, further writes are refused at once (``503``, the
*breaker*) until a probe in a thread of its own finds PostgreSQL answering again, so a long
silence costs one bound, not one per write.

Once it has committed a write that answers someone (an operation, an approval, a clock
moved), a registered front-end (:meth:`Replica.register`) waits, bounded by
:data:`SPREAD_SECONDS`, until every other live front-end reports it has applied the record,
so that the next response of every front-end shows what was acknowledged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from forewarn import collector
from forewarn.commands import MAX_GROUP_COMMANDS, Command, Group, Result, Seen, Tick, Touch
from forewarn.domain.clock import Clock
from forewarn.domain.impact import Pause
from forewarn.domain.platform import Platform
from forewarn.errors import ForewarnError
from forewarn.journal_replay import Applied, NewPlatform, replay_journal
from forewarn.storage.errors import AppendConflictError, StorageError, StoreUnavailableError
from forewarn.storage.journal import MAX_RECORD_BYTES, encode_record
from forewarn.vm_requests import AnswerLaterError

if TYPE_CHECKING:
    from forewarn.storage.postgres import PostgresJournal

_LOG = logging.getLogger("forewarn.cluster")

#: How many times a write retries after finding records it had not seen (only writers not
#: taking the namespace lock, such as an older forewarn, can cause that).
MAX_ATTEMPTS = 3
#: How long a write may wait on PostgreSQL, its turn behind the writes before it, retries,
#: reconnecting and the wait for the other front-ends included, before it is refused
#: (``503``): then it has not been applied, and is not applied later
#: (:meth:`forewarn.storage.postgres.PostgresJournal.bounded`), unless its commit was sent and
#: went unanswered, which the refusal says. A write waits in a thread of its own, never on the
#: event loop's (``forewarn serve``): a VM's request waits, without holding the loop, only
#: while a write applied here waits for its commit's answer, so this is the longest a silent
#: server holds up a poll, and once per silence (the breaker then refuses writes at once).
WRITE_SECONDS = 2.0
#: After the store failed a VM's first request's write, how long further first requests are
#: refused without trying: each try takes the writes' turn for as long as connecting takes.
QUIET_SECONDS = 5.0
#: While the breaker is open (a write ran out of time), how often a probe asks PostgreSQL
#: whether it answers again; writes are refused at once meanwhile.
PROBE_SECONDS = 0.5
#: How long a write waits, after its commit, for the other front-ends to apply it before it
#: answers anyway (and logs which lagged): a front-end killed a moment ago delays writes by
#: this much until its heartbeat is older than :data:`LIVE_SECONDS`.
SPREAD_SECONDS = 0.25
#: A front-end whose last report (one at least every second while it follows the journal)
#: is older than this is not waited for.
LIVE_SECONDS = 3.0
#: Front-ends silent for this long are removed from the namespace's list when one starts.
FORGET_SECONDS = 600.0
#: The most writes one transaction holds: more asked for together (a campaign's operations
#: all at once) go in transactions of this many, one after another. A transaction is
#: applied and appended within :data:`WRITE_SECONDS`, the local platform's work included:
#: 100 scheduled events take about 20 ms of CPU, and a transaction of 500 took 0.7 s on a
#: machine whose cores were shared nine ways, near enough to the bound for a spike to cross
#: it. The transaction's own cost (the lock, the round trips, the flush: milliseconds) is
#: shared by all of them, as with the approvals a front-end gathers in a turn.
MAX_GROUP = 100


#: The most bytes the commands of one journal record take (:class:`~forewarn.commands.Group`),
#: half a record's bound: the rest is the record's own keys and time, with room to spare.
GROUP_BYTES = MAX_RECORD_BYTES // 2


def _record_of(run: Sequence[Command], at: datetime) -> dict[str, Any]:
    """The journal record of the commands ``run``, applied at ``at`` as one record: the
    command's own when it is alone, a group of them otherwise."""
    (command,) = run if len(run) == 1 else (Group(tuple(run)),)
    return command.to_record(at)


class ReplicaError(StoreUnavailableError):
    """This front-end cannot write now: the store is unreachable, or its copy of the fleet
    is being rebuilt after a write whose commit could not be confirmed."""


class _NotStartedError(ReplicaError):
    """A write failed before it changed anything here (its cause says why)."""


class _LoopGoneError(ReplicaError):
    """The event loop owning the platform stopped running a write's steps (shutting down)."""


def _adopted_by_nobody(platform: Platform) -> None:
    """:attr:`Replica.adopt` until a service serves from the replica's platforms."""


def _nobody_told() -> None:
    """:attr:`Replica.on_change` until someone (the leader) wakes on applied records."""


_T = TypeVar("_T")


class _Owner(Protocol):
    """Runs a step of a write on the platform on the thread that owns the platform."""

    def __call__(self, step: Callable[[], _T]) -> _T: ...


def _here(step: Callable[[], _T]) -> _T:
    """The owner when the writing thread is the platform's (:meth:`Replica.write`)."""
    return step()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class _OnLoop:
    """The owner of a write made in the writes' thread: each step runs on the event loop's
    thread, which owns the platform, while the writes' thread waits for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def __call__(self, step: Callable[[], _T]) -> _T:
        done: Future[_T] = Future()

        def run() -> None:
            if not done.set_running_or_notify_cancel():
                return  # given up before it began: nothing was changed
            try:
                done.set_result(step())
            except BaseException as exc:  # (raised in the writes' thread, as it would be)
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        while True:
            try:
                return done.result(timeout=WRITE_SECONDS)
            except FutureTimeoutError:
                if self._loop.is_running():
                    continue  # a busy loop runs it in its turn: a step, not a wait
                if done.cancel():  # stopped without running it: nothing changed
                    raise _LoopGoneError("the event loop stopped before the write's step") from None


@dataclass(slots=True)
class _Decided:
    """What a write's step on the platform decided: each command's outcome, the records to
    append, and the head they end at."""

    outcomes: list[Result | ForewarnError]
    records: list[dict[str, Any]]
    head: int


@dataclass(slots=True)
class _Pending:
    """A write waiting for its group's transaction, then its outcome."""

    command: Command
    spread: bool
    at: datetime | None
    outcome: Result | Exception | None = None


class Replica:
    """This front-end's copy of the fleet, kept equal to the shared journal.

    Not thread-safe, like the service it belongs to: every method runs on the event loop's
    thread (``forewarn serve``) or the test's; :meth:`write` alone may be called from several
    threads at once, and groups their writes. The loop's writes make their waits in the
    writes' thread, and hand their steps on the platform back to the loop's.
    """

    def __init__(
        self,
        journal: PostgresJournal,
        clock: Clock,
        new_platform: NewPlatform,
        *,
        touch_every: timedelta,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.journal = journal
        self.clock = clock
        self._new_platform = new_platform
        #: Told of every platform this replica serves from (the service's).
        self.adopt: Callable[[Platform], None] = _adopted_by_nobody
        self.touch_every = touch_every
        self.applied = Applied.fresh(new_platform)
        self.diverged = False
        #: VMs whose requests wait to be journaled in the next Seen record.
        self.unseen: set[str] = set()
        #: Called after records were applied (the leader wakes on it).
        self.on_change: Callable[[], None] = _nobody_told
        self._monotonic = monotonic
        self._quiet_until = 0.0
        self._refused_until = 0.0
        #: This front-end's name in the namespace's list of front-ends (the logs show it).
        self.front_end = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"
        #: Whether it is in that list: writers then wait for it, and it for them.
        self.registered = False
        #: Whether it holds the leader lock now (:func:`forewarn.cluster.tasks.lead`): the one
        #: front-end that journals the time and delivers Event Grid's events.
        self.leading = False
        # Writes waiting for a transaction, and the turn to write them (group commit).
        self._waiting: list[_Pending] = []
        self._waiting_lock = threading.Lock()
        self._turn = threading.Lock()
        # Writes asked for in this turn of the event loop (write_soon), and who waits on each.
        self._soon: list[tuple[Command, Callable[[Result | Exception], None]]] = []
        #: The event loop writes were last asked for on (write_async): the thread that owns
        #: the platform, on which a blocking write is refused.
        self._loop: asyncio.AbstractEventLoop | None = None
        # The loop's writes take turns here, each waiting a bounded time for its own...
        self._queue = asyncio.Lock()
        # ...and make their waits on PostgreSQL in this thread, one after the other.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forewarn-write")
        #: Whether a write is applied here and its commit not answered yet: VMs' requests
        #: wait (when_committed) rather than be shown it.
        self.committing = False
        self._after_commit: list[Callable[[], None]] = []
        # Why writes are refused at once (the breaker), until a probe finds PostgreSQL.
        self._broken: str | None = None
        # The tasks of this replica's (a group's write, the probe), kept until done.
        self._tasks: set[asyncio.Task[None]] = set()
        # The VMs whose first request is being journaled, and who waits on each.
        self._touching: dict[str, list[Callable[[Exception | None], None]]] = {}
        # The VMs whose first request the domain refused to journal: answered as things stand.
        self._untouched: set[str] = set()

    @property
    def platform(self) -> Platform:
        return self.applied.platform

    @property
    def head(self) -> int:
        return self.applied.head

    # -- following ------------------------------------------------------------------------

    def rebuild(self) -> int:
        """Replay the whole journal onto a fresh platform, then serve that one; the
        number of records. Start-up and recovery after a diverged write both come here."""
        untouched = self.applied.head == 0 and not self.diverged
        # at start-up the platform built with the replica is the fresh one: no second build
        applied = self.applied if untouched else self._fresh()
        replay_journal(applied, self.journal.records(), self.clock)
        self._serve(applied)
        return applied.head

    def _fresh(self) -> Applied:
        """A fresh platform to replay the journal onto, in place of this one, whose history
        holds the changes readers were not told of yet until it is served
        (:mod:`forewarn.domain.history`)."""
        told = self.applied.platform.history.told
        applied = Applied.fresh(self._new_platform)
        applied.platform.history.hold(after=told)
        return applied

    def _serve(self, applied: Applied) -> None:
        """Serve ``applied``, replayed from the journal: the service adopts it (its readers
        listen to its history), then is told of the changes replayed that it had not been."""
        self.applied = applied
        self.adopt(applied.platform)
        applied.platform.history.release()
        self.diverged = False
        self.on_change()

    def replayed(self, journal: PostgresJournal) -> Applied:
        """The whole journal replayed onto a fresh platform, read through ``journal`` (a
        connection of the caller's): thread-safe, so the follower runs it in a worker thread
        and then serves the result (:meth:`install`) without the event loop waiting on it."""
        applied = self._fresh()
        replay_journal(applied, journal.records(), self.clock)
        return applied

    def install(self, applied: Applied) -> bool:
        """Serve ``applied`` (from :meth:`replayed`) while this copy is diverged; False when
        a write rebuilt it meanwhile, and ``applied`` is dropped."""
        if not self.diverged:
            return False
        self._serve(applied)
        return True

    def apply_fetched(self, records: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
        """Apply fetched records that come after the head, in order; those already applied
        are passed over, and a gap stops at it (the next fetch reads from the head again).
        The number applied."""
        count = 0
        applied = self.applied
        for position, record in records:
            if position <= applied.head:
                continue
            if position != applied.head + 1:
                break
            applied.apply(position, record, self.clock)
            count += 1
        if count:
            self.on_change()
        return count

    def catch_up(self) -> int:
        """Read and apply what others appended (a blocking read, bounded as a write is:
        start-up and tests only; :meth:`catch_up_async` on the loop)."""
        with self.journal.bounded(WRITE_SECONDS):
            return self.apply_fetched(list(self.journal.records(after=self.applied.head)))

    async def catch_up_async(self) -> int:
        """:meth:`catch_up` on the loop's thread: read in the writes' thread (after the
        writes asked for before), applied on the loop's."""
        self._loop = loop = asyncio.get_running_loop()
        async with self._queue:
            records = await loop.run_in_executor(self._thread, self._read_after_head)
        return self.apply_fetched(records)

    def _read_after_head(self) -> list[tuple[int, dict[str, Any]]]:
        with self._turn, self.journal.bounded(WRITE_SECONDS):
            return list(self.journal.records(after=self.applied.head))

    def register(self) -> None:
        """Join the namespace's list of front-ends, then read what was appended since the
        start-up replay, before serving anything: a write whose wait did not yet see this
        front-end committed before it joined, so the read after joining finds it."""
        self.journal.forget_front_end(self.front_end, silent_for=FORGET_SECONDS)
        self.journal.report_applied(self.front_end, self.applied.head)
        self.registered = True
        if self.catch_up():
            self.journal.report_applied(self.front_end, self.applied.head)

    def _spread(self, head: int) -> None:
        """Wait (bounded) until every other live front-end has applied ``head``."""
        if not self.registered:
            return
        start = self._monotonic()
        try:
            lagging = self.journal.wait_applied(
                self.front_end, head, timeout=SPREAD_SECONDS, live_within=LIVE_SECONDS
            )
        except StorageError as exc:  # committed all the same: answered, others follow
            _LOG.warning("record %d committed; whether others applied it is unknown: %s", head, exc)
            return
        if lagging:
            _LOG.warning(
                "answered after %.0f ms without %s having applied record %d",
                (self._monotonic() - start) * 1000,
                ", ".join(lagging),
                head,
            )

    # -- writing --------------------------------------------------------------------------

    def write(self, command: Command, *, spread: bool = True, at: datetime | None = None) -> Result:
        """Apply ``command`` for the whole fleet: journaled, and applied here, or refused
        (domain errors as raised; :class:`ReplicaError` when it cannot be confirmed). It is
        stamped with the clock's time, or ``at`` (a manual clock's move, made once it is
        recorded), or the last record's when that is later.

        With ``spread`` (a write someone waits on), it returns once every other live
        front-end applied it too, or after :data:`SPREAD_SECONDS`.

        Writes made from several threads at once are committed together (group commit): the
        first to find no transaction running writes everything waiting by then in one
        transaction (a write with a time of its own in one of its own, and the others before
        and after it in the transactions around it), and each caller returns once its
        transaction committed, with its own result or its own domain error; a transaction
        that fails fails every write in it alike. It blocks its caller for as long as
        PostgreSQL takes: never on the thread of the event loop this front-end serves from
        (:meth:`write_async` there)."""
        self._not_on_the_loop()
        # A value the journal would not keep is refused before anything is applied (its own
        # time or the clock's stands in for the stamp: every time is kept, and a record at
        # the size limit is judged with the length of the time it asks for).
        encode_record(command.to_record(self.clock.now() if at is None else at))
        pending = _Pending(command, spread, at)
        with self._waiting_lock:
            self._waiting.append(pending)
        with self._turn:
            # not written in the group before: lead the next, and those after it until this
            # one is written (one with a time of its own goes in a group of its own)
            while pending.outcome is None:
                self._write_waiting()
        outcome = pending.outcome
        assert outcome is not None  # written by this thread or by the group it joined
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def serve_from_this_loop(self) -> None:
        """The running event loop serves this replica from now on (``forewarn serve``): a
        VM's first request made there is journaled off the loop and answered later, and a
        blocking :meth:`write` there is refused."""
        self._loop = asyncio.get_running_loop()

    def _not_on_the_loop(self) -> None:
        """A blocking write on the loop's thread would hold every VM's poll for as long as
        PostgreSQL takes, and wait for itself once a write of the loop's holds the turn."""
        if self._loop is not None and _running_loop() is self._loop:
            raise RuntimeError("Replica.write on the event loop's thread: await write_async")

    def _write_waiting(self) -> None:
        """Write the waiting writes, in the order they came, in one transaction; a write
        with a time of its own (``at``) goes alone."""
        with self._waiting_lock:
            group: list[_Pending] = []
            for pending in self._waiting:
                if group and (
                    pending.at is not None or group[0].at is not None or len(group) >= MAX_GROUP
                ):
                    break
                group.append(pending)
            del self._waiting[: len(group)]
        outcomes: Sequence[Result | Exception]
        try:
            outcomes = self.write_group(
                [pending.command for pending in group],
                spread=any(pending.spread for pending in group),
                at=group[0].at,
            )
        except Exception as exc:  # the whole group: the same error for each write
            outcomes = [exc for _ in group]
        for index, pending in enumerate(group):  # outcomes: one for each, in order
            pending.outcome = outcomes[index]

    async def write_async(
        self, command: Command, *, spread: bool = True, at: datetime | None = None
    ) -> Result:
        """:meth:`write` on the event loop's thread, in a group of its own, without the loop
        waiting on PostgreSQL: the transaction runs in the writes' thread, and only its
        steps on the platform come back to the loop. Refused (:class:`ReplicaError`,
        nothing applied) at once while the breaker is open, and when it has waited
        :data:`WRITE_SECONDS` for the writes before it."""
        encode_record(command.to_record(self.clock.now() if at is None else at))
        deadline = self._monotonic() + WRITE_SECONDS
        (outcome,) = await self._write_off_loop([command], spread=spread, at=at, deadline=deadline)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def write_soon(self, command: Command, done: Callable[[Result | Exception], None]) -> None:
        """On the event loop's thread: write ``command`` with every other asked for in the
        same turn of the loop, in one transaction (:data:`MAX_GROUP` at most, the rest in the
        next ones) once that turn's callbacks have run, then call ``done`` with its result or
        what refused it (its own domain error, or the transaction's failure, the same for the
        whole group). Nothing is applied before: until the transaction, every answer shows
        the platform as the journal has it. The transaction runs off the loop, as
        :meth:`write_async`'s does."""
        try:
            encode_record(command.to_record(self.clock.now()))
        except ForewarnError as exc:
            done(exc)
            return
        self._soon.append((command, done))
        if len(self._soon) == 1:
            self._spawn(self._write_soon(self._monotonic() + WRITE_SECONDS))

    async def _write_soon(self, deadline: float) -> None:
        """The writes asked for in the turn, in transactions of at most :data:`MAX_GROUP`,
        in the order they were asked for, each off the loop as :meth:`write_async`'s; each
        caller told once its own committed. The first waits for the writes' turn until
        ``deadline``, each later one until :data:`WRITE_SECONDS` after it asks (the writes
        of other turns may go between them). Once one failed on the store, the turn's later
        writes are refused without trying (nothing of theirs was applied), rather than each
        wait out the store's bound and rebuild this copy in turn."""
        # The rest of this turn's callbacks ask for theirs first, and those asked for while
        # the writes before wait on PostgreSQL join them: the writes are taken with the turn.
        await asyncio.sleep(0)
        refusal: Exception | None = None
        try:
            await self._take_turn(deadline)
        except ReplicaError as exc:
            refusal = exc
        asked, self._soon = self._soon, []
        for first in range(0, len(asked), MAX_GROUP):
            group = asked[first : first + MAX_GROUP]
            if first and refusal is None:
                deadline = self._monotonic() + WRITE_SECONDS
                try:
                    await self._take_turn(deadline)
                except ReplicaError as exc:
                    refusal = exc
            outcomes: Sequence[Result | Exception]
            if refusal is not None:
                outcomes = [refusal for _ in group]
            else:
                # no collection inside the write's bound: a full one over a large fleet's
                # new objects took a second on a loaded core, half the bound; it runs after
                with collector.paused():
                    try:
                        outcomes = await self._in_turn(
                            [command for command, _ in group],
                            spread=True,
                            at=None,
                            deadline=deadline,
                        )
                    except Exception as exc:  # the whole group: the same error for each
                        outcomes = [exc for _ in group]
                        if isinstance(exc, StorageError):
                            refusal = ReplicaError(f"cannot write now, nothing was applied: {exc}")
            for index, (_, done) in enumerate(group):  # outcomes: one for each, in order
                try:
                    done(outcomes[index])
                except Exception:  # one caller's failure to answer is not the others'
                    _LOG.exception("answering a write of a group")

    async def _write_off_loop(
        self, commands: Sequence[Command], *, spread: bool, at: datetime | None, deadline: float
    ) -> list[Result | ForewarnError]:
        """One transaction for ``commands``, its waits in the writes' thread: after those
        asked for before it, and refused, nothing applied, when that wait reaches
        ``deadline`` (:func:`time.monotonic`) or the breaker is open."""
        await self._take_turn(deadline)
        return await self._in_turn(commands, spread=spread, at=at, deadline=deadline)

    async def _take_turn(self, deadline: float) -> None:
        """Wait for the writes' turn, until ``deadline``; refused at once while the breaker
        is open. The caller then holds it, and :meth:`_in_turn` gives it back."""
        self._loop = asyncio.get_running_loop()
        self._refuse_if_broken()
        try:
            await asyncio.wait_for(self._queue.acquire(), deadline - self._monotonic())
        except TimeoutError:
            raise ReplicaError(
                f"cannot write now, nothing was applied: the writes before it kept it waiting "
                f"{WRITE_SECONDS:g} s"
            ) from None
        if self._broken is not None:  # a write before it found PostgreSQL silent
            self._queue.release()
            self._refuse_if_broken()

    async def _in_turn(
        self, commands: Sequence[Command], *, spread: bool, at: datetime | None, deadline: float
    ) -> list[Result | ForewarnError]:
        """The transaction of a write holding the turn, in the writes' thread; the turn is
        given back after it."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._thread, self._write_in_thread, commands, spread, at, deadline, _OnLoop(loop)
            )
        except StorageError as exc:
            if self.journal.expired:
                self._break(str(exc))
            raise
        finally:
            self._queue.release()

    def _write_in_thread(
        self,
        commands: Sequence[Command],
        spread: bool,
        at: datetime | None,
        deadline: float,
        owner: _Owner,
    ) -> list[Result | ForewarnError]:
        with self._turn:  # writers of other threads take turns with the loop's
            seconds = deadline - self._monotonic()
            if seconds <= 0:
                raise ReplicaError(
                    f"cannot write now, nothing was applied: the writes before it kept it "
                    f"waiting {WRITE_SECONDS:g} s"
                )
            return self._bounded_group(commands, spread=spread, at=at, seconds=seconds, owner=owner)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task of the running loop, kept until it is done (the loop keeps
        only weak references to its tasks), then let go."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the breaker ----------------------------------------------------------------------

    def _refuse_if_broken(self) -> None:
        if self._broken is not None:
            raise ReplicaError(
                f"cannot write now, nothing was applied: {self._broken}; writes are refused "
                "until PostgreSQL answers again"
            )

    def _break(self, why: str) -> None:
        """Open the breaker (on the loop's thread): writes are refused at once until
        :meth:`_probe` finds PostgreSQL answering."""
        if self._broken is not None:
            return
        self._broken = why
        _LOG.warning("refusing writes until PostgreSQL answers again: %s", why)
        self._spawn(self._probe())

    async def _probe(self) -> None:
        """Ask PostgreSQL, on a connection of the probe's own and in a thread, until it
        answers (every :data:`PROBE_SECONDS`); then close the breaker."""
        while True:
            try:
                await asyncio.to_thread(self.journal.ping)
            except StorageError as exc:
                _LOG.debug("PostgreSQL still does not answer: %s", exc)
                await asyncio.sleep(PROBE_SECONDS)
                continue
            break
        self._broken = None
        _LOG.warning("PostgreSQL answers again: writes are tried again")

    @property
    def broken(self) -> bool:
        """Whether writes are refused at once, since one ran out of time (the breaker)."""
        return self._broken is not None

    # -- one transaction ------------------------------------------------------------------

    def write_group(
        self, commands: Sequence[Command], *, spread: bool = True, at: datetime | None = None
    ) -> list[Result | ForewarnError]:
        """Apply ``commands``, in order, for the whole fleet in one transaction: the result
        of each, or the domain error that refused it alone (the others are applied and
        journaled all the same). A failure of the transaction itself is raised, and then
        none of them is acknowledged (:class:`ReplicaError`, as for :meth:`write`). Not
        thread-safe, and blocking: :meth:`write` is the door for several threads,
        :meth:`write_async` and :meth:`write_soon` the loop's."""
        return self._bounded_group(
            commands, spread=spread, at=at, seconds=WRITE_SECONDS, owner=_here
        )

    def _bounded_group(
        self,
        commands: Sequence[Command],
        *,
        spread: bool,
        at: datetime | None,
        seconds: float,
        owner: _Owner,
    ) -> list[Result | ForewarnError]:
        try:
            with self.journal.bounded(seconds):
                outcomes = self._write_group(commands, spread=spread, at=at, owner=owner)
        except StorageError:
            self._refused_until = self._monotonic() + QUIET_SECONDS
            raise
        self._refused_until = 0.0
        return outcomes

    def refusing(self) -> bool:
        """Whether the store refused this front-end's last write, less than
        :data:`QUIET_SECONDS` ago, or refuses writes until it answers (the breaker), or its
        copy is being rebuilt (readiness, ``/readyz``)."""
        return self.diverged or self.broken or self._monotonic() < self._refused_until

    def _write_group(
        self,
        commands: Sequence[Command],
        *,
        spread: bool,
        at: datetime | None,
        owner: _Owner,
    ) -> list[Result | ForewarnError]:
        for attempt in range(MAX_ATTEMPTS):
            if self.diverged:
                self._recover(owner)
            try:
                outcomes, written = self._write_once(commands, at, owner)
                if spread and written is not None:
                    self._spread(written)
                return outcomes
            except AppendConflictError:
                continue
            except _NotStartedError as exc:
                if attempt == 0 and not self.journal.expired:
                    continue  # a connection the server dropped is opened again once
                raise ReplicaError(
                    f"cannot write now, nothing was applied: {exc.__cause__}"
                ) from exc.__cause__
        raise ReplicaError(
            f"{self.journal.namespace}: other writers kept appending first; try again"
        )

    def _write_once(
        self, commands: Sequence[Command], stamp: datetime | None, owner: _Owner
    ) -> tuple[list[Result | ForewarnError], int | None]:
        """One transaction: the outcome of each command, and the head it left when any was
        journaled. Its waits happen on the calling thread; its steps on the platform on the
        thread ``owner`` runs them on."""
        decided: _Decided | None = None
        try:
            with self.journal.exclusive() as transaction:
                fetched = transaction.records(after=self.applied.head)
                decided = owner(functools.partial(self._decide, fetched, commands, stamp))
                if self.registered:  # sent with the append: one round trip for both
                    transaction.report_applied(self.front_end, decided.head)
                if decided.records:
                    transaction.append_if(decided.head - len(decided.records), decided.records)
        except AppendConflictError:
            if decided is not None:
                self._diverge("another writer appended first", owner)
            raise
        except StorageError as exc:
            if decided is not None:
                self._diverge(str(exc), owner)
                raise ReplicaError(
                    f"the change could not be confirmed ({exc}): it may or may not have been "
                    "applied, and this front-end rebuilds its state from the journal, which "
                    "says which"
                ) from exc
            raise _NotStartedError() from exc
        written = any(not isinstance(outcome, ForewarnError) for outcome in decided.outcomes)
        owner(functools.partial(self._confirmed, written))
        return decided.outcomes, decided.head if written else None

    def _decide(
        self,
        fetched: Iterable[tuple[int, Mapping[str, Any]]],
        commands: Sequence[Command],
        stamp: datetime | None,
    ) -> _Decided:
        """On the platform's thread: apply what others appended (``fetched``), then
        ``commands`` (the domain's checks), stamped; from here the platform is ahead of the
        journal (:attr:`committing`) until :meth:`_confirmed` or :meth:`_diverge`."""
        applied = self.applied
        for position, record in fetched:
            if position > applied.head:  # (the follower may have applied some meanwhile)
                applied.apply(position, record, self.clock)
        head_at = applied.head_at
        assert head_at is not None  # the platform's creation before the first record
        at = max(self.clock.now() if stamp is None else stamp, head_at)
        # Each command's bytes in a record, measured before anything is applied: one the
        # journal cannot keep refuses the write here, with nothing of it applied.
        lengths = [
            len(encode_record({"op": command.op, **command.fields()}).encode("utf-8"))
            for command in commands
        ]
        outcomes: list[Result | ForewarnError] = []
        records: list[dict[str, Any]] = []
        due = applied.platform.next_deadline()
        self.committing = True
        # changes of published events made from here on are told once the commit is
        # confirmed; if it is not, this history is replaced with them untold
        applied.platform.history.hold()
        if due is not None and due <= at and not isinstance(commands[0], Tick):
            # time passing fires deadlines: a record of its own says so, and the events it
            # creates are numbered after it
            applied.apply_command(applied.head + 1, at, Tick())
            records.append(Tick().to_record(at))
        # The commands the domain accepts go in one record (a Group) while they fit in
        # GROUP_BYTES: one row, one decoding and one time for them all on every front-end.
        # One refused ends its record: what it drew (EventIds) before refusing is not in the
        # journal, so the next accepted command starts a record of its own, numbered afresh.
        run: list[Command] = []
        size = 0
        for command, length in zip(commands, lengths, strict=True):
            if run and (len(run) == MAX_GROUP_COMMANDS or size + length > GROUP_BYTES):
                records.append(_record_of(run, at))
                run, size = [], 0
            try:
                if run:
                    outcomes.append(applied.apply_joined(at, command))
                else:
                    outcomes.append(applied.apply_command(applied.head + 1, at, command))
            except ForewarnError as exc:  # refused alone, changing nothing
                outcomes.append(exc)
                if run:
                    records.append(_record_of(run, at))
                    run, size = [], 0
                continue
            run.append(command)
            size += length
        if run:
            records.append(_record_of(run, at))
        if applied.platform.now > head_at and not records:
            # The domain refuses before changing anything, but the platform's time has
            # moved to ``at``: journal that much, or this copy is ahead of it.
            applied.apply_command(applied.head + 1, at, Tick())
            records.append(Tick().to_record(at))
        return _Decided(outcomes, records, applied.head)

    def _confirmed(self, written: bool) -> None:
        """On the platform's thread: the commit answered; what it changed is shown."""
        self.applied.platform.history.release()
        self._settled()
        if written:
            self.on_change()

    def _settled(self) -> None:
        """The platform is as the journal has it again (or diverged, and refuses): the
        requests that waited for it are answered."""
        self.committing = False
        waiting, self._after_commit = self._after_commit, []
        for callback in waiting:
            try:
                callback()
            except Exception:  # one request's failure to answer is not the others'
                _LOG.exception("answering a request that waited for a commit")

    def when_committed(self, callback: Callable[[], None]) -> None:
        """On the loop's thread: call ``callback`` once the write being committed is
        confirmed or refused (at once when none is)."""
        if not self.committing:
            callback()
            return
        self._after_commit.append(callback)

    async def committed(self) -> None:
        """Wait, on the loop's thread, until no write applied here waits for its commit's
        answer (each such wait is bounded by the write's own)."""
        while self.committing:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.when_committed(functools.partial(_settle, done))
            await done

    def _diverge(self, why: str, owner: _Owner) -> None:
        _LOG.warning("state ahead of the journal (%s): rebuilding from the journal", why)
        owner(self._mark_diverged)
        try:
            applied = self.replayed(self.journal)
        except StorageError as exc:
            _LOG.warning("rebuild postponed: %s", exc)
            return
        owner(functools.partial(self.install, applied))

    def _mark_diverged(self) -> None:
        self.diverged = True
        self._settled()

    def _recover(self, owner: _Owner) -> None:
        try:
            applied = self.replayed(self.journal)
        except StorageError as exc:
            raise self.unavailable(exc) from exc
        owner(functools.partial(self.install, applied))

    def unavailable(self, cause: Exception | None = None) -> ReplicaError:
        """Why nothing can be read or written while this copy is diverged: it may show a
        change that never happened, until the follower (or the next write) has rebuilt it."""
        reason = f": {cause}" if cause is not None else ""
        return ReplicaError(
            "this front-end is rebuilding its state from the journal after a write whose "
            f"commit could not be confirmed, and cannot read the journal now{reason}"
        )

    # -- requests from VMs ----------------------------------------------------------------

    def requested(self, vm_name: str) -> Pause | None:
        """A request from ``vm_name`` is being answered: one that turns Scheduled Events on
        is journaled now (so the first-call delay counts from it everywhere), and when that
        cannot be done it is refused (:class:`ReplicaError`), changing nothing; others are
        journaled only once every :attr:`touch_every`, batched in the next :class:`Seen`
        record.

        On the thread of the event loop this front-end serves from, the first request's
        record is written off the loop: the request is answered once it is committed
        (:class:`~forewarn.vm_requests.AnswerLaterError`, :meth:`touch_soon`).

        While this copy is diverged (a write whose commit could not be confirmed, and the
        journal unreadable since), every request is refused rather than be shown a change
        that may never have happened."""
        if self.diverged:
            raise self.unavailable()
        platform = self.applied.platform
        if not platform.receiving(vm_name) and platform.pause(vm_name) is None:
            if self._monotonic() < self._quiet_until:
                # the store failed a moment ago: refused without trying again yet
                raise ReplicaError(
                    f"{vm_name}'s first request cannot be journaled: the store failed a "
                    "moment ago; retry in a moment"
                )
            if vm_name in self._untouched:  # the domain refused its record: as things stand
                self._untouched.discard(vm_name)
                return None
            if self._loop is not None and _running_loop() is self._loop:
                raise AnswerLaterError(functools.partial(self.touch_soon, vm_name))
            try:
                self.write(Touch(vm_name), spread=False)
            except StorageError:
                self._quiet_until = self._monotonic() + QUIET_SECONDS
                raise
            except ForewarnError as exc:  # answered as things stand; a later request retries
                _LOG.warning("cannot journal %s's first request: %s", vm_name, exc)
            return None
        last = self.applied.last_seen.get(vm_name)
        if last is None or self.clock.now() - last >= self.touch_every:
            self.unseen.add(vm_name)
        return None

    def touch_soon(self, vm_name: str, ready: Callable[[Exception | None], None]) -> None:
        """On the loop's thread: journal ``vm_name``'s first request off the loop (once, for
        every request of it waiting meanwhile), then call ``ready`` with None (answer it
        now) or the store's failure (refuse it: the next first requests are refused without
        trying for :data:`QUIET_SECONDS`)."""
        waiting = self._touching.get(vm_name)
        if waiting is not None:
            waiting.append(ready)
            return
        self._touching[vm_name] = [ready]
        self._spawn(self._touch(vm_name))

    async def _touch(self, vm_name: str) -> None:
        outcome: Exception | None = None
        try:
            await self.write_async(Touch(vm_name), spread=False)
        except StorageError as exc:
            self._quiet_until = self._monotonic() + QUIET_SECONDS
            outcome = exc
        except ForewarnError as exc:  # answered as things stand; a later request retries
            _LOG.warning("cannot journal %s's first request: %s", vm_name, exc)
            self._untouched.add(vm_name)
        for ready in self._touching.pop(vm_name):
            try:
                ready(outcome)
            except Exception:  # one request's failure to answer is not the others'
                _LOG.exception("answering a first request")

    def flush_seen(self) -> bool:
        """Journal the VMs seen since their last journaled request; True when written."""
        if not self.unseen:
            return False
        names = tuple(sorted(self.unseen))
        self.write(Seen(names), spread=False)
        self.unseen.difference_update(names)
        return True

    async def flush_seen_async(self) -> bool:
        """:meth:`flush_seen` on the loop's thread, its waits off the loop."""
        if not self.unseen:
            return False
        names = tuple(sorted(self.unseen))
        await self.write_async(Seen(names), spread=False)
        self.unseen.difference_update(names)
        return True


__all__ = [
    "FORGET_SECONDS",
    "GROUP_BYTES",
    "LIVE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_GROUP",
    "PROBE_SECONDS",
    "QUIET_SECONDS",
    "SPREAD_SECONDS",
    "WRITE_SECONDS",
    "Replica",
    "ReplicaError",
]
