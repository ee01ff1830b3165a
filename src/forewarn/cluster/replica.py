"""One front-end's copy of a fleet whose journal several front-ends share.

The copy is a function of the journal alone: records are applied in sequence order
(``advance_to(record.at)``, then the command), and nothing else ever moves the platform, so
every front-end, and every replay, holds the same platform after the same record.

A write (:meth:`Replica.write`) happens in one transaction holding the namespace's write lock
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

Once it has committed a write that answers someone (an operation, an approval, a clock
moved), a registered front-end (:meth:`Replica.register`) waits, bounded by
:data:`SPREAD_SECONDS`, until every other live front-end reports it has applied the record,
so that the next response of every front-end shows what was acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forewarn import collector
from forewarn.commands import Command, Result, Seen, Tick, Touch
from forewarn.domain.clock import Clock
from forewarn.domain.impact import Pause
from forewarn.domain.platform import Platform
from forewarn.errors import ForewarnError
from forewarn.journal_replay import Applied, NewPlatform, replay_journal
from forewarn.storage.errors import AppendConflictError, StorageError, StoreUnavailableError
from forewarn.storage.journal import encode_record

if TYPE_CHECKING:
    from forewarn.storage.postgres import PostgresJournal

_LOG = logging.getLogger("forewarn.cluster")

#: How many times a write retries after finding records it had not seen (only writers not
#: taking the namespace lock, such as an older forewarn, can cause that).
MAX_ATTEMPTS = 3
#: How long a write may wait on PostgreSQL, retries, reconnecting and the wait for the other
#: front-ends included, before it is refused (``503``): then it has not been applied, and is
#: not applied later (:meth:`forewarn.storage.postgres.PostgresJournal.bounded`), unless its
#: commit was sent and went unanswered, which the refusal says. Writes are made on the event
#: loop's thread, so this is also the longest a silent server holds up VMs' polls.
WRITE_SECONDS = 2.0
#: After the store failed a VM's first request's write, how long further first requests are
#: refused without trying: each try on the event loop's thread holds every other request
#: up for as long as connecting takes.
QUIET_SECONDS = 5.0
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


class ReplicaError(StoreUnavailableError):
    """This front-end cannot write now: the store is unreachable, or its copy of the fleet
    is being rebuilt after a write whose commit could not be confirmed."""


class _NotStartedError(ReplicaError):
    """A write failed before it changed anything here (its cause says why)."""


def _adopted_by_nobody(platform: Platform) -> None:
    """:attr:`Replica.adopt` until a service serves from the replica's platforms."""


