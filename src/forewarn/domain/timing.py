"""How long each phase of an event lasts: the documented numbers, dev and fast profiles.

Sources: "Event Scheduling" minimum notice table
(learn.microsoft.com/azure/virtual-machines/linux/scheduled-events); the typical timings of
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events ("Scheduled to Approval Timeout:
15 minutes, Impact Duration: 7 seconds, Started to Completed: 10 minutes"); "Enabling and disabling"
(first call "up to two minutes", disabled after 24 hours without a request); predicted hardware
failure "Azure tries to give 7 days' advance notice"; SPEC 4 and 7. The Started period of a live
migration, 5 minutes where every other kind captured is Started for 10, is the capture of
Microsoft's Scheduled Events mock server (Azure-Samples/scheduled-events-mock- server, ``main.py``,
"Live Migration": ``StartedDurationInMinutes`` 5), whose "Dev Timing" variants read its minutes as
seconds: the ``dev`` profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta

from forewarn.domain.clock import check_duration
from forewarn.domain.errors import TimeOutOfRangeError
from forewarn.domain.events import DURATION_UNKNOWN, EventType
from forewarn.domain.kinds import EventKind, kind_of

_MINUTE = timedelta(minutes=1)
#: Event types whose impact deletes the VM.
REMOVES_VM = frozenset({EventType.TERMINATE, EventType.PREEMPT})


@dataclass(frozen=True, slots=True)
class TimingProfile:
    """Every duration the lifecycle uses, in one value that tests can swap.

    ``terminate_notice`` None means "the scale set's notBeforeTimeout", as on Azure.
    ``started_period`` is how long an event stays Started, unless ``started_periods`` gives
    its kind (:mod:`forewarn.domain.kinds`) one of its own; ``started_after_impact``: counted
    from the end of the impact rather than from Started (:meth:`started_for`).
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
    started_periods: Mapping[EventKind, timedelta] = field(default_factory=dict, hash=False)
    started_after_impact: bool = False

    def notice_for(self, event_type: EventType) -> timedelta:
        return self.minimum_notice[event_type]

    def started_period_for(self, event_type: EventType, description: str) -> timedelta:
        """How long an event of this type and Description stays Started: its kind's period,
        else :attr:`started_period`."""
        periods = self.started_periods
        if periods:
            kind = kind_of(event_type, description)
            if kind is not None:
                return periods.get(kind, self.started_period)
        return self.started_period

    def impact_for(self, event_type: EventType, duration_seconds: int) -> timedelta:
        """How long an event's impact lasts: its DurationInSeconds, else :attr:`impact`."""
        if duration_seconds == DURATION_UNKNOWN or (
            duration_seconds == 0 and event_type in REMOVES_VM
        ):
            return self.impact  # a deleted VM is gone however short the notice said
        return timedelta(seconds=duration_seconds)

    def started_for(
        self,
        event_type: EventType,
        description: str,
        duration_seconds: int,
        own: timedelta | None = None,
    ) -> timedelta:
        """How long an event stays Started: ``own`` (an event made with a period of its own)
        or its kind's period, never less than its impact (a 7 s documented impact beside an
        event's own shorter period); with :attr:`started_after_impact` (the dev and fast
        profiles), that period after the impact, so a VM paused by it still sees Started for
        the whole period once it runs again."""
        period = self.started_period_for(event_type, description) if own is None else own
        impact = self.impact_for(event_type, duration_seconds)
        return impact + period if self.started_after_impact else max(period, impact)

    def with_overrides(self, overrides: Mapping[str, timedelta]) -> TimingProfile:
        """A copy with some durations replaced (per-run overrides); unknown names, and
        durations outside 0..LONGEST, refused (ValueError).

        ``notice.TYPE`` sets one event type's minimum notice, ``started_period.KIND`` one
        kind's Started period; other names are the fields' own (``impact``).
        """
        known = {f.name for f in fields(self)} - {
            "name",
            "minimum_notice",
            "started_periods",
            "started_after_impact",
        }
        notice = dict(self.minimum_notice)
        periods = dict(self.started_periods)
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
            elif key.startswith("started_period."):
                try:
                    periods[EventKind(key.removeprefix("started_period."))] = value
                except ValueError:
                    kinds = ", ".join(kind.value for kind in EventKind)
                    raise ValueError(f"unknown event kind in {key!r}; known: {kinds}") from None
            elif key in known:
                changes[key] = value
            else:
                names = ", ".join(
                    sorted(
                        known | {f"notice.{t.value}" for t in EventType} | {"started_period.KIND"}
                    )
                )
                raise ValueError(f"unknown timing {key!r}; known: {names}")
        return replace(
            self,
            minimum_notice=notice,
            started_periods=periods,
            **changes,  # type: ignore[arg-type]
        )


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
    started_periods={EventKind.LIVE_MIGRATION: 5 * _MINUTE},
)


def _minutes_read_as_seconds(profile: TimingProfile) -> TimingProfile:
    """``profile`` with every minute read as a second, as the mock server's "Dev Timing"
    flows read theirs ("all the timing reduced by a factor of 60", its README): a Freeze
    Scheduled 15 s ahead, a live migration Started for 5 s, the first call late by 2 s.
    Impacts stay in seconds (DurationInSeconds is), and so does the 24 h idle rule, which no
    flow exercises; Terminate takes the sets' default notBeforeTimeout read so, whatever a
    set says.

    The Started period then counts from the end of the impact (``started_after_impact``):
    read as seconds, a live migration's 5 s period is no longer than its 5 s Freeze, which
    would pause the VM for all of it, so a VM polling inside it would never see Started,
    where the mock server's Dev Timing shows Started for those 5 s (it pauses no VM). Minutes
    are long beside an impact, so the documented profile counts from Started, as the
    captures do."""
    return replace(
        profile,
        name="dev",
        minimum_notice={kind: notice / 60 for kind, notice in profile.minimum_notice.items()},
        started_period=profile.started_period / 60,
        first_call_delay=profile.first_call_delay / 60,
        predicted_failure_notice=profile.predicted_failure_notice / 60,
        os_image_notice=profile.os_image_notice / 60,
        terminate_notice=(profile.terminate_notice or profile.notice_for(EventType.TERMINATE)) / 60,
        started_periods={kind: period / 60 for kind, period in profile.started_periods.items()},
        started_after_impact=True,
    )


DEV = _minutes_read_as_seconds(DOCUMENTED)

#: The same shape in seconds, for demos and for users' own test suites. Its 2 s Started period
#: counts from the end of the impact, as the dev profile's does: counted from Started, a live
#: migration's 5 s Freeze would take all of it, and a VM paused by it would never read Started.
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
    started_after_impact=True,
)

PROFILES: dict[str, TimingProfile] = {profile.name: profile for profile in (DOCUMENTED, DEV, FAST)}


__all__ = [
    "DEV",
    "DOCUMENTED",
    "FAST",
    "PROFILES",
    "REMOVES_VM",
    "TimingProfile",
]
