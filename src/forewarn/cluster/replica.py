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

Once it has committed a write that answers someone (an operation, an approval, a clock
moved), a registered front-end (:meth:`Replica.register`) waits, bounded by
:data:`SPREAD_SECONDS`, until every other live front-end reports it has applied the record,
so that the next response of every front-end shows what was acknowledged.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forewarn.commands import Command, Result, Seen, Tick, Touch, from_record
from forewarn.domain.clock import Clock, ManualClock
from forewarn.domain.ids import JournalEventIds, NewEventId
from forewarn.domain.impact import Pause
from forewarn.domain.platform import Platform
from forewarn.errors import ForewarnError
from forewarn.service import ReplayError
from forewarn.storage.errors import AppendConflictError, StorageError, StoreUnavailableError

if TYPE_CHECKING:
    from forewarn.storage.postgres import PostgresJournal

_LOG = logging.getLogger("forewarn.cluster")

#: How many times a write retries after finding records it had not seen (only writers not
#: taking the namespace lock, such as an older forewarn, can cause that).
MAX_ATTEMPTS = 3
#: After the store failed a VM's first request's write, how long further VM requests are
#: answered without trying: each try on the event loop's thread holds every other request
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


class ReplicaError(StoreUnavailableError):
    """This front-end cannot write now: the store is unreachable, or its copy of the fleet
    is being rebuilt after a write whose commit could not be confirmed."""


class _NotStartedError(ReplicaError):
    """A write failed before it changed anything here (its cause says why)."""


#: Builds a platform holding the fleet as it was created, with the EventId source it uses.
NewPlatform = Callable[[], tuple[Platform, NewEventId]]


@dataclass(slots=True)
class Applied:
    """A platform and how far into the journal it is: the records 1..``head`` applied."""

    platform: Platform
    ids: NewEventId
    head: int = 0
    head_at: datetime | None = None
    #: When each VM's request was last journaled (Touch or Seen), for the idle rule.
    last_seen: dict[str, datetime] = field(default_factory=dict)

    @classmethod
    def fresh(cls, new_platform: NewPlatform) -> Applied:
        platform, ids = new_platform()
        seen = {vm.name: platform.now for vm in platform.vms()}
        return cls(platform, ids, 0, platform.now, seen)

    def apply(self, position: int, record: Mapping[str, Any], clock: Clock | None = None) -> None:
        """Apply record ``position``, the one after :attr:`head`."""
        if position != self.head + 1:
            raise ReplayError(position, record, ValueError(f"expected record {self.head + 1}"))
        try:
            at, command = from_record(record)
            self.apply_command(position, at, command)
        except (ForewarnError, KeyError, TypeError, ValueError) as exc:
            raise ReplayError(position, record, exc) from exc
        if isinstance(clock, ManualClock) and at > clock.now():
            clock.set(at)  # a manual clock moved by another front-end moves here too

    def apply_command(self, position: int, at: datetime, command: Command) -> Result:
        """Apply ``command`` at ``at`` as record ``position``; the head moves only when the
        domain accepted it."""
        if isinstance(self.ids, JournalEventIds):
            self.ids.at_record(position)
        self.platform.advance_to(at)
        result = command.apply(self.platform)
        self.head = position
        self.head_at = at if self.head_at is None else max(self.head_at, at)
        self._note_requests(command, at)
        return result

    def _note_requests(self, command: Command, at: datetime) -> None:
        if isinstance(command, Touch):
            self.last_seen[command.vm] = at
        elif isinstance(command, Seen):
            for name in command.vms:
                self.last_seen[name] = at


