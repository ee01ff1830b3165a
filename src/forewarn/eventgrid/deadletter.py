"""Where Event Grid puts what it gives up on: a file per event, named as its dead-letter blobs.

Source: learn.microsoft.com, "Set dead-letter location and retry policy" (manage-event-delivery):
blobs named with "the name of the Event Grid subscription with all the letters in upper case"
and "the nonzero padded date and hour (UTC): .../YYYY/MM/DD/HH/", each holding a JSON array of
the events with ``deadLetterReason``, ``deliveryAttempts``, ``lastDeliveryOutcome``,
``lastHttpStatusCode``, ``publishTime`` and ``lastDeliveryAttemptTime``. Without a dead-letter
location the event is dropped: "If dead-letter isn't configured ... events will be dropped".
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from forewarn.eventgrid.store import Delivery, Subscription


def dead_letter(
    directory: Path,
    subscription: Subscription,
    delivery: Delivery,
    *,
    at: datetime,
    status: int | None,
    outcome: str,
    reason: str | None,
) -> Path:
    """Write ``delivery``'s event under ``directory``, written whole or not at all; its path."""
    record: dict[str, Any] = json.loads(delivery.payload)
    record.update(
        {
            "deadLetterReason": reason,
            "deliveryAttempts": delivery.attempts + 1,
            "lastDeliveryOutcome": outcome,
            "lastHttpStatusCode": status,
            "publishTime": delivery.published.isoformat(),
            "lastDeliveryAttemptTime": at.isoformat(),
        }
    )
    folder = directory / subscription.name.upper() / f"{at.year}/{at.month}/{at.day}/{at.hour}"
    target = folder / f"{delivery.grid_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps([record], indent=2), encoding="utf-8")
    temporary.replace(target)
    return target


__all__ = ["dead_letter"]
