"""The fleet file: every group kind builds the right VMs; every mistake names file, field, why."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.config.fleet import FleetFileError, load_fleet, parse_fleet
from forewarn.domain import operations
from forewarn.domain.clock import DEFAULT_START
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Priority
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_service
from forewarn.service import platform_for_fleet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_examples_load() -> None:
    small = load_fleet(EXAMPLES / "fleet.yaml")
    assert [vm.name for vm in small.vms] == ["WestNO_0", "WestNO_1"]
    full = load_fleet(EXAMPLES / "fleet-full.yaml")
    names = {vm.name for vm in full.vms}
    assert {"web_0", "web_3", "batch_7", "FrontEnd_IN_1", "BackEnd_IN_0"} <= names


def test_scale_set_instances_are_named_and_spread() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events Resources example and SPEC
    2: scale-set instances are named ``{scaleSetName}_{instanceId}``."""
    fleet = parse_fleet(
        """
scaleSets:
  - name: web
    capacity: 3
    addressStart: 127.0.5.1
    platformFaultDomainCount: 2
    placementGroupSize: 2
    terminateNotification: {notBeforeTimeout: PT10M}
"""
    )
    assert [
        (vm.name, vm.address, vm.platform_fault_domain, vm.placement_group) for vm in fleet.vms
    ] == [
        ("web_0", "127.0.5.1", 0, "0"),
        ("web_1", "127.0.5.2", 1, "0"),
        ("web_2", "127.0.5.3", 0, "1"),
    ]
    (scale_set,) = fleet.scale_sets
    assert scale_set.terminate_notification
    assert scale_set.terminate_timeout == timedelta(minutes=10)


def test_classic_role_instances_are_not_iaas() -> None:
    fleet = parse_fleet(
        "cloudServices: [{name: svc, addressStart: 127.0.6.1, roles: [{name: FrontEnd, instances: 2}]}]"
    )
    assert [(vm.name, vm.iaas, vm.cloud_service) for vm in fleet.vms] == [
        ("FrontEnd_IN_0", False, "svc"),
        ("FrontEnd_IN_1", False, "svc"),
    ]


def test_instance_n_of_every_role_shares_update_domain_n_mod_count() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event properties",
    Resources: "This is guaranteed to contain machines from at most one Update Domain" with the
    example ``["FrontEnd_IN_0", "BackEnd_IN_0"]``: instance *n* of every role is in update domain *n
    mod count*."""
    fleet = parse_fleet(
        """
cloudServices:
  - name: svc
    addressStart: 127.0.6.1
    updateDomains: 2
    roles: [{name: FrontEnd, instances: 3}, {name: BackEnd, instances: 2}]
"""
    )
    assert [(vm.name, vm.platform_update_domain, vm.platform_fault_domain) for vm in fleet.vms] == [
        ("FrontEnd_IN_0", 0, 0),
        ("FrontEnd_IN_1", 1, 1),
        ("FrontEnd_IN_2", 0, 0),
        ("BackEnd_IN_0", 0, 0),
        ("BackEnd_IN_1", 1, 1),
    ]
    platform = platform_for_fleet(fleet, DEFAULT_START, timing=DOCUMENTED)
    operations.maintenance_campaign(platform)
    (event,) = platform.document("BackEnd_IN_1").events
    assert [r.name for r in event.resources] == ["FrontEnd_IN_0", "FrontEnd_IN_2", "BackEnd_IN_0"]
    two_roles = parse_fleet(
        "cloudServices: [{name: svc, roles: [{name: FrontEnd}, {name: BackEnd}],"
        " addressStart: 127.0.6.1}]"
    )
    platform = platform_for_fleet(two_roles, DEFAULT_START, timing=DOCUMENTED)
    operations.maintenance_campaign(platform)
    (event,) = platform.document("FrontEnd_IN_0").events
    assert [r.name for r in event.resources] == ["FrontEnd_IN_0", "BackEnd_IN_0"]


def test_policy_and_priority() -> None:
    fleet = parse_fleet(
        """
