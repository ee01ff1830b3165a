"""Properties of the platform domain over random fleets and random operation sequences.

A Hypothesis state machine drives one :class:`~forewarn.domain.platform.Platform` (a random
fleet, a seeded EventIdFactory, the documented or the fast timing profile) with every
operation of SPEC 6, approvals by random VMs with random ids, cancellations, touches and clock
steps of random sizes, and after every step compares what the platform shows with what the
documents promise. The checks are in ``platform_invariants.py`` and name their source.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from forewarn.domain import descriptions, operations
from forewarn.domain.errors import InvalidEventError, InvalidOperationError, UnknownEventError
from forewarn.domain.events import Event, EventSource, EventStatus, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED, TimingProfile
from forewarn.domain.vms import Priority, Vm

# pytest's importlib mode leaves test folders off sys.path; the shared model sits beside us.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from platform_invariants import Invariants, Snapshot, seconds
from platform_model import NO_OS_IMAGE_NOTIFICATION_SIZES, PROFILES, START, Fleet, fleets

UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
ZERO = timedelta(0)


def clock_steps(timing: TimingProfile) -> st.SearchStrategy[timedelta]:
    """Mostly small steps and steps that land on one of the profile's durations (or a second
    either side); now and then hours, or days past the 24 h idle period and 7-day notices."""
    landmarks = [
        timing.impact,
        timing.started_period,
        timing.first_call_delay,
        timing.idle_period,
        timing.os_image_notice,
        timing.predicted_failure_notice,
        *timing.minimum_notice.values(),
    ]
    near = [
        mark + seconds(d) for mark in landmarks for d in (-1, 0, 1) if mark + seconds(d) >= ZERO
    ]
    small = st.integers(0, 20).map(seconds)
    landmark = st.sampled_from(near)
    return st.one_of(
        small,
        landmark,
        small,
        landmark,
        st.integers(0, 2 * 3600).map(seconds),
        st.integers(0, 9 * 86_400).map(seconds),
        st.just(timing.idle_period),
    )


class PlatformProperties(RuleBasedStateMachine):
    """Random operations on a random fleet; every rule ends with :meth:`observe`."""

    def __init__(self) -> None:
        super().__init__()
        self.platform = Platform(START)
        self.timing: TimingProfile = DOCUMENTED
        self.fleet: dict[str, Vm] = {}
        self.scale_sets: dict[str, ScaleSet] = {}
        self.checks = Invariants(Fleet((), (), frozenset()), DOCUMENTED, self.platform)

    # -- set-up ----------------------------------------------------------------------------

    @initialize(fleet=fleets(), timing=st.sampled_from(PROFILES), seed=st.integers(0, 2**64 - 1))
    def build(self, fleet: Fleet, timing: TimingProfile, seed: int) -> None:
        self.platform = fleet.build(timing, seed)
        self.timing = timing
        self.fleet = {vm.name: vm for vm in fleet.vms}
        self.scale_sets = {s.name: s for s in fleet.scale_sets}
        self.checks = Invariants(fleet, timing, self.platform)
        self.observe()

    def observe(self) -> None:
        self.checks.observe(self.platform)

    # -- helpers ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(vm.name for vm in self.platform.vms())

    def hosts(self) -> list[str]:
        return sorted({vm.host for vm in self.platform.vms()})

    def draw_vm(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(self.names()), label="vm")

    def has_vms(self) -> bool:
        return bool(self.platform.vms())

    def expect_events(
        self,
        events: Sequence[Event],
        *,
        event_type: EventType,
        source: EventSource,
        description: str,
        notice: timedelta | None,
        duration: int = -1,
    ) -> None:
        """The rows of SPEC 6 (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
        "Event Scheduling" and "User- initiated Maintenance"): type, source, description, and
        NotBefore = now + notice for each event still Scheduled. ``notice`` None: the event must be
        Started already."""
        now = self.platform.now
        for event in events:
            assert event.event_type is event_type
            assert event.source is source
            assert event.description == description
            assert event.duration_seconds == duration
            if notice is None:
                assert event.status is EventStatus.STARTED
            elif event.status is EventStatus.SCHEDULED:
                assert event.not_before == now + notice

    def expect_host_events(self, events: Sequence[Event], on_host: Sequence[Vm]) -> None:
        """A host operation impacts exactly the VMs on the host, each once (how they are
        grouped into events is checked for every new event by :meth:`check_resources_grouping`)."""
        impacted = [r.name for e in events for r in e.resources]
        assert sorted(impacted) == sorted(vm.name for vm in on_host)

    # -- what users and the platform do ----------------------------------------------------

    @precondition(has_vms)
    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "User-initiated
        Maintenance": "If you restart a VM, an event with the type Reboot is scheduled"."""
        name = self.draw_vm(data)
        vm = self.platform.vm(name)
        events = operations.restart(self.platform, name)
        assert [[r.name for r in e.resources] for e in events] == [[name]]
        self.expect_events(
            events,
            event_type=EventType.REBOOT,
            source=EventSource.USER,
            description=descriptions.USER_RESTART,
            notice=None
            if vm.policy.auto_approve_reboot
            else self.timing.notice_for(EventType.REBOOT),
        )
        self.observe()

    @precondition(has_vms)
    @rule(data=st.data())
    def redeploy(self, data: st.DataObject) -> None:
        """Same section: "If you redeploy a VM, an event with the type Redeploy is scheduled"."""
        name = self.draw_vm(data)
        vm = self.platform.vm(name)
        events = operations.redeploy(self.platform, name)
        assert [[r.name for r in e.resources] for e in events] == [[name]]
        auto = vm.policy.auto_approve_redeploy
        self.expect_events(
            events,
            event_type=EventType.REDEPLOY,
            source=EventSource.USER,
            description=descriptions.USER_REDEPLOY,
            notice=None if auto else self.timing.notice_for(EventType.REDEPLOY),
        )
        self.observe()

    @precondition(lambda self: any(vm.priority is Priority.SPOT for vm in self.platform.vms()))
    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
        Preempt, 30 seconds minimum."""
        spot = sorted(vm.name for vm in self.platform.vms() if vm.priority is Priority.SPOT)
        names = data.draw(st.lists(st.sampled_from(spot), min_size=1, max_size=2, unique=True))
        events = operations.simulate_eviction(self.platform, names)
        assert [[r.name for r in e.resources] for e in events] == [[n] for n in names]
        self.expect_events(
            events,
            event_type=EventType.PREEMPT,
            source=EventSource.PLATFORM,
            description="",
            notice=self.timing.notice_for(EventType.PREEMPT),
        )
        self.observe()

    def has_scale_set_vms(self) -> bool:
        return any(vm.vm_scale_set_name for vm in self.platform.vms())

    def draw_instances(self, data: st.DataObject) -> tuple[str, list[str]]:
        in_sets = sorted(vm.name for vm in self.platform.vms() if vm.vm_scale_set_name)
        scale_set = self.platform.vm(data.draw(st.sampled_from(in_sets))).vm_scale_set_name
        members = [n for n in in_sets if n.startswith(scale_set + "_")]
        chosen = data.draw(st.lists(st.sampled_from(members), min_size=1, unique=True))
        return scale_set, [name.rsplit("_", 1)[1] for name in chosen]

    @precondition(has_scale_set_vms)
    @rule(data=st.data(), autoscale=st.booleans())
    def delete_instances(self, data: st.DataObject, autoscale: bool) -> None:
        """SPEC 6 [doc]: a Terminate (User, or Platform for autoscale) with the scale set's
        notBeforeTimeout when terminate notification is on; otherwise deleted, no event."""
        scale_set_name, instances = self.draw_instances(data)
        scale_set = self.scale_sets[scale_set_name]
        names = [f"{scale_set_name}_{i}" for i in instances]
        events = operations.delete_instances(
            self.platform, scale_set_name, instances, autoscale=autoscale
        )
        if not scale_set.terminate_notification:
            assert events == ()
            assert not set(names) & set(self.names())
            self.checks.deleted_on_request.update(names)
        else:
            assert [[r.name for r in e.resources] for e in events] == [[n] for n in names]
            self.expect_events(
                events,
                event_type=EventType.TERMINATE,
                source=EventSource.PLATFORM if autoscale else EventSource.USER,
                description="",
                notice=self.timing.terminate_notice or scale_set.terminate_timeout,
            )
        self.observe()

    @precondition(has_scale_set_vms)
    @rule(data=st.data())
    def os_image_upgrade(self, data: st.DataObject) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
        maintenance": OS upgrade and reimage events are "disabled by default" and "doesn't work for
        G, M, N, and H series"."""
        scale_set_name, instances = self.draw_instances(data)
        scale_set = self.scale_sets[scale_set_name]
        names = [f"{scale_set_name}_{i}" for i in instances]
        events = operations.os_image_upgrade(self.platform, scale_set_name, instances)
        expected = [
            [n]
            for n in names
            if scale_set.os_image_notification
            and self.fleet[n].vm_size not in NO_OS_IMAGE_NOTIFICATION_SIZES
        ]
        assert [[r.name for r in e.resources] for e in events] == expected
        self.expect_events(
            events,
            event_type=EventType.REBOOT,
            source=EventSource.PLATFORM,
            description="",
            notice=self.timing.os_image_notice,
        )
        self.observe()

    @precondition(has_vms)
    @rule(data=st.data(), kind=st.sampled_from(["live", "maintain", "predict", "fail"]))
    def host_operation(self, data: st.DataObject, kind: str) -> None:
        """SPEC 6 [doc]: live migration Freeze (a few seconds, 15 min), host maintenance Reboot
        (15 min), predicted failure Redeploy (days), hardware failure Reboot straight to
        Started (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event
        scheduling", second note)."""
        host = data.draw(st.sampled_from(self.hosts()), label="host")
        on_host = [vm for vm in self.platform.vms() if vm.host == host]
        timing = self.timing
        if kind == "live":
            events = operations.live_migrate(self.platform, host)
            self.expect_events(
                events,
                event_type=EventType.FREEZE,
                source=EventSource.PLATFORM,
                description=descriptions.LIVE_MIGRATION,
                notice=timing.notice_for(EventType.FREEZE),
                duration=operations.LIVE_MIGRATION_SECONDS,
            )
        elif kind == "maintain":
            events = operations.maintain_host(self.platform, host)
            self.expect_events(
                events,
                event_type=EventType.REBOOT,
                source=EventSource.PLATFORM,
                description=descriptions.HOST_MAINTENANCE,
                notice=timing.notice_for(EventType.REBOOT),
            )
        elif kind == "predict":
            events = operations.predict_failure(self.platform, host)
            self.expect_events(
                events,
                event_type=EventType.REDEPLOY,
                source=EventSource.PLATFORM,
                description=descriptions.EMERGENCY_REPAIR,
                notice=timing.predicted_failure_notice,
            )
        else:
            events = operations.fail_host(self.platform, host)
            self.expect_events(
                events,
                event_type=EventType.REBOOT,
                source=EventSource.PLATFORM,
                description=descriptions.VM_FAILURE,
                notice=None,
            )
        self.expect_host_events(events, on_host)
        self.observe()

    @precondition(has_vms)
    @rule(
        data=st.data(),
        kinds=st.lists(st.sampled_from(operations.MaintenanceKind), min_size=1, max_size=3),
    )
    def campaign(self, data: st.DataObject, kinds: list[operations.MaintenanceKind]) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        overview": routine maintenance, one fault domain after another; a campaign started while
        another runs waits its turn (the fault-domain check then covers both, in
        ``platform_invariants.py``)."""
        names = data.draw(
            st.one_of(st.none(), st.lists(st.sampled_from(self.names()), min_size=1, unique=True))
        )
        chosen = self.platform.vms() if names is None else [self.platform.vm(n) for n in names]
        running = bool(self.platform.campaigns())
        view = operations.maintenance_campaign(self.platform, names, kinds=kinds)
        first = [self.platform.event(i).event for i in view.current]
        if running:
            assert not first, "a campaign started while another runs waits its turn"
        else:
            assert first, "the first fault domain is scheduled at once"
            lowest = min(vm.platform_fault_domain for vm in chosen)
            domains = {self.fleet[r.name].platform_fault_domain for e in first for r in e.resources}
            assert domains == {lowest}
        for event_id in view.current:
            self.checks.campaign_of[event_id] = view.campaign_id
        # SPEC 6: the host update Freezes ~9 s, live migration 5 s, maintenance Reboots
        event_type, description, duration = {
            "update": (EventType.FREEZE, descriptions.HOST_MAINTENANCE, 9),
            "live-migrate": (EventType.FREEZE, descriptions.LIVE_MIGRATION, 5),
            "maintain": (EventType.REBOOT, descriptions.HOST_MAINTENANCE, -1),
        }[kinds[0].value]
        self.expect_events(
            first,
            event_type=event_type,
            source=EventSource.PLATFORM,
            description=description,
            notice=self.timing.notice_for(event_type),
            duration=duration,
        )
        self.observe()

    @precondition(has_vms)
    @rule(
        data=st.data(),
        event_type=st.sampled_from(EventType),
        extra=st.sampled_from([0, 1, 60, 3600, 3 * 86_400]),
        started=st.booleans(),
        duration=st.sampled_from([-1, 0, 1]),
    )
    def schedule(
        self,
        data: st.DataObject,
        event_type: EventType,
        extra: int,
        started: bool,
        duration: int,
    ) -> None:
        """A direct event with any notice at or above the type's minimum (scheduled-events-
        linux.txt, "Event Scheduling": "Each event is scheduled a minimum amount of time in the
        future based on the event type"); a shorter one is refused and changes nothing."""
        name = self.draw_vm(data)
        minimum = self.timing.notice_for(event_type)
        if not started and minimum > ZERO and data.draw(st.booleans(), label="too soon"):
            before = Snapshot.take(self.platform)
            with pytest.raises(InvalidEventError):
                self.platform.schedule(
                    event_type,
                    [name],
                    source=EventSource.PLATFORM,
                    notice=minimum - seconds(1),
                )
            assert Snapshot.take(self.platform) == before
        else:
            notice = minimum + seconds(extra)
            event = self.platform.schedule(
                event_type,
                [name],
                source=EventSource.PLATFORM,
                notice=notice,
                duration_seconds=duration,
                already_started=started,
            )
            self.expect_events(
                [event],
                event_type=event_type,
                source=EventSource.PLATFORM,
                description="",
                notice=None if started else notice,
                duration=duration,
            )
        self.observe()

    @precondition(has_vms)
    @rule(data=st.data())
    def delete_vm(self, data: st.DataObject) -> None:
        name = self.draw_vm(data)
        self.platform.delete_vm(name)
        self.checks.deleted_on_request.add(name)
        assert name not in self.names()
        self.observe()

    # -- what VMs do -----------------------------------------------------------------------

    @precondition(has_vms)
    @rule(data=st.data())
    def approve(self, data: st.DataObject) -> None:
        """SPEC 3: an approval counts for the approver's tenant, only for events it is shown
        ("Scheduled events are delivered to and can be acknowledged by" the VMs of the scope,
        learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope"); an id it is
        not shown is refused with no state change (SPEC 3 [ours])."""
        name = self.draw_vm(data)
        platform = self.platform
        shown = [e.event_id for e in platform.document(name).events]
        live = sorted(platform_event.event.event_id for platform_event in platform.events())
        only_shown = data.draw(st.booleans(), label="only shown ids")
        pool = shown if shown and only_shown else [*live, UNKNOWN_ID]
        ids = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3), label="ids")
        before = Snapshot.take(platform)
        if set(ids) <= set(shown):
            platform.approve(name, ids)
            tenant = platform.vm(name).tenant
            after = {view.event.event_id: view for view in platform.events()}
            for event_id in ids:
                view = after.get(event_id)
                if before.events[event_id].event.status is EventStatus.SCHEDULED:
                    assert view is not None, "an approval removed an event"
                    assert tenant in view.approvals or view.event.status is EventStatus.STARTED
        else:
            with pytest.raises(UnknownEventError):
                platform.approve(name, ids)
            assert Snapshot.take(platform) == before
        self.observe()

    @precondition(lambda self: bool(self.platform.events()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling":
        "in rare cases, the operation will be canceled by Azure before it starts. In that case the
        event will be removed from the Events array"; a Started event cannot be called off (SPEC
        4)."""
        live = sorted(v.event.event_id for v in self.platform.events())
        event_id = data.draw(st.sampled_from(live), label="event")
        before = Snapshot.take(self.platform)
        if before.events[event_id].event.status is EventStatus.STARTED:
            with pytest.raises(InvalidOperationError):
                self.platform.cancel(event_id)
            assert Snapshot.take(self.platform) == before
        else:
            self.platform.cancel(event_id)
            for document in Snapshot.take(self.platform).documents.values():
                assert event_id not in {e.event_id for e in document.events}
        self.observe()

    @precondition(has_vms)
    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and
        Disabling": enabled "the first time you make a request", "disabled for your service if it
        does not make a request for 24 hours"; the first call's delay is the profile's (SPEC 7)."""
        name = self.draw_vm(data)
        now = self.platform.now
        expect_enabling = self.checks.request_enables(name, now)
        assert self.platform.touch(name) is expect_enabling
        self.checks.requested(name, now)
        self.observe()

    @precondition(has_vms)
    @rule(after_a_day=st.booleans())
    def every_vm_asks(self, after_a_day: bool) -> None:
        """Every VM polls, as the documented clients do once a second (SPEC 8); or they
        all come back after a day away, past the 24 h that disables Scheduled Events."""
        if after_a_day:
            self.advance_by(self.timing.idle_period + seconds(1))
        now = self.platform.now
        for name in self.names():
            expect_enabling = self.checks.request_enables(name, now)
            assert self.platform.touch(name) is expect_enabling
            self.checks.requested(name, now)
            self.observe()

    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        self.advance_by(data.draw(clock_steps(self.timing), label="clock step"))

    def advance_by(self, step: timedelta) -> None:
        """Time moves deadline by deadline, observed at each, so that every change of a
        document is seen and none can hide behind another within one long step."""
        target = self.platform.now + step
        while (deadline := self.platform.next_deadline()) is not None and deadline <= target:
            self.platform.advance_to(deadline)
            self.observe()
        self.platform.advance_to(target)
        assert self.platform.now == target
        self.observe()


PlatformProperties.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_platform_properties = PlatformProperties.TestCase
