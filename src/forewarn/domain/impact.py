"""What a VM's own requests meet while it cannot be answered, and the policy per event type.

On Azure no VM ever sees its metadata endpoint misbehave during an impact: a frozen VM's calls
simply take longer (the VM is paused mid-request), a rebooting VM has no process left to ask,
and a VM that is warming up after enablement waits "up to two minutes" for its first answer
(learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and disabling
Scheduled Events"). forewarn can only imitate that from outside the VM, so what a request meets is a
policy, per event type:

- ``hold`` (the default): the request is answered when the impact ends, as a paused VM
  experiences it;
- ``drop``: the connection is closed without an answer (the VM "vanished" mid-call);
- ``refuse``: the connection is reset at once, as for a VM that is off.

A VM still warming up after its first call is always held: the documentation promises a
delayed answer, not a failure. A VM that is gone (deleted by a Terminate or Preempt, or with
no event) is held for ever, whatever the policies: on Azure its software is gone with it and
nothing answers at its address, so no HTTP answer a real VM could get is given; a client
still running (forewarn cannot stop it: an impact hook can) waits until it gives up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Literal

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain._state import Deletion
from forewarn.domain.events import EventType


class ImpactPolicy(Enum):
    HOLD = "hold"
    DROP = "drop"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True, init=False)
class Pause:
    """Why a VM's requests cannot be answered now, and until when.

    ``until`` None: never (the VM is gone; ``event_type`` and ``event_id`` are then those
    of the event that deleted it, if one did). ``event_type`` None with an ``until``: the VM
    is warming up after its first call, not in an impact.
    """

    until: datetime | None
    event_type: EventType | None = None
    event_id: str | None = None

    def __init__(
        self,
        until: datetime | None,
        event_type: EventType | None = None,
        event_id: str | None = None,
    ) -> None:
        # Through the slots' own setters (forewarn.domain._frozen): every request of a VM
        # in an impact meets one.
        _set_until(self, until)
        _set_event_type(self, event_type)
        _set_event_id(self, event_id)

    @property
    def gone(self) -> bool:
        """The VM is deleted: its requests are never answered."""
        return self.until is None

    @property
    def warming_up(self) -> bool:
        """The VM is up and asking, only not answered yet: its requests still count."""
        return self.until is not None and self.event_type is None


_set_until, _set_event_type, _set_event_id = frozen_slot_setters(Pause)


@dataclass(frozen=True, slots=True)
class ImpactPolicies:
    """The policy for each event type's impact; types not named are held."""

    by_type: Mapping[EventType, ImpactPolicy] = field(default_factory=dict)

    def for_pause(self, pause: Pause) -> ImpactPolicy:
        """A warm-up is held, and a gone VM held for ever (nothing answers it)."""
        if pause.until is None:
            return ImpactPolicy.HOLD
        if pause.event_type is None:
            return ImpactPolicy.HOLD
        return self.by_type.get(pause.event_type, ImpactPolicy.HOLD)

    @classmethod
    def parse(cls, settings: Iterable[str]) -> ImpactPolicies:
        """``TYPE=POLICY`` settings (``Freeze=hold``, ``Reboot=refuse``); bad ones refused."""
        by_type: dict[EventType, ImpactPolicy] = {}
        for setting in settings:
            name, sep, value = setting.partition("=")
            types = {t.value.lower(): t for t in EventType}
            policies = {p.value: p for p in ImpactPolicy}
            event_type = types.get(name.strip().lower())
            policy = policies.get(value.strip().lower())
            if not sep or event_type is None or policy is None:
                raise ValueError(
                    f"impact policy {setting!r} is not TYPE=POLICY with TYPE one of "
                    f"{', '.join(t.value for t in EventType)} and POLICY one of "
                    f"{', '.join(policies)}"
                )
            by_type[event_type] = policy
        return cls(by_type)


#: What happened to a VM, as impact hooks are told it (``FOREWARN_IMPACT``).
Phase = Literal["start", "end", "deleted"]


@dataclass(frozen=True, slots=True)
class ImpactChange:
    """A VM entering an impact, leaving it, or deleted (after its impact's end), with the
    event that did it (None for a deletion without one): what ``serve --impact-hook`` and the
    test plugin's ``impact_hook`` are told, so a harness can pause, resume or stop the VM's
    own software as the platform would."""

    vm: str
    phase: Phase
    event_type: EventType | None
    event_id: str | None


class ImpactWatch:
    """The changes between looks at the platform: which VMs are in an impact
    (:meth:`Platform.impacts`) and which were deleted since (:meth:`Platform.deletions_after`).

    Starts and ends are found by comparing one look's impacts with the last, so they follow
    the platform clock whatever moves it; deletions are counted, so each is told once. Those
    before ``deleted_before`` (the count at the first look) are not told: a harness starts the
    software of the VMs that exist.
    """

    __slots__ = ("_known", "deletions_seen")

    def __init__(self, deleted_before: int = 0) -> None:
        self._known: dict[str, Pause] = {}
        #: The :attr:`Deletion.number` of the last deletion told.
        self.deletions_seen = deleted_before

    def changes(
        self, impacts: Mapping[str, Pause], deletions: Sequence[Deletion]
    ) -> list[ImpactChange]:
        """What changed since the last call, ends first, then starts, then deletions (a
        deleted VM's impact ends before it is deleted); ``deletions`` are those after
        :attr:`deletions_seen`."""
        known = self._known
        changes = [
            _change(vm, "end", pause)
            for vm, pause in known.items()
            if (now := impacts.get(vm)) is None or now.event_id != pause.event_id
        ]
        changes += [
            _change(vm, "start", pause)
            for vm, pause in impacts.items()
            if (before := known.get(vm)) is None or before.event_id != pause.event_id
        ]
        for deletion in deletions:
            if deletion.number > self.deletions_seen:
                event = deletion.event
                changes.append(
                    ImpactChange(
                        deletion.vm.name,
                        "deleted",
                        None if event is None else event.event_type,
                        None if event is None else event.event_id,
                    )
                )
                self.deletions_seen = deletion.number
        self._known = dict(impacts)
        return changes

    def ending(self) -> list[ImpactChange]:
        """The end of every impact still known: told when the watching stops."""
        changes = [_change(vm, "end", pause) for vm, pause in self._known.items()]
        self._known = {}
        return changes


def _change(vm: str, phase: Phase, pause: Pause) -> ImpactChange:
    return ImpactChange(vm, phase, pause.event_type, pause.event_id)


__all__ = [
    "ImpactChange",
    "ImpactPolicies",
    "ImpactPolicy",
    "ImpactWatch",
    "Pause",
    "Phase",
]
