"""The use cases, between the adapters and the domain: the only door adapters go through.

Adapters (the endpoint, the control API, the dashboard, ``forewarn serve``, the pytest plugin,
in-process scenarios) call the public methods of :class:`ScheduledEventsService` and nothing
else: the platform and the clock are private, and every read an adapter needs (the time, the
clock's kind and profile, the next deadline, one VM, one event, the hosts) is a method here.

The catch-up rule: every public method that reads or changes the platform reaches it through
:meth:`ScheduledEventsService._caught_up`, which first applies whatever fell due up to the
clock (:meth:`~ScheduledEventsService.catch_up`), so a state change (an approval, a NotBefore
that passed) is visible in the very next response with no background polling, and no method
can forget it. Only :meth:`~ScheduledEventsService.replay` moves the platform to other times
(the journaled ones). The fault plan is not platform state: the fault methods reach the
platform only to find a VM, through the same door. ``tests/architecture/test_service_door.py``
holds this module and the adapters to both rules.

Every state change is a :class:`~forewarn.commands.Command`: journaled (when a journal is
configured) before the caller is answered or anything reads the platform, so an answer is
only given, and a change only shown, when it will survive a crash, and replayed at start-up;
one the journal cannot record is undone and refused (:mod:`forewarn.writer`,
:mod:`forewarn.cluster.replica`). Encoded documents are cached per VM and api-version
and rebuilt only when the VM's document object changed, which the domain guarantees happens
only when its events changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from forewarn import collector
from forewarn.commands import (
    Approve,
    ClockMoved,
    Command,
    Result,
    ScheduleEvent,
    StartCampaign,
)
from forewarn.domain.clock import Clock, ManualClock, check_time, ensure_utc
from forewarn.domain.errors import InvalidOperationError, UnknownEventError
from forewarn.domain.events import Event
from forewarn.domain.history import EventHistory, Listener
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.platform import CampaignView, EventView, Platform, VmState
from forewarn.domain.vms import Vm
from forewarn.faults import ActiveFault, FaultPlan, FaultRule
from forewarn.storage.errors import StoreUnavailableError
from forewarn.vm_requests import Arrival, EncodedDocument, VmRequestPath

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
    from forewarn.config.fleet import Fleet
    from forewarn.domain.timing import TimingProfile
    from forewarn.registry import Operation
    from forewarn.writer import JournalWriter


#: Every state change applied, at info (``forewarn serve --log-level``).
_OPERATIONS = logging.getLogger("forewarn.operations")


class CommandJournal(Protocol):
    """What the service needs of a store (:mod:`forewarn.storage` provides it)."""

    def append(self, record: Mapping[str, Any]) -> int: ...

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]: ...

    def ping(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ClockStatus:
    """The platform's time and what drives it, as the control API and the dashboard show it."""

    now: datetime
    #: The clock's class: ``ManualClock``, ``ScaledClock`` or ``SystemClock``.
    kind: str
    #: The timing profile's name (``documented``, ``fast``...).
    profile: str
    #: When the next lifecycle step is due, or None when nothing is pending.
    next_deadline: datetime | None


@dataclass(frozen=True, slots=True)
class Created:
    """An event a call created, and its live view now: None once it is over."""

    event: Event
    view: EventView | None


@dataclass(frozen=True, slots=True)
class CampaignStarted:
    """A campaign just started (None when nothing was left after its first step) and the
    events of that first step."""

    campaign: CampaignView | None
    events: tuple[Created, ...]


@dataclass(frozen=True, slots=True)
class HostView:
    """A host and the names of the VMs on it, sorted."""

    name: str
    vms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShownVm:
    """A VM's state and the DocumentIncarnation it is shown, for the dashboard."""

    state: VmState
    incarnation: int


@dataclass(frozen=True, slots=True)
class Overview:
    """Everything the dashboard shows but the timelines, read at one instant."""

    clock: ClockStatus
    vm_count: int
    vms: tuple[ShownVm, ...]
    events: tuple[EventView, ...]
    campaigns: tuple[CampaignView, ...]
    faults: tuple[ActiveFault, ...]


