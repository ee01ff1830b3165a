"""The simulated platform: VMs, live events, approvals and the documents each VM is shown.

One aggregate owns all mutable state so that every change goes through a method that also
refreshes the affected documents; no caller can change an event without the DocumentIncarnation
rule (:mod:`forewarn.domain.documents`) being applied.

Time only moves through :meth:`Platform.advance_to`: deadlines (NotBefore reached, Started
period over) wait in a heap and fire in order, so a reader that catches up before answering
sees exactly the state the clock implies, with no background polling.

Lifecycle (SPEC 4)::

    (created) -> Scheduled --approved by every party / NotBefore--> Started --period--> (removed)
                     \\--cancelled---------------------------------------------------> (removed)
    (hardware failure) -------------------------------------------> Started ----------> (removed)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from forewarn.domain.clock import ensure_utc
from forewarn.domain.documents import EMPTY_DOCUMENT, Document
from forewarn.domain.errors import (
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
    UnknownVmError,
)
from forewarn.domain.events import (
    DURATION_UNKNOWN,
    Event,
    EventSource,
    EventStatus,
    EventType,
    Resource,
)
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.scope import audience
from forewarn.domain.timing import DOCUMENTED, TimingProfile
from forewarn.domain.vms import Vm


class _Deadline(Enum):
    START = "start"
    REMOVE = "remove"


@dataclass(slots=True)
class _LiveEvent:
    """Book-keeping around one event snapshot; never leaves this module."""

    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    approvals: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class EventView:
    """A live event with who sees it and who approved it, for the control plane."""

    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    approvals: frozenset[str]


class Platform:
    """All simulated state; every method is pure computation on it."""

    def __init__(
        self,
        now: datetime,
        *,
        timing: TimingProfile = DOCUMENTED,
        new_event_id: Callable[[], str] | None = None,
    ) -> None:
        self._now = ensure_utc(now)
        self.timing = timing
        self._new_event_id = new_event_id or EventIdFactory()
        self._vms: dict[str, Vm] = {}
        self._by_address: dict[str, str] = {}
        self._documents: dict[str, Document] = {}
        # vm name -> ids of the live events it sees, in creation order (dicts keep order)
        self._visible: dict[str, dict[str, None]] = {}
        self._events: dict[str, _LiveEvent] = {}
        self._deadlines: list[tuple[datetime, int, str, _Deadline]] = []
        self._sequence = 0

    # -- the fleet -------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The platform time up to which every deadline has been applied."""
        return self._now

    def add_vm(self, vm: Vm) -> None:
        if vm.name in self._vms:
            raise InvalidOperationError(f"virtual machine {vm.name!r} already exists")
        if vm.address is not None and vm.address in self._by_address:
            taken = self._by_address[vm.address]
            raise InvalidOperationError(f"address {vm.address} is already {taken!r}'s")
        self._vms[vm.name] = vm
        if vm.address is not None:
            self._by_address[vm.address] = vm.name
        self._documents[vm.name] = EMPTY_DOCUMENT
        self._visible[vm.name] = {}

    def vm(self, name: str) -> Vm:
        try:
            return self._vms[name]
        except KeyError:
            raise UnknownVmError(f"named {name!r}") from None

    def vms(self) -> tuple[Vm, ...]:
        return tuple(self._vms.values())

    def vm_at(self, address: str) -> Vm | None:
        """The VM whose endpoint answers at ``address``, if any."""
        name = self._by_address.get(address)
        return None if name is None else self._vms[name]

    # -- reading ---------------------------------------------------------------------------

    def document(self, vm_name: str) -> Document:
        """The document ``vm_name`` is shown now; call :meth:`advance_to` first."""
        try:
            return self._documents[vm_name]
        except KeyError:
            raise UnknownVmError(f"named {vm_name!r}") from None

    def events(self) -> tuple[EventView, ...]:
        return tuple(
            EventView(live.event, live.audience, live.parties, frozenset(live.approvals))
            for live in self._events.values()
        )

    def event(self, event_id: str) -> EventView:
        live = self._live(event_id)
        return EventView(live.event, live.audience, live.parties, frozenset(live.approvals))

    # -- operations ------------------------------------------------------------------------

    def schedule(
        self,
        event_type: EventType,
        impacted: Sequence[str],
        *,
        source: EventSource,
        description: str = "",
        duration_seconds: int = DURATION_UNKNOWN,
        notice: timedelta | None = None,
        already_started: bool = False,
    ) -> Event:
        """Create an event impacting ``impacted`` VMs.

        ``notice`` defaults to the profile's minimum for the type and may not be shorter:
        the platform guarantees it (SPEC 4). ``already_started`` is the hardware-failure path,
        which skips the Scheduled state.
        """
        if not impacted:
            raise InvalidEventError("an event must impact at least one virtual machine")
        if len(set(impacted)) != len(impacted):
            raise InvalidEventError("Resources must not name a virtual machine twice")
        vms = [self.vm(name) for name in impacted]
        if duration_seconds < DURATION_UNKNOWN:
            raise InvalidEventError("DurationInSeconds is -1 (unknown) or a count of seconds")
        minimum = self.timing.notice_for(event_type)
        if notice is None:
            notice = minimum
        elif notice < minimum and not already_started:
            raise InvalidEventError(
                f"{event_type.value} needs at least {minimum.total_seconds():g} s of notice "
                f"in the {self.timing.name!r} timing profile"
            )
        event = Event(
            event_id=self._new_event_id(),
            event_type=event_type,
            status=EventStatus.SCHEDULED,
            resources=tuple(Resource(vm.name, vm.iaas) for vm in vms),
            not_before=self._now + notice,
            description=description,
            source=source,
            duration_seconds=duration_seconds,
        )
        live = _LiveEvent(
            event=event,
            audience=audience(vms, self._vms),
            parties=frozenset(vm.tenant for vm in vms),
        )
        self._events[event.event_id] = live
        for name in live.audience:
            self._visible[name][event.event_id] = None
        if already_started:
            self._start(live)
        else:
            assert event.not_before is not None
            self._push(event.not_before, event.event_id, _Deadline.START)
            self._refresh(live.audience)
        return live.event

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        """Record ``vm_name``'s approval of each event; all ids must be visible to it.

        The whole call is checked before anything changes, so one bad id leaves every
        approval as it was. Approving an already approved or Started event is accepted (the
        service answers 200 "even if another VM already approved the event").
        """
        vm = self.vm(vm_name)
        ids = tuple(dict.fromkeys(event_ids))
        visible = self._visible[vm_name]
        unknown = tuple(event_id for event_id in ids if event_id not in visible)
        if unknown:
            raise UnknownEventError(unknown)
        for event_id in ids:
            live = self._events[event_id]
            if live.event.status is not EventStatus.SCHEDULED:
                continue
            live.approvals.add(vm.tenant)
            if live.parties <= live.approvals:
                self._start(live)

    def cancel(self, event_id: str) -> Event:
        """The platform calls off a Scheduled event: it vanishes from every document."""
        live = self._live(event_id)
        if live.event.status is not EventStatus.SCHEDULED:
            raise InvalidOperationError(
                f"event {event_id} has Started; only a Scheduled event can be cancelled"
            )
        self._remove(live)
        return live.event

    def advance_to(self, now: datetime) -> None:
        """Apply every deadline due at or before ``now``, oldest first."""
        now = ensure_utc(now)
        if now < self._now:
            return  # a clock read a moment ago on another path: nothing new is due
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            when, _, event_id, kind = heapq.heappop(deadlines)
            live = self._events.get(event_id)
            if live is None:
                continue
            self._now = max(self._now, when)
            if kind is _Deadline.START and live.event.status is EventStatus.SCHEDULED:
                self._start(live)
            elif kind is _Deadline.REMOVE and live.event.status is EventStatus.STARTED:
                self._remove(live)
        self._now = now

    def next_deadline(self) -> datetime | None:
        """When the next lifecycle step is due, so a runner can wake up for it."""
        return self._deadlines[0][0] if self._deadlines else None

    # -- internals -------------------------------------------------------------------------

    def _live(self, event_id: str) -> _LiveEvent:
        try:
            return self._events[event_id]
        except KeyError:
            raise UnknownEventError((event_id,)) from None

    def _push(self, when: datetime, event_id: str, kind: _Deadline) -> None:
        self._sequence += 1
        heapq.heappush(self._deadlines, (when, self._sequence, event_id, kind))

    def _start(self, live: _LiveEvent) -> None:
        live.event = live.event.started()
        self._push(self._now + self.timing.started_period, live.event.event_id, _Deadline.REMOVE)
        self._refresh(live.audience)

    def _remove(self, live: _LiveEvent) -> None:
        event_id = live.event.event_id
        del self._events[event_id]
        for name in live.audience:
            self._visible[name].pop(event_id, None)
        self._refresh(live.audience)

    def _refresh(self, names: Iterable[str]) -> None:
        events = self._events
        for name in names:
            current = tuple(events[event_id].event for event_id in self._visible[name])
            self._documents[name] = self._documents[name].with_events(current)
