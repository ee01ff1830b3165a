"""What a VM's own requests meet while it cannot be answered, and the policy per event type.

On Azure no VM ever sees its metadata endpoint misbehave during an impact: a frozen VM's calls
simply take longer (the VM is paused mid-request), a rebooting VM has no process left to ask,
and a VM that is warming up after enablement waits "up to two minutes" for its first answer
(scheduled-events-linux.txt, "Enabling and disabling Scheduled Events"). forewarn can only
imitate that from outside the VM, so what a request meets is a policy, per event type:

- ``hold`` (the default): the request is answered when the impact ends, as a paused VM
  experiences it;
- ``drop``: the connection is closed without an answer (the VM "vanished" mid-call);
- ``refuse``: the connection is reset at once, as for a VM that is off.

A VM still warming up after its first call is always held: the documentation promises a
delayed answer, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from forewarn.domain.events import EventType


class ImpactPolicy(Enum):
    HOLD = "hold"
    DROP = "drop"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Pause:
    """Why a VM's requests cannot be answered now, and until when.

    ``until`` None: never (the VM is gone). ``event_type`` None: the VM is warming up after
    its first call, not in an impact.
    """

    until: datetime | None
    event_type: EventType | None = None
    event_id: str | None = None

    @property
    def warming_up(self) -> bool:
        """The VM is up and asking, only not answered yet: its requests still count."""
        return self.until is not None and self.event_type is None


@dataclass(frozen=True, slots=True)
class ImpactPolicies:
    """The policy for each event type's impact; types not named are held."""

    by_type: Mapping[EventType, ImpactPolicy] = field(default_factory=dict)

    def for_pause(self, pause: Pause) -> ImpactPolicy:
        """A gone VM is dropped (nothing could be held for it); a warm-up is held."""
        if pause.until is None:
            return ImpactPolicy.DROP
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


__all__ = [
    "ImpactPolicies",
    "ImpactPolicy",
    "Pause",
]
