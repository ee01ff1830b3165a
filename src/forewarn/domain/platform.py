"""The simulated platform: VMs, live events, approvals and the documents each VM is shown.

One aggregate owns all mutable state so that every change goes through a method that also
refreshes the affected documents; no caller can change an event without the DocumentIncarnation
rule (:mod:`forewarn.domain.documents`) being applied.

Time only moves through :meth:`Platform.advance_to`: deadlines (NotBefore reached, impact over,
Started period over, a VM's first-call delay over) wait in a heap and fire in order, so a reader
that catches up before answering sees exactly the state the clock implies.

Lifecycle (SPEC 4)::

    (created) -> Scheduled --job approved by all / NotBefore--> Started --period--> (removed)
                     \\--cancelled----------------------------------------------> (removed)
    (hardware failure, auto-approval) ----------------------> Started

Events are created in *jobs*: the events of one platform operation (one per tenant on a shared
host, or the same-NotBefore Terminate events of a scale set) start together, once every event
of the job is approved, or at their common NotBefore (SPEC 3).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum

from forewarn.domain.clock import ensure_utc
from forewarn.domain.documents import EMPTY_DOCUMENT, FIRST_INCARNATION, Document
from forewarn.domain.errors import (
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
    UnknownGroupError,
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
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.impact import Pause
from forewarn.domain.placement import new_host, placement_error
from forewarn.domain.scope import ScopeGroup, audience, scope_group
from forewarn.domain.timing import DOCUMENTED, TimingProfile
from forewarn.domain.vms import Vm

_REMOVES_VM = frozenset({EventType.TERMINATE, EventType.PREEMPT})


class _Deadline(Enum):
    START = "start"
    IMPACT_END = "impact-end"
    REMOVE = "remove"
    ENABLE = "enable"


@dataclass(frozen=True, slots=True)
class EventRequest:
    """One event an operation wants created; a job is a sequence of these."""

    event_type: EventType
    impacted: tuple[str, ...]
    source: EventSource
    description: str = ""
    duration_seconds: int = DURATION_UNKNOWN


@dataclass(slots=True)
class _LiveEvent:
    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    job: _Job
    approvals: set[str] = field(default_factory=set)

    def impacts(self, name: str) -> bool:
        return any(resource.name == name for resource in self.event.resources)


@dataclass(slots=True)
class _Job:
    job_id: int
    join_key: str | None
    not_before: datetime
    campaign: _Campaign | None
    events: list[_LiveEvent] = field(default_factory=list)


@dataclass(slots=True)
class _Campaign:
    campaign_id: int
    steps: list[list[EventRequest]]
    current: set[str] = field(default_factory=set)
    step: int = 0


@dataclass(frozen=True, slots=True)
class EventView:
    """A live event with who sees it and who approved it, for the control plane."""

    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    approvals: frozenset[str]
    job_id: int


@dataclass(frozen=True, slots=True)
class VmState:
    vm: Vm
    reachable: bool
    receiving: bool


@dataclass(frozen=True, slots=True)
class CampaignView:
    campaign_id: int
    step: int
    steps: int
    current: frozenset[str]


class Platform:
    """All simulated state; every method is pure computation on it."""

    def __init__(
        self,
        now: datetime,
        *,
        timing: TimingProfile = DOCUMENTED,
        new_event_id: EventIdFactory | None = None,
    ) -> None:
        self._now = ensure_utc(now)
        self.timing = timing
        self._new_event_id = new_event_id or EventIdFactory()
        self._vms: dict[str, Vm] = {}
        self._scale_sets: dict[str, ScaleSet] = {}
        self._by_address: dict[str, str] = {}
        # scope group -> its members' names, so an event's audience costs its group's size
        self._groups: dict[ScopeGroup, set[str]] = {}
        self._documents: dict[str, Document] = {}
        # vm name -> ids of the live events it is shown, in creation order (dicts keep order)
        self._visible: dict[str, dict[str, None]] = {}
        self._enabled_at: dict[str, datetime | None] = {}
        self._last_request: dict[str, datetime] = {}
        self._unreachable_until: dict[str, datetime] = {}
        # vm name -> the event whose impact it is under (for the impact policy and hooks)
        self._impact_of_vm: dict[str, Event] = {}
        self._events: dict[str, _LiveEvent] = {}
        self._open_jobs: dict[str | None, _Job] = {}
        self._campaigns: dict[int, _Campaign] = {}
        self._campaign_ids = itertools.count(1)  # numbered as users read them: 1, 2, ...
        self._job_ids = itertools.count(1)
        self._deadlines: list[tuple[datetime, int, str, _Deadline]] = []
        self._sequence = 0
        # hosts no VM is moved to (hardware predicted to fail, or failed); the failed ones
        # also see their VMs moved off when their impact ends
        self._avoided_hosts: set[str] = set()
        self._failed_hosts: set[str] = set()
        # vm name -> the freeze (seconds) its next Reboot brings instead of a reboot
        self._freeze_instead: dict[str, int] = {}

    # -- the fleet -------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The platform time up to which every deadline has been applied."""
        return self._now

    def add_scale_set(self, scale_set: ScaleSet) -> None:
        if scale_set.name in self._scale_sets:
            raise InvalidOperationError(f"scale set {scale_set.name!r} already exists")
        self._scale_sets[scale_set.name] = scale_set

    def scale_set(self, name: str) -> ScaleSet:
        try:
            return self._scale_sets[name]
        except KeyError:
            raise UnknownGroupError("scale set", name) from None

    def add_vm(self, vm: Vm, *, receiving: bool = True) -> None:
        """Add ``vm``; ``receiving`` VMs start as if they had just made their first request."""
        if vm.name in self._vms:
            raise InvalidOperationError(f"virtual machine {vm.name!r} already exists")
        if vm.address is not None and vm.address in self._by_address:
            taken = self._by_address[vm.address]
            raise InvalidOperationError(f"address {vm.address} is already {taken!r}'s")
        misplaced = placement_error(vm, self._vms.values())
        if misplaced is not None:
            raise InvalidOperationError(misplaced)
        if vm.vm_scale_set_name and vm.vm_scale_set_name not in self._scale_sets:
            self._scale_sets[vm.vm_scale_set_name] = ScaleSet(vm.vm_scale_set_name)
        self._vms[vm.name] = vm
        self._groups.setdefault(scope_group(vm, self._scale_sets), set()).add(vm.name)
        if vm.address is not None:
            self._by_address[vm.address] = vm.name
        self._documents[vm.name] = EMPTY_DOCUMENT
        self._visible[vm.name] = {}
        self._enabled_at[vm.name] = self._now if receiving else None
        self._last_request[vm.name] = self._now

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

    def scope_of(self, vm: Vm) -> ScopeGroup:
        """The delivery-scope group of ``vm`` (:func:`forewarn.domain.scope.scope_group`)."""
        return scope_group(vm, self._scale_sets)

    def freeze_instead(self, name: str, seconds: int) -> None:
        """The VM's Scheduled Reboot, when it starts, freezes it for ``seconds`` instead: "In
        rare cases a VM scheduled for EventType:"Reboot" may experience a freeze event instead
        of a reboot" (scheduled-events-windows-2024.txt, "Event properties", EventStatus). The
        document still says Reboot; only what the VM lives through differs."""
        if not any(
            live.event.event_type is EventType.REBOOT
            and live.event.status is EventStatus.SCHEDULED
            and live.impacts(name)
            for live in self._events.values()
        ):
            self.vm(name)
            raise InvalidOperationError(f"{name!r} has no Scheduled Reboot to freeze instead")
        self._freeze_instead[name] = seconds

    def impact_again(self, name: str) -> None:
        """A second impact, half as long as the advertised one, while the VM's event is still
        Started: "While the event is still in EventStatus:"Started" state, there may be another
        impact of a shorter duration than what was advertised" (scheduled-events-windows-
        2024.txt, "Event properties", EventStatus)."""
        started = [
            live
            for live in self._events.values()
            if live.event.status is EventStatus.STARTED and live.impacts(name)
        ]
        if not started:
            self.vm(name)
            raise InvalidOperationError(f"{name!r} has no Started event to be impacted again")
        if not self.reachable(name):
            raise InvalidOperationError(f"{name!r} is still in its impact")
        event = started[-1].event
        shorter = timedelta(seconds=self._impact_of(event).total_seconds() // 2)
        if shorter <= timedelta(0):
            raise InvalidOperationError(
                f"{name!r}'s {event.event_type.value} advertises no impact to fall short of"
            )
        self._unreachable_until[name] = self._now + shorter
        self._impact_of_vm[name] = event

    def host_predicted_to_fail(self, host: str) -> None:
        """No VM is moved to ``host`` any more: its hardware is expected to fail."""
        self._avoided_hosts.add(host)

    def host_failed(self, host: str) -> None:
        """No VM is moved to ``host`` any more, and its VMs leave it when their impact ends."""
        self._avoided_hosts.add(host)
        self._failed_hosts.add(host)

    def delete_vm(self, name: str) -> None:
        """Remove a VM at once, with no event (deletion without terminate notification)."""
        self._delete_vm(self.vm(name))

    def vm_state(self, name: str) -> VmState:
        return VmState(self.vm(name), self.reachable(name), self.receiving(name))

    def reachable(self, name: str) -> bool:
        """False while an impact (reboot, freeze, redeploy) is under way, or once deleted."""
        if name not in self._vms:
            return False
        until = self._unreachable_until.get(name)
        return until is None or self._now >= until

    def pause(self, name: str) -> Pause | None:
        """Why ``name``'s requests cannot be answered now (:mod:`forewarn.domain.impact`):
        an impact under way, the first-call delay after enablement, or the VM being gone."""
        if name not in self._vms:
            return Pause(None)
        until = self._unreachable_until.get(name)
        if until is not None and self._now < until:
            event = self._impact_of_vm[name]
            return Pause(until, event.event_type, event.event_id)
        enabled_at = self._enabled_at[name]
        if enabled_at is not None and self._now < enabled_at:
            return Pause(enabled_at)
        return None

    def impacts(self) -> dict[str, Pause]:
        """Every VM under an impact now, with the event causing it."""
        impacts: dict[str, Pause] = {}
        for name, until in self._unreachable_until.items():
            if self._now < until:
                event = self._impact_of_vm[name]
                impacts[name] = Pause(until, event.event_type, event.event_id)
        return impacts

    def receiving(self, name: str) -> bool:
        """Scheduled Events is on for ``name``: enabled, and asked within the idle period."""
        enabled_at = self._enabled_at.get(name)
        return (
            enabled_at is not None
            and enabled_at <= self._now
            and self._now - self._last_request[name] < self.timing.idle_period
        )

    # -- reading ---------------------------------------------------------------------------

    def document(self, vm_name: str) -> Document:
        """The document ``vm_name`` is shown now; call :meth:`advance_to` first."""
        try:
            return self._documents[vm_name]
        except KeyError:
            raise UnknownVmError(f"named {vm_name!r}") from None

    def events(self) -> tuple[EventView, ...]:
        return tuple(self._view(live) for live in self._events.values())

    def event(self, event_id: str) -> EventView:
        return self._view(self._live(event_id))

    def campaigns(self) -> tuple[CampaignView, ...]:
        return tuple(
            CampaignView(c.campaign_id, c.step, len(c.steps), frozenset(c.current))
            for c in self._campaigns.values()
        )

    # -- what VMs do -----------------------------------------------------------------------

    def touch(self, vm_name: str) -> bool:
        """Record a request from ``vm_name``: the first one (or the first after 24 h idle)
        turns Scheduled Events on, after the profile's first-call delay (SPEC 7).

        True when this request turned it on (the only requests worth journaling).
        """
        self.vm(vm_name)
        now = self._now
        enabled_at = self._enabled_at[vm_name]
        idle = now - self._last_request[vm_name] >= self.timing.idle_period
        self._last_request[vm_name] = now
        if enabled_at is not None and not idle:
            return False  # on already, or waiting for its first-call delay
        if enabled_at is not None:
            # Re-enabled after the idle period: Azure starts the DocumentIncarnation afresh
            # (SPEC 2; ClusterLabs azure-events-az forgets its last incarnation for this).
            events = self._documents[vm_name].events
            self._documents[vm_name] = Document(FIRST_INCARNATION, events)
        enable_at = now + self.timing.first_call_delay
        self._enabled_at[vm_name] = enable_at
        if enable_at <= now:
            self._enable(vm_name)
        else:
            self._push(enable_at, vm_name, _Deadline.ENABLE)
        return True

    def assume_requests_now(self) -> None:
        """Count every enabled VM as having just asked: after a restart of the service, whose
        journal keeps only the requests that changed state, nobody is idle by our absence."""
        for name, enabled_at in self._enabled_at.items():
            if enabled_at is not None:
                self._last_request[name] = self._now

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
            if live.event.status is EventStatus.SCHEDULED:
                live.approvals.add(vm.tenant)
                self._start_job_if_approved(live.job)

    # -- what the platform does ------------------------------------------------------------

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
        """Create one event impacting ``impacted`` VMs (a job of one)."""
        request = EventRequest(event_type, tuple(impacted), source, description, duration_seconds)
        return self.schedule_job([request], notice=notice, already_started=already_started)[0]

    def schedule_job(
        self,
        requests: Sequence[EventRequest],
        *,
        notice: timedelta | None = None,
        already_started: bool = False,
        join_key: str | None = None,
        campaign: _Campaign | None = None,
    ) -> tuple[Event, ...]:
        """Create events that start together (SPEC 3-4).

        ``notice`` defaults to the profile's minimum for the job's types and may not be
        shorter: the platform guarantees it. ``already_started`` is the hardware-failure and
        auto-approval path, which skips Scheduled. Jobs with the same ``join_key`` and
        NotBefore merge, as scale-set Terminate events with the same NotBefore do.
        """
        if not requests:
            raise InvalidEventError("a job needs at least one event")
        minimum = max(self.timing.notice_for(r.event_type) for r in requests)
        if notice is None:
            notice = minimum
        elif notice < minimum and not already_started:
            raise InvalidEventError(
                f"{requests[0].event_type.value} needs at least {minimum.total_seconds():g} s "
                f"of notice in the {self.timing.name!r} timing profile"
            )
        for request in requests:
            self._check_request(request)
        not_before = self._now + notice
        job = self._open_jobs.get(join_key)  # never holds None: keyless jobs never merge
        if job is None or job.not_before != not_before or already_started:
            job = _Job(next(self._job_ids), join_key, not_before, campaign)
            if join_key is not None and not already_started:
                self._open_jobs[join_key] = job
        created = [
            self._create(request, job, not_before, show=not already_started) for request in requests
        ]
        if already_started:
            for live in created:
                self._start(live)
        else:
            for live in created:  # one each, so cancelling one event keeps the job's deadline
                self._push(not_before, live.event.event_id, _Deadline.START)
            self._start_job_if_approved(job)
        return tuple(live.event for live in created)

    def cancel(self, event_id: str) -> Event:
        """The platform calls off a Scheduled event: it vanishes from every document."""
        live = self._live(event_id)
        if live.event.status is not EventStatus.SCHEDULED:
            raise InvalidOperationError(
                f"event {event_id} has Started; only a Scheduled event can be cancelled"
            )
        live.job.events.remove(live)
        self._remove(live)
        self._start_job_if_approved(live.job)
        return live.event

    def start_campaign(self, steps: Sequence[Sequence[EventRequest]]) -> CampaignView:
        """Run ``steps`` one after another: each starts when the previous one's events are
        all gone, so no two steps (fault domains) are in impact at once (SPEC 4).

        Campaigns queue behind each other: one started while another runs waits for it, so
        two campaigns over one set cannot impact two of its fault domains at once.
        """
        campaign = _Campaign(next(self._campaign_ids), [list(step) for step in steps if step])
        running = bool(self._campaigns)
        self._campaigns[campaign.campaign_id] = campaign
        if not running:
            self._next_campaign_step(campaign)
        return CampaignView(
            campaign.campaign_id, campaign.step, len(campaign.steps), frozenset(campaign.current)
        )

    def advance_to(self, now: datetime) -> None:
        """Apply every deadline due at or before ``now``, oldest first."""
        now = ensure_utc(now)
        if now < self._now:
            return  # a clock read a moment ago on another path: nothing new is due
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            when, _, key, kind = heapq.heappop(deadlines)
            self._now = max(self._now, when)
            self._fire(kind, key)
        self._now = now

    def next_deadline(self) -> datetime | None:
        """When the next lifecycle step is due, so a runner can wake up for it."""
        return self._deadlines[0][0] if self._deadlines else None

    # -- internals -------------------------------------------------------------------------

    def _fire(self, kind: _Deadline, key: str) -> None:
        if kind is _Deadline.ENABLE:
            enabled_at = self._enabled_at.get(key)
            if enabled_at is not None and enabled_at <= self._now:
                self._enable(key)
            return
        live = self._events.get(key)
        if live is None:
            return
        if kind is _Deadline.START:  # its job may have started already, by approval
            for member in list(live.job.events):
                if member.event.status is EventStatus.SCHEDULED:
                    self._start(member)
        elif kind is _Deadline.IMPACT_END:
            self._end_impact(live)
        elif kind is _Deadline.REMOVE:  # set when the event started
            self._remove(live)

    def _check_request(self, request: EventRequest) -> None:
        if not request.impacted:
            raise InvalidEventError("an event must impact at least one virtual machine")
        if len(set(request.impacted)) != len(request.impacted):
            raise InvalidEventError("Resources must not name a virtual machine twice")
        for name in request.impacted:
            self.vm(name)
        if request.duration_seconds < DURATION_UNKNOWN:
            raise InvalidEventError("DurationInSeconds is -1 (unknown) or a count of seconds")

    def _create(
        self, request: EventRequest, job: _Job, not_before: datetime, *, show: bool
    ) -> _LiveEvent:
        """Register an event; ``show`` False defers the documents to the caller's next step,
        so an event that starts at once is never seen Scheduled."""
        vms = [self._vms[name] for name in request.impacted]
        event = Event(
            event_id=self._new_event_id(),
            event_type=request.event_type,
            status=EventStatus.SCHEDULED,
            resources=tuple(Resource(vm.name, vm.iaas) for vm in vms),
            not_before=not_before,
            description=request.description,
            source=request.source,
            duration_seconds=request.duration_seconds,
        )
        seen_by = audience(vms, self.scope_of, self._group_members)
        receiving = [name for name in seen_by if self.receiving(name)]
        # Every tenant with a VM that is shown the event must approve (or NotBefore comes);
        # a VM with Scheduled Events off is not waited for, and with nobody shown the event
        # nobody is waited for at all.
        live = _LiveEvent(
            event=event,
            audience=seen_by,
            parties=frozenset(self._vms[name].tenant for name in receiving),
            job=job,
        )
        job.events.append(live)
        self._events[event.event_id] = live
        if job.campaign is not None:
            job.campaign.current.add(event.event_id)
        for name in receiving:
            self._visible[name][event.event_id] = None
        if show:
            self._refresh(receiving)
        return live

    def _start_job_if_approved(self, job: _Job) -> None:
        """Start ``job`` once every party approved; callers pass only jobs still Scheduled."""
        members = job.events
        if all(member.parties <= member.approvals for member in members):
            for member in list(members):
                self._start(member)

    def _start(self, live: _LiveEvent) -> None:
        if live.job.join_key is not None and self._open_jobs.get(live.job.join_key) is live.job:
            del self._open_jobs[live.job.join_key]
        live.event = live.event.started()
        event_id = live.event.event_id
        impact = self._impact_of(live.event)
        until = self._now + impact
        rebooting = live.event.event_type is EventType.REBOOT
        for resource in live.event.resources:
            freeze = self._freeze_instead.pop(resource.name, None) if rebooting else None
            vm_until, lived = until, live.event
            if freeze is not None:  # what the VM lives through (hooks, policy) is a Freeze
                vm_until = self._now + timedelta(seconds=freeze)
                lived = replace(live.event, event_type=EventType.FREEZE)
            if resource.name in self._vms and impact > timedelta(0):
                previous = self._unreachable_until.get(resource.name)
                if previous is None or vm_until >= previous:
                    self._unreachable_until[resource.name] = vm_until
                    self._impact_of_vm[resource.name] = lived
        self._push(until, event_id, _Deadline.IMPACT_END)
        # An event cannot be over before its impact is: a 5 s Freeze outlasts the fast
        # profile's Started period.
        removal = self._now + max(self.timing.started_period, impact)
        self._push(removal, event_id, _Deadline.REMOVE)
        self._refresh(live.audience)

    def _impact_of(self, event: Event) -> timedelta:
        seconds = event.duration_seconds
        if seconds == DURATION_UNKNOWN or (seconds == 0 and event.event_type in _REMOVES_VM):
            return self.timing.impact  # a deleted VM is gone however short the notice said
        return timedelta(seconds=seconds)

    def _end_impact(self, live: _LiveEvent) -> None:
        event_type = live.event.event_type
        for resource in live.event.resources:
            vm = self._vms.get(resource.name)
            if vm is None:
                continue
            if event_type in _REMOVES_VM:
                self._delete_vm(vm)
            elif event_type is EventType.REDEPLOY or vm.host in self._failed_hosts:
                # "Azure will ... immediately begin the recovery process for affected virtual
                # machines" (scheduled-events-windows-2024.txt): they come back elsewhere
                host = new_host(vm, self._vms.values(), self._avoided_hosts)
                self._vms[vm.name] = replace(vm, host=host)

    def _group_members(self, group: ScopeGroup) -> Iterable[str]:
        return self._groups[group]

    def _delete_vm(self, vm: Vm) -> None:
        del self._vms[vm.name]
        self._groups[scope_group(vm, self._scale_sets)].remove(vm.name)
        if vm.address is not None:
            del self._by_address[vm.address]
        for table in (
            self._documents,
            self._visible,
            self._enabled_at,
            self._last_request,
            self._unreachable_until,
            self._impact_of_vm,
            self._freeze_instead,
        ):
            table.pop(vm.name, None)

    def _remove(self, live: _LiveEvent) -> None:
        event_id = live.event.event_id
        del self._events[event_id]
        if live in live.job.events:
            live.job.events.remove(live)
        key = live.job.join_key
        if not live.job.events and key is not None and self._open_jobs.get(key) is live.job:
            del self._open_jobs[key]
        for name in live.audience:
            visible = self._visible.get(name)
            if visible is not None:
                visible.pop(event_id, None)
        self._refresh(live.audience)
        campaign = live.job.campaign
        if campaign is not None:
            campaign.current.discard(event_id)
            if not campaign.current:
                self._next_campaign_step(campaign)

    def _next_campaign_step(self, campaign: _Campaign) -> None:
        while campaign.step < len(campaign.steps):
            step = campaign.steps[campaign.step]
            campaign.step += 1
            requests = []
            for request in step:
                alive = tuple(name for name in request.impacted if name in self._vms)
                if alive:
                    requests.append(replace(request, impacted=alive))
            if requests:
                self.schedule_job(requests, campaign=campaign)
                return
        del self._campaigns[campaign.campaign_id]
        if self._campaigns:  # the next queued campaign takes its turn
            self._next_campaign_step(next(iter(self._campaigns.values())))

    def _enable(self, name: str) -> None:
        shown = (event_id for event_id, live in self._events.items() if name in live.audience)
        self._visible[name].update(dict.fromkeys(shown))
        self._refresh((name,))

    def _view(self, live: _LiveEvent) -> EventView:
        return EventView(
            live.event, live.audience, live.parties, frozenset(live.approvals), live.job.job_id
        )

    def _live(self, event_id: str) -> _LiveEvent:
        try:
            return self._events[event_id]
        except KeyError:
            raise UnknownEventError((event_id,)) from None

    def _push(self, when: datetime, key: str, kind: _Deadline) -> None:
        self._sequence += 1
        heapq.heappush(self._deadlines, (when, self._sequence, key, kind))

    def _refresh(self, names: Iterable[str]) -> None:
        events = self._events
        documents = self._documents
        for name in names:
            visible = self._visible.get(name)
            if visible is None:
                continue
            current = tuple(events[event_id].event for event_id in visible)
            documents[name] = documents[name].with_events(current)
