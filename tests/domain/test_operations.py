"""What triggers events (SPEC 6), one row at a time, and the auto-approval policies (SPEC 4).

Every expectation on the documented profile is the documented number itself, written out
here, never read back from the profile under test.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.domain import descriptions, operations
from forewarn.domain.events import Event, EventStatus, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.timing import DOCUMENTED, FAST, TimingProfile
from forewarn.domain.vms import Priority, Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
MIN = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


def make_platform(timing: TimingProfile = DOCUMENTED) -> Platform:
    return Platform(START, timing=timing, new_event_id=EventIdFactory(29))


@pytest.fixture
def platform() -> Platform:
    return make_platform()


def add(platform: Platform, name: str, **fields: Any) -> None:
    platform.add_vm(Vm(name=name, vm_id=f"id-{name}", **fields))


def row(event: Event) -> tuple[str, str, str, str, timedelta | None]:
    """An event as a row of SPEC 6: type, source, status, description, notice."""
    notice = None if event.not_before is None else event.not_before - START
    return (
        event.event_type.value,
        event.source.value,
        event.status.value,
        event.description,
        notice,
    )


def names(platform: Platform) -> set[str]:
    return {vm.name for vm in platform.vms()}


# -- minimum notice --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "notice"),
    [
        (EventType.FREEZE, 15 * MIN),
        (EventType.REBOOT, 15 * MIN),
        (EventType.REDEPLOY, 10 * MIN),
        (EventType.PREEMPT, 30 * SECOND),
        (EventType.TERMINATE, 5 * MIN),
    ],
)
def test_documented_minimum_notice(event_type: EventType, notice: timedelta) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    "Freeze 15 minutes, Reboot 15 minutes, Redeploy 10 minutes, Preempt 30 seconds, Terminate User
    Configurable: 5 to 15 minutes"."""
    assert DOCUMENTED.notice_for(event_type) == notice


def test_documented_typical_timings() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "Impact Duration: 7 seconds, EventStatus:"Started" to Completed (event removed from Events
    array): 10 minutes"."""
    assert (DOCUMENTED.impact, DOCUMENTED.started_period) == (7 * SECOND, 10 * MIN)


# -- user-initiated maintenance --------------------------------------------------------------


