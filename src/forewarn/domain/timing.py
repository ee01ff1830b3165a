"""How long each phase of an event lasts: the documented numbers and a fast profile.

Sources: "Event Scheduling" minimum notice table (scheduled-events-linux.txt) and the typical
timings of scheduled-events-windows-2024.txt ("Scheduled to Approval Timeout: 15 minutes,
Impact Duration: 7 seconds, Started to Completed: 10 minutes"); SPEC 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from forewarn.domain.events import EventType

_MINUTE = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class TimingProfile:
    """Every duration the lifecycle uses, in one value that tests can swap."""

    name: str
    minimum_notice: dict[EventType, timedelta] = field(hash=False)
    impact: timedelta
    started_period: timedelta

    def notice_for(self, event_type: EventType) -> timedelta:
        return self.minimum_notice[event_type]

    def with_overrides(self, **changes: timedelta) -> TimingProfile:
        """A copy with some durations replaced (per-run overrides)."""
        return replace(self, **changes)  # type: ignore[arg-type]


DOCUMENTED = TimingProfile(
    name="documented",
    minimum_notice={
        EventType.FREEZE: 15 * _MINUTE,
        EventType.REBOOT: 15 * _MINUTE,
        EventType.REDEPLOY: 10 * _MINUTE,
        EventType.PREEMPT: timedelta(seconds=30),
        EventType.TERMINATE: 5 * _MINUTE,
    },
    impact=timedelta(seconds=7),
    started_period=10 * _MINUTE,
)

#: The same shape in seconds, for demos and for users' own test suites.
FAST = TimingProfile(
    name="fast",
    minimum_notice={
        EventType.FREEZE: timedelta(seconds=3),
        EventType.REBOOT: timedelta(seconds=3),
        EventType.REDEPLOY: timedelta(seconds=2),
        EventType.PREEMPT: timedelta(seconds=1),
        EventType.TERMINATE: timedelta(seconds=2),
    },
    impact=timedelta(seconds=1),
    started_period=timedelta(seconds=2),
)

PROFILES: dict[str, TimingProfile] = {profile.name: profile for profile in (DOCUMENTED, FAST)}
