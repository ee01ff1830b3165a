"""Event Grid for one ``forewarn serve``: subscriptions, the handshake, and delivery.

Delivery never holds up a VM's poll: the platform's history tells :meth:`EventGrid.on_change`
of each change as it is made (an append to a queue, nothing more); everything else runs in
:meth:`EventGrid.run`, a task of its own on the event loop, whose database work goes to a
worker thread and whose HTTP calls are asynchronous, at most :data:`CONCURRENCY` at once, each
bounded by the response timeout and a cap on what is read of the answer. Changes are turned
into deliveries in the store (:mod:`forewarn.eventgrid.store`) in batches, so what waits for a
slow receiver waits on disk.

Times are the platform's (``service.now()``): on a manual clock, the retry schedule moves with
``forewarn clock advance``. Delivery is at least once: a delivery is removed from the store only
after its receiver answered with success, so a crash at any point sends it again after the
restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from forewarn.domain.errors import InvalidOperationError, UnknownGroupError
from forewarn.domain.history import EventChange
from forewarn.errors import InvalidInputError
from forewarn.eventgrid.payloads import (
    DATA_VERSION,
    METADATA_VERSION,
    SCHEMAS,
    Schema,
    grid_id,
    payload,
    validation_event,
)
from forewarn.eventgrid.schedule import RESPONSE_TIMEOUT, SUCCESS, after_failure
from forewarn.eventgrid.store import Delivery, DeliveryStore, Subscription

_LOG = logging.getLogger("forewarn.eventgrid")

#: Deliveries in flight at once, all subscriptions together.
CONCURRENCY = 16
#: How often, in real seconds, the dashboard's view of the subscriptions is refreshed.
VIEWS_EVERY = 0.5
#: Changes turned into deliveries per store transaction.
BATCH = 5000
#: The most of a receiver's answer read (a validation response is a few dozen bytes).
MAX_ANSWER_BYTES = 64 * 1024
#: "The provided URL is valid for 10 minutes" (webhook-event-delivery, asynchronous handshake).
VALIDATION_WINDOW = timedelta(minutes=10)
MAX_ENDPOINT_CHARS = 2048
#: "Event subscription names ... 3-64 characters ... letters, numbers, and hyphens" [doc: ARM
#: naming rules for Microsoft.EventGrid eventSubscriptions].
NAME = re.compile(r"^[A-Za-z0-9-]{3,64}$")
#: What Event Grid's CloudEvents handshake sends as ``WebHook-Request-Origin`` (CloudEvents
#: "HTTP 1.1 Web Hooks for Event Delivery", section 4, abuse protection).
ORIGIN = "eventgrid.azure.net"


@dataclass(frozen=True, slots=True)
class SubscriptionView:
    """A subscription as the control API and the dashboard show it."""

    subscription: Subscription
    pending: int


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` when it is an absolute http(s) URL with a host; else a clear refusal."""
    if len(endpoint) > MAX_ENDPOINT_CHARS:
        raise InvalidInputError(f"the endpoint is longer than {MAX_ENDPOINT_CHARS} characters")
    if any(ord(char) < 33 or ord(char) == 127 for char in endpoint):
        raise InvalidInputError("the endpoint holds spaces or control characters")
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