class Replica:
    """This front-end's copy of the fleet, kept equal to the shared journal.

    Not thread-safe, like the service it belongs to: every method runs on the event loop's
    thread (``forewarn serve``) or the test's.
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
        self.adopt: Callable[[Platform], None] = lambda platform: None
        self.touch_every = touch_every
        self.applied = Applied.fresh(new_platform)
        self.diverged = False
        #: VMs whose requests wait to be journaled in the next Seen record.
        self.unseen: set[str] = set()
        #: Called after records were applied (the leader wakes on it).
        self.on_change: Callable[[], None] = lambda: None
        self._monotonic = monotonic
        self._quiet_until = 0.0
        #: This front-end's name in the namespace's list of front-ends (the logs show it).
        self.front_end = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"
        #: Whether it is in that list: writers then wait for it, and it for them.
        self.registered = False
        #: Whether it holds the leader lock now (:func:`forewarn.cluster.tasks.lead`): the one
        #: front-end that journals the time and delivers Event Grid's events.
        self.leading = False

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
        applied = self.applied if untouched else Applied.fresh(self._new_platform)
        for position, record in self.journal.records():
            applied.apply(position, record, self.clock)
        self.applied = applied
        self.adopt(applied.platform)
        self.diverged = False
        self.on_change()
        return applied.head

    def take(self, records: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
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
        """Read and apply what others appended (a blocking read: writes and tests only)."""
        return self.take(self.journal.records(after=self.applied.head))

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

    def write(self, command: Command, *, spread: bool = True) -> Result:
        """Apply ``command`` for the whole fleet: journaled, and applied here, or refused
        (domain errors as raised; :class:`ReplicaError` when it cannot be confirmed).

        With ``spread`` (a write someone waits on), it returns once every other live
        front-end applied it too, or after :data:`SPREAD_SECONDS`."""
        for attempt in range(MAX_ATTEMPTS):
            if self.diverged:
                self._recover()
            try:
                result = self._write_once(command)
                if spread:
                    self._spread()
                return result
            except AppendConflictError:
                continue
            except _NotStartedError as exc:
                if attempt == 0:
                    continue  # a connection the server dropped is opened again once
                raise ReplicaError(f"cannot write now: {exc.__cause__}") from exc.__cause__
        raise ReplicaError(
            f"{self.journal.namespace}: other writers kept appending first; try again"
        )

    def _write_once(self, command: Command) -> Result:
        refused: ForewarnError | None = None
        result: Result = ()
        changed = False
        try:
            with self.journal.exclusive() as transaction:
                for position, record in transaction.records(after=self.applied.head):
                    self.applied.apply(position, record, self.clock)
                applied = self.applied
                head_at = applied.head_at or applied.platform.now
                at = max(self.clock.now(), head_at)
                records: list[dict[str, Any]] = []
                due = applied.platform.next_deadline()
                changed = True  # from here on the local platform may be ahead of the journal
                if due is not None and due <= at and not isinstance(command, Tick):
                    # time passing fires deadlines: a record of its own says so, and the
                    # events it creates are numbered after it
                    applied.apply_command(applied.head + 1, at, Tick())
                    records.append(Tick().to_record(at))
                try:
                    result = applied.apply_command(applied.head + 1, at, command)
                    records.append(command.to_record(at))
                except ForewarnError as exc:
                    # The domain refuses before changing anything, but the platform's time
                    # has moved to ``at``: journal that much, or this copy is ahead of it.
                    refused = exc
                    if applied.platform.now > head_at and not records:
                        applied.apply_command(applied.head + 1, at, Tick())
                        records.append(Tick().to_record(at))
                if records:
                    transaction.append_if(applied.head - len(records), records)
                if self.registered:
                    transaction.report_applied(self.front_end, applied.head)
            changed = False
        except AppendConflictError:
            if changed:
                self._diverge("another writer appended first")
            raise
        except StorageError as exc:
            if changed:
                self._diverge(str(exc))
                raise ReplicaError(
                    f"the change could not be confirmed ({exc}); nothing is acknowledged and "
                    "this front-end rebuilds its state from the journal"
                ) from exc
            raise _NotStartedError() from exc
        if refused is not None:
            raise refused
        self.on_change()
        return result

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
            raise ReplicaError(
                f"this front-end is rebuilding its state from the journal, which it cannot "
                f"read now: {exc}"
            ) from exc

    # -- requests from VMs ----------------------------------------------------------------

    def requested(self, vm_name: str) -> Pause | None:
        """A request from ``vm_name`` is being answered: one that turns Scheduled Events on
        is journaled now (so the first-call delay counts from it everywhere); others only
        once every :attr:`touch_every`, batched in the next :class:`Seen` record.

        While this copy is diverged (a write whose commit could not be confirmed, and the
        journal unreadable since), the request waits, held as in a warm-up, rather than be
        shown a change that may never have happened: the Pause to hold it with."""
        if self.diverged:
            return Pause(self.clock.now())  # looked at again by the server in a moment
        platform = self.applied.platform
        if not platform.receiving(vm_name) and platform.pause(vm_name) is None:
            if self._monotonic() < self._quiet_until:
                return None  # the store failed a moment ago: answer without trying again yet
            try:
                self.write(Touch(vm_name), spread=False)
            except ForewarnError as exc:  # answered as things stand; a later request retries
                _LOG.warning("cannot journal %s's first request: %s", vm_name, exc)
                if isinstance(exc, StorageError):
                    self._quiet_until = self._monotonic() + QUIET_SECONDS
                if self.diverged:  # the touch's commit was lost and no rebuild was possible
                    return Pause(self.clock.now())
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
    "QUIET_SECONDS",
    "SPREAD_SECONDS",
    "Applied",
    "NewPlatform",
    "Replica",
    "ReplicaError",
]