vms:
  - name: a
    priority: Spot
    scheduledEventsEnabled: false
    scheduledEventsPolicy: {userInitiatedReboot: {automaticallyApprove: true}}
"""
    )
    (vm,) = fleet.vms
    assert vm.priority is Priority.SPOT
    assert vm.policy.auto_approve_reboot
    assert not vm.policy.auto_approve_redeploy
    assert fleet.not_receiving == {"a"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("vms: [{name: a, colour: red}]", "vms.0: unknown field 'colour'"),
        ("vms: [{name: 'a b'}]", "vms.0.name"),
        ("vms: [{name: a, address: not-an-ip}]", "vms.0.address"),
        ("vms: [{name: a, address: 127.0.0.2}, {name: b, address: 127.0.0.2}]", "used twice"),
        ("vms: [{name: a, address: 127.0.0.2}, {name: a, address: 127.0.0.3}]", "used twice"),
        ("vms: [{name: a}, {name: b}]", "needs an address"),
        ("vms: [{name: a, availabilitySet: nope}]", "no availability set named 'nope'"),
        (
            "scaleSets: [{name: s, capacity: 1, priority: Spot, terminateNotification: {}}]",
            "cannot be enabled on Spot",
        ),
        (
            "scaleSets: [{name: s, capacity: 1, terminateNotification: {notBeforeTimeout: PT20M}}]",
            "PT5M to PT15M",
        ),
        (
            "scaleSets: [{name: s, capacity: 1, terminateNotification: {notBeforeTimeout: 5m}}]",
            "ISO 8601",
        ),
        ("vms: []", "no VMs"),
        ("vms: [{name: a, faultDomain: 99}]", "vms.0.faultDomain"),
        (": : :", "not valid YAML"),
        ("[1, 2]", "(top level)"),
    ],
)
def test_mistakes_name_file_field_and_reason(text: str, fragment: str) -> None:
    with pytest.raises(FleetFileError) as caught:
        parse_fleet(text, "fleet.yaml")
    message = str(caught.value)
    assert message.startswith("fleet.yaml: ")
    assert fragment in message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("vms: [{name: a, adress: 127.0.0.2}]", "vms.0: unknown field 'adress' (did you mean 'address'?)"),
        ("vmz: [{name: a}]", "(top level): unknown field 'vmz' (did you mean 'vms'?)"),
        ("vms: [{name: a, faultdomain: 1}]", "vms.0: unknown field 'faultdomain' (did you mean 'faultDomain'?)"),
        ("scaleSets: [{name: s, capacity: 1, terminateNotification: {notBeforeTimout: PT5M}}]",
         "scaleSets.0.terminateNotification: unknown field 'notBeforeTimout' (did you mean 'notBeforeTimeout'?)"),
        ("vms: [{name: a, zzz: 1}]", "vms.0: unknown field 'zzz'"),
    ],
)  # fmt: skip
def test_a_typo_is_an_unknown_field_with_the_nearest_known_one(text: str, said: str) -> None:
    """pydantic's "Extra inputs are not permitted" told a newcomer nothing about ``adress``:
    the field is named unknown, at the mapping holding it, with the closest field the file
    may have there, as the file spells it (camelCase aliases)."""
    with pytest.raises(FleetFileError) as caught:
        parse_fleet(text, "fleet.yaml")
    assert str(caught.value) == f"fleet.yaml: {said}"


def test_unreadable_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(FleetFileError, match="cannot be read"):
        load_fleet(tmp_path / "missing.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FleetFileError, match="not UTF-8"):
        load_fleet(binary)


def test_serve_refuses_an_unreadable_fleet_naming_it(tmp_path: Path) -> None:
    """Invalid fleet files get a clear error naming the file; nothing starts (issue text),
    also before any state is opened, and the CLI says so instead of a listening error."""
    missing = tmp_path / "missing.yaml"
    with pytest.raises(FleetFileError, match=r"missing\.yaml: cannot be read"):
        open_service(ServeSettings(fleet=missing, clock="manual"))
    result = CliRunner().invoke(main, ["serve", "--fleet", str(missing)])
    assert result.exit_code == 1
    assert "missing.yaml: cannot be read" in result.output
    assert "cannot listen" not in result.output


def test_a_flexible_scale_set_names_its_vms_as_azure_does_and_is_one_scope() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Applies to: ... Flexible
    scale sets". Azure names the VMs a Flexible set creates ``{scaleSet}_{8 hex digits}`` and
    reports the set in ``virtualMachineScaleSet.id``. Flexible orchestration has no placement
    groups, so (forewarn's decision; the documentation is silent) the whole set is one delivery
    scope, as a Uniform set's placement group is, and terminate notifications work as in Uniform."""
    text = """
scaleSets:
  - name: flex
    orchestrationMode: Flexible
    capacity: 3
    addressStart: 127.0.7.1
    platformFaultDomainCount: 3
    terminateNotification: {notBeforeTimeout: PT5M}
"""
    fleet = parse_fleet(text)
    names = [vm.name for vm in fleet.vms]
    assert all(re.fullmatch(r"flex_[0-9a-f]{8}", name) for name in names), names
    assert len(set(names)) == 3
    assert names == [vm.name for vm in parse_fleet(text).vms], "the same on every load"
    assert all(vm.flexible and vm.placement_group is None for vm in fleet.vms)
    platform = platform_for_fleet(fleet, DEFAULT_START, timing=DOCUMENTED)
    instance = names[1].removeprefix("flex_")
    (event,) = operations.delete_instances(platform, "flex", [instance])
    assert event.event_type.value == "Terminate"
    assert [r.name for r in event.resources] == [names[1]]
    assert all(platform.document(name).events for name in names), "every VM of the set sees it"


