"""What a Started event does to its VMs: the impact, its end, and the pauses VMs meet.

An event's start makes each impacted VM unreachable until the impact is over (the
``IMPACT_END`` deadline of :data:`forewarn.domain._lifecycle.LIFECYCLE`); its end deletes the
VMs of a Terminate or Preempt, and moves those of a Redeploy, or of a failed host, to another
host (:mod:`forewarn.domain.placement`). The documented edge cases live here too: a Reboot
that freezes instead, and a second, shorter impact while the event is still Started.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from forewarn.domain._fleet_registry import Registry
from forewarn.domain._lifecycle import impact_of
from forewarn.domain._state import LiveEvent, PlatformState, VmRecord
from forewarn.domain.errors import InvalidOperationError
from forewarn.domain.events import Event, EventStatus, EventType
from forewarn.domain.impact import Pause
from forewarn.domain.timing import REMOVES_VM


class Impacts:
    """Which VM is in an impact, until when, and because of which event."""

    def __init__(self, state: PlatformState, registry: Registry) -> None:
        self._state = state
        self._registry = registry

    def begin(self, event: Event, until: datetime) -> None:
        """``event`` has started and its impact lasts ``until``: its VMs cannot be reached.

        A VM already in a longer impact stays in it; a Reboot chosen to freeze instead
        (:meth:`freeze_instead`) makes its VM live through a Freeze of its own length.
        Each pause begun is counted as a change of its VM: one shown no event (Scheduled
        Events off) is paused all the same, its document unchanged.
        """
        state = self._state
        now = state.now
        rebooting = event.event_type is EventType.REBOOT
        for resource in event.resources:
            freeze = state.freeze_instead.pop(resource.name, None) if rebooting else None
            vm_until, lived = until, event
            if freeze is not None:  # what the VM lives through (hooks, policy) is a Freeze
                vm_until = now + timedelta(seconds=freeze)
                lived = replace(event, event_type=EventType.FREEZE)
            if resource.name in state.vms and until > now:
                previous = state.unreachable_until.get(resource.name)
                if previous is None or vm_until >= previous:
                    state.unreachable_until[resource.name] = vm_until
                    state.impact_of_vm[resource.name] = lived
                    state.changed_for(state.records[resource.name])

    def end_due(self, event_id: str) -> None:
        """The impact of ``event_id`` is over, unless the event is gone already."""
        live = self._state.events.get(event_id)
        if live is not None:
            self._end(live)

    def _end(self, live: LiveEvent) -> None:
        state = self._state
        event_type = live.event.event_type
        for resource in live.event.resources:
            vm = state.vms.get(resource.name)
            if vm is None:
                continue
            until = state.unreachable_until.get(resource.name)
            if until is not None and until <= state.now:
                # Over, and read as absent by every reader: dropped, so the tables hold the
                # VMs in an impact, not every VM a campaign ever reached (and its old event).
                del state.unreachable_until[resource.name]
                del state.impact_of_vm[resource.name]
            if event_type in REMOVES_VM:
                self._registry.delete(vm, live.event)
            elif event_type is EventType.REDEPLOY or vm.host in state.failed_hosts:
                # "Azure will ... immediately begin the recovery process for affected virtual
                # machines" (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events):
                # they come back elsewhere
                self._registry.move_off_host(vm)

    def freeze_instead(self, name: str, seconds: int) -> None:
        """The VM's Scheduled Reboot, when it starts, freezes it for ``seconds`` instead: "In
        rare cases a VM scheduled for EventType:"Reboot" may experience a freeze event instead
        of a reboot" (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event
        properties", EventStatus). The document still says Reboot; only what the VM lives through
        differs."""
        if not any(
            live.event.event_type is EventType.REBOOT
            and live.event.status is EventStatus.SCHEDULED
            and live.impacts(name)
            for live in self._state.events.values()
        ):
            self._registry.vm(name)
            raise InvalidOperationError(f"{name!r} has no Scheduled Reboot to freeze instead")
        self._state.freeze_instead[name] = seconds

    def impact_again(self, name: str) -> None:
        """A second impact, half as long as the advertised one, while the VM's event is still
        Started: "While the event is still in EventStatus:"Started" state, there may be another
        impact of a shorter duration than what was advertised" (scheduled-events-windows-
        2024.txt, "Event properties", EventStatus)."""
        state = self._state
        started = [
            live
            for live in state.events.values()
            if live.event.status is EventStatus.STARTED and live.impacts(name)
        ]
        if not started:
            self._registry.vm(name)
            raise InvalidOperationError(f"{name!r} has no Started event to be impacted again")
        if not self.reachable(name):
            raise InvalidOperationError(f"{name!r} is still in its impact")
        event = started[-1].event
        shorter = timedelta(seconds=impact_of(state.timing, event).total_seconds() // 2)
        if shorter <= timedelta(0):
            raise InvalidOperationError(
                f"{name!r}'s {event.event_type.value} advertises no impact to fall short of"
            )
        state.unreachable_until[name] = state.now + shorter
        state.impact_of_vm[name] = event
        state.changed_for(state.records[name])

    def reachable(self, name: str) -> bool:
        """False while an impact (reboot, freeze, redeploy) is under way, or once deleted."""
        state = self._state
        if name not in state.vms:
            return False
        until = state.unreachable_until.get(name)
        return until is None or state.now >= until

    def pause(self, name: str, record: VmRecord | None) -> Pause | None:
        """Why ``name``'s requests cannot be answered now (:mod:`forewarn.domain.impact`):
        an impact under way, the first-call delay after enablement, or the VM being gone.
        ``record`` is its record (None: every VM has one, so it is gone), looked up by the
        caller, which reads it again for the request."""
        state = self._state
        if record is None:
            return Pause(None)
        until = state.unreachable_until.get(name)
        if until is not None and state.now < until:
            event = state.impact_of_vm[name]
            return Pause(until, event.event_type, event.event_id)
        enabled_at = record.enabled_at
        if enabled_at is not None and state.now < enabled_at:
            return Pause(enabled_at)
        return None

    def impacts(self) -> dict[str, Pause]:
        """Every VM under an impact now, with the event causing it."""
        state = self._state
        impacts: dict[str, Pause] = {}
        for name, until in state.unreachable_until.items():
            if state.now < until:
                event = state.impact_of_vm[name]
                impacts[name] = Pause(until, event.event_type, event.event_id)
        return impacts
