"""The per-VM rate limit and the manual clock's rules.

SPEC 1 [doc: IMDS overview, "Rate limiting"]: "5 requests per second per VM", answered 429
beyond; ``serve --rate-limit`` takes any rate from 0.1. The manual clock only moves forward
(a NotBefore must never pass twice), and setting it to the moment it shows is no move.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from forewarn.domain.clock import ManualClock
from forewarn.domain.ratelimit import RateLimiter


def test_five_a_second_per_vm_then_one_more_each_fifth_of_a_second() -> None:
    limiter = RateLimiter(5)
    assert [limiter.allow("a", 0.0) for _ in range(6)] == [True] * 5 + [False]
    assert limiter.allow("b", 0.0)  # per VM: another VM has its own budget
    assert not limiter.allow("a", 0.19)
    assert limiter.allow("a", 0.2)
    assert not limiter.allow("a", 0.2)
    # a long quiet spell refills the bucket to the rate, never beyond it
    assert [limiter.allow("a", 100.0) for _ in range(6)] == [True] * 5 + [False]


def test_a_rate_below_one_allows_one_request_per_period() -> None:
    """A bucket smaller than one request never allowed any: --rate-limit 0.5 answered only
    429s. It now allows one request every two seconds."""
    limiter = RateLimiter(0.5)
    assert limiter.allow("a", 0.0)
    assert not limiter.allow("a", 1.9)
    assert limiter.allow("a", 2.0)
    assert not limiter.allow("a", 2.0)


def test_a_rate_must_be_positive() -> None:
    for rate in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            RateLimiter(rate)


def test_the_manual_clock_never_goes_back_and_may_be_set_to_now() -> None:
    start = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
    clock = ManualClock(start)
    assert clock.set(start) == start
    assert clock.advance(timedelta(0)) == start
    with pytest.raises(ValueError, match="forward"):
        clock.set(start - timedelta(microseconds=1))
    with pytest.raises(ValueError, match="forward"):
        clock.advance(timedelta(seconds=-1))
    assert clock.set(start + timedelta(hours=1)) == start + timedelta(hours=1)
    assert clock.now() == start + timedelta(hours=1)