class ScheduledEventsService(VmRequestPath):
    """One platform on one clock, and the operations adapters may perform on it."""

    def __init__(
        self,
        platform: Platform,
        clock: Clock,
        *,
        writer: JournalWriter | None = None,
        replica: Replica | None = None,
    ) -> None:
        self._platform = platform
        self._clock = clock
        # Faults injected in front of the VM-facing endpoint: not platform state, never
        # journaled (forewarn.faults).
        self._faults = FaultPlan()
        # The request path's caches (forewarn.vm_requests declares them)
        self._encoded = {}
        self._known = {}
        #: Set when this process alone writes a journal (forewarn.writer): the platform is
        #: then the writer's, rebuilt from the journal when a change cannot be recorded.
        self._writer = writer
        # Told of every change of a published event (on_published), on every platform served
        self._listeners: list[Listener] = []
        self._listened: EventHistory | None = None
        #: Set when front-ends share the journal (forewarn.cluster): the platform is then
        #: the replica's, moved by journal records alone.
        self._replica = replica
        durable = writer or replica
        #: The journal, when there is one.
        self.journal: CommandJournal | None = None if durable is None else durable.journal
        if durable is not None:
            durable.adopt = self._adopt
            self._adopt(durable.platform)

    def catch_up(self) -> datetime:
        """Bring the platform up to the clock; the clock's time. With a shared journal only
        records move the platform (the leader journals what falls due), so this only reads the
        clock."""
        self._caught_up()
        return self._clock.now()

    def _caught_up(self) -> Platform:
        """The platform, brought up to the clock: the one way public methods reach it.
        Refused (:class:`~forewarn.storage.StoreUnavailableError`) while it may show a change
        its journal does not hold (forewarn.writer, forewarn.cluster.replica)."""
        platform = self._platform
        if self._replica is None:
            writer = self._writer
            if writer is not None and writer.diverged:
                writer.recover()
                platform = self._platform
            platform.advance_to(self._clock.now())
        elif self._replica.diverged:
            raise self._replica.unavailable()
        return platform

    def _adopt(self, platform: Platform) -> None:
        """Serve ``platform`` from now on (rebuilt from the journal). What was kept of the
        last one's answers is dropped, and its count of changes goes on from the last one's,
        so that nothing kept under a count (the socket server's repeated answers) can match
        the new platform by chance."""
        platform.count_changes_after(self._platform.changes)
        self._platform = platform
        self._encoded.clear()
        self._known.clear()
        if platform.history is not self._listened:  # a replica's rebuild may adopt it again
            self._listened = platform.history
            for listener in self._listeners:
                platform.history.listen(listener)

    def check_store(self) -> None:
        """Raise :class:`~forewarn.storage.errors.StoreUnavailableError` unless the journal can
        be used now (``/healthz``); without a journal there is nothing to reach. Reads no
        platform state, so a worker thread may call it while the event loop serves."""
        if self.journal is not None:
            self.journal.ping()

    def write_refused(self) -> str | None:
        """Why a change would be refused now (``/readyz``): the store refused the last one a
        moment ago, or this copy is being rebuilt from the journal; None when it would be
        tried. Reads no platform state."""
        refusing = (
            self._replica.refusing()
            if self._replica is not None
            else self._writer is not None and self._writer.refusing_now()
        )
        return "the store refused a change a moment ago" if refusing else None

    def close(self) -> None:
        """Close the journal, if there is one (``forewarn serve`` on its way out)."""
        if self.journal is not None:
            self.journal.close()

    # -- durability ------------------------------------------------------------------------

    def replay(self) -> int:
        """Rebuild the platform from the journal; how many records it holds.

        A manual clock is set to the last journaled time, so pending NotBefore times still
        hold; real clocks simply go on, and whatever fell due meanwhile happens on catch-up.
        """
        if self._replica is not None:
            # No one is idle by this front-end's absence: the others journaled requests.
            return self._replica.rebuild()
        if self._writer is None:
            return 0
        return self._writer.rebuild()

    def execute(self, command: Command) -> Result:
        """Apply ``command`` now and journal it, before anything can see it; a domain error
        or a change the journal cannot record (:class:`~forewarn.writer.NotJournaledError`,
        :class:`~forewarn.cluster.replica.ReplicaError`) leaves no trace."""
        if self._replica is not None:
            result = self._replica.write(command)
            self._log(command, self._replica.applied.head_at or self._replica.platform.now)
            return result
        platform = self._caught_up()
        now = platform.now
        if self._writer is None:
            result = command.apply(platform)
        else:
            result = self._writer.write(command, now)
        self._log(command, now)
        return result

    async def execute_async(self, command: Command) -> Result:
        """:meth:`execute` on the event loop's thread (the control API): with a shared
        journal, the loop does not wait on PostgreSQL while it is recorded
        (:meth:`~forewarn.cluster.replica.Replica.write_async`); the same otherwise. It
        returns once no write is waiting for its commit, so what the caller reads next is
        what the journal holds."""
        replica = self._replica
        if replica is None:
            return self.execute(command)
        result = await replica.write_async(command)
        self._log(command, replica.applied.head_at or replica.platform.now)
        await self._committed()
        return result

    async def _committed(self) -> None:
        """Wait (asynchronously) until no write applied to the platform waits for its
        commit's answer: each such wait is bounded by the write's own bound."""
        if self._replica is not None:
            await self._replica.committed()

    @staticmethod
    def _log(command: Command, at: datetime) -> None:
        if _OPERATIONS.isEnabledFor(logging.INFO):
            record = command.to_record(at)
            fields = {k: v for k, v in record.items() if k not in ("op", "at")}
            _OPERATIONS.info(str(record["op"]), extra={"fields": fields})

    def execute_soon(self, command: Command, done: Callable[[Result | Exception], None]) -> None:
        """:meth:`execute`, then ``done`` with its result or what refused it. With a shared
        journal (on the event loop's thread), the writes asked for in one turn of the loop
        (VMs' approvals, the control API's operations, whoever asked) are journaled together
        (group commit), each told once its transaction committed, so a burst of writes
        costs a transaction, not one each; otherwise now."""
        replica = self._replica
        if replica is None:
            try:
                result = self.execute(command)
            except Exception as exc:
                done(exc)
                return
            done(result)
            return

        def written(outcome: Result | Exception) -> None:
            if not isinstance(outcome, Exception):
                self._log(command, replica.applied.head_at or replica.platform.now)
            done(outcome)

        replica.write_soon(command, written)

    async def execute_grouped(self, command: Command) -> Result:
        """:meth:`execute` from a coroutine on the event loop (the control API's handlers):
        grouped with the other writes asked for in the same turn (:meth:`execute_soon`), so
        concurrent operations share one transaction, which waits on PostgreSQL off the loop
        (:meth:`~forewarn.cluster.replica.Replica.write_soon`). Raises what refused it. It
        returns once no write is waiting for its commit (the turn's next group may be applied
        by then), so what the caller reads next is what the journal holds."""
        answered: asyncio.Future[Result | Exception] = asyncio.get_running_loop().create_future()

        def done(outcome: Result | Exception) -> None:
            if not answered.done():  # its caller may have gone (a client that hung up)
                answered.set_result(outcome)

        self.execute_soon(command, done)
        outcome = await answered
        await self._committed()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def perform(
        self, operation: Operation, target: str, arguments: Mapping[str, Any] | None = None
    ) -> Result:
        """Run a :mod:`forewarn.registry` operation on the VM, scale set or host ``target``."""
        return self.execute(self.operation_command(operation, target, arguments))

    def operation_command(
        self, operation: Operation, target: str, arguments: Mapping[str, Any] | None = None
    ) -> Command:
        """The command that runs ``operation`` on ``target``, once the operation's own check
        of the platform as it stands has passed (refused as :meth:`perform` refuses)."""
        if operation.check is not None:
            operation.check(self._caught_up(), target)
        return operation.command(target, **(arguments or {}))

    def create_event(self, command: ScheduleEvent) -> Created:
        """Any event, bypassing the operations' rules except the minimum notice."""
        (created,) = self.created(self.execute(command))
        return created

    def created(self, events: Result) -> tuple[Created, ...]:
        """Each of ``events`` (what a command created) with its live view now (the control
        API's answers): looked up one by one, not by listing every live event, so an answer
        costs the same in a fleet with a hundred thousand events."""
        platform = self._caught_up()
        return tuple(Created(event, _live_view(platform, event.event_id)) for event in events)

    # -- approvals -------------------------------------------------------------------------

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        self.execute(Approve(vm_name, tuple(event_ids)))

    def approve_soon(
        self,
        vm_name: str,
        event_ids: Iterable[str],
        done: Callable[[Exception | None], None],
    ) -> None:
        """:meth:`approve`, then ``done`` with None or what refused it, grouped with the
        other writes of the turn as :meth:`execute_soon` groups them."""

        def written(outcome: Result | Exception) -> None:
            done(outcome if isinstance(outcome, Exception) else None)

        self.execute_soon(Approve(vm_name, tuple(event_ids)), written)

    def approval_for(self, vm_name: str, event_ids: Iterable[str] | None) -> Approve:
        """The approval made on ``vm_name``'s behalf (the control plane), of every event its
        document shows when ``event_ids`` is None. A VM that is down cannot ask, so neither
        can anyone on its behalf."""
        platform = self._caught_up()
        if not platform.vm_state(vm_name).reachable:
            raise InvalidOperationError(
                f"{vm_name} is down (an impact is under way) and cannot ask"
            )
        if event_ids is None:
            ids = tuple(event.event_id for event in platform.document(vm_name).events)
        else:
            ids = tuple(event_ids)
        return Approve(vm_name, ids)

    # -- beyond IMDS: Event Grid and Resource Graph -----------------------------------------

    def published(self) -> EventHistory:
        """What published events went through, up to the clock (Resource Graph's table)."""
        return self._caught_up().history

    def on_published(self, listener: Listener) -> None:
        """Tell ``listener`` of every change of a published event from now on: register it
        before :meth:`replay`, which makes the journal's changes again, numbered alike."""
        self._listeners.append(listener)
        self._platform.history.listen(listener)
        self._listened = self._platform.history

    # -- the control plane -----------------------------------------------------------------

    def now(self) -> datetime:
        """The platform's time, everything due by then applied (a front-end of a shared
        journal: the clock's, :meth:`_answered_at`); the clock's while the platform cannot
        be read (every answer needs a Date, refusals included)."""
        try:
            return self._answered_at(self._caught_up())
        except StoreUnavailableError:
            return self._clock.now()

    def clock_status(self) -> ClockStatus:
        platform = self._caught_up()
        return ClockStatus(
            now=self._answered_at(platform),
            kind=type(self._clock).__name__,
            profile=platform.timing.name,
            next_deadline=platform.next_deadline(),
        )

    def events(self) -> tuple[EventView, ...]:
        return self._caught_up().events()

    def event(self, event_id: str) -> EventView:
        """One live event; UnknownEventError once it is over (or never was)."""
        return self._caught_up().event(event_id)

    def vms(self) -> tuple[Vm, ...]:
        return self._caught_up().vms()

    def vm(self, name: str) -> Vm:
        """The VM ``name``; UnknownVmError when there is none."""
        return self._caught_up().vm(name)

    def vm_state(self, name: str) -> VmState:
        return self._caught_up().vm_state(name)

    def vm_states(self) -> tuple[VmState, ...]:
        platform = self._caught_up()
        return tuple(platform.vm_state(vm.name) for vm in platform.vms())

    def hosts(self) -> tuple[HostView, ...]:
        """Every host holding a VM, by name, each with its VMs."""
        by_host: dict[str, list[str]] = {}
        for vm in self._caught_up().vms():
            by_host.setdefault(vm.host, []).append(vm.name)
        return tuple(HostView(host, tuple(sorted(vms))) for host, vms in sorted(by_host.items()))

    def campaigns(self) -> tuple[CampaignView, ...]:
        return self._caught_up().campaigns()

    def start_campaign(
        self,
        vm_names: tuple[str, ...] | None,
        event_type: str,
        kinds: tuple[str, ...] | None = None,
    ) -> CampaignStarted:
        """Start a maintenance campaign; the campaign (None when it had nothing left to do
        after its first step) and the events of that step."""
        before = {view.campaign_id for view in self.campaigns()}
        created = self.created(self.execute(StartCampaign(vm_names, event_type, kinds)))
        return self._started(before, created)

    async def start_campaign_async(
        self,
        vm_names: tuple[str, ...] | None,
        event_type: str,
        kinds: tuple[str, ...] | None = None,
    ) -> CampaignStarted:
        """:meth:`start_campaign` on the event loop's thread (:meth:`execute_async`): a write
        of its own, not grouped with others, as the campaign it started is told apart as the
        one that was not there before."""
        before = {view.campaign_id for view in self.campaigns()}
        command = StartCampaign(vm_names, event_type, kinds)
        return self._started(before, self.created(await self.execute_async(command)))

    def _started(self, before: set[int], created: tuple[Created, ...]) -> CampaignStarted:
        started = [view for view in self.campaigns() if view.campaign_id not in before]
        return CampaignStarted(started[0] if started else None, created)

    def overview(self, shown_vms: int, moment: float) -> Overview:
        """The clock, the first ``shown_vms`` VMs with their incarnations, the events, the
        campaigns and the faults in force at ``moment`` (:func:`time.monotonic`)."""
        platform = self._caught_up()
        vms = platform.vms()
        return Overview(
            clock=self.clock_status(),
            vm_count=len(vms),
            vms=tuple(
                ShownVm(platform.vm_state(vm.name), platform.document(vm.name).incarnation)
                for vm in vms[:shown_vms]
            ),
            events=platform.events(),
            campaigns=platform.campaigns(),
            faults=self._faults.faults(moment),
        )

    def advance_clock(self, delta: timedelta) -> ClockStatus:
        """Move a manual clock; other clocks follow real time and refuse."""
        clock = self._manual_clock()
        if self._replica is not None:  # from the fleet's time, not a lagging follower's
            self._replica.catch_up()
        return self._move_clock(clock, self._advanced(clock, delta))

    async def advance_clock_async(self, delta: timedelta) -> ClockStatus:
        """:meth:`advance_clock` on the event loop's thread: with a shared journal, its
        read of the others' records and its record are made off the loop."""
        clock = self._manual_clock()
        replica = self._replica
        if replica is None:
            return self.advance_clock(delta)
        await replica.catch_up_async()
        moment = self._advanced(clock, delta)
        await replica.write_async(ClockMoved(), at=moment)
        await self._committed()
        return self._moved(clock, moment)

    @staticmethod
    def _advanced(clock: ManualClock, delta: timedelta) -> datetime:
        try:
            return clock.advanced_by(delta)
        except ValueError as exc:
            raise InvalidOperationError(f"{exc}: it is {clock.now().isoformat()}") from None

    def set_clock(self, moment: datetime) -> ClockStatus:
        """Set a manual clock to ``moment``, which must not be in its past (nor past
        :data:`~forewarn.domain.clock.LATEST`)."""
        clock = self._manual_clock()
        return self._move_clock(clock, self._settable(clock, moment))

    async def set_clock_async(self, moment: datetime) -> ClockStatus:
        """:meth:`set_clock` on the event loop's thread: with a shared journal, its record
        is made off the loop."""
        clock = self._manual_clock()
        replica = self._replica
        if replica is None:
            return self.set_clock(moment)
        moment = self._settable(clock, moment)
        await replica.write_async(ClockMoved(), at=moment)
        await self._committed()
        return self._moved(clock, moment)

    @staticmethod
    def _settable(clock: ManualClock, moment: datetime) -> datetime:
        try:
            moment = check_time(ensure_utc(moment), "the clock cannot be set to")
            if moment < clock.now():
                raise ValueError("a clock only moves forward")
        except ValueError as exc:
            raise InvalidOperationError(f"{exc}: it is {clock.now().isoformat()}") from None
        return moment

    def _manual_clock(self) -> ManualClock:
        if not isinstance(self._clock, ManualClock):
            raise InvalidOperationError("only a manual clock can be moved (serve --clock manual)")
        return self._clock

    def _move_clock(self, clock: ManualClock, moment: datetime) -> ClockStatus:
        """Journal the clock's move to ``moment``, then make it: a move the journal cannot
        record is not made (replay needs it to know how far time had gone)."""
        if self._replica is not None:
            self._replica.write(ClockMoved(), at=moment)
        elif self._writer is not None:
            self._caught_up()
            self._writer.write(ClockMoved(), moment)
        return self._moved(clock, moment)

    def _moved(self, clock: ManualClock, moment: datetime) -> ClockStatus:
        """The clock's move is journaled: make it."""
        if moment > clock.now():  # (another front-end's record may have moved it further)
            clock.set(moment)
        self._log(ClockMoved(), moment)
        return self.clock_status()

    # -- faults in front of the endpoint (not platform state, never journaled) ---------------

    def add_fault(self, rule: FaultRule, moment: float) -> ActiveFault:
        """Inject ``rule`` from ``moment`` (:func:`time.monotonic`); a VM it names must exist."""
        if rule.vm is not None:
            self.vm(rule.vm)
        return self._faults.add(rule, moment)

    def faults(self, moment: float) -> tuple[ActiveFault, ...]:
        """The faults in force at ``moment``, oldest (and first to apply) first."""
        return self._faults.faults(moment)

    def clear_faults(self, fault_id: int | None = None, *, vm: str | None = None) -> int:
        """Clear one fault by id, those of ``vm``, or all; how many were cleared."""
        return self._faults.clear(fault_id, vm=vm)

    def fault_for(
        self, local_address: str, peer_address: str, monotonic: Callable[[], float]
    ) -> FaultRule | None:
        """The fault a request arriving at ``local_address`` meets now (by ``monotonic``), if
        any. Requests no VM answers for meet none: the endpoint refuses them as it always
        does. The clock is read only when a fault is set: this is on every request's path."""
        if not self._faults.active:
            return None
        try:
            vm = self.resolve_vm(local_address, peer_address)
        except StoreUnavailableError:  # the endpoint refuses the request with 503 itself
            return None
        if vm is None:
            return None
        return self._faults.pick(vm.name, monotonic())


