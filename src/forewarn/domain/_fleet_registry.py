"""The VM registry: VMs, scale sets, addresses, scope groups and the hosts VMs may move to.

Adding a VM checks it against everything already there (name, address, placement) before any
table changes, so a refused VM leaves no trace. Deleting one takes it out of every table of
the :class:`~forewarn.domain._state.PlatformState` at once, the enablement and impact tables
included: a deleted VM is simply gone. What is kept of it is a
:class:`~forewarn.domain._state.Deletion`: its address answers nothing (as for a VM that no
longer exists, whose software is gone with it), until a VM is added again under its name or
address, which starts afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from forewarn.domain._state import Deletion, PlatformState, VmRecord
from forewarn.domain.documents import EMPTY_DOCUMENT
from forewarn.domain.errors import InvalidOperationError, UnknownGroupError, UnknownVmError
from forewarn.domain.events import Event
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.placement import new_host, placement_error
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.scope import ScopeGroup, ScopeKind, scope_group
from forewarn.domain.vms import Vm


class Registry:
    """Which VMs and scale sets exist, where they answer and which scope group they are in."""

    def __init__(self, state: PlatformState) -> None:
        self._state = state

    def add_scale_set(self, scale_set: ScaleSet) -> None:
        scale_sets = self._state.scale_sets
        if scale_set.name in scale_sets:
            raise InvalidOperationError(f"scale set {scale_set.name!r} already exists")
        scale_sets[scale_set.name] = scale_set

    def scale_set(self, name: str) -> ScaleSet:
        try:
            return self._state.scale_sets[name]
        except KeyError:
            raise UnknownGroupError("scale set", name) from None

    def add_vm(self, vm: Vm, *, receiving: bool) -> None:
        """Add ``vm``; ``receiving`` VMs start as if they had just made their first request."""
        state = self._state
        if vm.name in state.vms:
            raise InvalidOperationError(f"virtual machine {vm.name!r} already exists")
        if vm.address is not None and vm.address in state.by_address:
            taken = state.by_address[vm.address].name
            raise InvalidOperationError(f"address {vm.address} is already {taken!r}'s")
        misplaced = placement_error(vm, state.vms.values(), state.placements)
        if misplaced is not None:
            raise InvalidOperationError(misplaced)
        if vm.vm_scale_set_name and vm.vm_scale_set_name not in state.scale_sets:
            state.scale_sets[vm.vm_scale_set_name] = ScaleSet(vm.vm_scale_set_name)
        state.vms[vm.name] = vm
        state.placements.add(vm)
        record = state.records[vm.name] = VmRecord(
            EMPTY_DOCUMENT, state.now if receiving else None, state.now, vm.tenant
        )
        group = scope_group(vm, state.scale_sets)
        if group.kind is not ScopeKind.VM:
            members = state.groups.setdefault(group, {})
            members[vm.name] = record
            state.group_of[vm.name] = members
        if vm.address is not None:
            state.by_address[vm.address] = vm
            state.deleted_at.pop(vm.address, None)  # a new VM there: afresh
        state.deleted.pop(vm.name, None)
        unaddressed = state.deleted_unaddressed
        if unaddressed is not None and unaddressed.vm.name == vm.name:
            state.deleted_unaddressed = None
        state.changed_for(record)  # a record the VM's requests never met before

    def vm(self, name: str) -> Vm:
        try:
            return self._state.vms[name]
        except KeyError:
            raise UnknownVmError(f"named {name!r}") from None

    def vms(self) -> tuple[Vm, ...]:
        return tuple(self._state.vms.values())

    def vm_at(self, address: str) -> Vm | None:
        """The VM whose endpoint answers at ``address``, if any."""
        return self._state.by_address.get(address)

    def deleted_calling(self, local_address: str, peer_address: str) -> Deletion | None:
        """The deleted VM a request arriving at ``local_address`` from ``peer_address`` is
        in the name of, found as a live VM is (by either address; the zero-configuration VM,
        which had none, once the fleet is empty), when no VM was added there since."""
        state = self._state
        found = state.deleted_at.get(local_address) or state.deleted_at.get(peer_address)
        if found is None and not state.vms:
            found = state.deleted_unaddressed
        return found

    def deletions_after(self, number: int) -> tuple[Deletion, ...]:
        """The deletions after the ``number``-th, of VMs not added again, in order."""
        state = self._state
        if state.deletions <= number:  # nothing new: the case of every look but a few
            return ()
        found = [d for d in state.deleted.values() if d.number > number]
        return tuple(sorted(found, key=lambda deletion: deletion.number))

    def scope_of(self, vm: Vm) -> ScopeGroup:
        """The delivery-scope group of ``vm`` (:func:`forewarn.domain.scope.scope_group`)."""
        return scope_group(vm, self._state.scale_sets)

    def group_members(self, vm: Vm) -> Mapping[str, VmRecord]:
        """The names in ``vm``'s scope group, each with its record; a VM's group of its own
        is not kept (a table per standalone VM of a large fleet), its one member is itself."""
        state = self._state
        members = state.group_of.get(vm.name)
        return {vm.name: state.records[vm.name]} if members is None else members

    def delete(self, vm: Vm, event: Event | None = None) -> None:
        """``vm`` is gone, deleted by ``event`` (None: deleted with no event)."""
        state = self._state
        state.deletions += 1
        deletion = Deletion(vm, event, state.deletions)
        state.deleted[vm.name] = deletion
        if vm.address is None:
            state.deleted_unaddressed = deletion
        else:
            state.deleted_at[vm.address] = deletion
        del state.vms[vm.name]
        state.placements.remove(vm)
        members = state.group_of.pop(vm.name, None)
        if members is not None:
            del members[vm.name]
        if vm.address is not None:
            del state.by_address[vm.address]
        state.forget_vm(vm.name)

    def host_predicted_to_fail(self, host: str) -> None:
        """No VM is moved to ``host`` any more: its hardware is expected to fail."""
        self._state.avoided_hosts.add(host)

    def host_failed(self, host: str) -> None:
        """No VM is moved to ``host`` any more, and its VMs leave it when their impact ends."""
        self._state.avoided_hosts.add(host)
        self._state.failed_hosts.add(host)

    def move_off_host(self, vm: Vm) -> None:
        """``vm`` comes back on another host (:func:`forewarn.domain.placement.new_host`)."""
        state = self._state
        host = new_host(vm, state.vms.values(), state.avoided_hosts, state.placements)
        moved = replace(vm, host=host)
        state.vms[vm.name] = moved
        if vm.address is not None:
            state.by_address[vm.address] = moved
        state.changed_for(state.records[vm.name])
        state.placements.remove(vm)
        state.placements.add(moved)

    def set_policy(self, kind: str, name: str, policy: ScheduledEventsPolicy) -> tuple[Vm, ...]:
        """Give the VM ``name``, or every VM of the scale set or availability set ``name``
        (``kind`` ``vm``, ``scale-set``, ``availability-set``), ``policy``; the VMs changed.

        A VM of a set takes its set's: "If your VM is part of an availability set or a Virtual
        Machine Scale Set then you can't set the schedule events profile for each VM
        individually" (learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid)."""
        state = self._state
        if kind == "vm":
            vm = self.vm(name)
            group = (
                f"scale set {vm.vm_scale_set_name!r}"
                if vm.vm_scale_set_name
                else f"availability set {vm.availability_set!r}"
                if vm.availability_set
                else None
            )
            if group is not None:
                raise InvalidOperationError(
                    f"{name!r} is in {group}: all VMs of a set are required to have the same "
                    "scheduled events policy; set it on the set"
                )
            members = [vm]
        elif kind == "scale-set":
            self.scale_set(name)
            members = [vm for vm in state.vms.values() if vm.vm_scale_set_name == name]
        elif kind == "availability-set":
            members = [vm for vm in state.vms.values() if vm.availability_set == name]
            if not members:
                raise UnknownGroupError("availability set", name)
        else:
            raise InvalidOperationError(f"no policy can be set on a {kind}")
        changed = tuple(replace(vm, policy=policy) for vm in members)
        for vm in changed:
            state.vms[vm.name] = vm
            if vm.address is not None:
                state.by_address[vm.address] = vm
            state.changed_for(state.records[vm.name])
        return changed
