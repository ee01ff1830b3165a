"""The validation handshake's rules, each against an endpoint that answers as told.

Source: learn.microsoft.com/azure/event-grid/webhook-event-delivery, "Endpoint validation
with Event Grid events": the endpoint proves it owns itself by echoing the event's
``validationCode`` as ``{"validationResponse": code}`` (synchronous handshake), or by a GET of
``validationUrl``: "The provided URL is valid for 10 minutes" (asynchronous handshake); and
"Endpoint validation with CloudEvents v1.0": CloudEvents' abuse protection ("HTTP 1.1 Web
Hooks for Event Delivery", section 4.2), an ``OPTIONS`` with ``WebHook-Request-Origin``
answered 200 with ``WebHook-Allowed-Origin`` naming that origin (or ``*``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from forewarn.domain.errors import InvalidOperationError
from forewarn.eventgrid._http import Answer, ExchangeError
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.handshake import ORIGIN, handshake
from forewarn.eventgrid.store import DeliveryStore, Subscription

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CODE = "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"


def answering(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
    """An exchange that answers every request so, and keeps what it was asked."""
    asked: list[tuple[str, str, dict[str, str], bytes]] = []

    async def exchange(method: str, url: str, *, body: bytes = b"", headers: Any = None) -> Answer:
        asked.append((method, url, dict(headers or {}), body))
        return Answer(status, "", {k.lower(): v for k, v in (answer_headers or {}).items()}, reply)

    reply, answer_headers = body, headers
    exchange.asked = asked  # type: ignore[attr-defined]
    return exchange


def hook(schema: str) -> Subscription:
    return Subscription(
        "hook", "http://127.0.0.1:9/", schema, "AwaitingManualAction",  # type: ignore[arg-type]
        CODE, T0, 0,
    )  # fmt: skip


def shake(subscription: Subscription, exchange: Any) -> tuple[bool, str]:
    return asyncio.run(handshake(subscription, "http://x/validate", T0, exchange))


@pytest.mark.parametrize(
    ("body", "passes"),
    [
        (json.dumps({"validationResponse": CODE}).encode(), True),
        (json.dumps({"validationResponse": CODE.upper()}).encode(), False),
        (json.dumps({"validationResponse": "another-code"}).encode(), False),
        (json.dumps({"validationResponse": ""}).encode(), False),
        (json.dumps({"validationCode": CODE}).encode(), False),
        (b"{}", False),
        (b"", False),
        (b"not json", False),
    ],
)
def test_only_the_echoed_code_validates(body: bytes, passes: bool) -> None:
    """The synchronous handshake passes only when the answer echoes the event's own code."""
    exchange = answering(200, body)
    assert shake(hook("eventgrid"), exchange)[0] is passes
    ((method, url, headers, sent),) = exchange.asked
    assert (method, url) == ("POST", "http://127.0.0.1:9/")
    assert headers == {  # as Event Grid's own deliveries name them (webhook-event-delivery)
        "Content-Type": "application/json; charset=utf-8",
        "aeg-event-type": "SubscriptionValidation",
        "aeg-subscription-name": "HOOK",
    }
    (event,) = json.loads(sent)
    assert event["data"] == {"validationCode": CODE, "validationUrl": "http://x/validate"}
    assert event["eventType"] == "Microsoft.EventGrid.SubscriptionValidationEvent"
    assert event["topic"] == "/subscriptions/00000000-0000-0000-0000-000000000000"


def test_the_code_echoed_with_an_error_status_does_not_validate() -> None:
    body = json.dumps({"validationResponse": CODE}).encode()
    assert shake(hook("eventgrid"), answering(500, body))[0] is False


@pytest.mark.parametrize(
    ("status", "headers", "passes"),
    [
        (200, {"WebHook-Allowed-Origin": ORIGIN}, True),
        (200, {"WebHook-Allowed-Origin": "*"}, True),
        (200, {}, False),
        (200, {"WebHook-Allowed-Origin": "attacker.example"}, False),
        (200, {"WebHook-Allowed-Origin": ""}, False),
        (403, {"WebHook-Allowed-Origin": ORIGIN}, False),
    ],
)
def test_cloudevents_validate_only_with_the_allowed_origin(
    status: int, headers: dict[str, str], passes: bool
) -> None:
    exchange = answering(status, headers=headers)
    assert shake(hook("cloudevents"), exchange)[0] is passes
    ((method, url, sent, _),) = exchange.asked
    assert (method, url) == ("OPTIONS", "http://127.0.0.1:9/")
    assert sent == {"WebHook-Request-Origin": "eventgrid.azure.net", "WebHook-Request-Rate": "120"}


def test_the_validation_url_works_for_10_minutes_and_not_after() -> None:
    """A receiver that does not answer the handshake is AwaitingManualAction; a GET of its
    validation URL 10 minutes after validates it, a second later it is refused and the
    subscription Failed."""

    async def run() -> None:
        now = [T0]
        grid = EventGrid(lambda: now[0], lambda: 0, DeliveryStore(None), validation_base="x")
        on_time = await grid.subscribe("on-time", "http://127.0.0.1:9/", "eventgrid")
        late = await grid.subscribe("too-late", "http://127.0.0.1:9/", "eventgrid")
        assert on_time.subscription.state == late.subscription.state == "AwaitingManualAction"
        now[0] = T0 + timedelta(minutes=10)
        validated = await grid.validate("on-time", on_time.subscription.validation_code)
        assert validated.subscription.state == "Succeeded"
        now[0] = T0 + timedelta(minutes=10, microseconds=1)
        with pytest.raises(InvalidOperationError, match="expired after 10 minutes"):
            await grid.validate("too-late", late.subscription.validation_code)
        assert (await grid.view("too-late")).subscription.state == "Failed"
        grid.store.close()

    asyncio.run(run())


def test_an_unanswered_handshake_says_why() -> None:
    async def refused(method: str, url: str, **_: Any) -> Answer:
        raise ExchangeError("ConnectionRefusedError: [Errno 111] Connection refused")

    passed, why = shake(hook("eventgrid"), refused)
    assert (passed, why) == (False, "validation failed: ConnectionRefusedError: [Errno 111]"
                                    " Connection refused")  # fmt: skip
    passed, why = shake(hook("eventgrid"), answering(200, b"{}"))
    assert (passed, why) == (False, "validation answered 200 without the code")
    assert shake(hook("eventgrid"), answering(200, json.dumps({"validationResponse": CODE})
                                              .encode())) == (True, "")  # fmt: skip
    allowed = answering(200, headers={"WebHook-Allowed-Origin": ORIGIN})
    assert shake(hook("cloudevents"), allowed) == (True, "")
    passed, why = shake(hook("cloudevents"), answering(200))
    assert (passed, why) == (
        False,
        "abuse protection handshake answered 200 without WebHook-Allowed-Origin: "
        "eventgrid.azure.net",
    )
