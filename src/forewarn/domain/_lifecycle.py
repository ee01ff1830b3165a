"""The lifecycle as data: what happens when, after what (SPEC 4 and 7).

Time only moves through :meth:`Deadlines.advance_to`: every step that waits (a job reaching
its NotBefore, an impact over, a Started event's period over, a VM's first-call delay over) is
a deadline in one heap, and :data:`LIFECYCLE` says, for each kind, which step sets it, when it
falls (each wait counts from that step: the VM's enabling request, the job's creation, the
event's start; the durations come from the :class:`~forewarn.domain.timing.TimingProfile`)
and which part of the platform it hands its subject to::

    (created) -> Scheduled --job approved by all / NotBefore--> Started --period--> (removed)
                     \\--cancelled----------------------------------------------> (removed)
    (hardware failure, auto-approval) ----------------------> Started

Deadlines due at one instant fire in the order they were set (a sequence number breaks the
tie), so a replay applies them exactly as the original run did. A deadline whose subject is
gone (a cancelled event, a deleted VM) does nothing when it falls.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING

from forewarn.domain.events import Event
from forewarn.domain.timing import TimingProfile

if TYPE_CHECKING:
    from forewarn.domain._enablement import Enablement
    from forewarn.domain._impacts import Impacts
    from forewarn.domain._jobs import Jobs
    from forewarn.domain._state import LiveEvent, PlatformState


class Deadline(Enum):
    ENABLE = "enable"
    START = "start"
    IMPACT_END = "impact-end"
    REMOVE = "remove"

    # Members are compared by identity, so they may be hashed by it: Enum's own hash is a
    # Python function, called for every deadline set and fired.
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Parts:
    """The parts of the platform a deadline hands its subject to."""

    enablement: Enablement
    jobs: Jobs
    impacts: Impacts


def impact_of(timing: TimingProfile, event: Event) -> timedelta:
    """How long ``event``'s impact lasts (:meth:`TimingProfile.impact_for`)."""
    return timing.impact_for(event.event_type, event.duration_seconds)


def _first_call_delay_over(state: PlatformState, name: str) -> datetime:
    return state.records[name].last_request + state.timing.first_call_delay


def _not_before(state: PlatformState, event_id: str) -> datetime:
    return state.events[event_id].job.not_before


def _impact_over(state: PlatformState, event_id: str) -> datetime:
    return state.now + impact_of(state.timing, state.events[event_id].event)


def started_period_of(timing: TimingProfile, live: LiveEvent) -> timedelta:
    """How long ``live`` stays Started (:meth:`TimingProfile.started_for`): its own period
    when it was made with one, else its kind's."""
    event = live.event
    return timing.started_for(
        event.event_type, event.description, event.duration_seconds, live.started_for
    )


def _started_period_over(state: PlatformState, event_id: str) -> datetime:
    return state.now + started_period_of(state.timing, state.events[event_id])


@dataclass(frozen=True, slots=True)
class Transition:
    """One kind of deadline: the step that sets it, when it falls, what it does."""

    set_by: str
    due: Callable[[PlatformState, str], datetime]
    #: The part's step the deadline hands its subject to.
    fire: Callable[[Parts], Callable[[str], None]]


LIFECYCLE: Mapping[Deadline, Transition] = {
    Deadline.ENABLE: Transition(
        set_by="a VM's first request, or its first after the idle period (Enablement.touch)",
        due=_first_call_delay_over,  # TimingProfile.first_call_delay after that request
        fire=lambda parts: parts.enablement.enable_due,
    ),
    Deadline.START: Transition(
        set_by="a job's creation, once per event (Jobs.schedule_job)",
        due=_not_before,  # its notice later: at least TimingProfile.minimum_notice
        fire=lambda parts: parts.jobs.start_due,
    ),
    Deadline.IMPACT_END: Transition(
        set_by="an event's start (Jobs._start)",
        due=_impact_over,  # DurationInSeconds later, or TimingProfile.impact
        fire=lambda parts: parts.jobs.impact_over,
    ),
    Deadline.REMOVE: Transition(
        set_by="an event's start (Jobs._start)",
        due=_started_period_over,  # its kind's Started period later (started_period_of)
        fire=lambda parts: parts.jobs.remove_due,
    ),
}


