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

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from forewarn import collector
from forewarn.commands import (
    Approve,
    ClockMoved,
    Command,
    Result,
    ScheduleEvent,
    StartCampaign,
    Touch,
)
from forewarn.domain.api_versions import ApiVersion
from forewarn.domain.clock import Clock, ManualClock, check_time, ensure_utc
from forewarn.domain.documents import Document
from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.events import Event
from forewarn.domain.history import EventHistory, Listener
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.impact import Pause
from forewarn.domain.platform import CampaignView, Deletion, EventView, Platform, VmState
from forewarn.domain.vms import Vm
from forewarn.faults import ActiveFault, FaultPlan, FaultRule
from forewarn.storage.errors import StoreUnavailableError
from forewarn.wire.documents import encode_document

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
    from forewarn.config.fleet import Fleet
    from forewarn.domain.timing import TimingProfile
    from forewarn.registry import Operation
    from forewarn.writer import JournalWriter


#: Every state change applied, at info (``forewarn serve --log-level``).
_OPERATIONS = logging.getLogger("forewarn.operations")


@dataclass(frozen=True, slots=True)
class EncodedDocument:
    """A document's bytes and its ETag, the incarnation (SPEC 1.4: the
    scale sets' terminate-notification page calls DocumentIncarnation "an ETag")."""

    body: bytes
    tag: str
    etag: bytes
    #: The document encoded: a VM's cached encoding holds while it is shown this very object.
    document: Document

    @classmethod
    def of(cls, document: Document, version: ApiVersion) -> EncodedDocument:
        """The encoding of ``document``; equal documents (the empty one every VM starts
        with, the same events shown across a set) share one body and one tag."""
        shared = _shared_encoding(document, version)
        if shared.document is document:
            return shared
        return cls(shared.body, shared.tag, shared.etag, document)


def _encoding(
    document: Document, version: ApiVersion, cached: EncodedDocument | None
) -> EncodedDocument:
    """``document`` encoded as ``version`` shows it: ``cached`` while it encodes this very
    document (a VM's document is replaced, never changed, when its events change)."""
    if cached is not None and cached.document is document:
        return cached
    return EncodedDocument.of(document, version)


#: Distinct documents whose encodings are shared between the VMs shown them.
_SHARED_ENCODINGS = 1024
#: Those encodings by api-version, incarnation (as that version reads it) and the identities
#: of the events shown: an event is one object in every document showing it, so equal
#: documents of VMs shown the same events have equal keys, made without hashing the events
#: field by field (which cost more than encoding a one-event document). An entry holds its
#: document, so no identity in a kept key can be reused by another object. Emptied when full,
#: at once rather than entry by entry: a campaign's documents, each shown to one VM, pass
#: through it, and a shared document is encoded again at most once per so many.
_shared: dict[tuple[str, int, tuple[int, ...]], EncodedDocument] = {}


def _shared_encoding(document: Document, version: ApiVersion) -> EncodedDocument:
    incarnation = document.incarnation_for(version.event_types)
    key = (version.name, incarnation, tuple(map(id, document.events)))
    shared = _shared.get(key)
    if shared is None:
        if len(_shared) >= _SHARED_ENCODINGS:
            _shared.clear()
        tag = str(incarnation)
        shared = _shared[key] = EncodedDocument(
            encode_document(document, version), tag, b'"%s"' % tag.encode(), document
        )
    return shared


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


