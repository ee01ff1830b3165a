"""Placement: each set's fault domains stay on hosts of their own, whatever moves a VM.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview": "As part
of Azure's availability guarantee, VMs in different fault domains won't be impacted by routine
maintenance operations at the same time". Host maintenance impacts a whole host, so the guarantee
holds only if no host holds two fault domains of one availability set, scale set or cloud service.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.config.fleet import FleetFileError, parse_fleet
from forewarn.domain import operations
from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.placement import (
    FaultDomainSet,
    Placements,
    SetKind,
    fault_domain_set,
    new_host,
    placement_error,
)
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
WEEK = timedelta(days=7)


@pytest.fixture
def platform() -> Platform:
    return Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(5))


def add(platform: Platform, name: str, **fields: Any) -> None:
    platform.add_vm(Vm(name=name, vm_id=f"id-{name}", **fields))


def two_domains(platform: Platform) -> None:
    """An availability set with fault domain 0 on h1 and fault domain 1 on h2, and a lone VM on
    h0, the first host by name."""
    add(platform, "lone", host="h0")
    add(platform, "as-0", availability_set="as", platform_fault_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_fault_domain=1, host="h2")


def run_to_the_end(platform: Platform) -> None:
    platform.advance_to(platform.now + WEEK + timedelta(hours=1))


def test_a_redeploy_never_lands_on_a_host_of_another_fault_domain(platform: Platform) -> None:
    """Redeploy "moves" the VM (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
    "Event properties"): to the first host by name that holds no other fault domain of its set (a
    host is known while it runs a VM)."""
    two_domains(platform)
    operations.redeploy(platform, "as-0")
    run_to_the_end(platform)
    assert platform.vm("as-0").host == "h0"
    operations.redeploy(platform, "as-1")
    run_to_the_end(platform)
    assert platform.vm("as-1").host == "h2-redeployed", "h0 now holds fault domain 0"


def test_with_no_such_host_the_vm_gets_a_new_one(platform: Platform) -> None:
    add(platform, "as-0", availability_set="as", platform_fault_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_fault_domain=1, host="h2")
    operations.redeploy(platform, "as-0")
    run_to_the_end(platform)
    assert platform.vm("as-0").host == "h1-redeployed"


def test_a_new_host_name_is_never_one_in_use() -> None:
    moving = Vm(name="a", vm_id="a", availability_set="s", platform_fault_domain=0, host="h")
    fleet = [
        moving,
        Vm(name="b", vm_id="b", availability_set="s", platform_fault_domain=1, host="h-redeployed"),
    ]
    assert new_host(moving, fleet, avoid=()) == "h-redeployed-2"
    assert new_host(moving, fleet, avoid=("h-redeployed-2",)) == "h-redeployed-3"


def test_a_predicted_failure_moves_the_vms_and_no_vm_moves_onto_that_host(
    platform: Platform,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event scheduling": Azure
    predicts host failure "due to degraded hardware and will attempt to mitigate disruption to your
    service by scheduling a migration": the VMs leave, and the degraded host takes no others."""
    two_domains(platform)
    (event,) = operations.predict_failure(platform, "h0")
    assert event.event_type is EventType.REDEPLOY
    operations.redeploy(platform, "as-0")
    run_to_the_end(platform)
    assert platform.vm("as-0").host == "h1-redeployed", "not h0 (failing), not h2 (domain 1)"
    assert platform.vm("lone").host == "h1-redeployed", "the first other host by name"


