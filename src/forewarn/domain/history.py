"""What happens to an event outside the VM's view: every state it reaches, as a fact.

IMDS shows an event while it lives and drops it when it is over; Event Grid and Resource Graph
also say how it ended: "when the operation is done either an event with EventStatus:"Completed"
(Event Grid, ARG) or an empty event array (IMDS) is sent", and "Canceled: (Event Grid and ARG
only): The scheduled impact won't proceed as scheduled" (learn.microsoft.com, "Scheduled Events
overview", "Scheduled Events States"). The lifecycle's steps report each state here
(:class:`EventHistory.record`) as an :class:`EventChange`: Scheduled when it is shown, Started,
Completed when its Started period ends, Canceled when the platform calls it off. "All
connections ... are unidirectional, an event will never move backwards", so each event's
changes are at most those four, in that order.

Only events published beyond IMDS are recorded: those of VMs whose ``scheduledEventsPolicy``
enables ``eventGridAndResourceGraph`` ("By default, scheduled events aren't delivered to Event
Grid", learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid), so a fleet that
publishes nothing pays nothing.

Changes are numbered in the order they happen. The platform is a function of its journal, so
a replay (a restart, another front-end) makes the very same changes with the very same numbers
at the very same platform times: a reader that remembers the last number it handled (the
Event Grid outbox) knows exactly what is new. Readers are told of each change as it is made
(:meth:`EventHistory.listen`), but only once it is a fact: a change made ahead of its journal
(applied before its record commits) is held (:meth:`EventHistory.hold`) and told when the
commit is confirmed (:meth:`EventHistory.release`), or never, when the platform is rebuilt
from the journal instead (the change undone): its number is then the next real change's, and
a reader told of the undone one would take the real one for a change it had already handled,
and pass over it. The rebuilt history holds its replayed changes too, and tells those the
replaced one had not (:attr:`EventHistory.told`) once readers listen to it: among them the
change whose commit could not be confirmed, when the journal says it happened.

The history itself keeps the latest change of each event for Resource Graph's table: every
live event, and the :data:`FINISHED_KEPT` most recently finished (Completed or Canceled), the
oldest forgotten first, so memory stays bounded however long the platform runs.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from forewarn.domain import arm
from forewarn.domain.events import Event
from forewarn.domain.vms import Vm

#: Finished events whose last state Resource Graph keeps (about 0.4 KiB each).
FINISHED_KEPT = 100_000


class Phase(enum.Enum):
    """EventStatus as Event Grid and Resource Graph show it: IMDS's two, and how it ended."""

    SCHEDULED = "Scheduled"
    STARTED = "Started"
    COMPLETED = "Completed"
    CANCELED = "Canceled"

    __hash__ = object.__hash__  # as EventType's

    @property
    def finished(self) -> bool:
        return self is Phase.COMPLETED or self is Phase.CANCELED


@dataclass(frozen=True, slots=True)
class Publication:
    """Where an event is filed in ARM, from the VMs it impacts when it is created."""

    #: The resource it is filed under (:func:`forewarn.domain.arm.target_id`).
    target: str
    subscription_id: str
    resource_group: str
    location: str
    tenant_id: str
    zones: tuple[str, ...]
    #: ``scheduledEventsApiVersion`` of the VMs' policy.
    api_version: str

    def event_id(self, event_id: str) -> str:
        return arm.scheduled_event_id(self.target, event_id)


def publication(vms: Sequence[Vm]) -> Publication | None:
    """Where an event impacting ``vms`` is published, or None when none of them publishes
    (``eventGridAndResourceGraph.enable``; [ours]: any impacted VM's policy publishes it)."""
    publishing = [vm for vm in vms if vm.policy.publish]
    if not publishing:
        return None
    first = vms[0]
    return Publication(
        arm.target_id(vms),
        first.subscription_id,
        first.resource_group,
        first.location,
        first.tenant_id,
        tuple(sorted({vm.zone for vm in vms if vm.zone})),
        publishing[0].policy.published_api_version,
    )


@dataclass(frozen=True, slots=True)
class EventChange:
    """Event ``event`` reached ``phase`` at platform time ``at``; the ``sequence``-th change."""

    sequence: int
    at: datetime
    phase: Phase
    #: The event as IMDS showed it last (Scheduled or Started).
    event: Event
    where: Publication


Listener = Callable[[EventChange], None]


class EventHistory:
    """The changes of published events as they happen, and the latest of each event."""

    def __init__(self, finished_kept: int = FINISHED_KEPT) -> None:
        self.sequence = 0
        self._finished_kept = finished_kept
        self._live: dict[str, EventChange] = {}
        self._finished: OrderedDict[str, EventChange] = OrderedDict()
        self._listeners: list[Listener] = []
        #: The number of the last change readers were told of, here or by the history this
        #: one replaces (:meth:`hold`).
        self.told = 0
        #: While held, the number after which changes are kept for :meth:`release`.
        self._holding: int | None = None
        self._held: list[EventChange] = []

    def hold(self, after: int | None = None) -> None:
        """Keep the changes made from now on, untold, until :meth:`release` (dropped with
        this history when its platform is replaced instead). Those numbered ``after`` or
        less are not kept, as readers were told of them already: ``after`` is the
        :attr:`told` of the history this one, replayed from the journal, replaces."""
        if after is not None:
            self.told = max(self.told, after)
        self._holding = self.told

    def release(self) -> None:
        """Tell readers of the changes held, in order, and of every change from now on."""
        held, self._held, self._holding = self._held, [], None
        for change in held:
            self._tell(change)

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every change from now on, as it is made."""
        self._listeners.append(listener)

    def record(self, at: datetime, phase: Phase, event: Event, where: Publication) -> None:
        self.sequence += 1
        change = EventChange(self.sequence, at, phase, event, where)
        event_id = event.event_id
        if phase.finished:
            self._live.pop(event_id, None)
            self._finished[event_id] = change
            if len(self._finished) > self._finished_kept:
                self._finished.popitem(last=False)
        else:
            self._live[event_id] = change
        if self._holding is None:
            self._tell(change)
        elif change.sequence > self._holding:
            self._held.append(change)

    def _tell(self, change: EventChange) -> None:
        self.told = change.sequence
        for listener in self._listeners:
            listener(change)

    def latest(self) -> Iterator[EventChange]:
        """Each kept event's latest change: the finished (oldest first), then the live."""
        yield from self._finished.values()
        yield from self._live.values()

    def get(self, event_id: str) -> EventChange | None:
        return self._live.get(event_id) or self._finished.get(event_id)

    def __len__(self) -> int:
        return len(self._live) + len(self._finished)


__all__ = [
    "FINISHED_KEPT",
    "EventChange",
    "EventHistory",
    "Listener",
    "Phase",
    "Publication",
    "publication",
]