def test_uniform_instance_ids_are_numbers_and_images_come_from_the_fleet() -> None:
    with pytest.raises(FleetFileError, match=r"instances\.0\.id.*Uniform scale set's instance ids"):
        parse_fleet("scaleSets: [{name: web, instances: [{id: a1}], addressStart: 127.0.1.1}]")
    fleet = parse_fleet(
        """
defaults: {image: {publisher: canonical, offer: ubuntu-24_04-lts, sku: server}}
vms:
  - {name: a, address: 127.0.0.2}
  - {name: b, address: 127.0.0.3, image: {publisher: me, offer: o, sku: s, version: 1.0.0}}
"""
    )
    images = [vm.image_reference for vm in fleet.vms]
    assert [(i.publisher, i.offer, i.sku, i.version) for i in images] == [
        ("canonical", "ubuntu-24_04-lts", "server", "latest"),
        ("me", "o", "s", "1.0.0"),
    ]


def test_anchors_aliases_and_merge_keys_read_as_written() -> None:
    """YAML's own ways of saying a thing once (an anchor, its aliases, a merge key) give each
    VM the values written at the anchor."""
    fleet = parse_fleet(
        "vms:\n"
        "  - &first {name: a, address: 127.1.0.1, tags: &tags {team: blue, tier: '2'}}\n"
        "  - {<<: *first, name: b, address: 127.1.0.2}\n"
        "  - {name: c, address: 127.1.0.3, tags: *tags, size: Standard_NC6s_v3}\n"
    )
    assert [(vm.name, vm.address, vm.tags) for vm in fleet.vms] == [
        ("a", "127.1.0.1", (("team", "blue"), ("tier", "2"))),
        ("b", "127.1.0.2", (("team", "blue"), ("tier", "2"))),
        ("c", "127.1.0.3", (("team", "blue"), ("tier", "2"))),
    ]
    assert fleet.vms[2].vm_size == "Standard_NC6s_v3"
