"""Event Grid's delivery rules, as data: when to retry, when to give up, what never to retry.

Source: learn.microsoft.com, "Event Grid message delivery and retry" (delivery-and-retry):
"Event Grid waits 30 seconds for a response after delivering a message"; the retry schedule
"10 seconds, 30 seconds, 1 minute, 5 minutes, 10 minutes, 30 minutes, 1 hour, 3 hours, 6 hours,
Every 12 hours up to 24 hours"; "maximum number of delivery attempts (default is 30) and the
event time-to-live (default is 1440 minutes)"; the webhook errors for which "retry doesn't
happen": 400, 413, 401 and 403, which go to the dead-letter location at once; the success codes
200 to 204 (webhook-event-delivery, "Event delivery"). "Event Grid adds a small randomization to
all retry steps": left out here [ours], so a test on a manual clock can name each retry's time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

#: The wait after each failed attempt: the n-th failure waits RETRY_DELAYS[n - 1], the last
#: one repeating ("Every 12 hours up to 24 hours").
RETRY_DELAYS = (
    timedelta(seconds=10),
    timedelta(seconds=30),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=10),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(hours=12),
)
MAX_DELIVERY_ATTEMPTS = 30
EVENT_TIME_TO_LIVE = timedelta(minutes=1440)
#: How long a receiver has to answer one delivery, in real seconds.
RESPONSE_TIMEOUT = 30.0
#: Webhook answers that end the event's delivery at once (dead-lettered, never retried).
NOT_RETRIED = frozenset({400, 401, 403, 413})
SUCCESS = frozenset({200, 201, 202, 203, 204})


def retry_delay(failed_attempts: int) -> timedelta:
    """How long after its ``failed_attempts``-th failure an event is tried again."""
    return RETRY_DELAYS[min(failed_attempts, len(RETRY_DELAYS)) - 1]


def after_failure(
    failed_attempts: int,
    published_at: datetime,
    failed_at: datetime,
    status: int | None,
    *,
    max_attempts: int = MAX_DELIVERY_ATTEMPTS,
    time_to_live: timedelta = EVENT_TIME_TO_LIVE,
) -> tuple[datetime | None, str | None]:
    """After the ``failed_attempts``-th failed attempt (answered ``status``, None: no answer):
    when to try again, or None and why the event is dead-lettered: Event Grid's
    ``deadLetterReason`` values."""
    if status in NOT_RETRIED:
        return None, "NonRetryableError"
    if failed_attempts >= max_attempts:
        return None, "MaxDeliveryAttemptsExceeded"
    again = failed_at + retry_delay(failed_attempts)
    if again > published_at + time_to_live:
        return None, "TimeToLiveExceeded"
    return again, None


__all__ = [
    "EVENT_TIME_TO_LIVE",
    "MAX_DELIVERY_ATTEMPTS",
    "NOT_RETRIED",
    "RESPONSE_TIMEOUT",
    "RETRY_DELAYS",
    "SUCCESS",
    "after_failure",
    "retry_delay",
]
