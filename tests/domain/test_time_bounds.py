"""Every way platform time moves is held to one bound [ours]: ``LATEST`` for the clock, and
``LONGEST`` for every duration added to it, so every date the platform prints (NotBefore,
impact ends, Started periods, the 24 h idle rule, the Date header) stays printable.

The manual clock, the scaled clock, the timing overrides, scheduled events and the pytest
plugin are each held to it here; the control API and a real ``forewarn serve`` in
``tests/e2e/test_e2e_time_bounds.py``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from forewarn.clocks import ScaledClock
from forewarn.domain.clock import (
    LATEST,
    LONGEST,
    ManualClock,
    check_duration,
    check_time,
    seconds_to_duration,
)
from forewarn.domain.errors import InvalidEventError, TimeOutOfRangeError
from forewarn.domain.timing import DOCUMENTED
from forewarn.testing import ForewarnPlatform

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def test_the_bounds_leave_every_date_printable() -> None:
    """A handful of the longest durations past the latest time is still centuries short of
    the last date ``datetime`` (and an RFC 1123 date) can hold."""
    assert datetime(9999, 12, 31, tzinfo=UTC) > LATEST + 9 * LONGEST
    assert max(DOCUMENTED.minimum_notice.values()) <= DOCUMENTED.predicted_failure_notice
    assert DOCUMENTED.predicted_failure_notice < LONGEST


def test_the_bounds_are_the_documented_values_and_hold_to_the_microsecond() -> None:
    """docs/control.md, "Bounds": the latest time is "9000-01-01T00:00:00Z" and the longest
    duration "100 years (3,153,600,000 s)". Each is the last value accepted where it is
    defined: one microsecond more is refused."""
    assert datetime(9000, 1, 1, tzinfo=UTC) == LATEST
    assert timedelta(days=36_500) == LONGEST
    assert LONGEST.total_seconds() == 3_153_600_000
    assert check_time(LATEST) == LATEST
    with pytest.raises(TimeOutOfRangeError, match="past 9000-01-01T00:00:00"):
        check_time(LATEST + timedelta(microseconds=1))
    tick = timedelta(microseconds=1)
    assert check_duration(LONGEST) == LONGEST
    assert check_duration(timedelta(0)) == timedelta(0)
    for refused in (LONGEST + tick, -tick):
        with pytest.raises(TimeOutOfRangeError, match="from 0 to 36500 days"):
            check_duration(refused, "the notice")
    assert seconds_to_duration(3_153_600_000) == LONGEST
    assert seconds_to_duration(0) == timedelta(0)


def test_the_manual_clock_stops_at_the_bound() -> None:
    clock = ManualClock(START)
    with pytest.raises(TimeOutOfRangeError, match="would pass 9000-01-01T00:00:00"):
        clock.advance(timedelta(days=999_999_999))
    assert clock.now() == START
    assert clock.set(LATEST) == LATEST
    with pytest.raises(TimeOutOfRangeError, match="latest time the platform can show"):
        clock.advance(timedelta(microseconds=1))
    with pytest.raises(TimeOutOfRangeError):
        clock.set(LATEST + timedelta(seconds=1))
    assert clock.now() == LATEST


def test_a_scaled_clock_stops_at_the_bound_however_fast_or_long_it_runs() -> None:
    elapsed = [0.0]
    clock = ScaledClock(1e12, START, monotonic=lambda: elapsed[0])
    assert clock.now() == START
    elapsed[0] = 1e9  # a billion trillion platform seconds: far past every datetime
    assert clock.now() == LATEST
    slow = ScaledClock(60, LATEST - timedelta(minutes=1), monotonic=lambda: elapsed[0])
    elapsed[0] += 2
    assert slow.now() == LATEST
    for factor in (math.inf, math.nan, 0.0, -1.0):
        with pytest.raises(ValueError, match="positive number"):
            ScaledClock(factor, START)


@pytest.mark.parametrize("seconds", [math.inf, math.nan, -1.0, 1e308, LONGEST.total_seconds() + 1])
def test_a_count_of_seconds_beyond_the_bound_is_refused_before_it_overflows(
    seconds: float,
) -> None:
    with pytest.raises(TimeOutOfRangeError, match="36500 days"):
        seconds_to_duration(seconds, "the notice")


def test_timing_overrides_beyond_the_bound_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_period must be from 0 to 36500 days"):
        DOCUMENTED.with_overrides({"idle_period": LONGEST + timedelta(days=1)})
    with pytest.raises(ValueError, match=r"notice\.Reboot"):
        DOCUMENTED.with_overrides({"notice.Reboot": timedelta(seconds=-1)})
    assert DOCUMENTED.with_overrides({"impact": LONGEST}).impact == LONGEST


def test_the_plugin_is_held_to_the_same_bounds() -> None:
    platform = ForewarnPlatform(vms=["vm0"], timing={"first_call_delay": 0})
    before = platform.now
    with pytest.raises(TimeOutOfRangeError, match="would pass 9000-01-01"):
        platform.advance(timedelta(days=999_999_999))
    with pytest.raises(TimeOutOfRangeError, match="9000-01-01"):
        platform.set_time(datetime(9999, 1, 1, tzinfo=UTC))
    assert platform.now == before
    with pytest.raises(TimeOutOfRangeError, match="must be from 0 to 3153600000 seconds"):
        platform.schedule("Reboot", "vm0", notice=1e300)
    with pytest.raises(InvalidEventError, match="DurationInSeconds"):
        platform.schedule("Freeze", "vm0", duration_seconds=10**12)
    platform.set_time(LATEST)
    with httpx.Client(transport=platform.transport(), base_url="http://169.254.169.254") as vm:

        def poll() -> httpx.Response:
            query = {"api-version": "2020-07-01"}
            return vm.get("/metadata/scheduledevents", params=query, headers={"Metadata": "true"})

        assert poll().status_code == 200
        platform.schedule("Redeploy", "vm0", notice=timedelta(days=7))
        (shown,) = poll().json()["Events"]
    assert shown["NotBefore"] == "Wed, 08 Jan 9000 00:00:00 GMT"
