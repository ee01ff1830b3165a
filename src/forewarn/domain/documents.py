"""The per-VM Scheduled Events document and its DocumentIncarnation rule.

SPEC 2: the incarnation increases whenever, and only when, the VM's Events array changes;
the same incarnation always means the same information; it never goes backwards. The rule
lives in one place, :meth:`Document.with_events`, so every path that changes events obeys it.

Through an api-version that does not show every event type (Preempt arrived with 2017-11-01,
Terminate with 2019-01-01), the incarnation is the one the VM's document had at the last change
that version shows (:meth:`Document.incarnation_for`). The documentation defines it by what a
client reads: "Entier qui augmente lorsque le tableau d'événements change. Les documents avec
la même incarnation contiennent les mêmes informations d'événement" (an integer that increases
when the events array changes, the same incarnation the same information:
learn.microsoft.com/fr-fr/azure/virtual-machines/windows/scheduled-events, "Event properties"), it
"provides an easy way to inspect if the Events payload has changed since the last query" (terminate
page, SPEC 1.4) and "is changing every time there's new information in Events"
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses"). A change
to an event a version hides is no new information in that version's Events, so it moves neither that
version's incarnation nor its ETag (a conditional GET answers 304); the next change it does show
brings it to the VM's incarnation, by more than one ("It may jump by more than one", SPEC 2). Each
incarnation still names one document of the VM, the one a client of any version would read as that
version shows it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain.api_versions import SCHEDULED_EVENTS_VERSIONS
from forewarn.domain.events import Event, EventType

#: The first document a VM is shown: the docs' live-migration example starts at 1 with no events
#: (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses").
FIRST_INCARNATION = 1

#: The event types of each api-version that does not show them all, narrowest first: each is
#: a view of the document with an incarnation of its own.
NARROW_VIEWS: tuple[frozenset[EventType], ...] = tuple(
    sorted(
        {v.event_types for v in SCHEDULED_EVENTS_VERSIONS if v.event_types != set(EventType)},
        key=len,
    )
)
_VIEW_INDEX = {view: index for index, view in enumerate(NARROW_VIEWS)}
#: Which narrow views see a change to an event of each type.
_SEEN_BY = {t: tuple(t in view for view in NARROW_VIEWS) for t in EventType}

#: Which of :data:`NARROW_VIEWS` show a change (in their order); None when all of them do.
Seen = tuple[bool, ...] | None


def _seen_by(changed: Iterable[EventType]) -> Seen:
    seen = [False] * len(NARROW_VIEWS)
    for event_type in changed:
        seen = [a or b for a, b in zip(seen, _SEEN_BY[event_type], strict=True)]
    return None if all(seen) else tuple(seen)


#: :func:`_seen_by` of every set of event types, worked out once: every change of a document
#: asks (three times a VM in a campaign), and a look-up costs a sixth of working it out.
_SEEN_OF: dict[frozenset[EventType], Seen] = {
    frozenset(types): _seen_by(types)
    for size in range(len(EventType) + 1)
    for types in itertools.combinations(EventType, size)
}


def seen_by(changed: Iterable[EventType]) -> Seen:
    """Which narrow views show a change to events of the types ``changed``; None when every
    one does (a change of Freeze, Reboot or Redeploy events, which every version shows)."""
    return _SEEN_OF[frozenset(changed)]


#: :func:`seen_by` of each single type: a change of one event, the most common change of all
#: (each step of each event of a campaign), is looked up with no set built.
_SEEN_OF_TYPE: dict[EventType, Seen] = {t: _SEEN_OF[frozenset((t,))] for t in EventType}


def seen_by_type(changed: EventType) -> Seen:
    """:func:`seen_by` of a change to events of the one type ``changed``."""
    return _SEEN_OF_TYPE[changed]


@dataclass(frozen=True, slots=True, init=False)
class Document:
    """What ``GET /metadata/scheduledevents`` tells one VM, before api-version filtering."""

    incarnation: int
    events: tuple[Event, ...]
    #: For each of :data:`NARROW_VIEWS`, the incarnation of the last change it shows; None
    #: while that is :attr:`incarnation` for every one (the last change showed in all).
    narrow: tuple[int, ...] | None

    def __init__(
        self, incarnation: int, events: tuple[Event, ...], narrow: tuple[int, ...] | None = None
    ) -> None:
        # Through the slots' own setters: every change builds a document for each VM shown
        # it (forewarn.domain._frozen).
        _set_incarnation(self, incarnation)
        _set_events(self, events)
        _set_narrow(self, narrow)

    def with_events(self, events: tuple[Event, ...], seen: Seen = None) -> Document:
        """The next document: the same object if nothing changed, else incarnation + 1.

        ``seen`` says which narrow views show the change (:func:`seen_by` of the types of the
        events added, changed or removed); those that do not keep their incarnation.
        """
        if events == self.events:
            return self
        incarnation = self.incarnation + 1
        if seen is None:
            return Document(incarnation, events)
        before = self.narrow or (self.incarnation,) * len(NARROW_VIEWS)
        narrow = tuple(
            incarnation if shown else kept for shown, kept in zip(seen, before, strict=True)
        )
        return Document(incarnation, events, narrow)

    def incarnation_for(self, shown: frozenset[EventType]) -> int:
        """The incarnation a version showing the event types ``shown`` reads: that of the
        last change it shows."""
        narrow = self.narrow
        if narrow is None:
            return self.incarnation
        index = _VIEW_INDEX.get(shown)
        return self.incarnation if index is None else narrow[index]


_set_incarnation, _set_events, _set_narrow = frozen_slot_setters(Document)

EMPTY_DOCUMENT = Document(FIRST_INCARNATION, ())


__all__ = [
    "EMPTY_DOCUMENT",
    "FIRST_INCARNATION",
    "NARROW_VIEWS",
    "Document",
    "Seen",
    "seen_by",
    "seen_by_type",
]