def test_restart_is_a_user_reboot_with_15_minutes_notice(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "User-initiated
    Maintenance": "If you restart a VM, an event with the type Reboot is scheduled"; description as
    documented (SPEC 2)."""
    add(platform, "vm0")
    (event,) = operations.restart(platform, "vm0")
    assert row(event) == ("Reboot", "User", "Scheduled", descriptions.USER_RESTART, 15 * MIN)
    assert descriptions.USER_RESTART == (
        "Virtual machine is going to be restarted as requested by authorized user."
    )


def test_restart_starts_at_once_when_approved(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
    approving "indicates to Azure that it can shorten the minimum notification time"; user events
    "can be immediately approved" ("User-initiated maintenance")."""
    add(platform, "vm0")
    (event,) = operations.restart(platform, "vm0")
    platform.approve("vm0", [event.event_id])
    assert platform.event(event.event_id).event.status is EventStatus.STARTED
    assert not platform.reachable("vm0")


def test_redeploy_is_a_user_redeploy_with_10_minutes_notice_and_moves_the_vm(
    platform: Platform,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "User-initiated
    Maintenance": "If you redeploy a VM, an event with the type Redeploy is scheduled"; "Event
    Properties": Redeploy "The Virtual Machine is scheduled to move to another node"."""
    add(platform, "vm0", host="h1")
    add(platform, "vm1", host="h2")
    (event,) = operations.redeploy(platform, "vm0")
    assert row(event) == ("Redeploy", "User", "Scheduled", descriptions.USER_REDEPLOY, 10 * MIN)
    platform.advance_to(START + 10 * MIN + 7 * SECOND)
    assert platform.vm("vm0").host == "h2"


# -- scale sets: Terminate and OS image notifications ----------------------------------------


@pytest.mark.parametrize("minutes", [5, 10, 15])
@pytest.mark.parametrize(("autoscale", "source"), [(False, "User"), (True, "Platform")])
def test_terminate_notice_is_the_scale_sets_not_before_timeout(
    platform: Platform, minutes: int, autoscale: bool, source: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    Terminate "User Configurable: 5 to 15 minutes"; SPEC 6 [doc]: delete or scale in with terminate
    notification gives Terminate, source User (Platform for autoscale)."""
    platform.add_scale_set(
        ScaleSet("web", terminate_notification=True, terminate_timeout=minutes * MIN)
    )
    add(platform, "web_0", vm_scale_set_name="web")
    (event,) = operations.delete_instances(platform, "web", ["0"], autoscale=autoscale)
    assert row(event) == ("Terminate", source, "Scheduled", "", minutes * MIN)
    assert [r.name for r in event.resources] == ["web_0"]


def test_terminate_is_deleted_after_its_impact(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    Terminate "The virtual machine is scheduled to be deleted"."""
    platform.add_scale_set(ScaleSet("web", terminate_notification=True))
    add(platform, "web_0", vm_scale_set_name="web")
    (event,) = operations.delete_instances(platform, "web", ["0"])
    platform.approve("web_0", [event.event_id])
    platform.advance_to(START + 6 * SECOND)
    assert names(platform) == {"web_0"}
    platform.advance_to(START + 7 * SECOND)
    assert names(platform) == set()


def test_delete_without_terminate_notification_deletes_with_no_event(platform: Platform) -> None:
    """SPEC 6 [doc]: Terminate only "with terminate notification enabled"; without it the
    instance goes at once and nobody in its placement group is shown anything."""
    platform.add_scale_set(ScaleSet("web"))
    add(platform, "web_0", vm_scale_set_name="web")
    add(platform, "web_1", vm_scale_set_name="web")
    assert operations.delete_instances(platform, "web", ["0"]) == ()
    assert names(platform) == {"web_1"}
    assert platform.events() == ()
    assert platform.document("web_1").incarnation == 1


def test_other_scale_set_operations_never_terminate(platform: Platform) -> None:
    """SPEC 6 [doc]: "reboot/reimage/redeploy/deallocate do not produce Terminate", even with
    terminate notification on."""
    platform.add_scale_set(ScaleSet("web", terminate_notification=True, os_image_notification=True))
    add(platform, "web_0", vm_scale_set_name="web")
    events = [
        *operations.restart(platform, "web_0"),
        *operations.redeploy(platform, "web_0"),
        *operations.os_image_upgrade(platform, "web", ["0"]),
    ]
    assert [e.event_type for e in events] == [
        EventType.REBOOT,
        EventType.REDEPLOY,
        EventType.REBOOT,
    ]


@pytest.mark.parametrize(
    ("size", "notified"),
    [
        ("Standard_D2s_v3", True),
        ("Standard_F4s_v2", True),
        ("Standard_G2", False),
        ("Standard_M8ms", False),
        ("Standard_NC6s_v3", False),
        ("Standard_H16r", False),
    ],
)
def test_os_image_notification_not_for_g_m_n_h_sizes(
    platform: Platform, size: str, notified: bool
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": guest OS upgrade and reimage events are "supported for general purpose VM sizes
    ... It doesn't work for G, M, N, and H series"; SPEC 6: Platform, 15 min."""
    platform.add_scale_set(ScaleSet("web", os_image_notification=True))
    add(platform, "web_0", vm_scale_set_name="web", vm_size=size)
    events = operations.os_image_upgrade(platform, "web", ["0"])
    expected = [("Reboot", "Platform", "Scheduled", "", 15 * MIN)] if notified else []
    assert [row(e) for e in events] == expected


def test_os_image_notification_only_when_enabled(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": "Scheduled events for Virtual Machine Scale Sets Guest OS upgrades and reimages
    are disabled by default. To enable ... first enable them using OSImageNotificationProfile"."""
    platform.add_scale_set(ScaleSet("web"))
    add(platform, "web_0", vm_scale_set_name="web")
    assert operations.os_image_upgrade(platform, "web", ["0"]) == ()
    assert platform.document("web_0").incarnation == 1


# -- Spot eviction -----------------------------------------------------------------------------


@pytest.mark.parametrize(("timing", "notice"), [(DOCUMENTED, 30 * SECOND), (FAST, SECOND)])
def test_spot_eviction_is_a_platform_preempt_then_a_deletion(
    timing: TimingProfile, notice: timedelta
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    Preempt "30 seconds"; "Event Properties": "Preempt: The Spot Virtual Machine is being deleted";
    the fast profile's second is SPEC 7 [ours]."""
    platform = make_platform(timing)
    platform.add_scale_set(ScaleSet("spotset", priority=Priority.SPOT))
    add(platform, "spotset_0", vm_scale_set_name="spotset", priority=Priority.SPOT)
    add(platform, "spotset_1", vm_scale_set_name="spotset", priority=Priority.SPOT)
    (event,) = operations.simulate_eviction(platform, ["spotset_0"])
    assert row(event) == ("Preempt", "Platform", "Scheduled", "", notice)
    assert platform.document("spotset_1").events == (event,)
    platform.advance_to(START + notice + timing.impact)
    assert names(platform) == {"spotset_1"}


# -- platform maintenance ----------------------------------------------------------------------


def test_live_migration_is_a_freeze_of_a_few_seconds(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    "Freeze: The Virtual Machine is scheduled to pause for a few seconds"; the documented example's
    DurationInSeconds 5 and description
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses")."""
    add(platform, "vm0", host="h1")
    (event,) = operations.live_migrate(platform, "h1")
    assert row(event) == ("Freeze", "Platform", "Scheduled", descriptions.LIVE_MIGRATION, 15 * MIN)
    assert event.duration_seconds == 5
    platform.approve("vm0", [event.event_id])
    platform.advance_to(START + 4 * SECOND)
    assert not platform.reachable("vm0")
    platform.advance_to(START + 5 * SECOND)
    assert platform.reachable("vm0")


def test_a_memory_preserving_host_update_is_a_freeze_of_about_nine_seconds(
    platform: Platform,
) -> None:
    """SPEC 6 [seen: public captures and Microsoft's mock]: "memory-preserving host
    update (the most common real event) | Freeze, "Host server is undergoing maintenance.",
    DurationInSeconds ~9 (1-15) | Platform | 15 min"."""
    add(platform, "vm0", host="h1")
    (event,) = operations.update_host(platform, "h1")
    assert row(event) == (
        "Freeze",
        "Platform",
        "Scheduled",
        descriptions.HOST_MAINTENANCE,
        15 * MIN,
    )
    assert event.duration_seconds == 9
    platform.approve("vm0", [event.event_id])
    platform.advance_to(START + 8 * SECOND)
    assert not platform.reachable("vm0")
    platform.advance_to(START + 9 * SECOND)
    assert platform.reachable("vm0")


def test_host_maintenance_is_a_platform_reboot(platform: Platform) -> None:
    """SPEC 6 [doc]: host maintenance needing reboot: Reboot, Platform, 15 min; description
    "Host server is undergoing maintenance."
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties")."""
    add(platform, "vm0", host="h1")
    (event,) = operations.maintain_host(platform, "h1")
    assert row(event) == (
        "Reboot",
        "Platform",
        "Scheduled",
        descriptions.HOST_MAINTENANCE,
        15 * MIN,
    )
    assert descriptions.HOST_MAINTENANCE == "Host server is undergoing maintenance."


def test_predicted_failure_is_a_redeploy_days_ahead(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    "Affected virtual machines will receive a scheduled event with a NotBefore that is typically a
    few days in the future ... Azure tries to give 7 days' advance notice when possible";
    "scheduling a migration": Redeploy."""
    add(platform, "vm0", host="h1")
    add(platform, "vm1", host="h2")
    (event,) = operations.predict_failure(platform, "h1")
    assert row(event) == (
        "Redeploy",
        "Platform",
        "Scheduled",
        descriptions.EMERGENCY_REPAIR,
        timedelta(days=7),
    )
    platform.advance_to(START + timedelta(days=7) - SECOND)
    assert platform.event(event.event_id).event.status is EventStatus.SCHEDULED
    platform.advance_to(START + timedelta(days=7, seconds=7))
    assert platform.vm("vm0").host == "h2"


def test_hardware_failure_is_a_started_reboot_for_every_impacted_vm(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": "In
    the case the host node experiences a hardware failure Azure will bypass the minimum notice
    period ... an event will be created for all impacted VMs with EventType = Reboot and EventStatus
    = Started." Nobody is asked: every impacted VM is down at once."""
    add(platform, "a0", host="h1")
    add(platform, "as-0", host="h1", availability_set="as", platform_update_domain=0)
    add(platform, "as-1", host="h1", availability_set="as", platform_update_domain=1)
    add(platform, "b0", host="h1", subscription_id="tenant-b")
    add(platform, "elsewhere", host="h2")
    events = operations.fail_host(platform, "h1")
    assert {row(e) for e in events} == {
        ("Reboot", "Platform", "Started", descriptions.VM_FAILURE, None)
    }
    assert sorted(r.name for e in events for r in e.resources) == ["a0", "as-0", "as-1", "b0"]
    for name in ("a0", "as-0", "as-1", "b0"):
        assert not platform.reachable(name)
        document = platform.document(name)
        assert {e.status for e in document.events} == {EventStatus.STARTED}
        # each event appeared once, already Started: one change per event, none for Scheduled
        assert document.incarnation == 1 + len(document.events)
    assert len(platform.document("as-0").events) == 2  # one per update domain of the set
    assert platform.reachable("elsewhere")
    assert platform.document("elsewhere").events == ()


# -- auto-approval policies ------------------------------------------------------------------

_ONE_POLICY = {
    "auto_approve_reboot": ScheduledEventsPolicy(auto_approve_reboot=True),
    "auto_approve_redeploy": ScheduledEventsPolicy(auto_approve_redeploy=True),
}


@pytest.mark.parametrize(
    ("policy", "operation", "auto"),
    [
        ("auto_approve_reboot", operations.restart, True),
        ("auto_approve_redeploy", operations.redeploy, True),
        ("auto_approve_reboot", operations.redeploy, False),
        ("auto_approve_redeploy", operations.restart, False),
    ],
)
def test_auto_approval_shows_only_started(
    platform: Platform,
    policy: str,
    operation: Callable[[Platform, str], tuple[Event, ...]],
    auto: bool,
) -> None:
    """SPEC 4 [doc: overview]: "Auto-approval policy on a VM (userInitiatedReboot /
    userInitiatedRedeploy automaticallyApprove): no Scheduled event is shown, only Started."
    Each policy covers its own operation only."""
    add(platform, "vm0", policy=_ONE_POLICY[policy])
    (event,) = operation(platform, "vm0")
    document = platform.document("vm0")
    assert document.events == (event,)
    if auto:
        assert (event.status, event.not_before, document.incarnation) == (
            EventStatus.STARTED,
            None,
            2,
        )
    else:
        assert event.status is EventStatus.SCHEDULED


def test_auto_approval_is_for_user_initiated_operations_only(platform: Platform) -> None:
    """SPEC 4 [doc: overview]: the policies are ``userInitiatedReboot`` and
    ``userInitiatedRedeploy``; platform maintenance still gives notice."""
    add(
        platform,
        "vm0",
        host="h1",
        policy=ScheduledEventsPolicy(auto_approve_reboot=True, auto_approve_redeploy=True),
    )
    events = (
        *operations.maintain_host(platform, "h1"),
        *operations.predict_failure(platform, "h1"),
    )
    assert [e.status for e in events] == [EventStatus.SCHEDULED] * 2


# -- an impact longer than the Started period ------------------------------------------------


def test_event_outlasting_the_started_period_is_removed_after_its_impact() -> None:
    """SPEC 4: "Started --impact, then done--> (removed)";
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "When the event has reached a terminal state, it's removed from the list of events. That serves
    as the signal for the customer to recover their VMs." A VM still frozen has not reached that
    state."""
    platform = make_platform(FAST)
    add(platform, "vm0", host="h1", availability_set="as")
    add(platform, "vm1", host="h2", availability_set="as")
    (event,) = operations.live_migrate(platform, "h1")
    platform.approve("vm1", [event.event_id])
    for elapsed in range(1, 8):
        platform.advance_to(START + elapsed * SECOND)
        if not platform.reachable("vm0"):
            assert platform.document("vm1").events, f"removed while vm0 frozen, at +{elapsed}s"


# -- maintenance campaigns -------------------------------------------------------------------


def fault_domains_in_impact(platform: Platform) -> set[int]:
    return {vm.platform_fault_domain for vm in platform.vms() if not platform.reachable(vm.name)}


def test_campaign_walks_fault_domains_and_groups_update_domains(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "VMs in different fault domains won't be impacted by routine maintenance operations at the same
    time. However, they may have operations serialized one after another. VMs in one fault domain
    can receive scheduled events with EventStatus:"Scheduled" shortly after another fault domain's
    maintenance is completed"; Resources hold one update domain
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events)."""
    for i in range(6):
        add(
            platform,
            f"as-{i}",
            availability_set="as",
            platform_fault_domain=i % 3,
            platform_update_domain=i % 2,
        )
    operations.maintenance_campaign(platform, kinds=[operations.MaintenanceKind.LIVE_MIGRATE])
    walked: dict[int, set[tuple[str, ...]]] = {}
    moment = START
    while platform.events():
        for view in platform.events():
            resources = tuple(r.name for r in view.event.resources)
            domain = platform.vm(resources[0]).platform_fault_domain
            walked.setdefault(domain, set()).add(resources)
            if view.event.status is EventStatus.SCHEDULED:
                platform.approve(resources[0], [view.event.event_id])
        assert len(fault_domains_in_impact(platform)) <= 1
        moment += SECOND
        platform.advance_to(moment)
    assert walked == {
        0: {("as-0",), ("as-3",)},
        1: {("as-1",), ("as-4",)},
        2: {("as-2",), ("as-5",)},
    }
    assert list(walked) == [0, 1, 2]
    live_migration_started = DOCUMENTED.started_period_for(
        EventType.FREEZE, descriptions.LIVE_MIGRATION
    )
    assert moment - START >= 3 * live_migration_started, "one domain after another"
    assert platform.campaigns() == ()


def test_overlapping_campaigns_impact_one_fault_domain_at_a_time(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "As part of Azure's availability guarantee, VMs in different fault domains won't be impacted by
    routine maintenance operations at the same time"."""
    add(platform, "as-0", availability_set="as", platform_fault_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_fault_domain=1, host="h2")
    operations.maintenance_campaign(platform, ["as-0"])
    operations.maintenance_campaign(platform, ["as-1"])
    for elapsed in range(0, 40 * 60, 1):
        platform.advance_to(START + elapsed * SECOND)
        assert len(fault_domains_in_impact(platform)) <= 1, f"at +{elapsed}s"


def test_campaigns_are_numbered_from_one_and_report_their_first_step(platform: Platform) -> None:
    """The campaign a user starts is named by its number (``forewarn maintenance start``
    prints "campaign 1: 2 fault domain step(s)"); a second one queues behind the first."""
    add(platform, "as-0", availability_set="as", platform_fault_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_fault_domain=1, host="h2")
    first = operations.maintenance_campaign(platform)
    (event,) = platform.document("as-0").events
    assert (first.campaign_id, first.step, first.steps) == (1, 1, 2)
    assert first.current == frozenset({event.event_id})
    second = operations.maintenance_campaign(platform, ["as-1"])
    assert (second.campaign_id, second.step, second.steps, second.current) == (2, 0, 1, frozenset())
    assert [c.campaign_id for c in platform.campaigns()] == [1, 2]


def test_a_campaign_step_skips_vms_deleted_before_it(platform: Platform) -> None:
    """A VM deleted while an earlier fault domain is under maintenance is not named by the
    later step (Resources name only existing VMs,
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events "Event properties")."""
    add(platform, "as-0", availability_set="as", platform_fault_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_fault_domain=1, host="h2")
    add(platform, "as-3", availability_set="as", platform_fault_domain=1, host="h2")
    operations.maintenance_campaign(platform)
    platform.delete_vm("as-3")
    (first,) = platform.document("as-0").events
    platform.approve("as-0", [first.event_id])
    platform.advance_to(START + DOCUMENTED.started_period + SECOND)
    (second,) = platform.document("as-1").events
    assert [r.name for r in second.resources] == ["as-1"]


def test_a_vm_deleted_during_its_impact_and_added_again_starts_afresh(platform: Platform) -> None:
    """Deleting a VM forgets everything about it: one added again under the same name is not
    paused by the old VM's impact, and answers at once."""
    add(platform, "a", host="h1", address="127.0.0.2")
    (event,) = operations.restart(platform, "a")
    platform.approve("a", [event.event_id])
    assert not platform.reachable("a")
    platform.delete_vm("a")
    assert platform.vm_at("127.0.0.2") is None
    add(platform, "a", host="h1", address="127.0.0.2")
    assert platform.reachable("a")
    assert platform.pause("a") is None
    assert platform.impacts() == {}
    assert platform.document("a").events == ()


def test_a_campaign_chooses_the_kind_of_each_fault_domains_step(platform: Platform) -> None:
    """SPEC 6: routine maintenance is a memory-preserving host update (Freeze ~9 s, "Host
    server is undergoing maintenance."), a live migration (Freeze 5 s) or a rebooting host
    maintenance; a campaign takes one per fault domain in turn, cycling."""
    for fd in range(3):
        add(platform, f"as-{fd}", availability_set="as", platform_fault_domain=fd, host=f"h{fd}")
    kinds = [operations.MaintenanceKind.UPDATE, operations.MaintenanceKind.MAINTAIN]
    operations.maintenance_campaign(platform, kinds=kinds)
    seen: list[tuple[str, str, str, int]] = []
    moment = START
    while platform.events():
        for view in platform.events():
            event = view.event
            row = (event.resources[0].name, event.event_type.value, event.description)
            if event.status is EventStatus.SCHEDULED and (*row, event.duration_seconds) not in seen:
                seen.append((*row, event.duration_seconds))
                platform.approve(event.resources[0].name, [event.event_id])
        moment += SECOND
        platform.advance_to(moment)
    assert seen == [
        ("as-0", "Freeze", descriptions.HOST_MAINTENANCE, 9),
        ("as-1", "Reboot", descriptions.HOST_MAINTENANCE, -1),
        ("as-2", "Freeze", descriptions.HOST_MAINTENANCE, 9),
    ]
