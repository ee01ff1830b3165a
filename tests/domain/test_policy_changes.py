"""A ``scheduledEventsPolicy`` changed at run time (``Platform.set_policy``), in the domain.

Sources: learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid: "If your VM is
part of an availability set or a Virtual Machine Scale Set then you can't set the schedule
events profile for each VM individually. All VMs in the same Virtual Machine Scale Set or
availability set are required to have the same scheduled events policy"; docs/azure-side.md,
"The policy and ARM identity": "events created from then on follow it".
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from forewarn.domain.errors import InvalidOperationError, UnknownGroupError, UnknownVmError
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.platform import Platform
from forewarn.domain.policy import DEFAULT_POLICY, ScheduledEventsPolicy
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
AUTO = ScheduledEventsPolicy(auto_approve_reboot=True, publish=True)


def fleet() -> Platform:
    platform = Platform(START)
    platform.add_scale_set(ScaleSet("web"))
    vms = [
        Vm(name="web_0", vm_id="w0", vm_scale_set_name="web", address="10.0.0.1", host="h1"),
        Vm(name="web_1", vm_id="w1", vm_scale_set_name="web", address="10.0.0.2", host="h2"),
        Vm(name="db0", vm_id="d0", availability_set="back", address="10.0.1.1", host="h3"),
        Vm(name="db1", vm_id="d1", availability_set="back", host="h4"),
        Vm(name="solo", vm_id="s", address="10.0.2.1", host="h5"),
    ]
    for vm in vms:
        platform.add_vm(vm)
    return platform


def policies(platform: Platform) -> dict[str, ScheduledEventsPolicy]:
    return {vm.name: vm.policy for vm in platform.vms()}


@pytest.mark.parametrize(
    ("kind", "name", "members"),
    [
        ("vm", "solo", {"solo"}),
        ("scale-set", "web", {"web_0", "web_1"}),
        ("availability-set", "back", {"db0", "db1"}),
    ],
)
def test_a_policy_reaches_every_member_and_no_one_else(
    kind: str, name: str, members: set[str]
) -> None:
    """Every VM of the set (or the VM) takes the policy, found by name or by address alike;
    every other VM keeps its own; readers of the platform see a change."""
    platform = fleet()
    before = platform.changes
    platform.set_policy(kind, name, AUTO)
    assert platform.changes != before
    assert {vm for vm, policy in policies(platform).items() if policy == AUTO} == members
    assert {vm for vm, policy in policies(platform).items() if policy == DEFAULT_POLICY} == (
        set(policies(platform)) - members
    )
    for vm in platform.vms():
        if vm.address is not None:
            found = platform.vm_at(vm.address)
            assert found is not None
            assert found.policy == vm.policy


@pytest.mark.parametrize(
    ("vm", "group"),
    [("web_1", "scale set 'web'"), ("db0", "availability set 'back'")],
)
def test_a_member_of_a_set_is_refused_a_policy_of_its_own(vm: str, group: str) -> None:
    platform = fleet()
    with pytest.raises(InvalidOperationError) as refused:
        platform.set_policy("vm", vm, AUTO)
    assert str(refused.value) == (
        f"{vm!r} is in {group}: all VMs of a set are required to have the same scheduled "
        "events policy; set it on the set"
    )
    assert set(policies(platform).values()) == {DEFAULT_POLICY}


def test_an_unknown_target_is_refused_by_its_kind() -> None:
    platform = fleet()
    with pytest.raises(UnknownVmError, match=r"^no virtual machine named 'nope'$"):
        platform.set_policy("vm", "nope", AUTO)
    with pytest.raises(UnknownGroupError, match=r"^no scale set named 'nope'$"):
        platform.set_policy("scale-set", "nope", AUTO)
    with pytest.raises(UnknownGroupError, match=r"^no availability set named 'nope'$"):
        platform.set_policy("availability-set", "nope", AUTO)
    with pytest.raises(InvalidOperationError, match=r"^no policy can be set on a host$"):
        platform.set_policy("host", "h1", AUTO)
    assert set(policies(platform).values()) == {DEFAULT_POLICY}
