"""How long each phase of an event lasts: the documented numbers and a fast profile.

Sources: "Event Scheduling" minimum notice table (scheduled-events-linux.txt); the typical
timings of scheduled-events-windows-2024.txt ("Scheduled to Approval Timeout: 15 minutes,
Impact Duration: 7 seconds, Started to Completed: 10 minutes"); "Enabling and disabling"
(first call "up to two minutes", disabled after 24 hours without a request); predicted
hardware failure "Azure tries to give 7 days' advance notice"; SPEC 4 and 7.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import timedelta

from forewarn.domain.clock import check_duration
from forewarn.domain.errors import TimeOutOfRangeError
from forewarn.domain.events import EventType

_MINUTE = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class TimingProfile:
    """Every duration the lifecycle uses, in one value that tests can swap.

    ``terminate_notice`` None means "the scale set's notBeforeTimeout", as on Azure.
    """

    name: str
    minimum_notice: dict[EventType, timedelta] = field(hash=False)
    impact: timedelta
    started_period: timedelta
    first_call_delay: timedelta
    idle_period: timedelta
    predicted_failure_notice: timedelta
    os_image_notice: timedelta
    terminate_notice: timedelta | None

    def notice_for(self, event_type: EventType) -> timedelta:
        return self.minimum_notice[event_type]

    def with_overrides(self, overrides: dict[str, timedelta]) -> TimingProfile:
        """A copy with some durations replaced (per-run overrides); unknown names, and
        durations outside 0..LONGEST, refused (ValueError)."""
        known = {f.name for f in fields(self)} - {"name", "minimum_notice"}
        notice = dict(self.minimum_notice)
        changes: dict[str, object] = {}
        for key, value in overrides.items():
            try:
                check_duration(value, key)
            except TimeOutOfRangeError as exc:
                raise ValueError(str(exc)) from None
            if key.startswith("notice."):
                try:
                    notice[EventType(key.removeprefix("notice."))] = value
                except ValueError:
                    raise ValueError(f"unknown event type in {key!r}") from None
            elif key in known:
                changes[key] = value
            else:
                names = ", ".join(sorted(known | {f"notice.{t.value}" for t in EventType}))
                raise ValueError(f"unknown timing {key!r}; known: {names}")
        return replace(self, minimum_notice=notice, **changes)  # type: ignore[arg-type]


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
    first_call_delay=2 * _MINUTE,
    idle_period=timedelta(hours=24),
    predicted_failure_notice=timedelta(days=7),
    os_image_notice=15 * _MINUTE,
    terminate_notice=None,
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
    first_call_delay=timedelta(0),
    idle_period=timedelta(hours=24),
    predicted_failure_notice=timedelta(seconds=10),
    os_image_notice=timedelta(seconds=3),
    terminate_notice=timedelta(seconds=2),
)

PROFILES: dict[str, TimingProfile] = {profile.name: profile for profile in (DOCUMENTED, FAST)}


__all__ = [
    "DOCUMENTED",
    "FAST",
    "PROFILES",
    "TimingProfile",
]
