"""The fleet's bookkeeping: addresses, scope groups and deletion leave nothing behind.

SPEC 1: each VM is told apart by the address its requests arrive at, so no two VMs may share
one; SPEC 5: a deleted VM is in no group's audience any more; SPEC 4: a deleted VM is down.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from forewarn.domain.errors import InvalidOperationError, UnknownVmError
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.platform import Platform
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def vm(name: str, **fields: object) -> Vm:
    return Vm(name=name, vm_id=f"id-{name}", **fields)  # type: ignore[arg-type]


def test_an_address_answers_for_one_vm_only() -> None:
    platform = Platform(START)
    platform.add_vm(vm("a", address="127.0.0.2"))
    with pytest.raises(InvalidOperationError, match=r"^address 127\.0\.0\.2 is already 'a''s$"):
        platform.add_vm(vm("b", address="127.0.0.2"))
    assert platform.vm_at("127.0.0.2") == platform.vm("a")
    assert [v.name for v in platform.vms()] == ["a"]


def test_a_deleted_vm_leaves_its_address_its_group_and_reachability() -> None:
    platform = Platform(START)
    for name, address in (("a", "127.0.0.2"), ("b", "127.0.0.3")):
        platform.add_vm(vm(name, address=address, availability_set="west"))
    platform.delete_vm("a")
    assert platform.vm_at("127.0.0.2") is None
    assert not platform.reachable("a")
    with pytest.raises(UnknownVmError):
        platform.vm("a")
    # b's next event is shown to b alone: a is no member of the set any more
    event = platform.schedule(EventType.REBOOT, ["b"], source=EventSource.USER)
    assert platform.event(event.event_id).audience == frozenset({"b"})
    # and the address is free for a VM of the same name again
    platform.add_vm(vm("a", address="127.0.0.2", availability_set="west"))
    assert platform.vm_at("127.0.0.2") == platform.vm("a")


def test_a_vm_added_again_where_one_was_deleted_starts_afresh() -> None:
    """SPEC 4.3: a deleted VM's "address answers nothing until a VM is added there again":
    once one is, no request there, nor from there, is in the deleted VM's name any more, and
    the deletion is no longer one a harness waits for (``deletions_after``: "of VMs not added
    again")."""
    platform = Platform(START)
    platform.add_vm(vm("a", address="127.0.0.2"))
    platform.add_vm(vm("b", address="127.0.0.3"))
    platform.delete_vm("a")
    gone = platform.deleted_calling("127.0.0.9", "127.0.0.2")
    assert gone is not None
    assert gone.vm.name == "a"
    assert [d.vm.name for d in platform.deletions_after(0)] == ["a"]
    platform.add_vm(vm("c", address="127.0.0.2"))
    assert platform.deleted_calling("127.0.0.2", "127.0.0.1") is None
    assert platform.deleted_calling("127.0.0.9", "127.0.0.2") is None
    platform.add_vm(vm("a", address="127.0.0.4"))
    assert platform.deletions_after(0) == ()


def test_the_unaddressed_vm_added_again_is_not_answered_for_once_gone_again() -> None:
    """A VM without an address of its own (the zero-configuration fleet's) is found, once
    the fleet is empty, by any request; deleted, every request then is in its name. Added
    again under its name, that deletion is over: deleted again with an address of its own,
    only that address answers nothing, and a request elsewhere is no VM's."""
    platform = Platform(START)
    platform.add_vm(vm("vm0"))
    platform.delete_vm("vm0")
    first = platform.deleted_calling("127.0.0.9", "127.0.0.8")
    assert first is not None
    assert first.vm.name == "vm0"
    platform.add_vm(vm("vm0", address="127.0.0.2"))
    platform.delete_vm("vm0")
    assert platform.deleted_calling("127.0.0.9", "127.0.0.8") is None
    again = platform.deleted_calling("127.0.0.2", "127.0.0.1")
    assert again is not None
    assert again.number == first.number + 1