class _Instant:
    """The deadlines due at one instant, in the order they were set, and how many fired.

    Two lists side by side rather than one of pairs: a campaign sets hundreds of thousands
    of deadlines, and a pair per deadline would be one more object for the collector to
    examine until it falls.
    """

    __slots__ = ("fired", "keys", "kinds")

    def __init__(self, key: str, kind: Deadline) -> None:
        self.keys = [key]
        self.kinds = [kind]
        self.fired = 0


class Deadlines:
    """What is due, ordered by instant, then by the order the deadlines were set.

    A heap of the distinct instants, each with the list of its deadlines in the order they
    were set: a campaign's thousands of events fall due at a handful of instants, so setting
    one is an append and firing one a step along its list, whatever the number pending. The
    order is the same as one heap of (instant, sequence) would give, because a list only
    grows at its end and the next deadline is always the first unfired one of the earliest
    instant.
    """

    def __init__(self, state: PlatformState) -> None:
        self._state = state
        self._instants: list[datetime] = []
        self._due_at: dict[datetime, _Instant] = {}
        # The instant each kind's last deadline was set at, with its deadlines: a campaign
        # sets each kind's thousands at one instant, and comparing two aware datetimes costs
        # a tenth of hashing a new one to find its instant in the table.
        self._last: dict[Deadline, tuple[datetime, _Instant]] = {}

    def due(self, kind: Deadline, key: str) -> datetime:
        """When a deadline of ``kind`` for ``key`` set now would fall."""
        return LIFECYCLE[kind].due(self._state, key)

    def set(self, kind: Deadline, key: str) -> datetime:
        """Set the deadline of ``kind`` for ``key`` at the instant :data:`LIFECYCLE` gives."""
        when = LIFECYCLE[kind].due(self._state, key)
        self.push(when, key, kind)
        return when

    def push(self, when: datetime, key: str, kind: Deadline) -> None:
        last = self._last.get(kind)
        # Still pending while it holds deadlines: it leaves the table (and the heap) as its
        # last one fires, emptied then (_fire_due).
        if last is not None and last[0] == when and last[1].keys:
            last[1].keys.append(key)
            last[1].kinds.append(kind)
            return
        instant = self._due_at.get(when)
        if instant is None:
            instant = self._due_at[when] = _Instant(key, kind)
            heapq.heappush(self._instants, when)
        else:
            instant.keys.append(key)
            instant.kinds.append(kind)
        self._last[kind] = (when, instant)

    def next_due(self) -> datetime | None:
        return self._instants[0] if self._instants else None

    def advance_to(self, now: datetime, parts: Parts) -> None:
        """Fire every deadline due at or before ``now``, oldest first, each at its instant."""
        state = self._state
        if now < state.now:
            return  # a clock read a moment ago on another path: nothing new is due
        instants = self._instants
        if instants and instants[0] <= now:
            self._fire_due(now, parts)
        state.now = now

    def _fire_due(self, now: datetime, parts: Parts) -> None:
        state = self._state
        instants = self._instants
        due_at = self._due_at
        # each kind's step, found once for the many deadlines a campaign fires at once
        steps = {kind: transition.fire(parts) for kind, transition in LIFECYCLE.items()}
        while instants and instants[0] <= now:
            when = instants[0]
            instant = due_at[when]
            fired = instant.fired
            key, kind = instant.keys[fired], instant.kinds[fired]
            instant.fired = fired + 1
            if fired + 1 == len(instant.keys):
                heapq.heappop(instants)
                del due_at[when]
                # Emptied, so the instant push keeps as its kind's last (Deadlines._last)
                # holds no campaign's keys alive, and reads as fired to it.
                instant.keys.clear()
                instant.kinds.clear()
            if when > state.now:
                state.now = when
            steps[kind](key)
