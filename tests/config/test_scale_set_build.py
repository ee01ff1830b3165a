"""A scale set's VMs as the fleet file makes them, by capacity or listed: what every
instance shares (defaults, policy, priority, image) and what each takes by its position
(fault and update domain, zone, host, placement group, address) or from its own entry."""

from __future__ import annotations

import uuid

from forewarn.config.fleet import parse_fleet

TEXT = """
defaults: {subscriptionId: sub-1, resourceGroup: rg, location: northeurope, size: Standard_B1s}
scaleSets:
  - {name: web, capacity: 7, addressStart: 10.0.0.254, hosts: [h1, h2, h3],
     zones: ['1', '2', '3'], platformFaultDomainCount: 3, placementGroupSize: 2}
  - name: api
    addressStart: 10.1.0.1
    instances:
      - {id: '4', host: own-host, zone: '9'}
      - {id: '7', address: 10.9.9.9}
      - {id: '12'}
  - {name: flex, capacity: 3, addressStart: 10.2.0.1, orchestrationMode: Flexible,
     priority: Spot, location: westus}
"""


def test_capacity_instances_take_their_fields_by_position() -> None:
    web = [vm for vm in parse_fleet(TEXT).vms if vm.vm_scale_set_name == "web"]
    assert [vm.name for vm in web] == [f"web_{i}" for i in range(7)]
    assert [vm.address for vm in web] == [
        "10.0.0.254", "10.0.0.255", "10.0.1.0", "10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"
    ]  # fmt: skip
    assert [vm.platform_fault_domain for vm in web] == [i % 3 for i in range(7)]
    assert [vm.platform_update_domain for vm in web] == [i % 5 for i in range(7)]
    assert [vm.zone for vm in web] == ["1", "2", "3", "1", "2", "3", "1"]
    assert [vm.host for vm in web] == ["h1", "h2", "h3", "h1", "h2", "h3", "h1"]
    assert [vm.placement_group for vm in web] == ["0", "0", "1", "1", "2", "2", "3"]
    for vm in web:
        assert vm.vm_id == str(uuid.uuid5(uuid.NAMESPACE_URL, f"forewarn:vm:{vm.name}"))
        assert (vm.subscription_id, vm.resource_group, vm.location, vm.vm_size) == (
            "sub-1", "rg", "northeurope", "Standard_B1s"
        )  # fmt: skip
        assert vm.policy == web[0].policy
        assert not vm.flexible


def test_listed_instances_keep_their_own_fields() -> None:
    api = [vm for vm in parse_fleet(TEXT).vms if vm.vm_scale_set_name == "api"]
    assert [vm.name for vm in api] == ["api_4", "api_7", "api_12"]
    # an address of its own takes none from addressStart
    assert [vm.address for vm in api] == ["10.1.0.1", "10.9.9.9", "10.1.0.2"]
    assert [vm.host for vm in api] == ["own-host", "host-api-1", "host-api-2"]
    assert [vm.zone for vm in api] == ["9", "", ""]


def test_a_flexible_set_has_no_placement_groups_and_hashed_ids() -> None:
    flex = [vm for vm in parse_fleet(TEXT).vms if vm.vm_scale_set_name == "flex"]
    assert len(flex) == 3
    assert all(vm.flexible and vm.placement_group is None for vm in flex)
    assert all(vm.priority.value == "Spot" and vm.location == "westus" for vm in flex)
    suffixes = [vm.name.removeprefix("flex_") for vm in flex]
    assert all(len(s) == 8 and int(s, 16) >= 0 for s in suffixes)
    assert len(set(suffixes)) == 3
    assert parse_fleet(TEXT).vms[-1].name == flex[-1].name  # the same on every load
