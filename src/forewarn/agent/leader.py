"""Which VM approves an event that impacts several.

"Acknowledging an event allows the event to proceed for all Resources in the event, not just
the VM that acknowledges the event. Therefore, you can choose to elect a leader to coordinate
the acknowledgement, which might be as simple as the first machine in the Resources field."
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event"). Every VM of
the event computes the same answer from the same document, so no messages are needed: the leader
approves, the others only prepare. A VM that is not among the Resources never approves.
"""

from __future__ import annotations

from forewarn.agent.config import LeaderElection
from forewarn.client import ScheduledEvent

#: api-version 2017-03-01 prefixes IaaS VM names with ``_`` (SPEC 2).
_PREFIX = "_"


def _names(event: ScheduledEvent) -> list[str]:
    if event.api_version == "2017-03-01":
        return [name.removeprefix(_PREFIX) for name in event.resources]
    return list(event.resources)


def leader(event: ScheduledEvent, election: LeaderElection) -> str | None:
    """The VM that approves ``event``, or None when every impacted VM may (``every-vm``)."""
    names = _names(event)
    if election == "every-vm" or not names:
        return None
    if election == "first-listed":
        return names[0]
    return min(names)


def may_approve(event: ScheduledEvent, vm_name: str, election: LeaderElection) -> bool:
    """Whether ``vm_name`` is the one to approve ``event``."""
    if not event.impacts(vm_name):
        return False
    chosen = leader(event, election)
    return chosen is None or chosen == vm_name


__all__ = [
    "leader",
    "may_approve",
]
