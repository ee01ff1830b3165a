"""Time as the domain sees it: a :class:`Clock` it is handed, never the wall clock.

The manual clock lives here because it is pure; clocks that read the system time are adapters
(:mod:`forewarn.clocks`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

#: Where a manual clock starts unless told: the moment of the documentation's live-migration
#: example (scheduled-events-windows-2024.txt, "Example responses": NotBefore
#: "Mon, 11 Apr 2022 22:26:58 GMT", 15 minutes later).
DEFAULT_START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


class Clock(Protocol):
    """Anything that can say what time it is on the simulated platform."""

    def now(self) -> datetime:
        """The current platform time, timezone-aware UTC."""
        ...


def ensure_utc(moment: datetime) -> datetime:
    """Refuse naive datetimes: a time without a zone cannot be shown as GMT honestly."""
    if moment.tzinfo is UTC:  # the clocks' own times, on every catch-up
        return moment
    if moment.tzinfo is None:
        raise ValueError("platform times must be timezone-aware")
    return moment.astimezone(UTC)


class ManualClock:
    """A clock that moves only when told, so tests never sleep."""

    def __init__(self, start: datetime) -> None:
        self._now = ensure_utc(start)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move forward; going backwards would let NotBefore times pass twice."""
        if delta < timedelta(0):
            raise ValueError("a clock only moves forward")
        self._now += delta
        return self._now

    def set(self, moment: datetime) -> datetime:
        """Jump to ``moment``, which must not be in the past."""
        moment = ensure_utc(moment)
        if moment < self._now:
            raise ValueError("a clock only moves forward")
        self._now = moment
        return self._now


__all__ = [
    "DEFAULT_START",
    "Clock",
    "ManualClock",
    "ensure_utc",
]
