"""Per-VM request throttling: IMDS allows 5 requests per second per VM (SPEC 1).

A token bucket: a burst of ``rate`` requests, refilled continuously. The caller passes a
monotonic time in seconds, so tests drive it without sleeping.
"""

from __future__ import annotations


class RateLimiter:
    """Decides whether one more request from a key fits in the per-second budget."""

    __slots__ = ("_buckets", "_rate")

    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._rate = rate
        # key -> (tokens left, time of last refill)
        self._buckets: dict[str, tuple[float, float]] = {}

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        """The most requests a key can make at once: a full bucket, at least one."""
        return int(max(self._rate, 1.0))

    def allow(self, key: str, now: float) -> bool:
        """Take a token for ``key`` if one is left; False means answer 429.

        The bucket holds at least one request, so a rate below one per second (``serve
        --rate-limit 0.5``) allows one request every 1/rate seconds rather than none at all.
        """
        burst = max(self._rate, 1.0)  # the bucket's size; self.burst is its whole requests
        tokens, last = self._buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - last) * self._rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1.0, now)
        return True


__all__ = [
    "RateLimiter",
]