def test_after_a_host_failure_its_vms_come_back_elsewhere(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": on a
    hardware failure "Azure will ... immediately begin the recovery process for affected virtual
    machines" with a Started Reboot; the failed host runs nothing afterwards and takes no VM that
    moves."""
    two_domains(platform)
    (event,) = operations.fail_host(platform, "h1")
    assert (event.event_type, event.status) == (EventType.REBOOT, EventStatus.STARTED)
    assert platform.vm("as-0").host == "h1", "moved only once its impact is over"
    run_to_the_end(platform)
    assert platform.vm("as-0").host == "h0"
    operations.redeploy(platform, "lone")
    run_to_the_end(platform)
    assert platform.vm("lone").host == "h2", "h1 runs nothing any more"


def test_a_reboot_elsewhere_does_not_move_a_vm(platform: Platform) -> None:
    """Only a Redeploy or recovery from failed hardware moves a VM; a reboot keeps its host."""
    two_domains(platform)
    operations.maintain_host(platform, "h1")
    operations.restart(platform, "lone")
    run_to_the_end(platform)
    assert [vm.host for vm in platform.vms()] == ["h0", "h1", "h2"]


def test_a_vm_cannot_join_a_host_holding_another_fault_domain_of_its_set(
    platform: Platform,
) -> None:
    two_domains(platform)
    with pytest.raises(InvalidOperationError, match="fault domains never share a host"):
        add(platform, "as-2", availability_set="as", platform_fault_domain=0, host="h2")
    add(platform, "as-3", availability_set="as", platform_fault_domain=1, host="h2")
    add(platform, "other", availability_set="other", platform_fault_domain=1, host="h1")
    add(platform, "vmss_0", vm_scale_set_name="vmss", platform_fault_domain=0, host="h2")


@pytest.mark.parametrize(
    ("fields", "group"),
    [
        ({"availability_set": "a"}, FaultDomainSet(SetKind.AVAILABILITY_SET, "a")),
        ({"vm_scale_set_name": "s"}, FaultDomainSet(SetKind.SCALE_SET, "s")),
        ({"cloud_service": "c", "iaas": False}, FaultDomainSet(SetKind.CLOUD_SERVICE, "c")),
        ({}, None),
    ],
)
def test_which_set_a_vm_keeps_apart(fields: dict[str, Any], group: FaultDomainSet | None) -> None:
    assert fault_domain_set(Vm(name="v", vm_id="v", **fields)) == group


def test_a_fleet_file_placing_two_fault_domains_on_one_host_is_refused() -> None:
    with pytest.raises(FleetFileError, match=r"host 'h1' already runs 'a'.*fault domain 0"):
        parse_fleet(
            "availabilitySets: [{name: s}]\n"
            "vms:\n"
            "  - {name: a, availabilitySet: s, faultDomain: 0, host: h1, address: 127.0.0.2}\n"
            "  - {name: b, availabilitySet: s, faultDomain: 1, host: h1, address: 127.0.0.3}\n"
        )
    with pytest.raises(FleetFileError, match="fault domains never share a host"):
        parse_fleet(
            "scaleSets: [{name: web, capacity: 2, hosts: [h1], platformFaultDomainCount: 2,"
            " addressStart: 127.0.1.1}]"
        )


def test_a_scale_set_spreads_its_fault_domains_over_its_hosts() -> None:
    fleet = parse_fleet(
        "scaleSets: [{name: web, capacity: 4, hosts: [a, b, c], platformFaultDomainCount: 2,"
        " addressStart: 127.0.1.1}]"
    )
    assert [(vm.platform_fault_domain, vm.host) for vm in fleet.vms] == [
        (0, "a"),
        (1, "b"),
        (0, "a"),
        (1, "b"),
    ]


def test_a_host_predicted_to_fail_keeps_its_vms_until_they_are_redeployed(
    platform: Platform,
) -> None:
    """Only the Redeploy of the predicted failure moves its VMs; a reboot in the meantime
    keeps them where they are (unlike a host that failed, whose VMs come back elsewhere)."""
    two_domains(platform)
    operations.predict_failure(platform, "h1")
    (reboot,) = operations.restart(platform, "as-0")
    platform.approve("as-0", [reboot.event_id])
    platform.advance_to(platform.now + timedelta(minutes=1))
    assert platform.vm("as-0").host == "h1"


def test_vms_without_a_host_are_no_destination_and_a_new_host_has_a_name() -> None:
    """A VM added with no host runs "nowhere in particular": no VM is moved onto that
    nowhere, and one leaving it gets a named host."""
    hostless = Vm(name="a", vm_id="a")
    placed = Vm(name="b", vm_id="b", availability_set="s", platform_fault_domain=1, host="h")
    moving = Vm(name="c", vm_id="c", availability_set="s", platform_fault_domain=0, host="h2")
    assert new_host(moving, [hostless, placed, moving], avoid=()) == "h2-redeployed"
    assert new_host(hostless, [hostless], avoid=()) == "host-redeployed"


def test_a_redeploy_moves_its_vm_whatever_its_duration(platform: Platform) -> None:
    """A Redeploy moves the VM when its impact ends: at once for DurationInSeconds 0, and also
    when the impact ends at the very moment the event is removed (both are due together; the
    impact's end comes first, as it was set first)."""
    two_domains(platform)
    for seconds in (0, int(DOCUMENTED.started_period.total_seconds())):
        before = platform.vm("lone").host
        event = platform.schedule(
            EventType.REDEPLOY, ["lone"], source=EventSource.PLATFORM, duration_seconds=seconds
        )
        platform.approve("lone", [event.event_id])
        platform.advance_to(platform.now + timedelta(seconds=seconds))
        assert platform.vm("lone").host != before, seconds
        live = {view.event.event_id for view in platform.events()}
        assert (event.event_id in live) == (seconds == 0), "removed with its impact's end"


def test_failed_hardware_takes_no_vm_even_one_placed_there_later(platform: Platform) -> None:
    two_domains(platform)
    operations.fail_host(platform, "h0")
    run_to_the_end(platform)
    add(platform, "late", host="h0")
    operations.redeploy(platform, "as-1")
    run_to_the_end(platform)
    assert platform.vm("as-1").host not in ("h0", "h2")


def _random_set_vm(chooser: random.Random, index: int) -> Vm:
    return Vm(
        name=f"v{index}",
        vm_id=f"v{index}",
        availability_set=chooser.choice(["s", "t", None]),
        platform_fault_domain=chooser.randrange(3),
        host=chooser.choice(["h1", "h2", "h3", "h4", ""]),
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_placement_index_gives_the_answers_of_a_search_of_the_fleet(seed: int) -> None:
    """The index only spares work: whatever VMs were placed, moved and removed, every check
    refuses the same VMs with the same message (naming the first VM in the fleet's order in
    the way), and every move picks the same host, as a search of the whole fleet."""
    chooser = random.Random(seed)
    fleet: dict[str, Vm] = {}
    placements = Placements()
    for index in range(60):
        candidate = _random_set_vm(chooser, index)
        expected = placement_error(candidate, fleet.values())
        assert placement_error(candidate, fleet.values(), placements) == expected
        if expected is None:
            fleet[candidate.name] = candidate
            placements.add(candidate)
        if fleet and chooser.random() < 0.3:
            moving = chooser.choice(list(fleet.values()))
            host = new_host(moving, fleet.values(), avoid=("h3",), placements=placements)
            assert host == new_host(moving, fleet.values(), avoid=("h3",))
            fleet[moving.name] = replace(moving, host=host)
            placements.remove(moving)
            placements.add(fleet[moving.name])
        if fleet and chooser.random() < 0.1:
            gone = fleet.pop(chooser.choice(list(fleet)))
            placements.remove(gone)
