"""The POST body: ``{"StartRequests":[{"EventId":"..."}]}`` (SPEC 3).

Older clients also send ``DocumentIncarnation`` (the 2017 preview's curl sample sends it as a
string, its PowerShell sample as a number): accepted and ignored. Anything else malformed is a
:class:`MalformedApprovalError`, which the HTTP edge answers with 400.

EventIds are GUIDs, which RFC 4122 (section 3) declares "case insensitive on input"; the
documentation's own samples approve lower-case ids
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
``f020ba2e-3bc0-4c40-a10b-86575a9eabd5``) while documents show upper case, so ids are compared in
upper case; they are kept as sent, so an error names an id as its client wrote it.
"""

from __future__ import annotations

from typing import Any

import orjson

from forewarn.errors import ForewarnError

#: More ids than this in one request is not a real client (an approval names live events).
MAX_START_REQUESTS = 100
MAX_EVENT_ID_LENGTH = 64


class MalformedApprovalError(ForewarnError):
    """The body is not a StartRequests document."""


def parse_start_requests(body: bytes) -> tuple[str, ...]:
    """The EventIds a POST body asks to start, as sent, in order, without duplicates (in any
    case: the first spelling is kept)."""
    try:
        payload: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise MalformedApprovalError("the body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise MalformedApprovalError("the body must be a JSON object")
    requests = payload.get("StartRequests")
    if not isinstance(requests, list) or not requests:
        raise MalformedApprovalError("StartRequests must be a non-empty array")
    if len(requests) > MAX_START_REQUESTS:
        raise MalformedApprovalError(f"at most {MAX_START_REQUESTS} StartRequests per request")
    incarnation = payload.get("DocumentIncarnation")
    if incarnation is not None and not isinstance(incarnation, (int, str)):
        raise MalformedApprovalError("DocumentIncarnation must be a number or a string")
    ids: list[str] = []
    for request in requests:
        event_id = request.get("EventId") if isinstance(request, dict) else None
        if not isinstance(event_id, str) or not event_id or len(event_id) > MAX_EVENT_ID_LENGTH:
            raise MalformedApprovalError("each StartRequest must carry an EventId string")
        ids.append(event_id)
    first: dict[str, str] = {}
    for event_id in ids:
        first.setdefault(event_id.upper(), event_id)
    return tuple(first.values())


__all__ = [
    "MAX_EVENT_ID_LENGTH",
    "MAX_START_REQUESTS",
    "MalformedApprovalError",
    "parse_start_requests",
]
