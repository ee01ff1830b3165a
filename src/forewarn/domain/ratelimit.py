"""Per-VM request throttling: IMDS allows 5 requests per second per VM (SPEC 1).

A token bucket: a burst of ``rate`` requests, refilled continuously. The caller passes a
monotonic time in seconds, so tests drive it without sleeping.
"""

from __future__ import annotations


class RateLimiter:
    """Decides whether one more request from a key fits in the per-second budget."""

    __slots__ = ("_buckets", "_burst", "_rate")

    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._rate = rate
        # The bucket holds at least one request, so a rate below one per second (``serve
        # --rate-limit 0.5``) allows one request every 1/rate seconds rather than none at all.
        self._burst = max(rate, 1.0)
        # key -> tokens left + 1j * time of last refill: the two floats of a bucket in one
        # 32-byte object, where a tuple of two floats takes 128 bytes (every VM has one)
        self._buckets: dict[str, complex] = {}

    @property
    def rate(self) -> float:
        return self._rate

    def allow(self, key: str, now: float) -> bool:
        """Take a token for ``key`` if one is left; False means answer 429. Every VM's every
        request asks this, so it is written out rather than with min() and a default."""
        burst = self._burst
        bucket = self._buckets.get(key)
        if bucket is None:
            tokens = burst
        else:
            tokens = bucket.real + (now - bucket.imag) * self._rate
            if tokens > burst:
                tokens = burst
        if tokens < 1.0:
            self._buckets[key] = complex(tokens, now)
            return False
        self._buckets[key] = complex(tokens - 1.0, now)
        return True


__all__ = [
    "RateLimiter",
]
