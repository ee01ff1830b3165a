"""ARM ids of VMs, scale sets and scheduled events, built as Azure's pages spell them.

Sources: learn.microsoft.com, "Scheduled Events in Event Grid"
(learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid): the sample's ``subject``
and ``data.resourceInfo.id``
``/subscriptions/{subscription-id}/resourceGroups/{rg-name}/providers/Microsoft.Compute/
virtualMachineScaleSets/{vmss-name}/providers/microsoft.maintenance/scheduledevents/{event-id}``,
and "Finding the Virtual Machine ID for a Virtual Machine in a Virtual Machine Scale Set" ("the
scheduled event ID includes the ID of the entire Virtual Machine Scale Set"); the acknowledge
command's ``--ids /subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/providers/
microsoft.compute/virtualMachines/{resourceName}/providers/microsoft.maintenance/
scheduledevents/{scheduledEventId}`` (lower-case ``resourcegroups``: ARM ignores case).
"""

from __future__ import annotations

from forewarn.config.fleet import parse_fleet
from forewarn.domain import arm
from forewarn.domain.vms import Vm
from forewarn.wire.instance import compute_fields

FLEET = """
defaults: {subscriptionId: 11111111-1111-1111-1111-111111111111, resourceGroup: rg-a,
           location: eastus, tenantId: 99999999-9999-9999-9999-999999999999}
vms:
  - {name: solo, address: 127.0.40.1}
  - {name: other, address: 127.0.40.2, resourceGroup: rg-b, location: westus}
scaleSets:
  - {name: web, capacity: 2, addressStart: 127.0.41.1, resourceGroup: rg-web, location: northeurope}
  - {name: flex, orchestrationMode: Flexible, capacity: 1, addressStart: 127.0.42.1}
"""


def vms() -> dict[str, Vm]:
    return {vm.name: vm for vm in parse_fleet(FLEET).vms}


def test_vm_ids_are_the_ones_instance_metadata_shows() -> None:
    fleet = vms()
    for vm in fleet.values():
        assert arm.vm_id(vm) == compute_fields(vm, "2021-02-01")["resourceId"]
    assert arm.vm_id(fleet["solo"]) == (
        "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg-a"
        "/providers/Microsoft.Compute/virtualMachines/solo"
    )
    assert arm.vm_id(fleet["web_1"]) == (
        "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg-web"
        "/providers/Microsoft.Compute/virtualMachineScaleSets/web/virtualMachines/1"
    )


def test_fleet_fields_give_each_resource_its_group_location_and_tenant() -> None:
    fleet = vms()
    assert (fleet["other"].resource_group, fleet["other"].location) == ("rg-b", "westus")
    assert (fleet["web_0"].resource_group, fleet["web_0"].location) == ("rg-web", "northeurope")
    assert (fleet["flex_" + fleet_flex_suffix()].resource_group, fleet["solo"].location) == (
        "rg-a",
        "eastus",
    )
    assert {vm.tenant_id for vm in fleet.values()} == {"99999999-9999-9999-9999-999999999999"}


def fleet_flex_suffix() -> str:
    return next(name for name in vms() if name.startswith("flex_")).removeprefix("flex_")


def test_an_event_of_a_scale_set_is_filed_under_the_whole_set() -> None:
    """ "the scheduled event ID includes the ID of the entire Virtual Machine Scale Set, not just
    the impacted VMs" (event-grid page); a VM's event names the VM."""
    fleet = vms()
    event_id = "3DA1B9AA-5204-4335-8C33-C54E315DCFFE"
    by_set = arm.scheduled_event_id(arm.target_id([fleet["web_0"], fleet["web_1"]]), event_id)
    assert by_set == (
        "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg-web/providers"
        "/Microsoft.Compute/virtualMachineScaleSets/web/providers/microsoft.maintenance"
        f"/scheduledevents/{event_id}"
    )
    alone = arm.scheduled_event_id(arm.target_id([fleet["solo"]]), event_id)
    assert alone.endswith(
        "/Microsoft.Compute/virtualMachines/solo/providers/microsoft.maintenance/"
        f"scheduledevents/{event_id}"
    )


def test_an_acknowledge_id_is_read_whatever_its_case() -> None:
    """The CLI's ``--ids`` spells ``resourcegroups`` and ``microsoft.compute`` in lower case."""
    ref = arm.parse_scheduled_event_id(
        "/subscriptions/11111111-1111-1111-1111-111111111111/resourcegroups/RG-A/providers/"
        "microsoft.compute/virtualMachines/solo/providers/microsoft.maintenance/"
        "scheduledevents/3da1b9aa-5204-4335-8c33-c54e315dcffe"
    )
    assert ref is not None
    assert ref.event_id == "3DA1B9AA-5204-4335-8C33-C54E315DCFFE"
    assert arm.names(ref, vms()["solo"])
    assert not arm.names(ref, vms()["other"])


def test_anything_else_is_no_scheduled_event_id() -> None:
    for text in (
        "",
        "/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachines/solo",
        "/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/s"
        "/providers/microsoft.maintenance/scheduledevents/3da1b9aa-5204-4335-8c33-c54e315dcffe",
        "/subscriptions/" + "x" * 5000,
    ):
        assert arm.parse_scheduled_event_id(text) is None
