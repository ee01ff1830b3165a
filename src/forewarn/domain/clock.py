"""Time as the domain sees it: a :class:`Clock` it is handed, never the wall clock.

The manual clock lives here because it is pure; clocks that read the system time are adapters
(:mod:`forewarn.clocks`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Protocol

from forewarn.domain.errors import TimeOutOfRangeError

#: Where a manual clock starts unless told: the moment of the documentation's live-migration
#: example (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example
#: responses": NotBefore "Mon, 11 Apr 2022 22:26:58 GMT", 15 minutes later).
DEFAULT_START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


#: The latest moment the platform's clock may show. Every date the platform prints (a
#: NotBefore, an impact's or a Started period's end, the 24 h idle rule, the Date header) is a
#: clock reading plus a few durations of at most :data:`LONGEST` each, so with both bounds every
#: such date stays centuries short of year 9999, past which ``datetime`` cannot go and an HTTP
#: date cannot be printed. Clock moves, journal times and scaled clocks are held to it.
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
#: The longest duration the platform adds to a time: a notice, an event's DurationInSeconds,
#: a timing of the profile, one clock step. 100 years: far beyond the longest notice Azure
#: gives (7 days of predicted failure).
LONGEST = timedelta(days=36_500)


def check_time(moment: datetime, what: str = "the time") -> datetime:
    """``moment``, if the platform can show it; :class:`TimeOutOfRangeError` otherwise."""
    if moment > LATEST:
        raise TimeOutOfRangeError(
            f"{what} {moment.isoformat()}: it is past {LATEST.isoformat()}, "
            "the latest time the platform can show"
        )
    return moment


def check_duration(duration: timedelta, what: str = "a duration") -> timedelta:
    """``duration``, if it is at least 0 and at most :data:`LONGEST`."""
    if duration < timedelta(0) or duration > LONGEST:
        raise TimeOutOfRangeError(
            f"{what} must be from 0 to {LONGEST.days} days, not {_days(duration)}"
        )
    return duration


def seconds_to_duration(seconds: float, what: str = "a duration") -> timedelta:
    """``seconds`` as a duration held to :func:`check_duration`; an infinite, NaN or huge
    count is refused before ``timedelta`` would overflow."""
    if not math.isfinite(seconds) or not 0 <= seconds <= LONGEST.total_seconds():
        raise TimeOutOfRangeError(
            f"{what} must be from 0 to {LONGEST.total_seconds():.0f} seconds "
            f"({LONGEST.days} days), not {seconds:g}"
        )
    return timedelta(seconds=seconds)


def _days(duration: timedelta) -> str:
    return f"{duration.total_seconds() / 86_400:g} days"


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
        """Move forward; going backwards would let NotBefore times pass twice, and going
        past :data:`LATEST` would leave dates nobody can print."""
        self._now = self.advanced_by(delta)
        return self._now

    def advanced_by(self, delta: timedelta) -> datetime:
        """Where :meth:`advance` would move the clock, or why it would not (ValueError,
        TimeOutOfRangeError), without moving it: a move is journaled before it is made."""
        if delta < timedelta(0):
            raise ValueError("a clock only moves forward")
        if delta > LATEST - self._now:
            raise TimeOutOfRangeError(
                f"advancing {_days(delta)} from {self._now.isoformat()} would pass "
                f"{LATEST.isoformat()}, the latest time the platform can show"
            )
        return self._now + delta

    def set(self, moment: datetime) -> datetime:
        """Jump to ``moment``, which must not be in the past nor past :data:`LATEST`."""
        moment = check_time(ensure_utc(moment), "the clock cannot be set to")
        if moment < self._now:
            raise ValueError("a clock only moves forward")
        self._now = moment
        return self._now


__all__ = [
    "DEFAULT_START",
    "LATEST",
    "LONGEST",
    "Clock",
    "ManualClock",
    "check_duration",
    "check_time",
    "ensure_utc",
    "seconds_to_duration",
]
