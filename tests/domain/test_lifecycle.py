"""The lifecycle of SPEC 4 on a manual clock: Scheduled -> Started -> removed, jobs, impact."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from forewarn.domain import operations
from forewarn.domain._lifecycle import Deadline, Deadlines, Parts
from forewarn.domain._state import PlatformState
from forewarn.domain._views import EventView
from forewarn.domain.documents import Document
from forewarn.domain.errors import InvalidEventError, InvalidOperationError, UnknownEventError
from forewarn.domain.events import Event, EventSource, EventStatus, EventType, Resource
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Priority, Vm

MIN = timedelta(minutes=1)
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def make_vm(name: str, **fields: Any) -> Vm:
    return Vm(name=name, vm_id=f"id-{name}", **fields)


@pytest.fixture
def platform() -> Platform:
    return Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(7))


@pytest.fixture
def add(platform: Platform) -> Callable[..., Vm]:
    def add_vm(name: str, **fields: Any) -> Vm:
        vm = make_vm(name, **fields)
        platform.add_vm(vm)
        return vm

    return add_vm


def statuses(platform: Platform, vm: str) -> list[tuple[str, str]]:
    return [(e.event_type.value, e.status.value) for e in platform.document(vm).events]


def test_docs_live_migration_example_incarnations(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": two
    VMs live migrated see incarnation 1 (empty) -> 2 Scheduled Freeze -> 3 Started, NotBefore "" ->
    4 empty."""
    # one live migration names both, so they share a host and with it a fault domain
    for name, fd in (("WestNO_0", 0), ("WestNO_1", 0)):
        platform.add_vm(
            make_vm(
                name,
                availability_set="west",
                platform_fault_domain=fd,
                platform_update_domain=0,
                host="h1",
            )
        )
    assert platform.document("WestNO_0").incarnation == 1
    (event,) = operations.live_migrate(platform, "h1")
    doc = platform.document("WestNO_0")
    assert doc.incarnation == 2
    assert [r.name for r in event.resources] == ["WestNO_0", "WestNO_1"]
    assert event.status is EventStatus.SCHEDULED
    assert event.duration_seconds == 5
    assert event.not_before == START + 15 * MIN
    platform.approve("WestNO_1", [event.event_id])
    doc = platform.document("WestNO_0")
    assert doc.incarnation == 3
    assert doc.events[0].status is EventStatus.STARTED
    assert doc.events[0].not_before is None
    assert doc.events[0].event_id == event.event_id
    platform.advance_to(START + 10 * MIN)
    assert platform.document("WestNO_0").incarnation == 4
    assert platform.document("WestNO_0").events == ()
    assert platform.document("WestNO_1") == platform.document("WestNO_0")


def test_not_before_starts_an_unapproved_event(platform: Platform, add: Callable[..., Vm]) -> None:
    """SPEC 4: "approved by all / NotBefore reached -> Started"."""
    add("vm0")
    (event,) = operations.restart(platform, "vm0")
    platform.advance_to(START + 15 * MIN - timedelta(seconds=1))
    assert statuses(platform, "vm0") == [("Reboot", "Scheduled")]
    platform.advance_to(START + 15 * MIN)
    assert statuses(platform, "vm0") == [("Reboot", "Started")]
    assert event.source is EventSource.USER


def test_minimum_notice_is_enforced(platform: Platform, add: Callable[..., Vm]) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling": Reboot
    has 15 minutes minimum notice."""
    add("vm0")
    with pytest.raises(InvalidEventError):
        platform.schedule(EventType.REBOOT, ["vm0"], source=EventSource.USER, notice=MIN)


def test_reboot_makes_vm_unreachable_during_impact_only(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    add("vm0")
    (event,) = operations.restart(platform, "vm0")
    platform.approve("vm0", [event.event_id])
    assert not platform.reachable("vm0")
    platform.advance_to(START + timedelta(seconds=6))
    assert not platform.reachable("vm0")
    platform.advance_to(START + timedelta(seconds=7))
    assert platform.reachable("vm0")


def test_cancelled_event_vanishes_while_scheduled(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events: "the scheduled event
    goes directly from 'Scheduled' to being removed from the events array"."""
    add("vm0")
    (event,) = operations.restart(platform, "vm0")
    platform.cancel(event.event_id)
    assert platform.document("vm0").events == ()
    assert platform.document("vm0").incarnation == 3
    with pytest.raises(UnknownEventError):
        platform.approve("vm0", [event.event_id])


def test_started_event_cannot_be_cancelled(platform: Platform, add: Callable[..., Vm]) -> None:
    add("vm0")
    (event,) = operations.restart(platform, "vm0")
    platform.approve("vm0", [event.event_id])
    with pytest.raises(InvalidOperationError):
        platform.cancel(event.event_id)


