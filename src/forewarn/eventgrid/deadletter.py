"""Where Event Grid puts what it gives up on: a file per event, named as its dead-letter blobs.

Source: learn.microsoft.com, "Set dead-letter location and retry policy" (manage-event-delivery):
blobs named with "the name of the Event Grid subscription with all the letters in upper case"
and "the nonzero padded date and hour (UTC): .../YYYY/MM/DD/HH/", each holding a JSON array of
the events with ``deadLetterReason``, ``deliveryAttempts``, ``lastDeliveryOutcome``,
``lastHttpStatusCode``, ``publishTime`` and ``lastDeliveryAttemptTime``. Without a dead-letter
location the event is dropped: "If dead-letter isn't configured ... events will be dropped".
The values are as "Event Grid message delivery and retry" ("Delivery event formats",
dead-letter event) shows them: ``lastDeliveryOutcome`` a name (``NotFound``), the times with
seven fractional digits (``2020-08-13T17:18:14.0265758Z``). A CloudEvents subscription's record
names them in lower case, as that section's CloudEvents 1.0 dead-letter event does
(``deadletterreason``, ``deliveryattempts``, ``lastdeliveryoutcome``, ``publishtime``: a
CloudEvents attribute name is lower-case letters and digits only); the sample shows those four,
its last line ending on a comma, and ``lasthttpstatuscode`` and ``lastdeliveryattempttime``
follow the same rule [ours].
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from forewarn.eventgrid.payloads import event_time
from forewarn.eventgrid.store import Delivery, Subscription


def dead_letter(
    directory: Path,
    subscription: Subscription,
    delivery: Delivery,
    *,
    at: datetime,
    status: int | None,
    outcome: str | None,
    reason: str,
    attempts: int,
) -> Path:
    """Write ``delivery``'s event under ``directory``, written whole or not at all; its path.
    ``attempts`` were made, the last at ``at``, answered ``status`` (``outcome``)."""
    record: dict[str, Any] = json.loads(delivery.payload)
    fields: dict[str, Any] = {
        "deadLetterReason": reason,
        "deliveryAttempts": attempts,
        "lastDeliveryOutcome": outcome,
        "lastHttpStatusCode": status,
        "publishTime": event_time(delivery.published),
        "lastDeliveryAttemptTime": event_time(at),
    }
    if subscription.schema == "cloudevents":
        fields = {name.lower(): value for name, value in fields.items()}
    record.update(fields)
    folder = directory / subscription.name.upper() / f"{at.year}/{at.month}/{at.day}/{at.hour}"
    target = folder / f"{delivery.grid_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp")
    try:
        # json.dumps writes ASCII (non-ASCII text escaped), the same bytes in any encoding
        temporary.write_bytes(json.dumps([record], indent=2).encode())
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk leaves no half-written record
            temporary.unlink()  # one never made: FileNotFoundError, an OSError
        raise
    return target


__all__ = ["dead_letter"]
