"""A VM the fleet file gives no vmId gets the UUID version 5 of its name in the URL
namespace, the same on every start (and so in every front-end): the one written out by hand
in forewarn.config.fleet is pinned against the standard library's. Addresses are those
:func:`ipaddress.ip_address` reads, though most are matched without it."""

from __future__ import annotations

import uuid

import pytest

from forewarn.config.fleet import FleetFileError, parse_fleet


@pytest.mark.parametrize("name", ["vm0", "web_7", "a.b-c", "x" * 64, "worker-000123"])
def test_a_standalone_vms_id_is_uuid5_of_its_name(name: str) -> None:
    (vm,) = parse_fleet(f"vms: [{{name: {name}, address: 127.0.0.2}}]").vms
    assert vm.vm_id == str(uuid.uuid5(uuid.NAMESPACE_URL, f"forewarn:vm:{name}"))


def test_scale_set_instances_and_the_default_policy() -> None:
    fleet = parse_fleet(
        "vms:\n"
        "  - {name: a, address: 127.0.0.2}\n"
        "  - {name: b, address: 127.0.0.3,"
        " scheduledEventsPolicy: {userInitiatedReboot: {automaticallyApprove: true}}}\n"
        "  - {name: c, address: 127.0.0.4}\n"
        "scaleSets: [{name: web, capacity: 2, addressStart: 10.0.0.1}]\n"
    )
    by_name = {vm.name: vm for vm in fleet.vms}
    for name in ("web_0", "web_1"):
        assert by_name[name].vm_id == str(uuid.uuid5(uuid.NAMESPACE_URL, f"forewarn:vm:{name}"))
    assert not by_name["a"].policy.auto_approve_reboot
    assert by_name["b"].policy.auto_approve_reboot
    assert by_name["c"].policy == by_name["a"].policy
    assert by_name["a"].policy.auto_approve_all_instances_down  # ARM's default: true


@pytest.mark.parametrize(
    "address",
    ["0.0.0.0", "127.1.0.1", "255.255.255.255", "10.200.249.9", "::1", "fe80::1%eth0"],
)
def test_an_address_ipaddress_reads_is_accepted(address: str) -> None:
    (vm,) = parse_fleet(f"vms: [{{name: a, address: '{address}'}}]").vms
    assert vm.address == address


@pytest.mark.parametrize(
    "address",
    ["256.0.0.1", "1.2.3.04", "1.2.3", "1.2.3.4.5", "1.2.3.4\\n", "1.2.3.\\u0664", "1.2.3.-1", "x"],
)
def test_an_address_ipaddress_refuses_is_refused_at_its_field(address: str) -> None:
    with pytest.raises(FleetFileError, match=r"^f\.yaml: vms\.0\.address: "):
        parse_fleet(f'vms: [{{name: a, address: "{address}"}}]', "f.yaml")
