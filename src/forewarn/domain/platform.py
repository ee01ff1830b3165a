"""The simulated platform: VMs, live events, approvals and the documents each VM is shown.

:class:`Platform` is the one door to it: every change goes through a method that also
refreshes the affected documents, so no caller can change an event without the
DocumentIncarnation rule (:mod:`forewarn.domain.documents`) being applied. Behind the door the
work is split by concern, each part a small class over one shared
:class:`~forewarn.domain._state.PlatformState` (why one state: see that module):

- :mod:`~forewarn.domain._fleet_registry`: VMs, scale sets, addresses, scope groups, hosts to avoid;
- :mod:`~forewarn.domain._enablement`: the first request, the first-call delay, the 24 h rule;
- :mod:`~forewarn.domain._jobs`: events created in jobs, approvals, start, cancel, removal;
- :mod:`~forewarn.domain._impacts`: what a Started event does to its VMs, and their pauses;
- :mod:`~forewarn.domain._campaigns`: one fault domain at a time;
- :mod:`~forewarn.domain._lifecycle`: the deadlines, and the table of what each one does.

The parts are composed here, in dependency order (the registry first, the jobs last), so no
part imports one that depends on it; the lifecycle table reaches the parts through
:class:`~forewarn.domain._lifecycle.Parts`.

Time only moves through :meth:`Platform.advance_to`, which fires the deadlines due in order,
so a reader that catches up before answering sees exactly the state the clock implies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from forewarn.domain._campaigns import Campaigns
from forewarn.domain._enablement import Enablement
from forewarn.domain._fleet_registry import Registry
from forewarn.domain._impacts import Impacts
from forewarn.domain._jobs import Jobs
from forewarn.domain._lifecycle import Deadlines, Parts
from forewarn.domain._state import Deletion, EventRequest, PlatformState
from forewarn.domain._views import (
    CampaignView,
    EventView,
    VmState,
    campaign_view,
    event_view,
)
from forewarn.domain.arm import ScheduledEventRef
from forewarn.domain.clock import ensure_utc
from forewarn.domain.documents import Document
from forewarn.domain.errors import InvalidEventError
from forewarn.domain.events import DURATION_UNKNOWN, Event, EventSource, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.history import EventHistory
from forewarn.domain.ids import EventIdFactory, NewEventId
from forewarn.domain.impact import Pause
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.scope import ScopeGroup
from forewarn.domain.timing import DOCUMENTED, TimingProfile
from forewarn.domain.vms import Vm

__all__ = ["CampaignView", "Deletion", "EventRequest", "EventView", "Platform", "VmState"]


class Platform:
    """All simulated state; every method is pure computation on it."""

    def __init__(
        self,
        now: datetime,
        *,
        timing: TimingProfile = DOCUMENTED,
        new_event_id: NewEventId | None = None,
    ) -> None:
        state = PlatformState(ensure_utc(now), timing, new_event_id or EventIdFactory())
        self._state = state
        self._deadlines = Deadlines(state)
        self._registry = Registry(state)
        self._enablement = Enablement(state, self._deadlines)
        self._impacts = Impacts(state, self._registry)
        self._campaigns = Campaigns(state)
        self._jobs = Jobs(
            state,
            self._registry,
            self._enablement,
            self._impacts,
            self._campaigns,
            self._deadlines,
        )
        self._parts = Parts(self._enablement, self._jobs, self._impacts)

    @property
    def now(self) -> datetime:
        """The platform time up to which every deadline has been applied."""
        return self._state.now

    @property
    def changes(self) -> int:
        """How many times what a VM's request meets (its VM, its pause, its enablement, its
        document) may have changed, for any VM; equal readings mean none of it has, and
        :meth:`unchanged_since` says whether one VM's has since a reading."""
        return self._state.changes

    def unchanged_since(self, vm_name: str, changes: int) -> bool:
        """Whether nothing a request of ``vm_name`` meets (its VM, its pause, its enablement,
        its document) changed since :attr:`changes` read ``changes``: other VMs' changes
        leave it so, and a VM gone (or gone and added again) is changed."""
        state = self._state
        return state.unchanged_since(state.records.get(vm_name), changes)

    def count_changes_after(self, changes: int) -> None:
        """Count this platform's changes on from after ``changes``, another platform's count:
        one that replaces another (rebuilt from a journal) never reads as the other did, and
        every VM's request meets a change, so what a reader kept under the other's count is
        never taken for this one's."""
        state = self._state
        state.changes = max(state.changes, changes + 1)
        state.everyone_changed = state.changes

    @property
    def timing(self) -> TimingProfile:
        """The durations this platform's lifecycle uses."""
        return self._state.timing

    # -- the fleet -------------------------------------------------------------------------

    def add_scale_set(self, scale_set: ScaleSet) -> None:
        self._registry.add_scale_set(scale_set)

    def scale_set(self, name: str) -> ScaleSet:
        return self._registry.scale_set(name)

    def add_vm(self, vm: Vm, *, receiving: bool = True) -> None:
        """Add ``vm``; ``receiving`` VMs start as if they had just made their first request."""
        self._registry.add_vm(vm, receiving=receiving)

    def vm(self, name: str) -> Vm:
        return self._registry.vm(name)

    def vms(self) -> tuple[Vm, ...]:
        return self._registry.vms()

    def vm_at(self, address: str) -> Vm | None:
        """The VM whose endpoint answers at ``address``, if any."""
        return self._registry.vm_at(address)

    def scope_of(self, vm: Vm) -> ScopeGroup:
        """The delivery-scope group of ``vm`` (:func:`forewarn.domain.scope.scope_group`)."""
        return self._registry.scope_of(vm)

    def freeze_instead(self, name: str, seconds: int) -> None:
        """The VM's Scheduled Reboot freezes it for ``seconds`` instead
        (:meth:`forewarn.domain._impacts.Impacts.freeze_instead`)."""
        self._impacts.freeze_instead(name, seconds)

    def impact_again(self, name: str) -> None:
        """A second, shorter impact while the VM's event is still Started
        (:meth:`forewarn.domain._impacts.Impacts.impact_again`)."""
        self._impacts.impact_again(name)

    def host_predicted_to_fail(self, host: str) -> None:
        """No VM is moved to ``host`` any more: its hardware is expected to fail."""
        self._registry.host_predicted_to_fail(host)

    def host_failed(self, host: str) -> None:
        """No VM is moved to ``host`` any more, and its VMs leave it when their impact ends."""
        self._registry.host_failed(host)

    def set_policy(self, kind: str, name: str, policy: ScheduledEventsPolicy) -> None:
        """A new ``scheduledEventsPolicy`` for a VM, a scale set or an availability set
        (:meth:`forewarn.domain._fleet_registry.Registry.set_policy`); events created from now on
        follow it."""
        self._registry.set_policy(kind, name, policy)

    def delete_vm(self, name: str) -> None:
        """Remove a VM at once, with no event (deletion without terminate notification)."""
        self._registry.delete(self.vm(name))

    def deleted_calling(self, local_address: str, peer_address: str) -> Deletion | None:
        """The deleted VM a request arriving at these addresses is in the name of, when no
        VM answers there (:meth:`vm_at`) and none was added there since: nothing answers
        it, as nothing is left of a deleted VM to answer or to ask."""
        return self._registry.deleted_calling(local_address, peer_address)

    def deletions_after(self, number: int) -> tuple[Deletion, ...]:
        """The deletions after the ``number``-th (:attr:`Deletion.number`) of VMs not
        added again, in order: what harnesses stopping a deleted VM's software wait for."""
        return self._registry.deletions_after(number)

    def vm_state(self, name: str) -> VmState:
        return VmState(self.vm(name), self.reachable(name), self.receiving(name))

    def reachable(self, name: str) -> bool:
        """False while an impact (reboot, freeze, redeploy) is under way, or once deleted."""
        return self._impacts.reachable(name)

    def pause(self, name: str) -> Pause | None:
        """Why ``name``'s requests cannot be answered now (:mod:`forewarn.domain.impact`):
        an impact under way, the first-call delay after enablement, or the VM being gone."""
        return self._impacts.pause(name, self._state.records.get(name))

    def impacts(self) -> dict[str, Pause]:
        """Every VM under an impact now, with the event causing it."""
        return self._impacts.impacts()

    def receiving(self, name: str) -> bool:
        """Scheduled Events is on for ``name``: enabled, and asked within the idle period."""
        return self._enablement.receiving(name)

    # -- reading ---------------------------------------------------------------------------

    def document(self, vm_name: str) -> Document:
        """The document ``vm_name`` is shown now; call :meth:`advance_to` first."""
        return self._state.record(vm_name).document

    def events(self) -> tuple[EventView, ...]:
        return tuple(event_view(live) for live in self._state.events.values())

    def event(self, event_id: str) -> EventView:
        return event_view(self._state.live(event_id))

    def campaigns(self) -> tuple[CampaignView, ...]:
        return tuple(campaign_view(campaign) for campaign in self._campaigns.all())

    # -- what VMs do -----------------------------------------------------------------------

    def touch(self, vm_name: str) -> bool:
        """Record a request from ``vm_name``: the first one (or the first after 24 h idle)
        turns Scheduled Events on, after the profile's first-call delay (SPEC 7).

        True when this request turned it on (the only requests worth journaling).
        """
        return self._enablement.touch(vm_name, self._state.record(vm_name))

    def repeat(self, vm_name: str, changes: int) -> bool | None:
        """A request from ``vm_name`` repeating one that found the platform at ``changes``
        (:attr:`changes`): None when what it found may differ now (:meth:`unchanged_since`);
        otherwise the request counted (:meth:`touch`) and whether it turned Scheduled Events
        on. One call for a fleet's every repeated poll, where comparing and touching were
        three."""
        state = self._state
        record = state.records.get(vm_name)
        if not state.unchanged_since(record, changes):
            return None
        assert record is not None  # (unchanged_since: a VM gone is changed)
        return self._enablement.touch(vm_name, record)

    def arrive(self, vm_name: str, *, for_events: bool = True) -> tuple[Pause | None, bool]:
        """A request from ``vm_name`` arrived: a request for events (``for_events``) counts
        as a request (:meth:`touch`) unless the VM is down (an impact under way, or gone),
        when nothing inside it could be asking; a warming-up VM is up, only not answered
        yet, so its requests count.

        Only requests for events count: "Scheduled Events is enabled for your service the
        first time you make a request for events", and disabled "if it does not make a
        request for 24 hours" (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
        "Enabling and Disabling Scheduled Events"). A request for instance metadata or the versions
        neither turns it on nor keeps it on, and is answered at once during the first-call delay,
        which is the events' own; only a VM that is down holds it.

        The pause the request meets (None: it is answered now), one reading of it unless
        this request turned Scheduled Events on, and whether it did (the only requests worth
        journaling). Every VM's every request comes here, so it is one call.
        """
        impacts = self._impacts
        record = self._state.records.get(vm_name)
        pause = impacts.pause(vm_name, record)
        if pause is not None and not pause.warming_up:
            return pause, False
        if not for_events:
            return None, False
        assert record is not None  # a VM without one is gone: paused, not warming up
        if not self._enablement.touch(vm_name, record):
            return pause, False
        return impacts.pause(vm_name, record), True

    def assume_requests_now(self) -> None:
        """Count every enabled VM as having just asked: after a restart of the service, whose
        journal keeps only the requests that changed state, nobody is idle by our absence."""
        self._enablement.assume_requests_now()

    def last_requests(self) -> dict[str, datetime]:
        """When each VM last made a request. A journal one process writes keeps only the
        requests that changed state, so a platform rebuilt from it mid-run takes the others
        from the one it replaces (:meth:`take_requests`)."""
        return self._enablement.last_requests()

    def take_requests(self, times: Mapping[str, datetime]) -> None:
        """Each VM named in ``times`` (and still here) last made a request then."""
        self._enablement.take_requests(times)

    def approve(self, vm_name: str, event_ids: Iterable[str]) -> None:
        """Record ``vm_name``'s approval of each event; all ids must be visible to it.

        The whole call is checked before anything changes, so one bad id leaves every
        approval as it was. Approving an already approved or Started event is accepted (the
        service answers 200 "even if another VM already approved the event").
        """
        self._jobs.approve(vm_name, event_ids)

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
        started_for: timedelta | None = None,
    ) -> Event:
        """Create one event impacting ``impacted`` VMs (a job of one); ``started_for`` keeps
        it Started that long instead of its kind's period (never less than its impact)."""
        if started_for is not None and started_for < timedelta(0):
            raise InvalidEventError("an event cannot stay Started for a negative time")
        request = EventRequest(
            event_type, tuple(impacted), source, description, duration_seconds, started_for
        )
        (event,) = self._jobs.schedule_job(
            [request], notice=notice, already_started=already_started
        )
        return event

    def schedule_job(
        self,
        requests: Sequence[EventRequest],
        *,
        notice: timedelta | None = None,
        already_started: bool = False,
        join_key: str | None = None,
    ) -> tuple[Event, ...]:
        """Create events that start together (SPEC 3-4).

        ``notice`` defaults to the profile's minimum for the job's types and may not be
        shorter: the platform guarantees it. ``already_started`` is the hardware-failure and
        auto-approval path, which skips Scheduled. Jobs with the same ``join_key`` and
        NotBefore merge, as scale-set Terminate events with the same NotBefore do.
        """
        return self._jobs.schedule_job(
            requests,
            notice=notice,
            already_started=already_started,
            join_key=join_key,
        )

    def acknowledge(self, refs: Sequence[ScheduledEventRef]) -> None:
        """The Maintenance resource provider's acknowledgement of events, all or none
        (:meth:`forewarn.domain._jobs.Jobs.acknowledge`)."""
        self._jobs.acknowledge(refs)

    @property
    def history(self) -> EventHistory:
        """What published events went through (:mod:`forewarn.domain.history`)."""
        return self._state.history

    def cancel(self, event_id: str) -> Event:
        """The platform calls off a Scheduled event: it vanishes from every document."""
        return self._jobs.cancel(event_id)

    def start_campaign(self, steps: Sequence[Sequence[EventRequest]]) -> CampaignView:
        """Run ``steps`` one after another: each starts when the previous one's events are
        all gone, so no two steps (fault domains) are in impact at once (SPEC 4).

        Campaigns queue behind each other: one started while another runs waits for it, so
        two campaigns over one set cannot impact two of its fault domains at once.
        """
        campaign, runs_now = self._campaigns.add(steps)
        if runs_now:
            self._jobs.continue_campaign(campaign)
        return campaign_view(campaign)

    def advance_to(self, now: datetime) -> None:
        """Apply every deadline due at or before ``now``, oldest first. Every request catches
        up first, with a clock's own UTC time, which needs no converting."""
        self._deadlines.advance_to(now if now.tzinfo is UTC else ensure_utc(now), self._parts)

    def next_deadline(self) -> datetime | None:
        """When the next lifecycle step is due, so a runner can wake up for it."""
        return self._deadlines.next_due()
