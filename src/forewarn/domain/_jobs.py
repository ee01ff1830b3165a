"""Jobs and approvals: how events are created, approved, started, cancelled and removed.

Events are created in *jobs*: the events of one platform operation (one per tenant on a shared
host, or the same-NotBefore Terminate events of a scale set) start together, once every event
of the job is approved, or at their common NotBefore (SPEC 3). The NotBefore is the job's
notice after its creation, never less than the timing profile's minimum for its event types:
the platform guarantees it. Every tenant with a VM shown an event must approve it; a VM whose
Scheduled Events are off is not waited for.

When a deadline starts or removes an event is :data:`forewarn.domain._lifecycle.LIFECYCLE`;
what an impact does to the VMs is :mod:`forewarn.domain._impacts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

from forewarn.domain._campaigns import Campaigns
from forewarn.domain._enablement import Enablement
from forewarn.domain._fleet_registry import Registry
from forewarn.domain._impacts import Impacts
from forewarn.domain._lifecycle import Deadline, Deadlines
from forewarn.domain._state import (
    Campaign,
    EventRequest,
    Job,
    LiveEvent,
    PlatformState,
    VmRecord,
)
from forewarn.domain.arm import ScheduledEventRef, names
from forewarn.domain.clock import LONGEST, check_duration
from forewarn.domain.errors import InvalidEventError, InvalidOperationError, UnknownEventError
from forewarn.domain.events import DURATION_UNKNOWN, Event, EventStatus, EventType, Resource
from forewarn.domain.history import Phase, publication
from forewarn.domain.scope import audience
from forewarn.domain.timing import REMOVES_VM
from forewarn.domain.vms import Vm


class Jobs:
    """The live events, their jobs and the approvals they wait for."""

    def __init__(
        self,
        state: PlatformState,
        registry: Registry,
        enablement: Enablement,
        impacts: Impacts,
        campaigns: Campaigns,
        deadlines: Deadlines,
    ) -> None:
        self._state = state
        self._registry = registry
        self._enablement = enablement
        self._impacts = impacts
        self._campaigns = campaigns
        self._deadlines = deadlines
        # Each set of tenants an event waits for, as one object for all the events waiting
        # for the same ones (a campaign's thousands wait for a handful of subscriptions): one
        # object less per live event for the collector to walk.
        self._parties: dict[frozenset[str], frozenset[str]] = {}

    def schedule_job(
        self,
        requests: Sequence[EventRequest],
        *,
        notice: timedelta | None = None,
        already_started: bool = False,
        join_key: str | None = None,
        campaign: Campaign | None = None,
    ) -> tuple[Event, ...]:
        """Create events that start together (SPEC 3-4); see :meth:`Platform.schedule_job`."""
        state = self._state
        if not requests:
            raise InvalidEventError("a job needs at least one event")
        notice_for = state.timing.notice_for
        minimum = max([notice_for(request.event_type) for request in requests])
        if notice is None:
            notice = minimum
        check_duration(notice, "the notice")
        if notice < minimum and not already_started:
            raise InvalidEventError(
                f"{requests[0].event_type.value} needs at least {minimum.total_seconds():g} s "
                f"of notice in the {state.timing.name!r} timing profile"
            )
        impacted = [self._impacted_vms(request) for request in requests]
        not_before = state.now + notice
        job = state.open_jobs.get(join_key)  # never holds None: keyless jobs never merge
        if job is None or job.not_before != not_before or already_started:
            job = Job(next(state.job_ids), join_key, not_before, campaign)
            if join_key is not None and not already_started:
                state.open_jobs[join_key] = job
        created = [
            self._create(request, vms, job, show=not already_started)
            for request, vms in zip(requests, impacted, strict=True)
        ]
        if already_started:
            for live, receiving in created:
                self._start(live, shown_first_to=receiving)
        else:
            for (live, _), vms in zip(created, impacted, strict=True):
                # one each, so cancelling one event keeps the job's deadline
                self._deadlines.set(Deadline.START, live.event.event_id)
                if self._all_instances_down(vms, live):
                    live.approvals = live.approvals | live.parties
            self._start_job_if_approved(job)
        return tuple([live.event for live, _ in created])

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        """Record ``vm_name``'s approval of each event; see :meth:`Platform.approve`."""
        state = self._state
        record = state.record(vm_name)
        # EventIds are GUIDs, "case insensitive on input" (RFC 4122); documents show them in
        # upper case, and an unknown one is named as it was given.
        ids: dict[str, str] = {}
        for given in event_ids:
            ids.setdefault(given.upper(), given)
        shown = [event.event_id for event in record.document.events]
        unknown = [given for wanted, given in ids.items() if wanted not in shown]
        if unknown:
            raise UnknownEventError(tuple(unknown))
        events = state.events
        for event_id in ids:
            live = events[event_id]
            if live.event.status is EventStatus.SCHEDULED:
                live.approvals = live.approvals | {record.tenant}
                if vm_name not in live.approvers:
                    live.approvers += (vm_name,)
                self._start_job_if_approved(live.job)

    def acknowledge(self, refs: Sequence[ScheduledEventRef]) -> None:
        """The Maintenance resource provider's acknowledgement of the events ``refs`` name,
        each at the resource it is filed under (a scale set's at the set: :func:`names`) or,
        for one filed under a VM, at one of the VMs it impacts [ours: the pages show only
        VMs and scale sets]: the approval of that resource's subscription, as a POST from one
        of its VMs would give ("Azure treats an approval request from either endpoint as
        meaning that the event can start", "Scheduled Events overview", "Acknowledging
        Scheduled Events"). All of them or none: one that names no event refuses the whole
        list, naming every such one."""
        state = self._state
        found: list[tuple[LiveEvent, Vm]] = []
        unknown: list[str] = []
        for ref in refs:
            live = state.events.get(ref.event_id)
            resources = () if live is None else live.event.resources
            named = [
                vm
                for resource in resources
                if (vm := state.vms.get(resource.name)) is not None and names(ref, vm)
            ]
            if live is None or not named:
                unknown.append(ref.event_id)
            else:
                found.append((live, named[0]))
        if unknown:
            raise UnknownEventError(tuple(unknown))
        for live, vm in found:
            if live.event.status is EventStatus.SCHEDULED:
                live.approvals = live.approvals | {vm.tenant}
                self._start_job_if_approved(live.job)

    def cancel(self, event_id: str) -> Event:
        """The platform calls off a Scheduled event: it vanishes from every document."""
        live = self._state.live(event_id)
        if live.event.status is not EventStatus.SCHEDULED:
            raise InvalidOperationError(
                f"event {event_id} has Started; only a Scheduled event can be cancelled"
            )
        self._published(live, Phase.CANCELED)
        live.job.events.remove(live)
        self._remove(live)
        self._start_job_if_approved(live.job)
        return live.event

    def continue_campaign(self, campaign: Campaign) -> None:
        """Schedule the next step of ``campaign``, or of the campaign queued after it."""
        step = self._campaigns.next_step(campaign)
        if step is not None:
            runs, requests = step
            self.schedule_job(requests, campaign=runs)

    def start_due(self, event_id: str) -> None:
        """NotBefore reached: the event's job starts, unless approvals started it already."""
        live = self._state.events.get(event_id)
        if live is None:
            return
        for member in list(live.job.events):
            if member.event.status is EventStatus.SCHEDULED:
                self._start(member)

    def impact_over(self, event_id: str) -> None:
        """The impact of ``event_id`` is over (:meth:`Impacts.end_due`). When it deleted its
        VMs and no VM that could be shown it is left (a standalone Spot VM evicted, a whole
        set's instances deleted), the event is over too: nobody could read it any more, so it
        is not kept as a live event for its Started period."""
        self._impacts.end_due(event_id)
        state = self._state
        live = state.events.get(event_id)
        if (
            live is not None
            and live.event.event_type in REMOVES_VM
            and not any(name in state.vms for name in live.audience)
        ):
            self._remove(live)

    def remove_due(self, event_id: str) -> None:
        """The Started period is over: the event disappears."""
        live = self._state.events.get(event_id)
        if live is not None:
            self._published(live, Phase.COMPLETED)
            self._remove(live)

    def _published(self, live: LiveEvent, phase: Phase) -> None:
        """``live`` reached ``phase``: a fact of its history when it is published."""
        where = live.where
        if where is not None:
            state = self._state
            state.history.record(state.now, phase, live.event, where)

    def _all_instances_down(self, vms: list[Vm], live: LiveEvent) -> bool:
        """``allInstancesDown.automaticallyApprove`` (default true): "Scheduled Events should
        be auto-approved when all instances are down" (ARM schema, :mod:`forewarn.domain.
        policy`). [ours] "All instances" are those of the event's scope (the VM alone, or its
        whole availability set, scale-set placement group or cloud service: everyone who could
        approve it), and "down" is not running: gone, or under an impact that stops the VM
        (a Reboot, Redeploy, Preempt or Terminate; a Freeze only pauses it). Then nobody can
        approve and the event starts at once, when the impacted VMs' policies say so."""
        if not all(vm.policy.auto_approve_all_instances_down for vm in vms):
            return False
        impact_of = self._state.impact_of_vm
        reachable = self._impacts.reachable
        for name in live.audience:
            if reachable(name):
                return False
            during = impact_of.get(name)
            if during is not None and during.event_type is EventType.FREEZE:
                return False
        return True

    def _impacted_vms(self, request: EventRequest) -> list[Vm]:
        """The VMs ``request`` impacts, once it is checked: every request of a job is, before
        any of its events is created."""
        impacted = request.impacted
        if not impacted:
            raise InvalidEventError("an event must impact at least one virtual machine")
        if len(impacted) > 1 and len(set(impacted)) != len(impacted):
            raise InvalidEventError("Resources must not name a virtual machine twice")
        vms = [self._registry.vm(name) for name in impacted]
        if not DURATION_UNKNOWN <= request.duration_seconds <= LONGEST.total_seconds():
            raise InvalidEventError(
                "DurationInSeconds is -1 (unknown) or a count of seconds up to "
                f"{LONGEST.total_seconds():.0f} ({LONGEST.days} days)"
            )
        return vms

    def _create(
        self, request: EventRequest, vms: list[Vm], job: Job, *, show: bool
    ) -> tuple[LiveEvent, dict[str, VmRecord]]:
        """Register an event impacting ``vms``, and the VMs to show it to; ``show`` False
        leaves showing it to the caller's next step, so an event that starts at once is never
        seen Scheduled."""
        state = self._state
        event = Event(
            state.new_event_id(),
            request.event_type,
            EventStatus.SCHEDULED,
            tuple([Resource(vm.name, vm.iaas) for vm in vms]),
            job.not_before,
            request.description,
            request.source,
            request.duration_seconds,
        )
        event_id = event.event_id
        members = audience(vms, self._registry.group_members)
        receiving = self._enablement.receiving_among(members)
        # Every tenant with a VM that is shown the event must approve (or NotBefore comes);
        # a VM with Scheduled Events off is not waited for, and with nobody shown the event
        # nobody is waited for at all.
        tenants = frozenset([record.tenant for record in receiving.values()])
        live = LiveEvent(
            event,
            frozenset(members),
            self._parties.setdefault(tenants, tenants),
            job,
            started_for=request.started_for,
            where=publication(vms),
        )
        job.events.append(live)
        state.events[event_id] = live
        if job.campaign is not None:
            job.campaign.current.add(event_id)
        if show:
            state.show(receiving.values(), (event,))
            self._published(live, Phase.SCHEDULED)
        return live, receiving

    def _start_job_if_approved(self, job: Job) -> None:
        """Start ``job`` once every party approved; callers pass only jobs still Scheduled."""
        members = job.events
        for member in members:
            if not member.parties <= member.approvals:
                return
        for member in list(members):
            self._start(member)

    def _start(
        self, live: LiveEvent, *, shown_first_to: Mapping[str, VmRecord] | None = None
    ) -> None:
        """``live`` starts; ``shown_first_to`` holds the VMs (with their records) that were
        never shown it Scheduled (an event created Started), else every document showing it
        changes."""
        state = self._state
        job = live.job
        if job.join_key is not None and state.open_jobs.get(job.join_key) is job:
            del state.open_jobs[job.join_key]
        event = live.event = live.event.started()
        self._published(live, Phase.STARTED)
        event_id = event.event_id
        deadlines = self._deadlines
        self._impacts.begin(event, deadlines.set(Deadline.IMPACT_END, event_id))
        deadlines.set(Deadline.REMOVE, event_id)
        if shown_first_to is None:
            state.update(live.audience, event)
        else:
            state.show(shown_first_to.values(), (event,))

    def _remove(self, live: LiveEvent) -> None:
        state = self._state
        event_id = live.event.event_id
        del state.events[event_id]
        job = live.job
        if live in job.events:
            job.events.remove(live)
        key = job.join_key
        if not job.events and key is not None and state.open_jobs.get(key) is job:
            del state.open_jobs[key]
        state.hide(live.audience, event_id)
        campaign = job.campaign
        if campaign is not None:
            campaign.current.discard(event_id)
            if not campaign.current:
                self.continue_campaign(campaign)
