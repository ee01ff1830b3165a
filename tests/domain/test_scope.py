"""Delivery scope (SPEC 5): which VMs are shown an event, and what its Resources list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from forewarn.domain import operations
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
GPU_SIZE = "Standard_NC6s_v3"
GENERAL_SIZE = "Standard_D2s_v3"


@pytest.fixture
def platform() -> Platform:
    return Platform(START, timing=DOCUMENTED, new_event_id=EventIdFactory(11))


def add(platform: Platform, name: str, **fields: Any) -> None:
    platform.add_vm(Vm(name=name, vm_id=f"id-{name}", **fields))


def shown(platform: Platform) -> dict[str, list[str]]:
    """Each VM's shown events as lists of their Resources, for readable comparisons."""
    return {
        vm.name: [",".join(r.name for r in e.resources) for e in platform.document(vm.name).events]
        for vm in platform.vms()
    }


def test_standalone_vm_is_shown_only_its_own_events(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "Scheduled
    events are delivered to: Standalone Virtual Machines." Two standalone VMs of one tenant on one
    host are strangers."""
    add(platform, "vm0", host="h1")
    add(platform, "vm1", host="h1")
    operations.restart(platform, "vm0")
    assert shown(platform) == {"vm0": ["vm0"], "vm1": []}


def test_availability_set_every_vm_is_shown_and_resources_name_the_impacted(
    platform: Platform,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "if you have
    100 VMs in a availability set and there is an update to one of them, the scheduled event will go
    to all 100" and "check the Resources field in the event to identify which VMs are affected"."""
    for i in range(4):
        add(platform, f"as-{i}", availability_set="as", platform_fault_domain=i % 2)
    add(platform, "outsider")
    operations.restart(platform, "as-1")
    assert shown(platform) == {
        "as-0": ["as-1"],
        "as-1": ["as-1"],
        "as-2": ["as-1"],
        "as-3": ["as-1"],
        "outsider": [],
    }


def test_cloud_service_every_vm_is_shown(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "All the VMs
    in a cloud service."; classic role instances keep their names unprefixed (SPEC 2, api-version
    2017-03-01)."""
    for i in range(3):
        add(platform, f"FrontEnd_IN_{i}", cloud_service="classic", iaas=False)
    (event,) = operations.restart(platform, "FrontEnd_IN_2")
    assert shown(platform) == {f"FrontEnd_IN_{i}": ["FrontEnd_IN_2"] for i in range(3)}
    assert [r.iaas for r in event.resources] == [False]


def test_placement_group_is_the_scope_regardless_of_zone(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": "All the VMs in
    a scale set placement group" and "Scheduled Events for all virtual machines (VMs) in an entire
    Availability Set or a Placement Group for a Virtual Machine Scale Set are delivered to all other
    VMs in the same group or set regardless of Availability Zone usage"."""
    platform.add_scale_set(ScaleSet("web", platform_fault_domain_count=2))
    add(platform, "web_0", vm_scale_set_name="web", placement_group="pg0", zone="1")
    add(platform, "web_1", vm_scale_set_name="web", placement_group="pg0", zone="2")
    add(platform, "web_2", vm_scale_set_name="web", placement_group="pg1", zone="1")
    operations.restart(platform, "web_0")
    assert shown(platform) == {"web_0": ["web_0"], "web_1": ["web_0"], "web_2": []}


def test_single_vms_in_a_zone_are_shown_only_their_own_events(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "Specific to
    VMs in an availability zone, the scheduled events go to single VMs in a zone ... if there are
    100 single VMs in a zone, then event will only go to the VM which is getting impacted"."""
    for i in range(3):
        add(platform, f"zonal{i}", zone="1", host="h1")
    operations.maintain_host(platform, "h1")
    assert shown(platform) == {f"zonal{i}": [f"zonal{i}"] for i in range(3)}


@pytest.mark.parametrize(
    ("size", "fault_domains", "broadcast"),
    [(GPU_SIZE, 1, False), (GPU_SIZE, 2, True), (GENERAL_SIZE, 1, True)],
)
def test_gpu_scale_set_with_one_fault_domain_shows_only_the_impacted_vm(
    platform: Platform, size: str, fault_domains: int, broadcast: bool
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Resources": "GPU
    accelerated Virtual Machines in a scale set using 1 fault domain (FD = 1) will only receive
    scheduled events for the impacted resource. Events will not be broadcasted to all VMs in the
    same placement group." Either condition alone keeps the placement-group scope."""
    platform.add_scale_set(ScaleSet("gpu", platform_fault_domain_count=fault_domains))
    for i in range(3):
        add(platform, f"gpu_{i}", vm_scale_set_name="gpu", vm_size=size)
    operations.restart(platform, "gpu_1")
    observers = ["gpu_1"] if broadcast else []
    assert shown(platform) == {"gpu_0": observers, "gpu_1": ["gpu_1"], "gpu_2": observers}


def test_host_operation_resources_hold_one_update_domain_one_tenant_one_scope(
    platform: Platform,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties",
    Resources: "The list is guaranteed to contain machines from at most one update domain, but it
    might not contain all machines in the UD"; tenants on shared hardware each approve their own
    events (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
    overview"). A set member on another host is shown the events of its set but is not in their
    Resources."""
    add(platform, "as-0", availability_set="as", platform_update_domain=0, host="h1")
    add(platform, "as-1", availability_set="as", platform_update_domain=0, host="h1")
    add(platform, "as-2", availability_set="as", platform_update_domain=1, host="h1")
    add(platform, "as-3", availability_set="as", platform_update_domain=0, host="h2")
    add(platform, "solo-a", host="h1")
    add(platform, "solo-b", host="h1", subscription_id="tenant-b")
    events = operations.maintain_host(platform, "h1")
    assert sorted(",".join(r.name for r in e.resources) for e in events) == [
        "as-0,as-1",
        "as-2",
        "solo-a",
        "solo-b",
    ]
    assert shown(platform) == {
        "as-0": ["as-0,as-1", "as-2"],
        "as-1": ["as-0,as-1", "as-2"],
        "as-2": ["as-0,as-1", "as-2"],
        "as-3": ["as-0,as-1", "as-2"],
        "solo-a": ["solo-a"],
        "solo-b": ["solo-b"],
    }


def test_a_vm_of_the_scope_may_approve_for_the_impacted(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": events are
    "delivered to and can be acknowledged by ... All the VMs in an availability set"; "Start an
    event": "Acknowledging an event allows the event to proceed for all Resources in the event, not
    just the VM that acknowledges the event"."""
    add(platform, "as-0", availability_set="as")
    add(platform, "as-1", availability_set="as")
    (event,) = operations.restart(platform, "as-0")
    platform.approve("as-1", [event.event_id])
    assert platform.document("as-0").events[0].status is EventStatus.STARTED


def test_a_vm_outside_the_scope_cannot_approve(platform: Platform) -> None:
    """SPEC 3 [ours]: "An id that is not an event this VM can see: 400 and no state change"."""
    add(platform, "as-0", availability_set="as")
    add(platform, "stranger")
    (event,) = operations.restart(platform, "as-0")
    before = platform.events(), platform.document("as-0"), platform.document("stranger")
    with pytest.raises(UnknownEventError):
        platform.approve("stranger", [event.event_id])
    assert (platform.events(), platform.document("as-0"), platform.document("stranger")) == before
    assert platform.event(event.event_id).approvals == frozenset()


def test_the_gpu_rule_reaches_the_platform() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Resources": "GPU
    accelerated Virtual Machines in a scale set using 1 fault domain (FD = 1) will only receive
    scheduled events for the impacted resource": a restart of one such instance is shown to it
    alone, while a set with more fault domains shows it to its whole placement group."""
    from datetime import UTC, datetime

    from forewarn.domain.events import EventSource, EventType
    from forewarn.domain.fleet import ScaleSet
    from forewarn.domain.platform import Platform
    from forewarn.domain.scope import ScopeKind
    from forewarn.domain.vms import Vm

    for fault_domains, expected in ((1, {"gpu_0"}), (2, {"gpu_0", "gpu_1"})):
        platform = Platform(datetime(2022, 4, 11, tzinfo=UTC))
        platform.add_scale_set(ScaleSet("gpu", platform_fault_domain_count=fault_domains))
        for index in range(2):
            platform.add_vm(
                Vm(
                    name=f"gpu_{index}",
                    vm_id=f"g{index}",
                    vm_scale_set_name="gpu",
                    vm_size="Standard_NC6s_v3",
                    host=f"h{index}",
                )
            )
        event = platform.schedule(EventType.REBOOT, ["gpu_0"], source=EventSource.USER)
        assert platform.event(event.event_id).audience == expected
        kind = platform.scope_of(platform.vm("gpu_0")).kind
        assert kind is (ScopeKind.VM if fault_domains == 1 else ScopeKind.PLACEMENT_GROUP)


def test_two_cloud_services_do_not_see_each_others_events(platform: Platform) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics": "All the VMs
    in a cloud service": in that service only."""
    add(platform, "FrontEnd_IN_0", cloud_service="shop", iaas=False)
    add(platform, "BackEnd_IN_0", cloud_service="shop", iaas=False)
    add(platform, "Worker_IN_0", cloud_service="batch", iaas=False)
    platform.schedule(EventType.REBOOT, ["FrontEnd_IN_0"], source=EventSource.PLATFORM)
    assert shown(platform) == {
        "FrontEnd_IN_0": ["FrontEnd_IN_0"],
        "BackEnd_IN_0": ["FrontEnd_IN_0"],
        "Worker_IN_0": [],
    }


def test_a_scale_set_vm_without_a_placement_group_is_in_the_first(platform: Platform) -> None:
    """A VM added with no placement group (as the plugin and control API can) belongs to the
    set's first one, "0", the one a fleet file gives up to placementGroupSize instances."""
    add(platform, "web_0", vm_scale_set_name="web", placement_group="0", host="h0")
    add(platform, "web_1", vm_scale_set_name="web", host="h0")
    add(platform, "web_2", vm_scale_set_name="web", placement_group="1", host="h0")
    platform.schedule(EventType.REBOOT, ["web_1"], source=EventSource.PLATFORM)
    assert shown(platform) == {"web_0": ["web_1"], "web_1": ["web_1"], "web_2": []}