def _live_view(platform: Platform, event_id: str) -> EventView | None:
    """The event's live view, or None once it is over."""
    try:
        return platform.event(event_id)
    except UnknownEventError:
        return None


def platform_for_fleet(
    fleet: Fleet,
    now: datetime,
    *,
    timing: TimingProfile,
    seed: int = 0,
    ids: NewEventId | None = None,
) -> Platform:
    """A fresh platform holding ``fleet`` at ``now``; its EventIds come from ``ids``, or are
    seeded by ``seed``."""
    platform = Platform(now, timing=timing, new_event_id=ids or EventIdFactory(seed))
    with collector.paused():  # a record per VM, all long-lived: nothing for it to find
        for scale_set in fleet.scale_sets:
            platform.add_scale_set(scale_set)
        for vm in fleet.vms:
            platform.add_vm(vm, receiving=vm.name not in fleet.not_receiving)
    return platform


def service_for_fleet(
    fleet: Fleet, clock: Clock, *, timing: TimingProfile, seed: int = 0
) -> ScheduledEventsService:
    """A fresh platform holding ``fleet``, on ``clock``, with no journal (tests, in-process
    scenario runs and the pytest plugin; ``forewarn serve`` opens its state in server.state)."""
    return ScheduledEventsService(
        platform_for_fleet(fleet, clock.now(), timing=timing, seed=seed), clock
    )


__all__ = [
    "Arrival",
    "CampaignStarted",
    "ClockStatus",
    "CommandJournal",
    "Created",
    "EncodedDocument",
    "HostView",
    "Overview",
    "ScheduledEventsService",
    "ShownVm",
    "platform_for_fleet",
    "service_for_fleet",
]
