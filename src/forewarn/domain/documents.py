"""The per-VM Scheduled Events document and its DocumentIncarnation rule.

SPEC 2: the incarnation increases whenever, and only when, the VM's Events array changes;
the same incarnation always means the same information; it never goes backwards. The rule
lives in one place, :meth:`Document.with_events`, so every path that changes events obeys it.
"""

from __future__ import annotations

from dataclasses import dataclass

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain.events import Event

#: The first document a VM is shown: the docs' live-migration example starts at 1 with no events
#: (scheduled-events-windows-2024.txt, "Example responses").
FIRST_INCARNATION = 1


@dataclass(frozen=True, slots=True, init=False)
class Document:
    """What ``GET /metadata/scheduledevents`` tells one VM, before api-version filtering."""

    incarnation: int
    events: tuple[Event, ...]

    def __init__(self, incarnation: int, events: tuple[Event, ...]) -> None:
        # Through the slots' own setters: every change builds a document for each VM shown
        # it (forewarn.domain._frozen).
        _set_incarnation(self, incarnation)
        _set_events(self, events)

    def with_events(self, events: tuple[Event, ...]) -> Document:
        """The next document: the same object if nothing changed, else incarnation + 1."""
        if events == self.events:
            return self
        return Document(self.incarnation + 1, events)


_set_incarnation, _set_events = frozen_slot_setters(Document)

EMPTY_DOCUMENT = Document(FIRST_INCARNATION, ())


__all__ = [
    "EMPTY_DOCUMENT",
    "FIRST_INCARNATION",
    "Document",
]
