"""Turning polled documents into changes, the way the documentation's pseudo code does.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview",
prescribes the loop::

    current_list_of_scheduled_events = get_latest_from_se_endpoint()
    for each event in current_list_of_scheduled_events:
      if event not in previous_list_of_scheduled_events:
        prepare_for_event(event)
    for each event in previous_list_of_scheduled_events:
      if event not in current_list_of_scheduled_events:
        receover_from_event(event)
    previous_list_of_scheduled_events = current_list_of_scheduled_events

and its Python sample polls once a second until DocumentIncarnation moves, then handles "all
events in a document together". A :class:`DocumentChange` is one such step: the events
``added`` (prepare), ``changed`` (the same EventId shown differently, chiefly Scheduled ->
Started) and ``removed`` (recover). Everything here is pure; the clients do the polling.
"""

from __future__ import annotations

from dataclasses import dataclass

from forewarn.client._models import ScheduledEvent, ScheduledEventsDocument

#: "we recommend that you poll the service once per second"
#: (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency").
DEFAULT_POLL_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class EventUpdate:
    """One event shown differently than before: ``before`` and ``after`` share an EventId."""

    before: ScheduledEvent
    after: ScheduledEvent

    @property
    def started(self) -> bool:
        """The transition that matters most: Scheduled before, Started now."""
        return self.before.is_scheduled and self.after.is_started


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """What moved between two documents with different DocumentIncarnations.

    ``previous`` is None for the first document a watch sees, whose events are all
    ``added``. The three tuples may all be empty: the incarnation moved for a change this
    api-version does not show (an event of a type it does not know).
    """

    previous: ScheduledEventsDocument | None
    current: ScheduledEventsDocument
    added: tuple[ScheduledEvent, ...]
    changed: tuple[EventUpdate, ...]
    removed: tuple[ScheduledEvent, ...]

    @property
    def incarnation(self) -> int:
        return self.current.incarnation

    @property
    def started(self) -> tuple[ScheduledEvent, ...]:
        """Events that moved from Scheduled to Started in this change."""
        return tuple(update.after for update in self.changed if update.started)


def diff_documents(
    previous: ScheduledEventsDocument | None, current: ScheduledEventsDocument
) -> DocumentChange:
    """The change from ``previous`` to ``current``, events matched by EventId."""
    before = {event.event_id: event for event in previous.events} if previous else {}
    now = {event.event_id: event for event in current.events}
    added = tuple(event for event in current.events if event.event_id not in before)
    changed = tuple(
        EventUpdate(before[event.event_id], event)
        for event in current.events
        if event.event_id in before and before[event.event_id] != event
    )
    removed = tuple(event for event_id, event in before.items() if event_id not in now)
    return DocumentChange(previous, current, added, changed, removed)


class IncarnationTracker:
    """Remembers the last document and reports a change only when DocumentIncarnation moves.

    "Moves" means differs: the service promises the same incarnation always means the same
    information, so an equal number is never news, and any other number is.
    """

    def __init__(self, previous: ScheduledEventsDocument | None = None) -> None:
        self.previous = previous

    def observe(self, document: ScheduledEventsDocument) -> DocumentChange | None:
        previous = self.previous
        if previous is not None and previous.incarnation == document.incarnation:
            return None
        self.previous = document
        return diff_documents(previous, document)


class PollSchedule:
    """Polls at a fixed rate on a monotonic clock: one every ``interval`` seconds, and at once
    (without a burst to catch up) when handling the last change took longer than that."""

    def __init__(self, interval: float, start: float) -> None:
        if interval <= 0:
            raise ValueError("the poll interval must be positive")
        self.interval = interval
        self._due = start

    def wait(self, now: float) -> float:
        """Seconds to sleep before the next poll; books the one after it."""
        wait = max(0.0, self._due - now)
        self._due = max(self._due + self.interval, now)
        return wait