class ScheduledEventsService:
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
        # api-version name -> VM name -> its document's encoding
        self._encoded: dict[str, dict[str, EncodedDocument]] = {}
        # The address a request arrived at -> what it found there (request_from)
        self._known: dict[str, _Known] = {}
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

    @staticmethod
    def _log(command: Command, at: datetime) -> None:
        if _OPERATIONS.isEnabledFor(logging.INFO):
            record = command.to_record(at)
            fields = {k: v for k, v in record.items() if k not in ("op", "at")}
            _OPERATIONS.info(str(record["op"]), extra={"fields": fields})

    def perform(
        self, operation: Operation, target: str, arguments: Mapping[str, Any] | None = None
    ) -> Result:
        """Run a :mod:`forewarn.registry` operation on the VM, scale set or host ``target``."""
        if operation.check is not None:
            operation.check(self._caught_up(), target)
        return self.execute(operation.command(target, **(arguments or {})))

    def operate(
        self, operation: Operation, target: str, arguments: Mapping[str, Any] | None = None
    ) -> tuple[Created, ...]:
        """:meth:`perform`, answered with each created event's live view (the control API)."""
        return self._created(self.perform(operation, target, arguments))

    def create_event(self, command: ScheduleEvent) -> Created:
        """Any event, bypassing the operations' rules except the minimum notice."""
        (created,) = self._created(self.execute(command))
        return created

    def _created(self, events: Result) -> tuple[Created, ...]:
        live = {view.event.event_id: view for view in self._caught_up().events()}
        return tuple(Created(event, live.get(event.event_id)) for event in events)

    # -- the VM-facing endpoint ------------------------------------------------------------

    def resolve_vm(self, local_address: str, peer_address: str) -> Vm | None:
        """The calling VM: by the address the request arrived at, then the one it came from.

        A fleet of one VM answers on any address, which is the zero-configuration default.
        """
        return _vm_calling(self._caught_up(), local_address, peer_address)

    def vm_request(self, vm_name: str) -> Pause | None:
        """A request from ``vm_name`` arrived: it counts as a request (turning Scheduled Events
        on when it is the first), unless the VM is down (reboot, freeze, deleted) when nothing
        inside it could be asking. None when it can be answered now; otherwise why and until
        when not (the first-call delay included)."""
        return self._requested(self._caught_up(), vm_name)

    def request_from(
        self,
        local_address: str,
        peer_address: str,
        version: ApiVersion | None = None,
        *,
        for_events: bool = True,
    ) -> Arrival | None:
        """:meth:`resolve_vm` then :meth:`vm_request` on one catch-up, as the endpoint asks
        for every request: the calling VM, why it cannot be answered now if it cannot, the
        platform time it arrived at (the answer's Date) and, for a request of Scheduled
        Events answered now, the document as ``version`` shows it after this request; None
        when no VM answers at those addresses and none was deleted there. A request in the
        name of a deleted VM arrives with a pause that never ends (:attr:`Pause.gone`),
        naming the event that deleted it: nothing answers it.

        ``for_events`` False is a request for instance metadata or the versions: it does not
        count as a request for events (:meth:`Platform.arrive`), so it neither turns
        Scheduled Events on nor keeps it on, and waits for no first-call delay.

        What a VM's request found is kept by the address it arrived at while the VM was
        answerable (:class:`_Known`): while the platform has not changed since
        (:attr:`Platform.changes`), its next request finds the same VM, no pause and the
        same document, and only counts as a request. Most of a fleet's polls are those.
        """
        platform = self._caught_up()
        if not for_events:  # rare beside the polls: looked up afresh, nothing kept
            calling = _vm_calling(platform, local_address, peer_address)
            if calling is None:
                return _gone(platform, local_address, peer_address)
            pause = self._requested(platform, calling.name, for_events=False)
            return Arrival(calling, pause, platform.now, None)
        known = self._known.get(local_address)
        if known is not None and known.version is version:
            vm = known.vm
            if self._again(platform, vm.name, known.changes):
                return Arrival(vm, None, platform.now, known.document, known.changes)
        calling = _vm_calling(platform, local_address, peer_address)
        if calling is None:
            return _gone(platform, local_address, peer_address)
        pause = self._requested(platform, calling.name)
        address = calling.address
        kept = pause is None and address == local_address and self._replica is None
        if version is None or pause is not None:  # nothing to show, or nobody answered now
            document = None
        elif kept and (known is None or known.version is version):
            # Its encoding kept with the address alone, not in the table by VM name as well:
            # one lookup in a table of the whole fleet the less for every changed VM's poll.
            cached = None if known is None else known.document
            document = _encoding(platform.document(calling.name), version, cached)
        else:
            document = self._encoded_of(platform, calling.name, version)
        if kept and address is not None:  # (it is: equal to the local address)
            changes = platform.changes
            if known is None:  # kept under the VM's own address string, not the caller's
                self._known[address] = _Known(changes, calling, version, document)
            else:  # out of date: brought up to date in place, as a campaign does to each
                known.changes, known.vm = changes, calling
                known.version, known.document = version, document
            return Arrival(calling, None, platform.now, document, changes)
        return Arrival(calling, pause, platform.now, document)

    def request_again(self, vm_name: str, changes: int) -> datetime | None:
        """A request from ``vm_name`` repeating one whose arrival holds while the platform
        reads ``changes`` (:attr:`Arrival.repeats_under`), as a VM's every poll on a kept
        connection repeats its last: counted as :meth:`request_from` counts it, and the
        platform time it arrived at when that arrival holds still. None when the platform
        has changed since, or this very request changed it (the VM back after the idle
        period): :meth:`request_from` then says what it finds."""
        platform = self._caught_up()
        return platform.now if self._again(platform, vm_name, changes) else None

    def _again(self, platform: Platform, vm_name: str, changes: int) -> bool:
        """The rule of :meth:`request_again` on a platform caught up already: True when the
        request is counted and what it found holds still."""
        if platform.changes != changes:
            return False
        # Not down, so the request counts (Platform.arrive's rule): only a touch that turned
        # Scheduled Events on (a VM back after the idle period) changes anything.
        if platform.touch(vm_name):
            self._journal_touch(platform, vm_name)
            return False
        return True

    def _journal_touch(self, platform: Platform, vm_name: str) -> None:
        """A request from ``vm_name`` turned Scheduled Events on: the only requests that
        change state, so the only ones journaled (or undone, and refused, when that fails)."""
        if self._writer is not None:
            self._writer.took(Touch(vm_name), platform.now)

    def _requested(
        self, platform: Platform, vm_name: str, *, for_events: bool = True
    ) -> Pause | None:
        if self._replica is not None:
            # Whether the request counts is the same rule (Pause.warming_up, and only a
            # request for events), but the replica journals the touch, as every front-end
            # must apply it.
            pause = platform.pause(vm_name)
            if pause is not None and not pause.warming_up:
                return pause
            if not for_events:
                return None
            return self._replica.requested(vm_name) or platform.pause(vm_name)
        writer = self._writer
        if (
            writer is not None
            and for_events
            and writer.refusing
            and writer.quiet()
            and _turns_on(platform, vm_name)
        ):
            raise writer.refusal()  # it would change state, which cannot be recorded now
        pause, turned_on = platform.arrive(vm_name, for_events=for_events)
        if turned_on:
            self._journal_touch(platform, vm_name)
        return pause

    def impacts(self) -> dict[str, Pause]:
        """The VMs under an impact now (for impact hooks)."""
        return self._caught_up().impacts()

    def deletions_after(self, number: int) -> tuple[Deletion, ...]:
        """The VMs deleted after the ``number``-th deletion and not added again, in order
        (for impact hooks, which stop a deleted VM's software)."""
        return self._caught_up().deletions_after(number)

    def document_bytes(self, vm_name: str, version: ApiVersion) -> bytes:
        return self.encoded_document(vm_name, version).body

    def encoded_document(self, vm_name: str, version: ApiVersion) -> EncodedDocument:
        """``vm_name``'s document as ``version`` shows it, with its tag; cached until the
        VM's events change."""
        return self._encoded_of(self._caught_up(), vm_name, version)

    def _encoded_of(self, platform: Platform, vm_name: str, version: ApiVersion) -> EncodedDocument:
        """The encoding of ``vm_name``'s document, kept by VM name: for the polls not kept
        by address (:class:`_Known`) and the control plane's readers."""
        document = platform.document(vm_name)
        encodings = self._encoded.get(version.name)
        if encodings is None:
            encodings = self._encoded[version.name] = {}
        encoded = encodings[vm_name] = _encoding(document, version, encodings.get(vm_name))
        return encoded

    def document(self, vm_name: str) -> Document:
        return self._caught_up().document(vm_name)

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        self.execute(Approve(vm_name, tuple(event_ids)))

    def approve_soon(
        self,
        vm_name: str,
        event_ids: Iterable[str],
        done: Callable[[Exception | None], None],
    ) -> None:
        """:meth:`approve`, then ``done`` with None or what refused it. With a shared journal
        (on the event loop's thread), the approvals asked for in one turn of the loop are
        journaled in one transaction (group commit), each told once it committed; otherwise
        now."""
        command = Approve(vm_name, tuple(event_ids))
        replica = self._replica
        if replica is None:
            try:
                self.execute(command)
            except Exception as exc:
                done(exc)
                return
            done(None)
            return

        def written(outcome: Result | Exception) -> None:
            if isinstance(outcome, Exception):
                done(outcome)
                return
            self._log(command, replica.applied.head_at or replica.platform.now)
            done(None)

        replica.write_soon(command, written)

    def approve_for(self, vm_name: str, event_ids: Iterable[str] | None) -> tuple[str, ...]:
        """Approve on ``vm_name``'s behalf (the control plane), every event its document shows
        when ``event_ids`` is None; the ids approved. A VM that is down cannot ask, so neither
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
        self.execute(Approve(vm_name, ids))
        return ids

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
        """The platform's time, everything due by then applied; the clock's while the
        platform cannot be read (every answer needs a Date, refusals included)."""
        try:
            return self._caught_up().now
        except StoreUnavailableError:
            return self._clock.now()

    def clock_status(self) -> ClockStatus:
        platform = self._caught_up()
        return ClockStatus(
            now=platform.now,
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
        created = self._created(self.execute(StartCampaign(vm_names, event_type, kinds)))
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
        try:
            moment = clock.advanced_by(delta)
        except ValueError as exc:
            raise InvalidOperationError(f"{exc}: it is {clock.now().isoformat()}") from None
        return self._move_clock(clock, moment)

    def set_clock(self, moment: datetime) -> ClockStatus:
        """Set a manual clock to ``moment``, which must not be in its past (nor past
        :data:`~forewarn.domain.clock.LATEST`)."""
        clock = self._manual_clock()
        try:
            moment = check_time(ensure_utc(moment), "the clock cannot be set to")
            if moment < clock.now():
                raise ValueError("a clock only moves forward")
        except ValueError as exc:
            raise InvalidOperationError(f"{exc}: it is {clock.now().isoformat()}") from None
        return self._move_clock(clock, moment)

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


class Arrival(NamedTuple):
    """A VM's request as the platform took it: who called, why it cannot be answered now
    (None when it can), and when, so one reading of the clock serves the whole request."""

    vm: Vm
    pause: Pause | None
    at: datetime
    #: For a request of Scheduled Events answered now, the document it is answered with.
    document: EncodedDocument | None
    #: The platform's count of changes (:attr:`Platform.changes`) while which the same
    #: request from the same address finds all of this again and only counts as a request
    #: (:meth:`ScheduledEventsService.request_again`); None when it may find otherwise.
    repeats_under: int | None = None


class _Known:
    """What a VM's request found at the address it arrived at, while the platform had
    changed ``changes`` times: the VM, answerable, and its document as ``version`` shows it."""

    __slots__ = ("changes", "document", "version", "vm")

    def __init__(
        self, changes: int, vm: Vm, version: ApiVersion | None, document: EncodedDocument | None
    ) -> None:
        self.changes = changes
        self.vm = vm
        self.version = version
        self.document = document


def _turns_on(platform: Platform, vm_name: str) -> bool:
    """Whether a request from ``vm_name`` now would turn Scheduled Events on
    (:meth:`Platform.arrive`'s rule, read without taking the request): off or idle, and up."""
    return not platform.receiving(vm_name) and platform.pause(vm_name) is None


def _gone(platform: Platform, local_address: str, peer_address: str) -> Arrival | None:
    """The arrival of a request in the name of a VM deleted since, or None when no VM ever
    answered there (:meth:`Platform.deleted_calling`)."""
    deletion = platform.deleted_calling(local_address, peer_address)
    if deletion is None:
        return None
    event = deletion.event
    pause = Pause(None) if event is None else Pause(None, event.event_type, event.event_id)
    return Arrival(deletion.vm, pause, platform.now, None)


def _vm_calling(platform: Platform, local_address: str, peer_address: str) -> Vm | None:
    vm = platform.vm_at(local_address) or platform.vm_at(peer_address)
    if vm is None:
        vms = platform.vms()
        if len(vms) == 1 and vms[0].address is None:
            return vms[0]
    return vm


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