class EventGrid:
    """The system topic's subscriptions and their deliveries."""

    def __init__(
        self,
        now: Callable[[], datetime],
        sequence: Callable[[], int],
        store: DeliveryStore,
        *,
        validation_base: str,
        dead_letters: Path | None = None,
        response_timeout: float = RESPONSE_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        poll: float = 0.05,
    ) -> None:
        self._now = now
        self._sequence = sequence
        self.store = store
        self._validation_base = validation_base.rstrip("/")
        self.dead_letters = dead_letters
        self._timeout = response_timeout
        self._transport = transport
        self._poll = poll
        self._cursor = store.cursor()
        self._incoming: deque[EventChange] = deque()
        self._busy: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        #: What the dashboard shows, refreshed by the delivery loop (never read from disk on
        #: the page's behalf).
        self.views: list[SubscriptionView] = []
        self._views_due = 0.0

    # -- the platform's side ------------------------------------------------------------

    def on_change(self, change: EventChange) -> None:
        """A change of a published event: queued, unless it was turned into deliveries
        before (a replay makes the journal's changes again)."""
        if change.sequence > self._cursor:
            self._incoming.append(change)

    # -- subscriptions ----------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport,
                timeout=self._timeout,
                follow_redirects=False,
                trust_env=False,
                headers={"User-Agent": "forewarn-eventgrid"},
            )
        return self._client

    async def subscribe(self, name: str, endpoint: str, schema: Schema) -> SubscriptionView:
        """Create a subscription and run its validation handshake: Succeeded, awaiting the
        GET of its validation URL (Event Grid schema), or Failed (CloudEvents)."""
        if NAME.match(name) is None:
            raise InvalidInputError("a subscription name is 3 to 64 letters, digits or hyphens")
        check_endpoint(endpoint)
        if schema not in SCHEMAS:
            raise InvalidInputError(f"the schema is one of {', '.join(SCHEMAS)}")
        if await asyncio.to_thread(self.store.get, name) is not None:
            raise InvalidOperationError(f"a subscription named {name!r} exists already")
        now = self._now()
        code = str(secrets.token_hex(16))
        subscription = Subscription(
            name, endpoint, schema, "AwaitingManualAction", code, now + VALIDATION_WINDOW,
            self._sequence(),
        )  # fmt: skip
        await asyncio.to_thread(self.store.add, subscription)
        validated, error = await self._handshake(subscription, now)
        if validated:
            state = "Succeeded"
        else:
            state = "AwaitingManualAction" if schema == "eventgrid" else "Failed"
        # from AwaitingManualAction only: the receiver may have GET its validation URL already
        await asyncio.to_thread(
            self.store.set_state, name, state, error, was="AwaitingManualAction"
        )
        return await self.view(name)

    def validation_url(self, subscription: Subscription) -> str:
        return (
            f"{self._validation_base}/api/v1/eventgrid/validate?subscription="
            f"{quote(subscription.name)}&code={subscription.validation_code}"
        )

    async def _handshake(self, subscription: Subscription, now: datetime) -> tuple[bool, str]:
        client = self._http()
        try:
            if subscription.schema == "cloudevents":
                async with client.stream(
                    "OPTIONS",
                    subscription.endpoint,
                    headers={"WebHook-Request-Origin": ORIGIN, "WebHook-Request-Rate": "120"},
                ) as response:
                    allowed = response.headers.get("WebHook-Allowed-Origin", "")
                    if response.status_code == 200 and allowed.strip() in (ORIGIN, "*"):
                        return True, ""
                    return False, (
                        f"abuse protection handshake answered {response.status_code} without "
                        f"WebHook-Allowed-Origin: {ORIGIN}"
                    )
            body = json.dumps(
                validation_event(
                    f"/subscriptions/{subscription.name}",
                    subscription.validation_code,
                    self.validation_url(subscription),
                    now,
                )
            )
            async with client.stream(
                "POST",
                subscription.endpoint,
                content=body.encode(),
                headers={
                    "Content-Type": "application/json; charset=utf-8",
                    "aeg-event-type": "SubscriptionValidation",
                    "aeg-subscription-name": subscription.name.upper(),
                },
            ) as response:
                answer = await _bounded(response)
                if response.status_code == 200:
                    try:
                        given = json.loads(answer).get("validationResponse")
                    except (ValueError, AttributeError):
                        given = None
                    if isinstance(given, str) and hmac.compare_digest(
                        given, subscription.validation_code
                    ):
                        return True, ""
                return False, f"validation answered {response.status_code} without the code"
        except httpx.HTTPError as exc:
            return False, f"validation failed: {type(exc).__name__}: {exc}"[:500]

    async def validate(self, name: str, code: str) -> SubscriptionView:
        """The GET of a validation URL: the asynchronous handshake."""
        subscription = await asyncio.to_thread(self.store.get, name)
        if subscription is None or not hmac.compare_digest(
            code.encode(), subscription.validation_code.encode()
        ):
            raise UnknownGroupError("subscription awaiting validation", name)
        if subscription.state != "AwaitingManualAction":
            raise InvalidOperationError(f"subscription {name!r} is {subscription.state}")
        if self._now() > subscription.expires:
            await asyncio.to_thread(self.store.set_state, name, "Failed", "validation expired")
            raise InvalidOperationError(
                f"subscription {name!r}: its validation URL expired after 10 minutes"
            )
        await asyncio.to_thread(self.store.set_state, name, "Succeeded")
        return await self.view(name)

    async def delete(self, name: str) -> None:
        if not await asyncio.to_thread(self.store.remove, name):
            raise UnknownGroupError("Event Grid subscription", name)

    async def duplicate(self, name: str, count: int) -> SubscriptionView:
        """The ``eventgrid-duplicate`` fault: the next ``count`` deliveries to ``name`` are
        sent twice, identical ("Double notifications", scheduled-events-event-grid.md)."""
        await self.view(name)
        await asyncio.to_thread(self.store.add_duplicates, name, count)
        return await self.view(name)

    async def view(self, name: str) -> SubscriptionView:
        subscription = await asyncio.to_thread(self.store.get, name)
        if subscription is None:
            raise UnknownGroupError("Event Grid subscription", name)
        pending = (await asyncio.to_thread(self.store.pending)).get(name, 0)
        return SubscriptionView(self._expired(subscription), pending)

    async def list(self) -> list[SubscriptionView]:
        subscriptions = await asyncio.to_thread(self.store.subscriptions)
        pending = await asyncio.to_thread(self.store.pending)
        return [SubscriptionView(self._expired(s), pending.get(s.name, 0)) for s in subscriptions]

    def _expired(self, subscription: Subscription) -> Subscription:
        if subscription.state == "AwaitingManualAction" and self._now() > subscription.expires:
            return replace(subscription, state="Failed", last_error="validation expired")
        return subscription

    # -- delivery -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Turn changes into deliveries and send what is due, until ``stop`` is set."""
        try:
            while not stop.is_set():
                await self.step()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._poll)
        finally:
            for task in list(self._tasks):
                task.cancel()
            if self._client is not None:
                await self._client.aclose()

    async def step(self) -> None:
        """One round: queue what changed, start what is due, refresh the views."""
        await self._pump()
        free = CONCURRENCY - len(self._busy)
        if free > 0:
            due = await asyncio.to_thread(self.store.due, self._now(), free, tuple(self._busy))
            for delivery in due:
                self._busy.add(delivery.id)
                task = asyncio.create_task(self._send(delivery))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        if time.monotonic() >= self._views_due:
            self._views_due = time.monotonic() + VIEWS_EVERY
            self.views = await self.list()

    async def settle(self) -> None:
        """Wait for the deliveries in flight (tests, and shutting down)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _pump(self) -> None:
        while self._incoming:
            batch = [self._incoming.popleft() for _ in range(min(BATCH, len(self._incoming)))]
            schemas = {s.schema for s in await asyncio.to_thread(self.store.subscriptions)}
            rows = await asyncio.to_thread(_rows, batch, schemas)
            cursor = batch[-1].sequence
            await asyncio.to_thread(self.store.enqueue, rows, cursor)
            self._cursor = cursor

    async def _send(self, delivery: Delivery) -> None:
        try:
            subscription = await asyncio.to_thread(self.store.get, delivery.subscription)
            if subscription is None:
                return
            twice = await asyncio.to_thread(self.store.take_duplicate, subscription.name)
            for _ in range(2 if twice else 1):
                status, outcome = await self._post(subscription, delivery)
                if status not in SUCCESS:
                    break
            at = self._now()
            if status in SUCCESS:
                await asyncio.to_thread(self.store.delivered, delivery)
                return
            again, reason = after_failure(delivery.attempts + 1, delivery.published, at, status)
            if again is None:
                await self._dead_letter(subscription, delivery, at, status, outcome, reason)
            await asyncio.to_thread(
                self.store.failed, delivery, at=at, status=status, outcome=outcome, again=again
            )
        except Exception:  # a store failure: the delivery stays, and is tried again
            _LOG.exception("delivering %s to %s", delivery.grid_id, delivery.subscription)
        finally:
            self._busy.discard(delivery.id)

    async def _post(self, subscription: Subscription, delivery: Delivery) -> tuple[int | None, str]:
        if subscription.schema == "cloudevents":
            body = delivery.payload.encode()
            headers = {"Content-Type": "application/cloudevents+json; charset=utf-8"}
        else:
            body = b"[" + delivery.payload.encode() + b"]"
            headers = {
                "Content-Type": "application/json; charset=utf-8",
                "aeg-event-type": "Notification",
                "aeg-subscription-name": subscription.name.upper(),
                "aeg-delivery-count": str(delivery.attempts),
                "aeg-data-version": DATA_VERSION,
                "aeg-metadata-version": METADATA_VERSION,
            }
        try:
            async with self._http().stream(
                "POST", subscription.endpoint, content=body, headers=headers
            ) as response:
                await _bounded(response)
                return response.status_code, f"{response.status_code} {response.reason_phrase}"
        except httpx.TimeoutException:
            return None, "TimedOut"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"[:500]

    async def _dead_letter(
        self,
        subscription: Subscription,
        delivery: Delivery,
        at: datetime,
        status: int | None,
        outcome: str,
        reason: str | None,
    ) -> None:
        """Write the event where undeliverable events go, as Event Grid writes a dead-letter
        blob: under the subscription's name in upper case and ``YYYY/M/D/H`` (UTC, not zero
        padded), a JSON array holding the event and why it was given up ("Set dead-letter
        location and retry policy", manage-event-delivery). Without a directory it is
        dropped, as "If dead-letter isn't configured ... events will be dropped"."""
        _LOG.warning(
            "dead-lettered %s for %s: %s (%s)",
            delivery.grid_id,
            subscription.name,
            reason,
            outcome,
        )
        if self.dead_letters is None:
            return
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
        folder = (
            self.dead_letters
            / subscription.name.upper()
            / f"{at.year}/{at.month}/{at.day}/{at.hour}"
        )
        target = folder / f"{delivery.grid_id}.json"
        await asyncio.to_thread(_write, target, json.dumps([record], indent=2))


def _write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(target)


def _rows(
    changes: list[EventChange], schemas: set[Schema]
) -> list[tuple[int, datetime, str, dict[Schema, str]]]:
    """Each change's number, time, Event Grid id and payload in each schema in use."""
    return [
        (
            change.sequence,
            change.at,
            grid_id(change),
            {
                schema: json.dumps(payload(change, schema), separators=(",", ":"))
                for schema in schemas
            },
        )
        for change in changes
    ]


async def _bounded(response: httpx.Response) -> bytes:
    """At most :data:`MAX_ANSWER_BYTES` of an answer: a receiver answering a huge body
    costs what the cap allows, then the connection is dropped."""
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            break
    return bytes(body[:MAX_ANSWER_BYTES])


__all__ = [
    "BATCH",
    "CONCURRENCY",
    "MAX_ANSWER_BYTES",
    "ORIGIN",
    "VALIDATION_WINDOW",
    "EventGrid",
    "SubscriptionView",
    "check_endpoint",
]
