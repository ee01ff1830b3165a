"""When to try a request again, and how long to wait first.

410, 429, 5xx and timeouts are the Metadata Service's transient answers (SPEC 1:
"410/500 are transient platform errors that clients retry", 429 its rate limit of 5 requests
per second). Retries back off exponentially with jitter, so VMs that failed together do not
retry together, and are bounded twice over: by a number of attempts and by a deadline. The
randomness comes from a :class:`random.Random` the client is handed, so a seeded run waits
exactly the same every time; the waiting itself is the client's injectable ``sleep``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from forewarn.client._errors import ImdsError


def is_transient(error: ImdsError) -> bool:
    """The default retry predicate: the errors marked transient in the error tree."""
    return error.transient


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed request is retried.

    ``attempts`` counts every try, the first included (1 = never retry). The n-th retry waits
    ``min(max_delay, initial_delay * multiplier ** (n - 1))``, less a random share of up to
    ``jitter`` of it, and at least a ``Retry-After`` the service sent (capped at
    ``max_delay``). No retry starts once ``deadline`` seconds have passed since the first try.
    ``retry_if`` decides which errors are worth another try; everything else is raised at once.
    """

    attempts: int = 4
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 8.0
    jitter: float = 0.5
    deadline: float | None = 30.0
    retry_if: Callable[[ImdsError], bool] = is_transient

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts counts the first try, so it is at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must not be negative and must not shrink")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter is a share of the delay, between 0 and 1")

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number ``retry`` (1 for the first retry)."""
        delay = min(self.max_delay, self.initial_delay * self.multiplier ** (retry - 1))
        return delay * (1.0 - self.jitter * rng.random())

    def delay_after(
        self, error: ImdsError, *, attempt: int, elapsed: float, rng: random.Random
    ) -> float | None:
        """How long to wait before trying again after ``error`` ended try number ``attempt``,
        or None when the error is to be raised."""
        if attempt >= self.attempts or not self.retry_if(error):
            return None
        delay = self.backoff(attempt, rng)
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, min(float(retry_after), self.max_delay))
        if self.deadline is not None and elapsed + delay > self.deadline:
            return None
        return delay


#: Raise every error at once.
NO_RETRY = RetryPolicy(attempts=1)
