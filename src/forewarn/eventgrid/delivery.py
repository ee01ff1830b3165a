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
``forewarn clock advance``. The loop's own measures (how busy the event loop is, the busy
rate, the views' age) are real time, read from the ``monotonic`` clock it is given. Delivery
is at least once: a delivery is removed from the store only after its receiver answered with
success, so a crash at any point sends it again after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forewarn.domain.errors import InvalidOperationError, UnknownGroupError
from forewarn.domain.history import EventChange, Phase
from forewarn.errors import InvalidInputError
from forewarn.eventgrid._http import Answer, ExchangeError, exchange
from forewarn.eventgrid.deadletter import dead_letter
from forewarn.eventgrid.handshake import NAME, check_endpoint, handshake
from forewarn.eventgrid.payloads import (
    DATA_VERSION,
    DEFAULT_TOPIC,
    METADATA_VERSION,
    SCHEMAS,
    Schema,
    grid_id,
    payload,
)
from forewarn.eventgrid.schedule import (
    EVENT_TIME_TO_LIVE,
    GENERIC_ERROR,
    LETTER_RETRY,
    RESPONSE_TIMEOUT,
    SUCCESS,
    after_failure,
    delivery_outcome,
    retry_delay,
)
from forewarn.eventgrid.store import Delivery, DeliveryStore, Subscription
from forewarn.storage.errors import StoreUnavailableError

_LOG = logging.getLogger("forewarn.eventgrid")