def test_hardware_failure_skips_scheduled(platform: Platform, add: Callable[..., Vm]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events: "In the case of hardware
    failure, Azure bypasses the 'Scheduled' state and immediately move to the EventStatus:"Started"
    state"."""
    add("vm0", host="h1")
    operations.fail_host(platform, "h1")
    assert statuses(platform, "vm0") == [("Reboot", "Started")]
    assert platform.document("vm0").incarnation == 2


def test_shared_host_waits_for_every_tenant(platform: Platform, add: Callable[..., Vm]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "If the VM is on shared infrastructure, the system will then wait for all other tenants on the
    same hardware to also approve the job or timeout"."""
    adder = add
    adder("a0", host="h1", subscription_id="tenant-a")
    adder("b0", host="h1", subscription_id="tenant-b")
    events = operations.maintain_host(platform, "h1")
    assert len(events) == 2
    by_vm = {e.resources[0].name: e for e in events}
    assert [r.name for r in platform.document("a0").events[0].resources] == ["a0"]
    platform.approve("a0", [by_vm["a0"].event_id])
    assert statuses(platform, "a0") == [("Reboot", "Scheduled")]
    platform.approve("b0", [by_vm["b0"].event_id])
    assert statuses(platform, "a0") == [("Reboot", "Started")]
    assert statuses(platform, "b0") == [("Reboot", "Started")]


def test_terminate_events_of_a_set_start_together(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    """SPEC 3: "For scale-set Terminate events with the same NotBefore, all must be approved
    before any proceeds"."""
    platform.add_scale_set(
        ScaleSet("web", terminate_notification=True, terminate_timeout=timedelta(minutes=7))
    )
    adder = add
    for i in range(3):
        adder(f"web_{i}", vm_scale_set_name="web")
    events = operations.delete_instances(platform, "web", ["0", "1"])
    assert {e.not_before for e in events} == {START + 7 * MIN}
    platform.approve("web_0", [events[0].event_id])
    assert statuses(platform, "web_0") == [("Terminate", "Scheduled")] * 2
    platform.approve("web_1", [events[1].event_id])
    assert statuses(platform, "web_2") == [("Terminate", "Started")] * 2
    platform.advance_to(START + timedelta(seconds=7))
    assert {vm.name for vm in platform.vms()} == {"web_2"}


def test_terminate_refused_on_spot() -> None:
    """SPEC 6: "Terminate notification cannot be enabled on Spot VMs"."""
    with pytest.raises(InvalidOperationError):
        ScaleSet("spot", priority=Priority.SPOT, terminate_notification=True)


def test_notbefore_timeout_bounds() -> None:
    with pytest.raises(InvalidOperationError):
        ScaleSet("s", terminate_notification=True, terminate_timeout=timedelta(minutes=16))


def test_eviction_only_for_spot_and_deletes(platform: Platform, add: Callable[..., Vm]) -> None:
    adder = add
    adder("spot0", priority=Priority.SPOT)
    adder("reg0")
    with pytest.raises(InvalidOperationError):
        operations.simulate_eviction(platform, ["reg0"])
    (event,) = operations.simulate_eviction(platform, ["spot0"])
    assert event.not_before == START + timedelta(seconds=30)
    assert event.source is EventSource.PLATFORM
    platform.advance_to(START + timedelta(seconds=30 + 7))
    assert "spot0" not in {vm.name for vm in platform.vms()}


def test_auto_approval_shows_only_started(platform: Platform, add: Callable[..., Vm]) -> None:
    """SPEC 4 [doc: overview]: with automaticallyApprove no Scheduled event is shown."""
    add("vm0", policy=ScheduledEventsPolicy(auto_approve_reboot=True))
    operations.restart(platform, "vm0")
    assert statuses(platform, "vm0") == [("Reboot", "Started")]
    assert platform.document("vm0").incarnation == 2


def test_redeploy_moves_host(platform: Platform, add: Callable[..., Vm]) -> None:
    adder = add
    adder("vm0", host="h1", address="127.0.0.2")
    adder("vm1", host="h2")
    (event,) = operations.redeploy(platform, "vm0")
    platform.approve("vm0", [event.event_id])
    platform.advance_to(START + timedelta(seconds=7))
    assert platform.vm("vm0").host == "h2"
    # and its requests, found by the address they arrive at, find it there
    assert platform.vm_at("127.0.0.2") == platform.vm("vm0")


def test_campaign_walks_fault_domains_one_at_a_time(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    adder = add
    for i in range(4):
        adder(
            f"as_{i}", availability_set="as", platform_fault_domain=i % 2, platform_update_domain=i
        )
    operations.maintenance_campaign(platform)
    scheduled = {e.event.resources[0].name for e in platform.events()}
    assert scheduled == {"as_0", "as_2"}  # fault domain 0 only
    platform.advance_to(START + 15 * MIN)
    platform.advance_to(START + 25 * MIN)
    names = {r.name for e in platform.events() for r in e.event.resources}
    assert names == {"as_1", "as_3"}
    platform.advance_to(START + 60 * MIN)
    assert platform.events() == ()
    assert platform.campaigns() == ()


def test_first_call_enables_after_delay(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and Disabling":
    "Scheduled Events is enabled for your service the first time you make a request for events ...
    disabled for your service if it does not make a request for 24 hours"."""
    platform.add_vm(make_vm("vm0"), receiving=False)
    (event,) = operations.restart(platform, "vm0")
    # nobody was listening, so nobody is waited for: it starts at once, unseen
    assert platform.event(event.event_id).event.status is EventStatus.STARTED
    assert platform.document("vm0").events == ()
    platform.advance_to(START + 11 * MIN)
    platform.touch("vm0")
    (second,) = operations.restart(platform, "vm0")
    assert platform.document("vm0").events == ()
    platform.advance_to(START + 13 * MIN)
    assert [e.event_id for e in platform.document("vm0").events] == [second.event_id]
    platform.advance_to(START + 13 * MIN + timedelta(hours=24))
    assert not platform.receiving("vm0")


def test_set_member_is_waited_for_when_the_impacted_vm_is_off(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": events are
    "delivered to and can be acknowledged by ... All the VMs in an availability set"; "Enabling and
    disabling": a VM that has not asked is not waited for. So a receiving member still gets the
    notice."""
    platform.add_vm(make_vm("as-0", availability_set="as"), receiving=False)
    platform.add_vm(make_vm("as-1", availability_set="as"))
    (event,) = operations.restart(platform, "as-0")
    assert statuses(platform, "as-1") == [("Reboot", "Scheduled")]
    platform.approve("as-1", [event.event_id])
    assert statuses(platform, "as-1") == [("Reboot", "Started")]


def test_an_event_starts_once_approval_then_not_before_change_nothing_more(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    """SPEC 4 [doc]: an event starts at approval or at NotBefore, whichever comes first, and
    never again: an approval shortly before NotBefore does not bring a second impact at
    NotBefore, and approving the Started event again changes nothing (scheduled-events-
    windows-2024.txt: "The service always returns a 200 success code if it's passed a valid
    event ID")."""
    add("vm0")
    (event,) = operations.restart(platform, "vm0")
    not_before = START + DOCUMENTED.minimum_notice[EventType.REBOOT]
    platform.advance_to(not_before - timedelta(seconds=10))
    platform.approve("vm0", [event.event_id])
    platform.advance_to(not_before - timedelta(seconds=3))
    assert platform.reachable("vm0")
    platform.advance_to(not_before + timedelta(seconds=1))
    assert platform.reachable("vm0"), "no second start at NotBefore"
    before = platform.document("vm0")
    platform.approve("vm0", [event.event_id])
    assert platform.reachable("vm0"), "no second start on a second approval"
    assert platform.document("vm0") == before


def test_advancing_to_the_present_is_allowed_and_changes_nothing(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    add("vm0")
    operations.restart(platform, "vm0")
    before = platform.document("vm0")
    platform.advance_to(START)
    assert (platform.now, platform.document("vm0")) == (START, before)


def test_a_duration_counts_to_the_second_and_a_deletion_takes_the_profiles_impact(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event properties":
    DurationInSeconds is the expected impact; a Preempt advertising 0 still deletes the VM, after
    the profile's impact."""
    add("a")
    add("b", priority=Priority.SPOT)
    one = platform.schedule(
        EventType.FREEZE, ["a"], source=EventSource.PLATFORM, duration_seconds=1
    )
    platform.approve("a", [one.event_id])
    platform.advance_to(START + timedelta(seconds=1))
    assert platform.reachable("a")
    gone = platform.schedule(
        EventType.PREEMPT, ["b"], source=EventSource.PLATFORM, duration_seconds=0
    )
    platform.approve("b", [gone.event_id])
    started = platform.now
    platform.advance_to(started + DOCUMENTED.impact - timedelta(seconds=1))
    assert [vm.name for vm in platform.vms()] == ["a", "b"]
    platform.advance_to(started + DOCUMENTED.impact)
    assert [vm.name for vm in platform.vms()] == ["a"]


def test_a_vm_of_an_unknown_scale_set_brings_its_set(platform: Platform) -> None:
    platform.add_vm(make_vm("web_0", vm_scale_set_name="web"))
    assert platform.scale_set("web").name == "web"
    assert platform.scale_set("web").platform_fault_domain_count >= 1


def test_a_vm_deleted_before_its_event_starts_leaves_nothing_behind(
    platform: Platform, add: Callable[..., Vm]
) -> None:
    add("a")
    add("b")
    event = platform.schedule(EventType.REBOOT, ["a", "b"], source=EventSource.PLATFORM)
    platform.delete_vm("a")
    platform.approve("b", [event.event_id])
    add("a")
    assert platform.reachable("a"), "the new a was never part of the event"
    assert not platform.reachable("b")


def test_a_started_event_differs_from_its_scheduled_self_in_status_and_not_before_only() -> None:
    """Whatever fields an event has, starting it changes EventStatus and clears NotBefore."""
    scheduled = Event(
        event_id="E",
        event_type=EventType.REDEPLOY,
        status=EventStatus.SCHEDULED,
        resources=(Resource("a"), Resource("b", iaas=False)),
        not_before=START,
        description="moving",
        source=EventSource.USER,
        duration_seconds=30,
        resource_type="Other",
    )
    assert scheduled.started() == dataclasses.replace(
        scheduled, status=EventStatus.STARTED, not_before=None
    )


@pytest.mark.parametrize("record", [Event, Resource, Document, EventView])
def test_a_record_built_often_keeps_each_value_in_its_own_field_and_stays_frozen(
    record: type,
) -> None:
    """The records a campaign builds by the thousand set their slots themselves
    (forewarn.domain._frozen): by position and by name, every value lands in the field of its
    name, and none can change; a field left out gets the default its declaration gives."""
    fields = dataclasses.fields(record)
    values: dict[str, Any] = {field.name: object() for field in fields}
    for built in (record(*values.values()), record(**values)):
        assert all(getattr(built, name) is value for name, value in values.items())
        for name in values:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(built, name, None)
    assert dataclasses.replace(built) == built
    required = {f.name: values[f.name] for f in fields if f.default is dataclasses.MISSING}
    defaulted = record(**required)
    for field in fields:
        if field.default is not dataclasses.MISSING:
            assert getattr(defaulted, field.name) == field.default, field.name


class _Recorder:
    """Stands in for the platform's parts: notes what each fired deadline handed it, and may
    set more deadlines while one fires, as the real parts do."""

    def __init__(self, deadlines: Deadlines, state: PlatformState) -> None:
        self.fired: list[tuple[str, datetime]] = []
        self._deadlines = deadlines
        self._state = state
        self.then: dict[str, tuple[timedelta, str]] = {}

    def _note(self, key: str) -> None:
        self.fired.append((key, self._state.now))
        if key in self.then:
            after, next_key = self.then.pop(key)
            self._deadlines.push(self._state.now + after, next_key, Deadline.ENABLE)

    enable_due = start_due = impact_over = remove_due = _note


def test_deadlines_fire_by_instant_then_in_the_order_they_were_set() -> None:
    """Those set while another fires included: at its own instant after every one already
    set for that instant, and before any later instant."""
    state = PlatformState(START, DOCUMENTED, EventIdFactory(1))
    deadlines = Deadlines(state)
    recorder = _Recorder(deadlines, state)
    parts = Parts(*(cast(Any, recorder),) * 3)
    for minutes, key in ((2, "b1"), (1, "a1"), (2, "b2"), (3, "c1"), (1, "a2"), (2, "b3")):
        deadlines.push(START + minutes * MIN, key, Deadline.ENABLE)
    recorder.then = {"a1": (MIN, "b4"), "b2": (timedelta(0), "b5"), "a2": (5 * MIN, "f1")}
    assert deadlines.next_due() == START + MIN
    deadlines.advance_to(START + 2 * MIN, parts)
    assert [key for key, _ in recorder.fired] == ["a1", "a2", "b1", "b2", "b3", "b4", "b5"]
    assert [at - START for _, at in recorder.fired] == [MIN] * 2 + [2 * MIN] * 5
    assert state.now == START + 2 * MIN
    assert deadlines.next_due() == START + 3 * MIN
    deadlines.advance_to(START + 10 * MIN, parts)
    assert [key for key, _ in recorder.fired[7:]] == ["c1", "f1"]
    assert deadlines.next_due() is None


def test_a_deadline_set_at_an_instant_already_fired_still_falls() -> None:
    """Each impact ends when its duration says: a Redeploy of DurationInSeconds 0 ends the
    instant it starts, its VM moved to another host ("Azure will ... immediately begin the
    recovery process", learn.microsoft.com/azure/virtual-machines/windows/scheduled-events),
    the second one as the first, although the instant they share has fired already."""
    platform = Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(3))
    for name in ("vm0", "vm1"):
        platform.add_vm(Vm(name=name, vm_id=name, host=f"host-{name}"))
    for name in ("vm0", "vm1"):
        platform.schedule(
            EventType.REDEPLOY,
            (name,),
            source=EventSource.PLATFORM,
            duration_seconds=0,
            already_started=True,
        )
        platform.advance_to(START)
        assert platform.vm(name).host != f"host-{name}", f"{name} moved at once"
