"""The in-process stand-in for a shared journal (what a :class:`~forewarn.cluster.replica.Replica`
uses of :class:`~forewarn.storage.postgres.PostgresJournal`), one for every in-process test
of tests/cluster: records kept in memory, each transaction's append and each wait for the
other front-ends shown, and the server's failures made on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, NamedTuple

from forewarn.cluster.replica import Replica
from forewarn.config.fleet import parse_fleet
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.service import platform_for_fleet
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.memory import MemoryJournal

__all__ = ["Builds", "StandInJournal", "Transaction", "Wait", "commands_of", "replica_on"]


def commands_of(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The commands ``records`` journal, in order: a group record's each in turn."""
    commands: list[Mapping[str, Any]] = []
    for record in records:
        commands.extend(record["commands"] if record["op"] == "group" else [record])
    return commands


class Builds:
    """The platform builder of a fleet (``fleet`` is its YAML), counting the platforms it
    built: a rebuild builds one, and a large fleet's takes time."""

    def __init__(self, fleet: str) -> None:
        self.fleet = fleet
        self.built: list[Platform] = []

    def __call__(self) -> tuple[Platform, NewEventId]:
        ids = EventIdFactory(1)
        platform = platform_for_fleet(
            parse_fleet(self.fleet, "fleet"), DEFAULT_START, timing=DOCUMENTED, ids=ids
        )
        self.built.append(platform)
        return platform, ids


class Wait(NamedTuple):
    """A writer's wait for every other live front-end to apply ``position``."""

    front_end: str
    position: int
    timeout: float
    live_within: float


class Transaction:
    """One transaction of :class:`StandInJournal` (``PostgresJournal.exclusive``'s surface)."""

    def __init__(self, journal: StandInJournal) -> None:
        self._journal = journal

    def records(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        return list(self._journal.records(after))

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        journal = self._journal
        if journal.down is not None:
            raise journal.down
        if journal.lost_commits:
            journal.lost_commits -= 1
            raise StoreUnavailableError("the server went away during the commit")
        for record in journal.others.pop(0) if journal.others else ():
            journal.memory.append(record)  # another writer, not taking the lock, was first
        last = journal.memory.append_if(expected_last, records)
        # the commands each transaction journals (a group record's each in turn)
        journal.appends.append([command["op"] for command in commands_of(records)])
        return last

    def report_applied(self, front_end: str, position: int) -> None:
        self._journal.report_applied(front_end, position)


class StandInJournal:
    """A shared journal in memory, showing what each write did (the ops each transaction
    appended, the waits for the other front-ends, the positions reported applied) and
    failing on demand: a connection dropped as a transaction begins, a commit lost with the
    server, another writer's records first, every append refused (``down``), every read
    refused (``unreadable``), the wait for the others refused (``unreachable``). The other
    front-ends' answers to a wait are the test's: ``lagging`` have not applied it when it
    ends, after ``waited`` seconds of :meth:`monotonic`, the front-end's clock here."""

    #: Whether the last bounded block ran out of time (never here).
    expired = False

    def __init__(
        self, records: Sequence[Mapping[str, Any]] = (), *, namespace: str = "fleet_a"
    ) -> None:
        self.namespace = namespace
        self.memory = MemoryJournal()
        for record in records:
            self.memory.append(record)
        #: The ops of each transaction's append, in commit order.
        self.appends: list[list[str]] = []
        #: Each wait for the other front-ends to apply a write's record.
        self.waits: list[Wait] = []
        #: The positions front-ends reported they applied, and who did.
        self.reports: list[int] = []
        self.reporters: set[str] = set()
        #: How many transactions to come fail to start (a connection the server dropped).
        self.dropped = 0
        #: How many appends to come are lost with the server.
        self.lost_commits = 0
        #: For each append to come: records another writer appends just before it.
        self.others: list[list[dict[str, Any]]] = []
        #: What every append meets while the server refuses writes (None: it does not).
        self.down: StoreUnavailableError | None = None
        #: What every read meets while the server cannot be read (None: it can).
        self.unreadable: StoreUnavailableError | None = None
        #: Run as each transaction begins, with how many began before.
        self.on_begin: Callable[[int], None] = lambda began: None
        self.began = 0
        self.now = 100.0
        self.lagging: tuple[str, ...] = ()
        self.waited = 0.0
        self.unreachable: StoreUnavailableError | None = None

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Calls made in the block are bounded (here, none ever waits)."""
        yield

    def monotonic(self) -> float:
        return self.now

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        if self.unreadable is not None:
            raise self.unreadable
        return self.memory.records(after)

    @contextmanager
    def exclusive(self) -> Iterator[Transaction]:
        began, self.began = self.began, self.began + 1
        if self.dropped:
            self.dropped -= 1
            raise StoreUnavailableError("the server closed the connection")
        self.on_begin(began)
        yield Transaction(self)

    def report_applied(self, front_end: str, position: int) -> None:
        self.reports.append(position)
        self.reporters.add(front_end)

    def forget_front_end(self, front_end: str, *, silent_for: float | None = None) -> None:
        pass

    def wait_applied(
        self, front_end: str, position: int, *, timeout: float, live_within: float
    ) -> tuple[str, ...]:
        self.waits.append(Wait(front_end, position, timeout, live_within))
        self.now += self.waited
        if self.unreachable is not None:
            raise self.unreachable
        return self.lagging

    def waited_for(self) -> list[int]:
        """The positions writers waited for the others to apply, in order."""
        return [wait.position for wait in self.waits]

    def kept(self) -> list[dict[str, Any]]:
        """Every record, in order."""
        return [record for _, record in self.memory.records()]

    def ops(self) -> list[str]:
        """The op of every command journaled, in order (a group record's each in turn)."""
        return [command["op"] for command in commands_of(self.kept())]


def replica_on(
    journal: StandInJournal,
    builds: Callable[[], tuple[Platform, NewEventId]],
    *,
    clock: ManualClock | None = None,
    touch_every: timedelta = timedelta(minutes=10),
    registered: bool = False,
) -> Replica:
    """A front-end's copy of the fleet ``builds`` makes, on ``journal``, whose clock it
    reads for its monotonic time."""
    replica = Replica(
        journal,  # type: ignore[arg-type]  # the surface of PostgresJournal it uses
        ManualClock(DEFAULT_START) if clock is None else clock,
        builds,
        touch_every=touch_every,
        monotonic=journal.monotonic,
    )
    if registered:
        replica.register()
    return replica