#: Deliveries in flight at once to one subscription: each has its own, so a receiver that
#: never answers holds up no other subscription's deliveries.
CONCURRENCY = 16
#: Deliveries in flight at once, all subscriptions together (each a connection).
IN_FLIGHT = 256
#: How often, in real seconds, the dashboard's view of the subscriptions is refreshed.
VIEWS_EVERY = 0.5
#: How long, in real seconds, a loop with nothing to deliver and nothing pending waits for a
#: change before it looks at the store again; a change wakes it at once, and without one
#: nothing can fall due. A front-end that does not deliver (not the leader) looks as often.
IDLE_POLL = 1.0
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
#: How often, in real seconds, a dead-letter folder that keeps failing is said again.
LETTER_LOG_EVERY = 60.0


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
        topic: Callable[[], str] = lambda: DEFAULT_TOPIC,
        monotonic: Callable[[], float] = time.monotonic,
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
        #: The system topic's ``topic`` (its Azure subscription), read when a handshake runs.
        self._topic = topic
        #: Real time, in seconds: the loop's own measures (its business, the busy rate, the
        #: views' age, the dead-letter warnings), never the platform's.
        self._monotonic = monotonic
        self._cursor = store.cursor()
        #: Changes not yet turned into deliveries, each with the NotBefore a Started one shows.
        self._incoming: deque[tuple[EventChange, datetime | None]] = deque()
        #: Each live event's NotBefore while it was Scheduled (see :meth:`on_change`).
        self._not_before: dict[str, datetime] = {}
        #: Deliveries taken from the store and not yet recorded, by id.
        self._busy: dict[int, _Flight] = {}
        #: Deliveries answered with success, not yet recorded (see :meth:`_commit`).
        self._succeeded: list[Delivery] = []
        #: Other outcomes, each with the store call that records it.
        self._failures: list[tuple[Delivery, Callable[[], None]]] = []
        #: Which subscription with something due goes first this round.
        self._turn = 0
        #: A failing dead-letter folder: what failed, how often, when it was said last.
        self._letter_failing: str | None = None
        self._letter_failures = 0
        self._letter_logged = 0.0
        #: Set when there is work: a change queued, a delivery finished.
        self._kick = asyncio.Event()
        #: The store's last failure, said once until it works again.
        self._store_failing: str | None = None
        self._tokens = BUSY_BURST
        self._was_busy = False
        self._measuring = False
        self._measure_due = 0.0
        self._refilled = self._monotonic()
        self._tasks: set[asyncio.Task[None]] = set()
        #: What the dashboard shows, refreshed by the delivery loop (never read from disk on
        #: the page's behalf).
        self.views: list[SubscriptionView] = []
        self._views_due = 0.0
        # When the views were last read (before their queries) and when this loop last
        # changed the store's deliveries: views read after show what is pending.
        self._views_at = 0.0
        self._changed_at = self._monotonic()

    # -- the platform's side ------------------------------------------------------------

    def on_change(self, change: EventChange) -> None:
        """A change of a published event: queued, unless it was turned into deliveries
        before (a replay makes the journal's changes again).

        A Started event is shown with the NotBefore it had while Scheduled (the time it
        started, if it never was), as the Event Grid page's sample shows a Started event
        with its NotBefore, where IMDS's field tables say it is blank once started
        (learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid): the pages
        disagree, and the sample is followed. Kept from every change, replayed ones too."""
        event = change.event
        not_before: datetime | None = None
        if change.phase is Phase.SCHEDULED:
            if event.not_before is not None:
                self._not_before[event.event_id] = event.not_before
        elif change.phase is Phase.STARTED:
            not_before = self._not_before.get(event.event_id, change.at)
        else:
            self._not_before.pop(event.event_id, None)
        if change.sequence > self._cursor:
            self._incoming.append((change, not_before))
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
        code = str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))  # a GUID, as Azure's
        subscription = Subscription(
            name, endpoint, schema, "AwaitingManualAction", code, now + VALIDATION_WINDOW,
            self._sequence(),
        )  # fmt: skip
        await asyncio.to_thread(self.store.add, subscription)
        try:
            validated, error = await self._handshake(subscription, now)
        except BaseException:
            # nothing half-made is kept: the subscription goes with the failed handshake
            await asyncio.shield(asyncio.to_thread(self.store.remove, name))
            raise
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
        return await handshake(
            subscription, self.validation_url(subscription), now, self._exchange, self._topic()
        )

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
        due moves with the platform's clock. A failure of the store (a full disk) ends
        nothing: it is said once, with its reason, and everything waits in the store (or, not
        yet recorded, here) until the store works again."""
        stopping: asyncio.Task[Any] = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                try:
                    if self._active is not None and not self._active():
                        await self._follow()
                        busy = True  # nothing to hurry for
                        wait = IDLE_POLL
                        self._changed_at = self._monotonic()  # when it leads: look first
                    else:
                        busy = await self._loop_busy()
                        await self.step(busy)
                        wait = IDLE_POLL if self._idle() else self._poll
                    self._store_works()
                except StoreUnavailableError as exc:
                    # Deliveries wait in the store (at least once): tried again next poll.
                    self._store_fails(str(exc))
                    busy, wait = True, self._poll
                except Exception as exc:  # never the end of delivery: said, tried again
                    self._store_fails(f"{type(exc).__name__}: {exc}", unexpected=True)
                    busy, wait = True, self._poll
                # a busy loop is given back for a whole poll; a quiet one is left at once for
                # whatever comes next (a change queued, a delivery finished)
                waited: set[asyncio.Task[Any]] = {stopping}
                if not busy:
                    waited.add(asyncio.create_task(self._kick.wait()))
                await asyncio.wait(waited, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                for task in waited - {stopping}:
                    task.cancel()
                self._kick.clear()
        finally:
            stopping.cancel()
            for task in list(self._tasks):
                task.cancel()
            try:
                await self._commit()
            except Exception as exc:  # stopping: what is not recorded is sent again next start
                _LOG.warning(
                    "Event Grid stops with %d outcomes not recorded (sent again after a "
                    "restart): %s",
                    len(self._succeeded) + len(self._failures),
                    exc,
                )

    def _store_fails(self, reason: str, *, unexpected: bool = False) -> None:
        """Say a failure of the store once, with its reason, until it works again."""
        if self._store_failing != reason:
            if unexpected:
                _LOG.exception("Event Grid's deliveries wait: %s", reason)
            else:
                _LOG.warning("Event Grid's deliveries wait for their store: %s", reason)
            self._store_failing = reason

    def _store_works(self) -> None:
        if self._store_failing is not None:
            _LOG.warning("Event Grid's store works again: deliveries go on")
            self._store_failing = None

    async def _follow(self) -> None:
        """Not the leader: forget the changes the leader has turned into deliveries (the
        shared cursor), keeping those it has not, should this front-end lead next."""
        cursor = await asyncio.to_thread(self.store.cursor)
        while self._incoming and self._incoming[0][0].sequence <= cursor:
            self._incoming.popleft()
        self._cursor = max(self._cursor, cursor)
        await self._refresh_views()

    async def _refresh_views(self) -> None:
        read_at = self._monotonic()
        if read_at >= self._views_due:
            self._views_due = read_at + VIEWS_EVERY
            self.views = await self.list()
            self._views_at = read_at

    def _idle(self) -> bool:
        """Nothing to deliver and nothing pending: no change waiting to be queued, no
        delivery in flight or unrecorded, and views read after this loop last changed the
        store showing no delivery pending. Then only a change (which wakes the loop) makes
        work, and the store is not asked every poll for what is due."""
        return (
            not self._incoming
            and not self._busy
            and not self._succeeded
            and not self._failures
            and self._views_at > self._changed_at
            and not any(view.pending for view in self.views)
        )

    async def _loop_busy(self) -> bool:
        """Whether the event loop has other work waiting (the VMs' requests): how long it
        takes to come back to this task after giving way once. Measured at most every
        :data:`MEASURE_EVERY` and only with none of this task's deliveries started in the
        last :data:`MEASURE_EVERY` still running, whose callbacks would make a quiet loop look
        busy: until they are done or older (waiting on a slow receiver, which makes no
        callbacks), no new one starts (:attr:`_measuring`) and the last measure holds. A
        hanging receiver therefore holds up nobody's deliveries for longer than that."""
        now = self._monotonic()
        if now < self._measure_due:
            return self._was_busy
        if any(f.running and now - f.started < MEASURE_EVERY for f in self._busy.values()):
            self._measuring = True
            return self._was_busy
        began = self._monotonic()
        await asyncio.sleep(0)
        self._was_busy = self._monotonic() - began > BUSY_LAG
        self._measuring = False
        self._measure_due = self._monotonic() + MEASURE_EVERY
        return self._was_busy

    def _allowed(self, busy: bool) -> int:
        """How many deliveries may start now: while the loop is busy, :data:`BUSY_RATE` a
        second at most, so a campaign's thousands of events wait for a quiet moment rather
        than take the loop from the VMs' requests; up to :data:`IN_FLIGHT` otherwise."""
        now = self._monotonic()
        self._tokens = min(BUSY_BURST, self._tokens + (now - self._refilled) * BUSY_RATE)
        self._refilled = now
        room = IN_FLIGHT - sum(1 for f in self._busy.values() if f.running)
        if not busy:
            return room
        return min(room, int(self._tokens))

    def _in_flight(self, name: str) -> int:
        return sum(1 for f in self._busy.values() if f.subscription == name)

    async def step(self, busy: bool = False) -> None:
        """One round: record what was answered, queue what changed (a bounded batch, smaller
        while the loop is busy), start what is due and allowed, refresh the views.

        Each subscription has slots of its own (:data:`CONCURRENCY`), as Event Grid delivers
        to each independently: a receiver that never answers fills its own, never another's,
        and the subscriptions with something due take turns at what the busy loop allows."""
        await self._commit()
        await self._pump(BUSY_BATCH if busy else BATCH)
        allowed = 0 if self._measuring else self._allowed(busy)
        if allowed > 0:
            now = self._now()
            waiting = await asyncio.to_thread(self.store.due_subscriptions, now)
            if waiting:
                subscriptions = {
                    s.name: s for s in await asyncio.to_thread(self.store.subscriptions)
                }
                turn = self._turn % len(waiting)
                self._turn += 1
                for name in waiting[turn:] + waiting[:turn]:
                    free = CONCURRENCY - self._in_flight(name)
                    subscription = subscriptions.get(name)
                    if free <= 0 or subscription is None:
                        continue  # no room of its own, or removed since: nothing to ask
                    due = await asyncio.to_thread(
                        self.store.due, now, min(free, allowed), tuple(self._busy),
                        subscription=name,
                    )  # fmt: skip
                    for delivery in due:
                        self._start(subscription, delivery, busy)
                    allowed -= len(due)
                    if allowed <= 0:
                        break
        await self._refresh_views()

    def _start(self, subscription: Subscription, delivery: Delivery, busy: bool) -> None:
        self._busy[delivery.id] = _Flight(subscription.name, self._monotonic())
        if busy:
            self._tokens -= 1
        task = asyncio.create_task(self._send(subscription, delivery))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait for the deliveries in flight (tests, and shutting down)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _commit(self) -> None:
        """Record the outcomes since the last round: the deliveries answered with success in
        one transaction, then each failure. Until recorded, a delivery stays out of the due
        ones here (it is never sent again meanwhile) and a crash sends it again (at least
        once); a store that refuses leaves them all to be recorded at the next round."""
        if self._succeeded or self._failures:
            self._changed_at = self._monotonic()
        if self._succeeded:
            done = list(self._succeeded)
            await asyncio.to_thread(self.store.delivered_all, done)
            del self._succeeded[: len(done)]
            for delivery in done:
                del self._busy[delivery.id]
        while self._failures:
            delivery, record = self._failures[0]
            await asyncio.to_thread(record)
            self._failures.pop(0)
            del self._busy[delivery.id]

    async def _pump(self, most: int) -> None:
        if not self._incoming:
            return
        batch = [self._incoming.popleft() for _ in range(min(most, len(self._incoming)))]
        try:
            schemas = {s.schema for s in await asyncio.to_thread(self.store.subscriptions)}
            # built here rather than in a worker thread, whose Python would take the
            # interpreter lock from the VMs' requests unseen: here it is within the round's
            # bounded batch
            rows = _rows(batch, schemas)
            cursor = batch[-1][0].sequence
            self._changed_at = self._monotonic()
            await asyncio.to_thread(self.store.enqueue, rows, cursor)
        except BaseException:
            self._incoming.extendleft(reversed(batch))  # not lost: queued again, in order
            raise
        self._cursor = cursor
        if self._incoming:
            self._kick.set()  # more to come: the next round at once

    def _record(self, delivery: Delivery, record: Callable[[], None]) -> None:
        """A failed attempt's outcome, recorded with the next round's (see :meth:`_commit`)."""
        self._failures.append((delivery, record))

    async def _send(self, subscription: Subscription, delivery: Delivery) -> None:
        flight = self._busy[delivery.id]
        try:
            if delivery.letter:
                await self._letter_again(subscription, delivery)
                return
            now = self._now()
            if now > delivery.published + EVENT_TIME_TO_LIVE:
                # the clock moved past its time to live before this attempt: none is made
                await self._give_up(
                    subscription, delivery, at=delivery.last_attempt or now,
                    status=delivery.last_status, outcome=delivery.last_outcome or None,
                    reason="TimeToLiveExceeded", attempted=False,
                    error=delivery.last_outcome or "TimeToLiveExceeded",
                )  # fmt: skip
                return
            twice = False
            if subscription.duplicates > 0:
                with contextlib.suppress(StoreUnavailableError):  # a fault, best effort
                    twice = await asyncio.to_thread(self.store.take_duplicate, subscription.name)
            for _ in range(2 if twice else 1):
                status, error = await self._post(subscription, delivery)
                if status not in SUCCESS:
                    break
            at = self._now()
            if status in SUCCESS:
                self._succeeded.append(delivery)  # committed with the next round's batch
                return
            outcome = delivery_outcome(status, error)
            again, reason = after_failure(delivery.attempts + 1, delivery.published, at, status)
            if again is None:
                await self._give_up(
                    subscription, delivery, at=at, status=status, outcome=outcome,
                    reason=reason or "NonRetryableError", attempted=True, error=error,
                )  # fmt: skip
                return
            self._record(
                delivery,
                functools.partial(
                    self.store.failed, delivery, at=at, status=status, outcome=outcome,
                    again=again, error=error,
                ),
            )  # fmt: skip
        except Exception as exc:  # a fault of forewarn's own: a failed attempt, retried later
            _LOG.exception("delivering %s to %s", delivery.grid_id, delivery.subscription)
            at = self._now()
            self._record(
                delivery,
                functools.partial(
                    self.store.failed, delivery, at=at, status=None, outcome=GENERIC_ERROR,
                    again=at + retry_delay(delivery.attempts + 1),
                    error=f"{type(exc).__name__}: {exc}"[:300],
                ),
            )  # fmt: skip
        finally:
            flight.running = False
            self._kick.set()

    async def _give_up(
        self,
        subscription: Subscription,
        delivery: Delivery,
        *,
        at: datetime,
        status: int | None,
        outcome: str | None,
        reason: str,
        attempted: bool,
        error: str,
    ) -> None:
        """Dead-letter ``delivery`` (``reason``): its record written, then its end recorded;
        a record that cannot be written keeps the delivery, never sent again, its record
        tried again after :data:`LETTER_RETRY`."""
        _LOG.warning(
            "dead-lettered %s for %s: %s (%s)", delivery.grid_id, subscription.name, reason, error
        )
        attempts = delivery.attempts + (1 if attempted else 0)
        if self.dead_letters is not None:
            try:
                await asyncio.to_thread(
                    dead_letter, self.dead_letters, subscription, delivery, at=at,
                    status=status, outcome=outcome, reason=reason, attempts=attempts,
                )  # fmt: skip
            except OSError as exc:
                failure = self._letter_failed(exc)
                self._record(
                    delivery,
                    functools.partial(
                        self.store.letter_waits, delivery, at=at, status=status,
                        outcome=outcome or "", reason=reason, again=self._now() + LETTER_RETRY,
                        error=failure, attempted=attempted,
                    ),
                )  # fmt: skip
                return
            self._letter_written()
        if attempted:
            self._record(
                delivery,
                functools.partial(
                    self.store.failed, delivery, at=at, status=status,
                    outcome=outcome or "", again=None, error=error,
                ),
            )  # fmt: skip
        else:
            self._record(delivery, functools.partial(self.store.lettered, delivery))

    async def _letter_again(self, subscription: Subscription, delivery: Delivery) -> None:
        """Write the dead-letter record that could not be written before (see
        :meth:`_give_up`); without a dead-letter folder any more, the event is dropped."""
        if self.dead_letters is not None:
            try:
                await asyncio.to_thread(
                    dead_letter, self.dead_letters, subscription, delivery,
                    at=delivery.last_attempt or self._now(), status=delivery.last_status,
                    outcome=delivery.last_outcome or None, reason=delivery.letter,
                    attempts=delivery.attempts,
                )  # fmt: skip
            except OSError as exc:
                failure = self._letter_failed(exc)
                self._record(
                    delivery,
                    functools.partial(
                        self.store.letter_failed, delivery,
                        again=self._now() + LETTER_RETRY, error=failure,
                    ),
                )  # fmt: skip
                return
            self._letter_written()
        self._record(delivery, functools.partial(self.store.lettered, delivery))

    def _letter_failed(self, exc: OSError) -> str:
        """Say a failed dead-letter write once per :data:`LETTER_LOG_EVERY` (not once per
        event or attempt); the error as the subscription's list shows it."""
        failure = f"dead-letter write failed: {exc.strerror or exc}"
        self._letter_failures += 1
        now = self._monotonic()
        if self._letter_failing is None or now >= self._letter_logged + LETTER_LOG_EVERY:
            _LOG.warning(
                "dead letters cannot be written under %s: %s (%d failed writes so far; each "
                "event's record is tried again every %d s of platform time, its receiver "
                "never again)",
                self.dead_letters, exc, self._letter_failures, LETTER_RETRY.total_seconds(),
            )  # fmt: skip
            self._letter_logged = now
        self._letter_failing = failure
        return failure

    def _letter_written(self) -> None:
        if self._letter_failing is not None:
            _LOG.warning("dead letters are written under %s again", self.dead_letters)
            self._letter_failing = None

    async def _post(self, subscription: Subscription, delivery: Delivery) -> tuple[int | None, str]:
        """One attempt: the receiver's status (None: no answer) and what the list shows."""
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


@dataclass(slots=True)
class _Flight:
    """A delivery taken from the store: whose, since when, and whether its attempt still
    runs (until its outcome is recorded it stays, so it is never taken twice)."""

    subscription: str
    started: float
    running: bool = True


def _rows(
    changes: list[tuple[EventChange, datetime | None]], schemas: set[Schema]
) -> list[tuple[int, datetime, str, dict[Schema, str]]]:
    """Each change's number, time, Event Grid id and payload in each schema in use."""
    return [
        (
            change.sequence,
            change.at,
            grid_id(change),
            {
                schema: json.dumps(payload(change, schema, not_before), separators=(",", ":"))
                for schema in schemas
            },
        )
        for change, not_before in changes
    ]


__all__ = [
    "BATCH",
    "CONCURRENCY",
    "IN_FLIGHT",
    "LETTER_LOG_EVERY",
    "MAX_ANSWER_BYTES",
    "VALIDATION_WINDOW",
    "EventGrid",
    "SubscriptionView",
]