def _nobody_told() -> None:
    """:attr:`Replica.on_change` until someone (the leader) wakes on applied records."""


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
    threads at once, and groups their writes.
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
        writes and tests only)."""
        with self.journal.bounded(WRITE_SECONDS):
            return self.apply_fetched(list(self.journal.records(after=self.applied.head)))

    def register(self) -> None:
        """Join the namespace's list of front-ends, then read what was appended since the
        start-up replay, before serving anything: a write whose wait did not yet see this
        front-end committed before it joined, so the read after joining finds it."""
        self.journal.forget_front_end(self.front_end, silent_for=FORGET_SECONDS)
        self.journal.report_applied(self.front_end, self.applied.head)
        self.registered = True
        if self.catch_up():
            self.journal.report_applied(self.front_end, self.applied.head)

    def _spread(self) -> None:
        """Wait (bounded) until every other live front-end has applied this one's head."""
        if not self.registered:
            return
        start = self._monotonic()
        head = self.applied.head
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
        that fails fails every write in it alike. From one thread, as ``forewarn serve``
        makes them, each is a group of one."""
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

    def write_soon(self, command: Command, done: Callable[[Result | Exception], None]) -> None:
        """On the event loop's thread: write ``command`` with every other asked for in the
        same turn of the loop, in one transaction once that turn's callbacks have run, then
        call ``done`` with its result or what refused it (its own domain error, or the
        transaction's failure, the same for the whole group). Nothing is applied before:
        until the transaction, every answer shows the platform as the journal has it."""
        try:
            encode_record(command.to_record(self.clock.now()))
        except ForewarnError as exc:
            done(exc)
            return
        self._soon.append((command, done))
        if len(self._soon) == 1:
            asyncio.get_running_loop().call_soon(self._write_soon)

    def _write_soon(self) -> None:
        """The writes asked for in the turn, in transactions of at most :data:`MAX_GROUP`,
        in the order they were asked for; each caller told once its own committed. Once one
        transaction failed on the store, the turn's later writes are refused without
        trying (nothing of theirs was applied), rather than each wait out the store's bound
        and rebuild this copy in turn."""
        asked, self._soon = self._soon, []
        failed: StorageError | None = None
        for first in range(0, len(asked), MAX_GROUP):
            group = asked[first : first + MAX_GROUP]
            outcomes: Sequence[Result | Exception]
            if failed is not None:
                refused = ReplicaError(f"cannot write now, nothing was applied: {failed}")
                outcomes = [refused for _ in group]
            else:
                # no collection inside the write's bound: a full one over a large fleet's
                # new objects took a second on a loaded core, half the bound; it runs after
                with self._turn, collector.paused():
                    try:
                        outcomes = self.write_group([command for command, _ in group])
                    except Exception as exc:  # the whole group: the same error for each
                        outcomes = [exc for _ in group]
                        if isinstance(exc, StorageError):
                            failed = exc
            for index, (_, done) in enumerate(group):  # outcomes: one for each, in order
                try:
                    done(outcomes[index])
                except Exception:  # one caller's failure to answer is not the others'
                    _LOG.exception("answering a write of a group")

    def write_group(
        self, commands: Sequence[Command], *, spread: bool = True, at: datetime | None = None
    ) -> list[Result | ForewarnError]:
        """Apply ``commands``, in order, for the whole fleet in one transaction: the result
        of each, or the domain error that refused it alone (the others are applied and
        journaled all the same). A failure of the transaction itself is raised, and then
        none of them is acknowledged (:class:`ReplicaError`, as for :meth:`write`). Not
        thread-safe: :meth:`write` is the door for several threads."""
        try:
            with self.journal.bounded(WRITE_SECONDS):
                outcomes = self._write_group(commands, spread=spread, at=at)
        except StorageError:
            self._refused_until = self._monotonic() + QUIET_SECONDS
            raise
        self._refused_until = 0.0
        return outcomes

    def refusing(self) -> bool:
        """Whether the store refused this front-end's last write, less than
        :data:`QUIET_SECONDS` ago, or its copy is being rebuilt (readiness, ``/readyz``)."""
        return self.diverged or self._monotonic() < self._refused_until

    def _write_group(
        self, commands: Sequence[Command], *, spread: bool, at: datetime | None
    ) -> list[Result | ForewarnError]:
        for attempt in range(MAX_ATTEMPTS):
            if self.diverged:
                self._recover()
            try:
                outcomes, written = self._write_once(commands, at)
                if spread and written:
                    self._spread()
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
        self, commands: Sequence[Command], stamp: datetime | None
    ) -> tuple[list[Result | ForewarnError], bool]:
        """One transaction: the outcome of each command, and whether any was journaled."""
        outcomes: list[Result | ForewarnError] = []
        # The head before this write's own changes, once known: from then on the local
        # platform may be ahead of the journal.
        ahead_of: int | None = None
        try:
            with self.journal.exclusive() as transaction:
                for position, record in transaction.records(after=self.applied.head):
                    self.applied.apply(position, record, self.clock)
                applied = self.applied
                head_at = applied.head_at
                assert head_at is not None  # the platform's creation before the first record
                at = max(self.clock.now() if stamp is None else stamp, head_at)
                records: list[dict[str, Any]] = []
                due = applied.platform.next_deadline()
                ahead_of = applied.head
                # changes of published events made from here on are told once the commit
                # is confirmed; if it is not, this history is replaced with them untold
                history = applied.platform.history
                history.hold()
                if due is not None and due <= at and not isinstance(commands[0], Tick):
                    # time passing fires deadlines: a record of its own says so, and the
                    # events it creates are numbered after it
                    applied.apply_command(applied.head + 1, at, Tick())
                    records.append(Tick().to_record(at))
                for command in commands:
                    try:
                        outcomes.append(applied.apply_command(applied.head + 1, at, command))
                        records.append(command.to_record(at))
                    except ForewarnError as exc:  # refused alone, changing nothing
                        outcomes.append(exc)
                if applied.platform.now > head_at and not records:
                    # The domain refuses before changing anything, but the platform's time
                    # has moved to ``at``: journal that much, or this copy is ahead of it.
                    applied.apply_command(applied.head + 1, at, Tick())
                    records.append(Tick().to_record(at))
                if self.registered:  # sent with the append: one round trip for both
                    transaction.report_applied(self.front_end, applied.head)
                if records:
                    transaction.append_if(applied.head - len(records), records)
        except AppendConflictError:
            if ahead_of is not None:
                self._diverge("another writer appended first")
            raise
        except StorageError as exc:
            if ahead_of is not None:
                self._diverge(str(exc))
                raise ReplicaError(
                    f"the change could not be confirmed ({exc}): it may or may not have been "
                    "applied, and this front-end rebuilds its state from the journal, which "
                    "says which"
                ) from exc
            raise _NotStartedError() from exc
        history.release()
        written = any(not isinstance(outcome, ForewarnError) for outcome in outcomes)
        if written:
            self.on_change()
        return outcomes, written

    def _diverge(self, why: str) -> None:
        _LOG.warning("state ahead of the journal (%s): rebuilding from the journal", why)
        self.diverged = True
        try:
            self.rebuild()
        except StorageError as exc:
            _LOG.warning("rebuild postponed: %s", exc)

    def _recover(self) -> None:
        try:
            self.rebuild()
        except StorageError as exc:
            raise self.unavailable(exc) from exc

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

    def flush_seen(self) -> bool:
        """Journal the VMs seen since their last journaled request; True when written."""
        if not self.unseen:
            return False
        names = tuple(sorted(self.unseen))
        self.write(Seen(names), spread=False)
        self.unseen.difference_update(names)
        return True


__all__ = [
    "FORGET_SECONDS",
    "LIVE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_GROUP",
    "QUIET_SECONDS",
    "SPREAD_SECONDS",
    "WRITE_SECONDS",
    "Replica",
    "ReplicaError",
]
