"""A subscription's proof of ownership: what an endpoint must be, and the validation handshake.

Source: learn.microsoft.com, Event Grid's "Webhook event delivery": "Event Grid requires you
to prove ownership of your Webhook endpoint before it starts delivering events to that
endpoint". For the Event Grid schema, a ``Microsoft.EventGrid.SubscriptionValidationEvent``
whose ``data.validationCode`` the endpoint echoes as ``{"validationResponse": code}`` (or, the
asynchronous handshake, a GET of ``data.validationUrl`` within 10 minutes). For CloudEvents,
the abuse-protection exchange of CloudEvents' "HTTP 1.1 Web Hooks for Event Delivery": an
``OPTIONS`` with ``WebHook-Request-Origin``, answered with ``WebHook-Allowed-Origin``.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from urllib.parse import urlsplit

from forewarn.errors import InvalidInputError
from forewarn.eventgrid._http import Answer, ExchangeError
from forewarn.eventgrid.payloads import DEFAULT_TOPIC, validation_event
from forewarn.eventgrid.store import Subscription

MAX_ENDPOINT_CHARS = 2048
#: "Event subscription names ... 3-64 characters ... letters, numbers, and hyphens" [doc: ARM
#: naming rules for Microsoft.EventGrid eventSubscriptions].
NAME = re.compile(r"^[A-Za-z0-9-]{3,64}$")
#: What Event Grid's CloudEvents handshake sends as ``WebHook-Request-Origin`` (CloudEvents
#: "HTTP 1.1 Web Hooks for Event Delivery", section 4, abuse protection).
ORIGIN = "eventgrid.azure.net"

#: How the handshake reaches the endpoint: ``exchange(method, url, body=..., headers=...)``.
Exchange = Callable[..., Awaitable[Answer]]


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` when it is an absolute http(s) URL with a host; else a clear refusal."""
    if len(endpoint) > MAX_ENDPOINT_CHARS:
        raise InvalidInputError(f"the endpoint is longer than {MAX_ENDPOINT_CHARS} characters")
    if any(ord(char) < 33 or ord(char) == 127 for char in endpoint):
        raise InvalidInputError("the endpoint holds spaces or control characters")
    if not endpoint.isascii():
        shown = endpoint if len(endpoint) <= 200 else endpoint[:200] + "..."
        raise InvalidInputError(
            f"the endpoint {shown!r} holds characters outside ASCII: percent-encode them "
            "(and write a host's name in its xn-- form)"
        )
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError as exc:
        raise InvalidInputError(f"the endpoint is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError("the endpoint must be an http:// or https:// URL with a host")
    if port == 0:
        raise InvalidInputError("the endpoint's port must be 1 to 65535")
    return endpoint


async def handshake(
    subscription: Subscription,
    validation_url: str,
    now: datetime,
    exchange: Exchange,
    topic: str = DEFAULT_TOPIC,
) -> tuple[bool, str]:
    """Run ``subscription``'s handshake: whether it passed, and else why not. ``topic`` is
    the system topic's, as its events carry it (``/subscriptions/{subscription-id}``)."""
    try:
        if subscription.schema == "cloudevents":
            answer = await exchange(
                "OPTIONS",
                subscription.endpoint,
                headers={"WebHook-Request-Origin": ORIGIN, "WebHook-Request-Rate": "120"},
            )
            allowed = answer.headers.get("webhook-allowed-origin", "").strip()
            if answer.status == 200 and allowed in (ORIGIN, "*"):
                return True, ""
            return False, (
                f"abuse protection handshake answered {answer.status} without "
                f"WebHook-Allowed-Origin: {ORIGIN}"
            )
        body = json.dumps(
            validation_event(
                topic,
                subscription.validation_code,
                validation_url,
                now,
            )
        )
        answer = await exchange(
            "POST",
            subscription.endpoint,
            body=body.encode(),
            headers={
                "Content-Type": "application/json; charset=utf-8",
                "aeg-event-type": "SubscriptionValidation",
                "aeg-subscription-name": subscription.name.upper(),
            },
        )
    except ExchangeError as exc:
        return False, f"validation failed: {exc.outcome}"[:500]
    if answer.status == 200:
        try:
            given = json.loads(answer.body).get("validationResponse")
        except (ValueError, AttributeError):
            given = None
        if isinstance(given, str) and hmac.compare_digest(
            given.encode(), subscription.validation_code.encode()
        ):
            return True, ""
    return False, f"validation answered {answer.status} without the code"


__all__ = ["MAX_ENDPOINT_CHARS", "NAME", "ORIGIN", "Exchange", "check_endpoint", "handshake"]
