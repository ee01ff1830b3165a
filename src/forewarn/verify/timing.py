"""How long everything lasts in a `forewarn verify` run, and why.

Azure's documented notices (Reboot 15 min, Preempt 30 s...: SPEC 4.1) would make a run last
hours, and a handler's own timers are what a notice has to fit: a handler polling once a
second sees an event within a second whether the notice is 15 minutes or 10 seconds. So the
run measures the handler's polling interval first and shortens each notice to what that
interval allows (:data:`NOTICE_POLLS` polls and :data:`NOTICE_FLOOR` seconds at least), never
beyond the profile's; ``--timing`` sets any duration, and the report says what was used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from forewarn.domain.events import EventType
from forewarn.domain.timing import PROFILES
from forewarn.verify.model import VerifyError

#: How often the ticker moves the platform clock, in real seconds.
TICK = 0.05
#: A poll counts as the handler's interval when it is at least this long (a burst of
#: requests at start-up, instance metadata then events, is not its timer).
MIN_INTERVAL = 0.05
#: Notices are at least this long, and at least this many of the handler's intervals.
NOTICE_FLOOR = 10.0
NOTICE_POLLS = 10
#: Impact and Started period of the trials' events (the documented 7 s and 10 min, shortened).
IMPACT = 3.0
STARTED_PERIOD = 6.0
#: The first-call delay the ``first-call-delay`` trial uses, of the documented two minutes.
FIRST_CALL_DELAY = 15.0
#: How long a handler has to give up on a request that gets no answer (real seconds).
HELD = 20.0
#: How long the run waits for the handler's first request, and a trial's warm-up.
START_TIMEOUT = 30.0


#: The durations ``--timing KEY=SECONDS`` sets besides ``notice.TYPE`` (one per event type).
TIMING_KEYS = ("impact", "started_period", "first_call_delay", "held")


@dataclass(frozen=True)
class RunTiming:
    """Every duration of the run. ``interval`` is the handler's measured polling interval
    (real seconds); notices come from the base profile scaled down to what that interval
    allows (at least :data:`NOTICE_POLLS` polls and :data:`NOTICE_FLOOR` seconds, never more
    than the profile's), ``overrides`` (``--timing``) last."""

    profile: str
    interval: float
    notices: Mapping[str, float]
    impact: float
    started_period: float
    first_call_delay: float
    held: float = 20.0
    overrides: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def scaled(
        cls, profile: str, interval: float, overrides: Mapping[str, float] | None = None
    ) -> RunTiming:
        try:
            base = PROFILES[profile]
        except KeyError:
            raise VerifyError(
                f"unknown profile {profile!r}; known: {', '.join(PROFILES)}"
            ) from None
        given = dict(overrides or {})
        allowed = float(math.ceil(max(NOTICE_FLOOR, NOTICE_POLLS * interval)))
        notices = {}
        for event_type in EventType:
            documented = base.notice_for(event_type).total_seconds()
            if event_type is EventType.TERMINATE and base.terminate_notice is not None:
                documented = base.terminate_notice.total_seconds()
            notices[event_type.value] = given.pop(
                f"notice.{event_type.value}", min(documented, allowed)
            )
        timing = cls(
            profile=profile,
            interval=interval,
            notices=notices,
            impact=given.pop("impact", min(IMPACT, base.impact.total_seconds())),
            started_period=given.pop(
                "started_period", min(STARTED_PERIOD, base.started_period.total_seconds())
            ),
            first_call_delay=given.pop(
                "first_call_delay", min(FIRST_CALL_DELAY, base.first_call_delay.total_seconds())
            ),
            held=given.pop("held", HELD),
            overrides=dict(overrides or {}),
        )
        if given:
            known = ", ".join([*TIMING_KEYS, *(f"notice.{t.value}" for t in EventType)])
            raise VerifyError(f"unknown timing {', '.join(given)}; known: {known}")
        return timing

    def notice(self, event_type: str) -> float:
        return self.notices[event_type]

    def platform_timing(self, first_call_delay: bool) -> dict[str, float]:
        """The overrides a trial's platform gets."""
        timing = {f"notice.{name}": seconds for name, seconds in self.notices.items()}
        timing.update(
            impact=self.impact,
            started_period=self.started_period,
            first_call_delay=self.first_call_delay if first_call_delay else 0.0,
            terminate_notice=self.notices[EventType.TERMINATE.value],
        )
        return timing

    def as_dict(self) -> dict[str, float]:
        out = {f"notice.{name}": seconds for name, seconds in self.notices.items()}
        out.update(
            interval=round(self.interval, 3),
            impact=self.impact,
            started_period=self.started_period,
            first_call_delay=self.first_call_delay,
            held=self.held,
        )
        return out

    def describe(self) -> str:
        base = PROFILES[self.profile]
        shrunk = ", ".join(
            f"{name} {base.notice_for(EventType(name)).total_seconds():g}s->{seconds:g}s"
            for name, seconds in self.notices.items()
        )
        return (
            f"Notices from the {self.profile} profile, shortened to what the handler's "
            f"timer allows (it polled every {self.interval:.1f} s: at least {NOTICE_POLLS} "
            f"polls and {NOTICE_FLOOR:g} s, never longer than documented): {shrunk}. Impacts "
            f"{self.impact:g} s, Started for {self.started_period:g} s; the first-call delay "
            f"(documented: up to 120 s) is {self.first_call_delay:g} s in first-call-delay "
            f"and 0 elsewhere. A request held unanswered must be given up within "
            f"{self.held:g} s (held). The platform clock runs at real time. "
            "--timing KEY=SECONDS sets any of them."
        )


__all__ = [
    "FIRST_CALL_DELAY",
    "HELD",
    "IMPACT",
    "MIN_INTERVAL",
    "NOTICE_FLOOR",
    "NOTICE_POLLS",
    "STARTED_PERIOD",
    "START_TIMEOUT",
    "TICK",
    "TIMING_KEYS",
    "RunTiming",
]
