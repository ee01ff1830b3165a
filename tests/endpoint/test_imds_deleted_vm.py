"""A deleted VM's address answers nothing (docs/faithfulness.md, "Deleted VMs").

learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties": Preempt "The
Spot Virtual Machine is being deleted", Terminate "The virtual machine is scheduled to be deleted".
On Azure the VM's software is gone with the VM, so no client ever reads an answer about a deleted
VM: no 400, no document, no reset. forewarn cannot stop a client that still runs (its impact hook
can), so it answers it nothing at all: the request is never answered, the connection kept open
until the client gives up [ours]. A VM added again under the name or address starts afresh.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from forewarn.domain import operations
from forewarn.domain.events import EventType
from forewarn.domain.vms import Priority, Vm
from forewarn.server.imds import ImdsRequest

from .conftest import Imds

INSTANCE = "/metadata/instance"


def never_answered(imds: Imds, vm: str) -> None:
    """Every kind of request in ``vm``'s name meets no answer."""
    responses = [
        imds.get(vm),
        imds.get(vm, "2017-08-01"),
        imds.approve(vm, "C7061BAC-AFDC-4513-B24B-AA5F13A16123"),
        imds.request("GET", vm, path=INSTANCE, query="api-version=2021-02-01"),
        imds.request("GET", vm, path="/metadata/versions", query=""),
    ]
    for response in responses:
        assert (response.status, response.unanswered, response.body) == (0, True, b"")
        assert response.held_until is None


@pytest.mark.parametrize("event_type", [EventType.PREEMPT, EventType.TERMINATE])
def test_after_a_deleting_event_nothing_answers_at_its_address(
    imds: Imds, event_type: EventType
) -> None:
    imds.add_vm("vm", priority=Priority.SPOT)
    event = imds.schedule(event_type, "vm", started=True)
    during = imds.get("vm")
    assert during.held_until is not None, "held through the impact"
    imds.advance(during.held_until - imds.service.now())
    never_answered(imds, "vm")
    (gone,) = imds.service.deletions_after(0)
    assert (gone.vm.name, gone.event) == ("vm", event)


def test_the_answer_names_the_deleted_vm_and_its_event(imds: Imds) -> None:
    """Recorders (the dashboard's timeline, the test plugin's requests) see who asked."""
    imds.add_vm("vm", priority=Priority.SPOT)
    event = imds.schedule(EventType.PREEMPT, "vm", started=True)
    imds.advance(timedelta(minutes=1))
    request = ImdsRequest(
        method="GET",
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        body=b"",
        local_address=imds.addresses["vm"],
        peer_address="127.0.0.1",
    )
    answer = imds.endpoint.answer(request)
    assert answer.vm is not None
    assert answer.vm.name == "vm"
    assert answer.response.unanswered
    assert event.event_type is EventType.PREEMPT


def test_a_deletion_without_an_event_is_gone_too(imds: Imds) -> None:
    """A scale-set instance deleted without terminate notification goes at once."""
    imds.add_vm("vm")
    imds.platform.delete_vm("vm")
    never_answered(imds, "vm")
    (gone,) = imds.service.deletions_after(0)
    assert gone.event is None


def test_an_address_no_vm_ever_had_is_still_refused(imds: Imds) -> None:
    imds.add_vm("vm")
    imds.platform.delete_vm("vm")
    stranger = imds.request("GET", "vm", address="127.0.0.99")
    assert stranger.status == 400


def test_the_others_in_its_set_are_answered_as_ever(imds: Imds) -> None:
    imds.add_vm("a", availability_set="west", platform_fault_domain=0)
    imds.add_vm("b", availability_set="west", platform_fault_domain=1)
    imds.schedule(EventType.TERMINATE, "a", started=True)
    imds.advance(timedelta(minutes=1))
    never_answered(imds, "a")
    assert imds.get("b").status == 200


def test_a_vm_added_again_under_its_name_and_address_starts_afresh(imds: Imds) -> None:
    vm = imds.add_vm("vm", priority=Priority.SPOT)
    imds.schedule(EventType.FREEZE, "vm", notice=timedelta(days=2))
    operations.simulate_eviction(imds.platform, ("vm",))
    imds.advance(timedelta(minutes=5))
    never_answered(imds, "vm")
    imds.platform.add_vm(vm)
    assert imds.document("vm") == {"DocumentIncarnation": 1, "Events": []}
    assert imds.service.deletions_after(0) == ()


def test_a_vm_added_again_at_the_address_alone_answers_there(imds: Imds) -> None:
    """The address belongs to the new VM; the old name stays gone."""
    vm = imds.add_vm("old")
    imds.platform.delete_vm("old")
    imds.platform.add_vm(Vm(name="new", vm_id="id-new", host="h9", address=vm.address))
    imds.addresses["new"] = imds.addresses["old"]
    assert imds.document("new")["DocumentIncarnation"] == 1
    assert [d.vm.name for d in imds.service.deletions_after(0)] == ["old"]


def test_the_zero_configuration_vm_deleted_leaves_no_address_answering(
    make_imds: type[Imds],
) -> None:
    """One VM with no address answers at any address; once it is deleted, none does."""
    imds = make_imds()
    imds.platform.add_vm(Vm(name="vm0", vm_id="id-vm0", host="h0", priority=Priority.SPOT))
    imds.addresses["vm0"] = "127.0.0.1"
    operations.simulate_eviction(imds.platform, ("vm0",))
    imds.advance(timedelta(minutes=5))
    never_answered(imds, "vm0")
    elsewhere = imds.request("GET", "vm0", address="10.0.0.4")
    assert elsewhere.unanswered
