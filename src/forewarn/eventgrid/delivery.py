"""Event Grid for one ``forewarn serve``: subscriptions, the handshake, and delivery.

Delivery never holds up a VM's poll: the platform's history tells :meth:`EventGrid.on_change`
of each change as it is made (an append to a queue, nothing more); everything else runs in
:meth:`EventGrid.run`, a task of its own on the event loop, whose database work goes to a
worker thread and whose HTTP exchanges (:mod:`forewarn.eventgrid._http`) are asynchronous,
at most :data:`CONCURRENCY` at once, each bounded by the response timeout and a cap on what is
read of the answer. Changes are turned
into deliveries in the store (:mod:`forewarn.eventgrid.store`) in batches, so what waits for a
slow receiver waits on disk.

Times are the platform's (``service.now()``): on a manual clock, the retry schedule moves with
``forewarn clock advance``. Delivery is at least once: a delivery is removed from the store only
after its receiver answered with success, so a crash at any point sends it again after the
restart.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forewarn.domain.errors import InvalidOperationError, UnknownGroupError
from forewarn.domain.history import EventChange
from forewarn.errors import InvalidInputError
from forewarn.eventgrid._http import Answer, ExchangeError, exchange
from forewarn.eventgrid.deadletter import dead_letter
from forewarn.eventgrid.handshake import NAME, check_endpoint, handshake
from forewarn.eventgrid.payloads import (
    DATA_VERSION,
    METADATA_VERSION,
    SCHEMAS,
    Schema,
    grid_id,
    payload,
)
from forewarn.eventgrid.schedule import RESPONSE_TIMEOUT, SUCCESS, after_failure
from forewarn.eventgrid.store import Delivery, DeliveryStore, Subscription
from forewarn.storage.errors import StoreUnavailableError

_LOG = logging.getLogger("forewarn.eventgrid")

#: Deliveries in flight at once, all subscriptions together.
CONCURRENCY = 16
#: How often, in real seconds, the dashboard's view of the subscriptions is refreshed.
VIEWS_EVERY = 0.5
#: Changes turned into deliveries per round (one store transaction), and while the loop is
#: busy with VMs' requests.
BATCH = 1000
BUSY_BATCH = 50
#: A loop that takes longer than this to come back to a task that gave way is busy.
BUSY_LAG = 0.0005
#: How often, in real seconds, the loop's business is measured again.
MEASURE_EVERY = 0.25
#: Deliveries started per second at most while the loop is busy, and the burst allowed.
BUSY_RATE = 200.0
BUSY_BURST = 16.0
#: The most of a receiver's answer read (a validation response is a few dozen bytes).
MAX_ANSWER_BYTES = 64 * 1024
#: "The provided URL is valid for 10 minutes" (webhook-event-delivery, asynchronous handshake).
VALIDATION_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class SubscriptionView:
    """A subscription as the control API and the dashboard show it."""

    subscription: Subscription
    pending: int


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
        active: Callable[[], bool] | None = None,
        poll: float = 0.05,
    ) -> None:
        self._now = now
        self._sequence = sequence
        self.store = store
        self._validation_base = validation_base.rstrip("/")
        self.dead_letters = dead_letters
        self._timeout = response_timeout
        #: Whether this front-end delivers: the fleet's leader when several share a journal.
        self._active = active
        self._poll = poll
        self._cursor = store.cursor()
        self._incoming: deque[EventChange] = deque()
        self._busy: set[int] = set()
        #: Deliveries answered with success, not yet recorded (see :meth:`_commit`).
        self._succeeded: list[Delivery] = []
        #: Set when there is work: a change queued, a delivery finished.
        self._kick = asyncio.Event()
        #: The store's last failure, said once until it works again.
        self._store_failing: str | None = None
        self._tokens = BUSY_BURST
        self._was_busy = False
        self._measuring = False
        self._measure_due = 0.0
        self._refilled = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()
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
            self._kick.set()

    # -- subscriptions ----------------------------------------------------------------------

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
        return await handshake(subscription, self.validation_url(subscription), now, self._exchange)

    async def _exchange(
        self, method: str, url: str, *, body: bytes = b"", headers: dict[str, str]
    ) -> Answer:
        return await exchange(
            method, url, body=body, headers=headers, timeout=self._timeout, limit=MAX_ANSWER_BYTES
        )

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
        sent twice, identical ("Double notifications",
        learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid)."""
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
        """Turn changes into deliveries and send what is due, until ``stop`` is set: woken by
        a change or a finished delivery, and at least every ``poll`` seconds, since what falls
        due moves with the platform's clock."""
        stopping: asyncio.Task[Any] = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                try:
                    if self._active is not None and not self._active():
                        await self._follow()
                        busy = True  # nothing to hurry for
                    else:
                        busy = await self._loop_busy()
                        await self.step(busy)
                    self._store_failing = None
                except StoreUnavailableError as exc:
                    # Deliveries wait in the store (at least once): tried again next poll.
                    if self._store_failing != str(exc):
                        _LOG.warning("Event Grid's deliveries wait for their store: %s", exc)
                        self._store_failing = str(exc)
                    busy = True
                # a busy loop is given back for a whole poll; a quiet one is left at once for
                # whatever comes next (a change queued, a delivery finished)
                waited: set[asyncio.Task[Any]] = {stopping}
                if not busy:
                    waited.add(asyncio.create_task(self._kick.wait()))
                await asyncio.wait(waited, timeout=self._poll, return_when=asyncio.FIRST_COMPLETED)
                for task in waited - {stopping}:
                    task.cancel()
                self._kick.clear()
        finally:
            stopping.cancel()
            for task in list(self._tasks):
                task.cancel()
            await self._commit()

    async def _follow(self) -> None:
        """Not the leader: forget the changes the leader has turned into deliveries (the
        shared cursor), keeping those it has not, should this front-end lead next."""
        cursor = await asyncio.to_thread(self.store.cursor)
        while self._incoming and self._incoming[0].sequence <= cursor:
            self._incoming.popleft()
        self._cursor = max(self._cursor, cursor)
        await self._refresh_views()

    async def _refresh_views(self) -> None:
        if time.monotonic() >= self._views_due:
            self._views_due = time.monotonic() + VIEWS_EVERY
            self.views = await self.list()

    async def _loop_busy(self) -> bool:
        """Whether the event loop has other work waiting (the VMs' requests): how long it
        takes to come back to this task after giving way once. Measured at most every
        :data:`MEASURE_EVERY` and only with none of this task's own deliveries in flight,
        whose callbacks would make a quiet loop look busy: until they are done, no new one
        starts (:attr:`_measuring`) and the last measure holds."""
        if time.monotonic() < self._measure_due:
            return self._was_busy
        if self._busy:
            self._measuring = True
            return self._was_busy
        began = time.perf_counter()
        await asyncio.sleep(0)
        self._was_busy = time.perf_counter() - began > BUSY_LAG
        self._measuring = False
        self._measure_due = time.monotonic() + MEASURE_EVERY
        return self._was_busy

    def _allowed(self, busy: bool) -> int:
        """How many deliveries may start now: while the loop is busy, :data:`BUSY_RATE` a
        second at most, so a campaign's thousands of events wait for a quiet moment rather
        than take the loop from the VMs' requests; at once otherwise."""
        now = time.monotonic()
        self._tokens = min(BUSY_BURST, self._tokens + (now - self._refilled) * BUSY_RATE)
        self._refilled = now
        if not busy:
            return CONCURRENCY
        return int(self._tokens)

    async def step(self, busy: bool = False) -> None:
        """One round: commit what was delivered, queue what changed (a bounded batch, smaller
        while the loop is busy), start what is due and allowed, refresh the views."""
        await self._commit()
        await self._pump(BUSY_BATCH if busy else BATCH)
        free = 0 if self._measuring else min(CONCURRENCY - len(self._busy), self._allowed(busy))
        if free > 0:
            due = await asyncio.to_thread(self.store.due, self._now(), free, tuple(self._busy))
            if due:
                subscriptions = {
                    s.name: s for s in await asyncio.to_thread(self.store.subscriptions)
                }
                for delivery in due:
                    subscription = subscriptions.get(delivery.subscription)
                    if subscription is None:
                        continue
                    self._busy.add(delivery.id)
                    if busy:
                        self._tokens -= 1
                    task = asyncio.create_task(self._send(subscription, delivery))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        await self._refresh_views()

    async def settle(self) -> None:
        """Wait for the deliveries in flight (tests, and shutting down)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _commit(self) -> None:
        """Record the deliveries answered with success since the last round, in one
        transaction: until then a crash sends them again (at least once)."""
        if self._succeeded:
            done, self._succeeded = self._succeeded, []
            await asyncio.to_thread(self.store.delivered_all, done)
            for delivery in done:
                self._busy.discard(delivery.id)

    async def _pump(self, most: int) -> None:
        if not self._incoming:
            return
        batch = [self._incoming.popleft() for _ in range(min(most, len(self._incoming)))]
        schemas = {s.schema for s in await asyncio.to_thread(self.store.subscriptions)}
        # built here rather than in a worker thread, whose Python would take the interpreter
        # lock from the VMs' requests unseen: here it is within the round's bounded batch
        rows = _rows(batch, schemas)
        cursor = batch[-1].sequence
        await asyncio.to_thread(self.store.enqueue, rows, cursor)
        self._cursor = cursor
        if self._incoming:
            self._kick.set()  # more to come: the next round at once

    async def _send(self, subscription: Subscription, delivery: Delivery) -> None:
        committed_later = False
        try:
            twice = subscription.duplicates > 0 and await asyncio.to_thread(
                self.store.take_duplicate, subscription.name
            )
            for _ in range(2 if twice else 1):
                status, outcome = await self._post(subscription, delivery)
                if status not in SUCCESS:
                    break
            at = self._now()
            if status in SUCCESS:
                self._succeeded.append(delivery)  # committed with the next round's batch
                committed_later = True
                return
            again, reason = after_failure(delivery.attempts + 1, delivery.published, at, status)
            if again is None:
                _LOG.warning(
                    "dead-lettered %s for %s: %s (%s)",
                    delivery.grid_id,
                    subscription.name,
                    reason,
                    outcome,
                )
                if self.dead_letters is not None:
                    await asyncio.to_thread(
                        dead_letter, self.dead_letters, subscription, delivery,
                        at=at, status=status, outcome=outcome, reason=reason,
                    )  # fmt: skip
            await asyncio.to_thread(
                self.store.failed, delivery, at=at, status=status, outcome=outcome, again=again
            )
        except Exception:  # a store failure: the delivery stays, and is tried again
            _LOG.exception("delivering %s to %s", delivery.grid_id, delivery.subscription)
        finally:
            if not committed_later:
                self._busy.discard(delivery.id)
            self._kick.set()

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
            answer = await self._exchange("POST", subscription.endpoint, body=body, headers=headers)
        except ExchangeError as exc:
            return None, exc.outcome
        return answer.status, f"{answer.status} {answer.reason}".strip()


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


__all__ = [
    "BATCH",
    "CONCURRENCY",
    "MAX_ANSWER_BYTES",
    "VALIDATION_WINDOW",
    "EventGrid",
    "SubscriptionView",
]
