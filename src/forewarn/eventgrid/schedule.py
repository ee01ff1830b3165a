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

from forewarn.wire.status_names import STATUS_NAMES

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
#: How long after a failed dead-letter write (the folder unwritable, the disk full) it is tried
#: again, on the platform's clock [ours]: never at once, so a failing folder makes no storm.
LETTER_RETRY = timedelta(minutes=1)

#: The outcome Event Grid names for a failure of no other kind: of the outcomes its delivery
#: failure logs name ("The possible values of Outcome are NotFound, Aborted, TimedOut,
#: GenericError, and Busy", learn.microsoft.com/azure/event-grid/monitor-push-reference,
#: "Resource logs"), the one that stands for any other error.
GENERIC_ERROR = "GenericError"


def delivery_outcome(status: int | None, error: str = "") -> str:
    """Event Grid's ``lastDeliveryOutcome`` for an attempt answered ``status`` (.NET's name for
    it, as Event Grid shows them: "Delivery event formats", ``"lastDeliveryOutcome":
    "NotFound"``), or unanswered for ``error``: ``TimedOut`` when the receiver did not answer
    in time (Event Grid's name), ``GenericError`` for a receiver that could not be reached at
    all and for an answer whose status .NET has no failure's name for (a 1xx, 3xx, 205 to
    299, or an unassigned one)."""
    if status is not None:
        return STATUS_NAMES.get(status, GENERIC_ERROR)
    return "TimedOut" if error == "TimedOut" else GENERIC_ERROR


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
    "GENERIC_ERROR",
    "LETTER_RETRY",
    "MAX_DELIVERY_ATTEMPTS",
    "NOT_RETRIED",
    "RESPONSE_TIMEOUT",
    "RETRY_DELAYS",
    "SUCCESS",
    "after_failure",
    "delivery_outcome",
    "retry_delay",
]
