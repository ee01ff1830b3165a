"""Event Grid's subscriptions and delivery loop, in process: the rules the end-to-end tests
(test_eventgrid_delivery.py) show through real receivers, pinned where mutation reaches them.

The loop is stepped by hand on a manual clock (``grid.step()``, then ``grid.settle()`` for
the attempts started, then ``grid.step()`` again to record their outcomes); the receiver is
an exchange that answers as told and keeps what it was asked, except where the wire itself
is the rule. Sources: learn.microsoft.com, "Webhook event delivery" (webhook-event-delivery:
"Endpoint validation with Event Grid events", the validation code and the validation URL
"valid for 10 minutes"); "Event Grid message delivery and retry" (delivery-and-retry: the
retry schedule, "Delivery event formats", the delivery headers ``aeg-subscription-name``,
``aeg-delivery-count``, ``aeg-event-type``, ``aeg-metadata-version``, ``aeg-data-version``;
"Dead-letter events"); docs/azure-side.md, "Event Grid" (the control API's subscriptions,
the list's counts, the duplicate fault, dead-lettering and a folder that cannot be written).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from forewarn.domain.errors import InvalidOperationError, UnknownGroupError
from forewarn.domain.events import Event, EventSource, EventStatus, EventType, Resource
from forewarn.domain.history import EventChange, Phase, Publication
from forewarn.errors import InvalidInputError
from forewarn.eventgrid import delivery
from forewarn.eventgrid._http import Answer, ExchangeError
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.payloads import DATA_VERSION, METADATA_VERSION, grid_id, payload
from forewarn.eventgrid.store import DeliveryStore, Subscription

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SUB = "11111111-2222-3333-4444-555555555555"
VM = f"/subscriptions/{SUB}/resourceGroups/ops/providers/Microsoft.Compute/virtualMachines/db0"
WHERE = Publication(VM, SUB, "ops", "westeurope", "tenant", (), "2020-07-01")
NOT_BEFORE = T0 + timedelta(minutes=15)

R = TypeVar("R")


def change(sequence: int, phase: Phase = Phase.SCHEDULED, event_id: str = "E1") -> EventChange:
    status = EventStatus.SCHEDULED if phase is Phase.SCHEDULED else EventStatus.STARTED
    not_before = NOT_BEFORE if phase is Phase.SCHEDULED else None
    event = Event(event_id, EventType.REBOOT, status, (Resource("db0"),), not_before,
                  "Reboot", EventSource.USER, -1)  # fmt: skip
    return EventChange(sequence, T0, phase, event, WHERE)


class Hook:
    """An exchange answering each request with the next of ``statuses`` (then the last one
    again), keeping what it was asked: method, URL, headers and body."""

    def __init__(self, *statuses: int | str | Exception) -> None:
        self.statuses = list(statuses) or [200]
        self.asked: list[tuple[str, str, dict[str, str], bytes]] = []

    async def __call__(
        self, method: str, url: str, *, body: bytes = b"", headers: dict[str, str]
    ) -> Answer:
        self.asked.append((method, url, dict(headers), body))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if isinstance(status, str):
            raise ExchangeError(status)
        if isinstance(status, Exception):
            raise status
        return Answer(status, {200: "OK", 503: "Service Unavailable"}.get(status, ""), {}, b"")


class Platform:
    """An Event Grid on a manual clock and an in-memory store, its receiver a :class:`Hook`."""

    def __init__(self, hook: Hook, dead_letters: Path | None = None, sequence: int = 0) -> None:
        self.now = T0
        self.hook = hook
        self.store = DeliveryStore(None)
        self.grid = EventGrid(lambda: self.now, lambda: sequence, self.store,
                              validation_base="http://fw.example:8080/", dead_letters=dead_letters)  # fmt: skip
        self.grid._exchange = hook  # type: ignore[method-assign]

    def subscribe(self, name: str = "ops", schema: str = "eventgrid", after: int = 0) -> None:
        self.store.add(Subscription(name, f"http://hook.example/{name}", schema,  # type: ignore[arg-type]
                                    "Succeeded", "c", T0, after))  # fmt: skip

    async def at(self, moment: datetime) -> int:
        """The loop's round at ``moment``, its attempts awaited and recorded: how many
        requests the receiver has had."""
        self.now = moment
        await self.grid.step()
        await self.grid.settle()
        await self.grid.step()
        return len(self.hook.asked)

    def get(self, name: str = "ops") -> Subscription:
        found = self.store.get(name)
        assert found is not None
        return found


def run(work: Callable[[], Awaitable[R]]) -> R:
    return asyncio.run(work())  # type: ignore[arg-type]


# -- subscriptions ------------------------------------------------------------------------


def test_a_subscription_is_made_awaiting_with_a_fresh_guid_valid_for_10_minutes() -> None:
    """webhook-event-delivery: the validation code a GUID, the validation URL "valid for 10
    minutes"; the subscription receives the changes after the one current when made."""
    platform = Platform(Hook(500), sequence=7)

    async def made() -> tuple[Subscription, Subscription]:
        one = await platform.grid.subscribe("ops", "http://hook.example/a", "eventgrid")
        two = await platform.grid.subscribe("two", "http://hook.example/b", "cloudevents")
        return one.subscription, two.subscription

    one, two = run(made)
    assert one == Subscription(
        "ops", "http://hook.example/a", "eventgrid", "AwaitingManualAction",
        one.validation_code, T0 + timedelta(minutes=10), 7, last_error=one.last_error,
    )  # fmt: skip
    assert uuid.UUID(one.validation_code).version == 4
    assert str(uuid.UUID(one.validation_code)) == one.validation_code
    assert one.validation_code != two.validation_code
    assert (two.schema, two.state) == ("cloudevents", "Failed")  # no OPTIONS handshake: no way on
    assert two.last_error.startswith("abuse protection handshake answered 500")


def test_a_receiver_echoing_the_code_is_validated_at_once() -> None:
    """webhook-event-delivery, synchronous handshake: the code echoed as
    ``validationResponse`` validates the subscription; its URL is forewarn's validation URL
    with the name and code."""
    hook = Hook(200)

    async def echo(method: str, url: str, *, body: bytes = b"", headers: dict[str, str]) -> Answer:
        hook.asked.append((method, url, dict(headers), body))
        (event,) = json.loads(body)
        assert event["data"]["validationUrl"] == (
            "http://fw.example:8080/api/v1/eventgrid/validate?subscription=ops&code="
            + event["data"]["validationCode"]
        )
        reply = json.dumps({"validationResponse": event["data"]["validationCode"]}).encode()
        return Answer(200, "OK", {}, reply)

    platform = Platform(hook)
    platform.grid._exchange = echo  # type: ignore[method-assign]
    view = run(lambda: platform.grid.subscribe("ops", "http://hook.example/a", "eventgrid"))
    assert (view.subscription.state, view.subscription.last_error, view.pending) == (
        "Succeeded",
        "",
        0,
    )
    assert platform.get().state == "Succeeded"


def test_a_subscription_is_refused_for_its_name_schema_endpoint_or_a_name_taken() -> None:
    platform = Platform(Hook(500))

    async def refusals() -> list[str]:
        said = []
        for name, endpoint, schema in (
            ("ab", "http://hook.example/", "eventgrid"),
            ("a" * 65, "http://hook.example/", "eventgrid"),
            ("ops", "ftp://hook.example/", "eventgrid"),
            ("ops", "http://hook.example/", "xml"),
        ):
            with pytest.raises(InvalidInputError) as refused:
                await platform.grid.subscribe(name, endpoint, schema)  # type: ignore[arg-type]
            said.append(str(refused.value))
        await platform.grid.subscribe("ops", "http://hook.example/", "eventgrid")
        with pytest.raises(InvalidOperationError) as taken:
            await platform.grid.subscribe("ops", "http://hook.example/", "eventgrid")
        said.append(str(taken.value))
        return said

    said = run(refusals)
    assert said[0] == said[1] == "a subscription name is 3 to 64 letters, digits or hyphens"
    assert said[2].startswith("the endpoint must be an http:// or https:// ")
    assert said[3:] == [
        "the schema is one of eventgrid, cloudevents",
        "a subscription named 'ops' exists already",
    ]
    assert [s.name for s in platform.store.subscriptions()] == ["ops"]


def test_a_handshake_cut_short_keeps_nothing_of_the_subscription() -> None:
    """A subscribe cancelled while its handshake waits (the control API's client gone)
    leaves no subscription half made."""
    platform = Platform(Hook(200))
    started = asyncio.Event()

    async def stalls(*args: Any, **kwargs: Any) -> Answer:
        started.set()
        await asyncio.sleep(30)
        raise AssertionError("not cancelled")

    platform.grid._exchange = stalls  # type: ignore[method-assign]

    async def cancelled() -> Subscription | None:
        task = asyncio.create_task(platform.grid.subscribe("ops", "http://h.example/", "eventgrid"))
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({task, waiting}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        assert started.is_set(), task  # the handshake under way, not the subscribe over
        assert platform.store.get("ops") is not None  # made before its handshake
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return platform.store.get("ops")

    assert run(cancelled) is None


def test_the_validation_url_validates_only_its_subscription_with_its_code_once() -> None:
    """webhook-event-delivery, asynchronous handshake: a GET of the validation URL
    validates; another code, another name, or a subscription no longer awaiting is refused;
    until then the list shows it awaiting, and Failed once the 10 minutes are past, though
    nothing was written (the expiry shown, not stored)."""
    platform = Platform(Hook(500))

    async def run_it() -> None:
        grid = platform.grid
        made = (await grid.subscribe("ops", "http://hook.example/", "eventgrid")).subscription
        for name, code in (("ops", made.validation_code.upper()), ("other", made.validation_code)):
            with pytest.raises(UnknownGroupError) as refused:
                await grid.validate(name, code)
            assert str(refused.value) == f"no subscription awaiting validation named {name!r}"
        platform.now = T0 + timedelta(minutes=10)
        assert (await grid.view("ops")).subscription.state == "AwaitingManualAction"
        platform.now = T0 + timedelta(minutes=10, microseconds=1)
        (listed,) = await grid.list()
        assert (listed.subscription.state, listed.subscription.last_error) == (
            "Failed",
            "validation expired",
        )
        assert platform.get().state == "AwaitingManualAction"  # shown so, not stored
        platform.now = T0 + timedelta(minutes=10)
        assert (await grid.validate("ops", made.validation_code)).subscription.state == (
            "Succeeded"
        )
        with pytest.raises(InvalidOperationError, match=r"^subscription 'ops' is Succeeded$"):
            await grid.validate("ops", made.validation_code)
        platform.now = T0 + timedelta(hours=1)
        assert (await grid.view("ops")).subscription.state == "Succeeded"  # validated in time
        late = (await grid.subscribe("late", "http://hook.example/", "eventgrid")).subscription
        platform.now = late.expires + timedelta(microseconds=1)
        with pytest.raises(InvalidOperationError) as expired:
            await grid.validate("late", late.validation_code)
        assert (
            str(expired.value) == "subscription 'late': its validation URL expired after 10 minutes"
        )
        stored = platform.get("late")  # written, not only shown
        assert (stored.state, stored.last_error) == ("Failed", "validation expired")

    run(run_it)


def test_a_subscription_deleted_or_faulted_must_exist() -> None:
    """docs/azure-side.md, "Double notifications": the next N deliveries sent twice; an
    unknown subscription is refused by name, for this as for a delete; its view counts its
    pending deliveries."""
    platform = Platform(Hook(503))
    platform.subscribe()

    async def run_it() -> None:
        grid = platform.grid
        assert [v.pending for v in await grid.list()] == [0]
        assert (await grid.duplicate("ops", 2)).subscription.duplicates == 2
        grid.on_change(change(1))
        await grid.step()  # queued, its attempt failed: pending
        await grid.settle()
        await grid.step()
        assert (await grid.view("ops")).pending == 1
        assert [v.pending for v in await grid.list()] == [1]
        for call in (grid.duplicate("nope", 1), grid.delete("nope"), grid.view("nope")):
            with pytest.raises(UnknownGroupError) as refused:
                await call
            assert str(refused.value) == "no Event Grid subscription named 'nope'"
        await grid.delete("ops")
        assert await grid.list() == []

    run(run_it)


# -- delivery -----------------------------------------------------------------------------


def test_an_event_grid_delivery_is_a_post_of_an_array_with_the_aeg_headers() -> None:
    """delivery-and-retry, "Delivery event formats" and the delivery headers: a POST of a
    JSON array of one event, ``aeg-event-type: Notification``, the subscription's name in
    upper case, the attempts made before this one, the data and metadata versions."""
    platform = Platform(Hook(503, 200))
    platform.subscribe("ops-1")
    platform.grid.on_change(change(1))

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        assert await platform.at(T0 + timedelta(seconds=10)) == 2

    run(run_it)
    expected = json.dumps(payload(change(1), "eventgrid", None), separators=(",", ":"))
    for attempt, (method, url, headers, body) in enumerate(platform.hook.asked):
        assert (method, url) == ("POST", "http://hook.example/ops-1")
        assert body == b"[" + expected.encode() + b"]"
        assert headers == {
            "Content-Type": "application/json; charset=utf-8",
            "aeg-event-type": "Notification",
            "aeg-subscription-name": "OPS-1",
            "aeg-delivery-count": str(attempt),
            "aeg-data-version": DATA_VERSION,
            "aeg-metadata-version": METADATA_VERSION,
        }
    assert platform.store.pending() == {}
    assert (platform.get("ops-1").delivered, platform.get("ops-1").failed) == (1, 1)


def test_a_cloudevents_delivery_is_one_event_in_structured_mode() -> None:
    """CloudEvents v1.0 schema with Azure Event Grid: the event alone, in the HTTP binding's
    structured mode (``application/cloudevents+json``)."""
    platform = Platform(Hook(200))
    platform.subscribe("ce", schema="cloudevents")
    platform.grid.on_change(change(1))
    run(lambda: platform.at(T0))
    ((method, url, headers, body),) = platform.hook.asked
    assert (method, url) == ("POST", "http://hook.example/ce")
    assert headers == {"Content-Type": "application/cloudevents+json; charset=utf-8"}
    assert json.loads(body) == payload(change(1), "cloudevents", None)


def test_a_started_change_shows_the_not_before_it_had_and_replays_are_not_sent_again() -> None:
    """The Event Grid page's sample shows a Started event with its NotBefore (docs/
    azure-side.md, "What is delivered"); a change the store has turned into deliveries
    already (a replay after a restart) is not queued again."""
    platform = Platform(Hook(200))
    platform.subscribe()
    platform.grid.on_change(change(1))
    platform.grid.on_change(change(2, Phase.STARTED))
    platform.grid.on_change(change(3, Phase.COMPLETED))
    platform.grid.on_change(change(4, Phase.STARTED))  # no longer Scheduled: its own time
    run(lambda: platform.at(T0))
    sent = [json.loads(body)[0] for _, _, _, body in platform.hook.asked]
    assert [e["id"] for e in sent] == [grid_id(change(n, p)) for n, p in (
        (1, Phase.SCHEDULED), (2, Phase.STARTED), (3, Phase.COMPLETED), (4, Phase.STARTED))]  # fmt: skip
    props = [e["data"]["resourceInfo"]["properties"] for e in sent]
    assert props[1]["NotBefore"] == props[0]["NotBefore"] != ""
    started_at = payload(change(4, Phase.STARTED), "eventgrid", T0)  # its own time: the change's
    assert props[3]["NotBefore"] == started_at["data"]["resourceInfo"]["properties"]["NotBefore"]
    platform.grid.on_change(change(5, Phase.CANCELED, event_id="never-scheduled"))  # no error
    again = EventGrid(lambda: T0, lambda: 0, platform.store, validation_base="http://x")
    again._exchange = platform.hook  # type: ignore[method-assign]
    for n in (1, 2, 3, 4):
        again.on_change(change(n))
    assert len(again._incoming) == 0


def test_the_duplicate_fault_sends_the_next_deliveries_twice_identical() -> None:
    """docs/azure-side.md, "Double notifications": the next N deliveries sent twice,
    identical; the one after once."""
    platform = Platform(Hook(200))
    platform.subscribe()
    platform.store.add_duplicates("ops", 1)
    platform.grid.on_change(change(1))

    async def run_it() -> None:
        await platform.at(T0)
        platform.grid.on_change(change(2))
        await platform.at(T0)

    run(run_it)
    first, twice, second = platform.hook.asked
    assert first == twice
    assert json.loads(second[3])[0]["id"] == grid_id(change(2))
    assert platform.get().duplicates == 0


def test_a_failure_is_shown_and_retried_on_schedule_a_400_dead_letters_at_once(
    tmp_path: Path,
) -> None:
    """delivery-and-retry: a failed delivery is retried after 10 seconds; 400 is never
    retried and goes to the dead-letter location with ``NonRetryableError``; the list shows
    each failed attempt and the last error (the status and its reason, or the exchange's
    outcome)."""
    platform = Platform(Hook(503, "TimedOut", 400), dead_letters=tmp_path)
    platform.subscribe()
    platform.grid.on_change(change(1))

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        assert (platform.get().failed, platform.get().last_error) == (1, "503 Service Unavailable")
        assert await platform.at(T0 + timedelta(seconds=10)) == 2
        assert (platform.get().failed, platform.get().last_error) == (2, "TimedOut")
        (retry,) = platform.store.due(T0 + timedelta(seconds=40), 10)
        assert (retry.last_status, retry.last_outcome) == (None, "TimedOut")  # Event Grid's name
        assert await platform.at(T0 + timedelta(seconds=40)) == 3
        assert await platform.at(T0 + timedelta(hours=2)) == 3

    run(run_it)
    ops = platform.get()
    assert (ops.failed, ops.dead_lettered, ops.last_error) == (3, 1, "400")
    (record_file,) = tmp_path.rglob("*.json")
    (record,) = json.loads(record_file.read_text())
    assert (record["deadLetterReason"], record["deliveryAttempts"]) == ("NonRetryableError", 3)
    assert (record["lastDeliveryOutcome"], record["lastHttpStatusCode"]) == ("BadRequest", 400)
    assert record["lastDeliveryAttemptTime"] == "2026-05-01T12:00:40.0000000Z"


def test_without_a_dead_letter_folder_the_event_is_dropped_and_counted() -> None:
    """ "If dead-letter isn't configured ... events will be dropped" (manage-event-delivery)."""
    platform = Platform(Hook(403))
    platform.subscribe()
    platform.grid.on_change(change(1))
    run(lambda: platform.at(T0))
    assert (platform.get().failed, platform.get().dead_lettered) == (1, 1)
    assert platform.store.pending() == {}


def test_past_the_time_to_live_no_attempt_is_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """delivery-and-retry, "Dead-letter events": an event not delivered within its time to
    live (1,440 minutes) is dead-lettered, ``TimeToLiveExceeded``; a clock moved past it
    makes no further attempt, the record showing the last attempt made."""
    platform = Platform(Hook(503), dead_letters=tmp_path)
    platform.subscribe()
    platform.grid.on_change(change(1))
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        assert await platform.at(T0 + timedelta(minutes=1440, microseconds=1)) == 1

    run(run_it)
    assert [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()] == [
        f"dead-lettered {grid_id(change(1))} for ops: TimeToLiveExceeded (ServiceUnavailable)"
    ]
    ops = platform.get()
    assert (ops.failed, ops.dead_lettered, ops.last_error) == (1, 1, "503 Service Unavailable")
    (record,) = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert record["deadLetterReason"] == "TimeToLiveExceeded"
    assert (record["deliveryAttempts"], record["lastHttpStatusCode"]) == (1, 503)
    assert record["lastDeliveryOutcome"] == "ServiceUnavailable"
    assert record["lastDeliveryAttemptTime"] == "2026-05-01T12:00:00.0000000Z"


def test_a_dead_letter_folder_that_fails_keeps_the_event_and_tries_again_each_minute(
    tmp_path: Path,
) -> None:
    """docs/azure-side.md, "Dead-lettering": a record that cannot be written keeps its event,
    whose receiver is never asked again; the write is tried again a minute later (platform
    time), each failure counted and shown; once the folder works, the record is written."""
    blocked = tmp_path / "letters"
    blocked.write_text("a file where the folder should be")
    platform = Platform(Hook(400), dead_letters=blocked)
    platform.subscribe()
    platform.grid.on_change(change(1))

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        ops = platform.get()
        assert (ops.failed, ops.letter_failures, ops.dead_lettered) == (1, 1, 0)
        assert ops.last_error.startswith("dead-letter write failed: ")
        assert await platform.at(T0 + timedelta(seconds=59)) == 1
        assert platform.get().letter_failures == 1  # not tried before the minute
        assert await platform.at(T0 + timedelta(minutes=1)) == 1
        ops = platform.get()
        assert (ops.letter_failures, ops.last_error) == (
            2,
            "dead-letter write failed: Not a directory",
        )
        assert await platform.at(T0 + timedelta(minutes=1, seconds=59)) == 1
        assert platform.get().letter_failures == 2  # the next try a minute after the last
        blocked.unlink()
        assert await platform.at(T0 + timedelta(minutes=2)) == 1

    run(run_it)
    ops = platform.get()
    assert (ops.failed, ops.letter_failures, ops.dead_lettered) == (1, 2, 1)
    (record,) = json.loads(next(blocked.rglob("*.json")).read_text())
    assert (record["deadLetterReason"], record["deliveryAttempts"]) == ("NonRetryableError", 1)
    assert (record["lastHttpStatusCode"], record["lastDeliveryOutcome"]) == (400, "BadRequest")
    assert record["lastDeliveryAttemptTime"] == "2026-05-01T12:00:00.0000000Z"  # not the write's
    assert platform.store.pending() == {}


def test_a_receiver_answering_after_the_response_timeout_has_timed_out() -> None:
    """delivery-and-retry: "Event Grid waits 30 seconds for a response" (``response_timeout``,
    shortened here): a receiver on the wire that answers later failed, ``TimedOut``."""

    async def run_it() -> Subscription | None:
        gone = asyncio.Event()

        async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # never answers; the connection ends from forewarn's side
            writer.close()
            await writer.wait_closed()
            gone.set()

        server = await asyncio.start_server(slow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = DeliveryStore(None)
        store.add(Subscription("ops", f"http://127.0.0.1:{port}/", "eventgrid", "Succeeded",
                               "c", T0, 0))  # fmt: skip
        grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", response_timeout=0.2)
        grid.on_change(change(1))
        await grid.step()
        await grid.settle()
        await grid.step()
        await gone.wait()
        server.close()
        await server.wait_closed()
        return store.get("ops")

    ops = asyncio.run(asyncio.wait_for(run_it(), 4))
    assert ops is not None
    assert (ops.failed, ops.last_error) == (1, "TimedOut")


def test_a_fault_of_forewarn_s_own_is_a_failed_attempt_retried_on_schedule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A delivery that fails inside forewarn (not the receiver's answer) stops nothing: it
    counts as a failed attempt, Event Grid's ``GenericError``, retried on the schedule
    (10 seconds after the first), the error's kind and text shown, at most 300 characters."""
    platform = Platform(Hook(RuntimeError("x" * 400), 200))
    platform.subscribe()
    platform.grid.on_change(change(1))

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        ops = platform.get()
        assert (ops.failed, ops.last_error) == (1, ("RuntimeError: " + "x" * 400)[:300])
        (retry,) = platform.store.due(T0 + timedelta(seconds=10), 10)
        assert (retry.attempts, retry.last_status, retry.last_outcome) == (1, None, "GenericError")
        assert retry.last_attempt == T0
        assert await platform.at(T0 + timedelta(seconds=10) - timedelta(microseconds=1)) == 1
        assert await platform.at(T0 + timedelta(seconds=10)) == 2

    run(run_it)
    assert (platform.get().delivered, platform.store.pending()) == (1, {})
    (said,) = [r for r in caplog.records if r.getMessage().startswith("delivering ")]
    assert said.getMessage() == f"delivering {grid_id(change(1))} to ops"
    assert said.exc_info is not None  # with its traceback


def test_a_failing_dead_letter_folder_is_said_once_a_minute_and_its_recovery_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/azure-side.md, "Dead-lettering": a folder that cannot be written makes no storm
    in the log either: said once per minute of real time (not once per event), with how
    many writes failed so far and how often each is tried again; its recovery said once."""
    blocked = tmp_path / "letters"
    blocked.write_text("a file where the folder should be")
    platform = Platform(Hook(400), dead_letters=blocked)
    platform.subscribe()
    for n in (1, 2):
        platform.grid.on_change(change(n, event_id=f"E{n}"))
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    async def run_it() -> None:
        await platform.at(T0)  # two events, two failed writes: said once
        assert said("dead letters cannot be written") == [
            f"dead letters cannot be written under {blocked}: [Errno 20] Not a directory: "
            f"'{blocked}/OPS/2026/5/1/12' (1 failed writes so far; each event's record is "
            "tried again every 60 s of platform time, its receiver never again)"
        ]
        monkeypatch.setattr(delivery, "LETTER_LOG_EVERY", 0.0)
        await platform.at(T0 + timedelta(minutes=1))  # a minute later: said again
        counts = [m.split(" (")[-1].split(" failed")[0] for m in said("cannot be written")]
        assert counts == ["1", "3", "4"]  # each failed write counted, each said now
        assert said("are written under") == []
        blocked.unlink()
        await platform.at(T0 + timedelta(minutes=2))
        await platform.at(T0 + timedelta(minutes=3))
        assert said("dead letters are written under") == [
            f"dead letters are written under {blocked} again"
        ]

    run(run_it)
    gave_up = said("dead-lettered")
    assert gave_up[0] == (
        f"dead-lettered {grid_id(change(1, event_id='E1'))} for ops: NonRetryableError (400)"
    )
    assert platform.get().dead_lettered == 2


def test_a_receiver_on_the_wire_echoing_the_code_is_validated() -> None:
    """webhook-event-delivery, synchronous handshake, over a real connection: the
    validation event POSTed, the code echoed in the answer's body, the subscription
    Succeeded (what the exchange reads of an answer is pinned in
    test_eventgrid_exchange.py)."""

    async def run_it() -> Subscription:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            (event,) = json.loads(await reader.readexactly(length))
            body = json.dumps({"validationResponse": event["data"]["validationCode"]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        grid = EventGrid(lambda: T0, lambda: 0, DeliveryStore(None), validation_base="x")
        view = await grid.subscribe("ops", f"http://127.0.0.1:{port}/hook", "eventgrid")
        server.close()
        await server.wait_closed()
        return view.subscription

    made = asyncio.run(asyncio.wait_for(run_it(), 5))
    assert (made.state, made.last_error) == ("Succeeded", "")


# -- the loop as serve runs it ------------------------------------------------------------


async def _until(done: Callable[[], bool], seconds: float = 5.0) -> None:
    async def wait() -> None:
        while not done():
            await asyncio.sleep(0.002)

    await asyncio.wait_for(wait(), seconds)


class Rounds:
    """The loop's rounds counted (its ``step``, or ``_follow`` when not leading)."""

    def __init__(self, grid: EventGrid) -> None:
        self.steps = 0
        self.follows = 0
        step, follow = grid.step, grid._follow

        async def counted_step(busy: bool = False) -> None:
            self.steps += 1
            await step(busy)

        async def counted_follow() -> None:
            self.follows += 1
            await follow()

        grid.step = counted_step  # type: ignore[method-assign]
        grid._follow = counted_follow  # type: ignore[method-assign]


def _refusing(path: Path, table: str, *events: str) -> Callable[[], None]:
    """Triggers making the store's file refuse ``events`` on ``table`` (a full disk, as
    another connection sees it); the function that removes them again."""
    other = sqlite3.connect(path, isolation_level=None)
    for event in events:
        other.execute(
            f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON {table}"
            " BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )

    def remove() -> None:
        for event in events:
            other.execute(f"DROP TRIGGER refuse_{event.lower()}")
        other.close()

    return remove


def test_a_failing_store_is_said_once_delivery_waits_and_goes_on_once_it_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/azure-side.md, "Durability": a store that fails stops nothing for good; its
    failure is said once, with its reason, however many rounds it lasts, and its recovery
    once; the change waits and is delivered then."""
    path = tmp_path / "eventgrid.sqlite3"
    store = DeliveryStore(path)
    store.add(Subscription("ops", "http://hook.example/", "eventgrid", "Succeeded", "c", T0, 0))
    repair = _refusing(path, "meta", "INSERT", "UPDATE")
    hook = Hook(200)
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", poll=0.002)
    grid._exchange = hook  # type: ignore[method-assign]
    rounds = Rounds(grid)
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    async def run_it() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(grid.run(stop))
        grid.on_change(change(1))
        await _until(lambda: rounds.steps >= 5)
        assert said("Event Grid's deliveries wait") == [
            f"Event Grid's deliveries wait for their store: Event Grid's state in {path}: disk full"
        ]
        assert hook.asked == []
        repair()
        await _until(lambda: store.get("ops").delivered == 1)  # type: ignore[union-attr]
        steps = rounds.steps
        await _until(lambda: rounds.steps >= steps + 3)
        stop.set()
        await loop

    asyncio.run(run_it())
    assert said("store works again") == ["Event Grid's store works again: deliveries go on"]
    assert len(said("Event Grid's deliveries wait")) == 1
    assert len(hook.asked) == 1


def test_an_unexpected_failure_is_said_with_its_kind_and_ends_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure of forewarn's own in a round (not the store's) is said once, as an
    error with its kind and traceback, and the loop goes on."""
    store = DeliveryStore(None)
    store.add(Subscription("ops", "http://hook.example/", "eventgrid", "Succeeded", "c", T0, 0))
    hook = Hook(200)
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", poll=0.002)
    grid._exchange = hook  # type: ignore[method-assign]
    rounds = Rounds(grid)
    real = store.due_subscriptions

    def broken(now: datetime) -> list[str]:
        raise RuntimeError("boom")

    monkeypatch.setattr(store, "due_subscriptions", broken)
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def run_it() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(grid.run(stop))
        grid.on_change(change(1))
        await _until(lambda: rounds.steps >= 5)
        monkeypatch.setattr(store, "due_subscriptions", real)
        await _until(lambda: store.get("ops").delivered == 1)  # type: ignore[union-attr]
        stop.set()
        await loop

    asyncio.run(run_it())
    (failure,) = [r for r in caplog.records if "deliveries wait" in r.getMessage()]
    assert failure.getMessage() == "Event Grid's deliveries wait: RuntimeError: boom"
    assert (failure.levelno, failure.exc_info is not None) == (logging.ERROR, True)


def test_stopping_with_outcomes_the_store_refuses_says_how_many_are_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At least once: a delivery answered but not recorded when serve stops is sent again
    after the restart, and the stop says how many."""
    path = tmp_path / "eventgrid.sqlite3"
    store = DeliveryStore(path)
    store.add(Subscription("ops", "http://hook.example/", "eventgrid", "Succeeded", "c", T0, 0))
    store.enqueue([(1, T0, "id-1", {"eventgrid": "{}"}), (2, T0, "id-2", {"eventgrid": "{}"})],
                  cursor=2)  # fmt: skip
    _refusing(path, "deliveries", "DELETE")
    hook = Hook(200, 503)
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", poll=0.002)
    grid._exchange = hook  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def run_it() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(grid.run(stop))
        await _until(lambda: len(hook.asked) == 2)
        stop.set()
        await loop

    asyncio.run(run_it())
    (stopped,) = [r.getMessage() for r in caplog.records if "stops" in r.getMessage()]
    assert stopped == (
        "Event Grid stops with 2 outcomes not recorded (sent again after a restart): "
        f"Event Grid's state in {path}: disk full"
    )
    assert store.pending() == {"ops": 2}


def test_a_front_end_not_leading_delivers_nothing_and_forgets_what_the_leader_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/azure-side.md, "Event Grid": with a shared store only the fleet's leader
    delivers; each front-end keeps the changes the leader has not yet turned into
    deliveries, so that it can take over, and forgets those it has: once leading, it sends
    each event once."""
    monkeypatch.setattr(delivery, "IDLE_POLL", 0.002)
    store = DeliveryStore(None)
    store.add(Subscription("ops", "http://hook.example/", "eventgrid", "Succeeded", "c", T0, 0))
    leading = [False]
    hook = Hook(200)
    grid = EventGrid(lambda: T0, lambda: 0, store, validation_base="x", poll=0.002,
                     active=lambda: leading[0])  # fmt: skip
    grid._exchange = hook  # type: ignore[method-assign]
    rounds = Rounds(grid)

    async def run_it() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(grid.run(stop))
        grid.on_change(change(1))
        grid.on_change(change(2, Phase.STARTED))
        # the leader turns the first change into its delivery, elsewhere
        store.enqueue([(1, T0, grid_id(change(1)), {"eventgrid": "{}"})], cursor=1)
        await _until(lambda: rounds.follows >= 3)
        assert (hook.asked, rounds.steps) == ([], 0)
        grid.on_change(change(1))  # a replay of what the leader turned into its delivery
        assert [v.subscription.name for v in grid.views] == ["ops"]  # the list kept fresh
        leading[0] = True
        await _until(lambda: store.get("ops").delivered == 2)  # type: ignore[union-attr]
        stop.set()
        await loop

    asyncio.run(run_it())
    sent = [json.loads(body)[0]["id"] if body != b"[{}]" else "leader's" for *_, body in hook.asked]
    assert sorted(sent) == sorted(["leader's", grid_id(change(2, Phase.STARTED))])


def test_an_event_past_its_time_to_live_unattempted_with_a_failing_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/azure-side.md, "Dead-lettering": an event given up on without an attempt (past
    its time to live before its first) counts no failed attempt, even while its record
    cannot be written; once written, the record says no attempt was made: no status, no
    outcome, zero attempts."""
    blocked = tmp_path / "letters"
    blocked.write_text("a file where the folder should be")
    platform = Platform(Hook(200), dead_letters=blocked)
    platform.subscribe()
    platform.grid.on_change(change(1))
    late = T0 + timedelta(minutes=1440, microseconds=1)

    async def run_it() -> None:
        assert await platform.at(late) == 0
        ops = platform.get()
        assert (ops.failed, ops.letter_failures, ops.dead_lettered) == (0, 1, 0)
        blocked.unlink()
        assert await platform.at(late + timedelta(minutes=1)) == 0

    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")
    run(run_it)
    assert [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()] == [
        f"dead-lettered {grid_id(change(1))} for ops: TimeToLiveExceeded (TimeToLiveExceeded)"
    ]
    ops = platform.get()
    assert (ops.failed, ops.letter_failures, ops.dead_lettered) == (0, 1, 1)
    (record,) = json.loads(next(blocked.rglob("*.json")).read_text())
    assert record["deadLetterReason"] == "TimeToLiveExceeded"
    assert (record["deliveryAttempts"], record["lastHttpStatusCode"]) == (0, None)
    assert record["lastDeliveryOutcome"] is None


def test_a_subscription_validated_by_its_url_during_the_handshake_stays_validated() -> None:
    """webhook-event-delivery: a receiver may answer the validation event without the code
    and GET the validation URL instead, even before its answer: the subscription it
    validated is not moved back to awaiting. The validation event carries the system
    topic's ``topic`` (docs/azure-side.md, "What is delivered")."""
    platform = Platform(Hook(200))
    platform.grid._topic = lambda: f"/subscriptions/{SUB}"
    seen: list[dict[str, Any]] = []

    async def validates_then_answers(
        method: str, url: str, *, body: bytes = b"", headers: dict[str, str]
    ) -> Answer:
        (event,) = json.loads(body)
        seen.append(event)
        await platform.grid.validate("ops", event["data"]["validationCode"])
        return Answer(200, "OK", {}, b"{}")

    platform.grid._exchange = validates_then_answers  # type: ignore[method-assign]
    view = run(lambda: platform.grid.subscribe("ops", "http://hook.example/", "eventgrid"))
    assert (view.subscription.state, platform.get().state) == ("Succeeded", "Succeeded")
    assert seen[0]["topic"] == f"/subscriptions/{SUB}"


def test_a_cloudevents_handshake_on_the_wire_is_an_options_without_a_body() -> None:
    """webhook-event-delivery, "Endpoint validation with CloudEvents v1.0": an OPTIONS with
    ``WebHook-Request-Origin``, answered with ``WebHook-Allowed-Origin``; no body."""

    async def run_it() -> tuple[bytes, Subscription]:
        asked: list[bytes] = []

        async def allow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            asked.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(
                b"HTTP/1.1 200 OK\r\nWebHook-Allowed-Origin: eventgrid.azure.net\r\n"
                b"Content-Length: 0\r\n\r\n"
            )
            await writer.drain()
            asked.append(await reader.read())  # nothing more: no body
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(allow, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            grid = EventGrid(lambda: T0, lambda: 0, DeliveryStore(None), validation_base="x")
            view = await grid.subscribe("cev", f"http://127.0.0.1:{port}/", "cloudevents")
            await _until(lambda: len(asked) == 2)
        finally:
            server.close()
            await server.wait_closed()
        return b"".join(asked), view.subscription

    request, made = asyncio.run(asyncio.wait_for(run_it(), 5))
    assert request.startswith(b"OPTIONS / HTTP/1.1\r\n")
    assert b"\r\nContent-Length: 0\r\n" in request
    assert request.endswith(b"\r\n\r\n")
    assert made.state == "Succeeded"


def test_each_subscription_has_its_own_16_deliveries_in_flight() -> None:
    """docs/azure-side.md, "Never in a VM's way, nor another subscription's": at most 16
    deliveries in flight to one subscription, whose receiver holding them all holds up no
    other subscription's; the rest start as those end."""
    release = asyncio.Event()
    asked: list[str] = []

    async def holding(
        method: str, url: str, *, body: bytes = b"", headers: dict[str, str]
    ) -> Answer:
        asked.append(url)
        await release.wait()
        return Answer(200, "OK", {}, b"")

    platform = Platform(Hook(200))
    platform.grid._exchange = holding  # type: ignore[method-assign]
    platform.subscribe("a")
    platform.subscribe("b")
    for n in range(1, 21):
        platform.grid.on_change(change(n, event_id=f"E{n}"))

    async def run_it() -> None:
        grid = platform.grid
        await grid.step()
        await _until(lambda: len(asked) == 32)
        await grid.step()  # nothing more may start while they hang
        await asyncio.sleep(0)
        assert sorted(asked) == ["http://hook.example/a"] * 16 + ["http://hook.example/b"] * 16
        release.set()
        await grid.settle()
        await grid.step()
        await grid.settle()
        await grid.step()
        assert len(asked) == 40
        assert platform.store.pending() == {}

    run(run_it)


def test_an_attempt_due_at_the_very_end_of_the_time_to_live_is_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """delivery-and-retry, "Dead-letter events": an event not delivered within its time to
    live is dead-lettered; an attempt at its last moment is within it, and is made; its
    failure then ends the event (the next retry would fall past it), said with its error."""
    platform = Platform(Hook(503))
    platform.subscribe()
    platform.grid.on_change(change(1))
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def run_it() -> None:
        assert await platform.at(T0) == 1
        assert await platform.at(T0 + timedelta(minutes=1440)) == 2

    run(run_it)
    ops = platform.get()
    assert (ops.failed, ops.dead_lettered) == (2, 1)
    assert [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()] == [
        f"dead-lettered {grid_id(change(1))} for ops: TimeToLiveExceeded (503 Service Unavailable)"
    ]


class Holding:
    """An exchange holding each request until released, by subscription (its URL's path)."""

    def __init__(self, *held: str) -> None:
        self.asked: list[str] = []
        self.held = set(held)
        self.release = asyncio.Event()

    async def __call__(
        self, method: str, url: str, *, body: bytes = b"", headers: dict[str, str]
    ) -> Answer:
        name = url.rsplit("/", 1)[1]
        self.asked.append(name)
        if name in self.held:
            await self.release.wait()
        return Answer(200, "OK", {}, b"")


def _holding_platform(hook: Holding, *names: str, events: int) -> Platform:
    platform = Platform(Hook(200))
    platform.grid._exchange = hook  # type: ignore[method-assign]
    for name in names:
        platform.subscribe(name)
    for n in range(1, events + 1):
        platform.grid.on_change(change(n, event_id=f"E{n}"))
    return platform


def test_while_the_loop_is_busy_deliveries_start_at_its_rate_and_changes_in_small_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/azure-side.md, "Never in a VM's way": while the event loop is busy with VMs'
    requests, deliveries start at a bounded rate after a burst of 16 (``BUSY_BURST``), and
    changes are turned into deliveries 50 at a time (``BUSY_BATCH``) rather than 1,000. The
    rate is made negligible here, so that no real time refills it between two rounds."""
    monkeypatch.setattr(delivery, "BUSY_RATE", 1e-6)
    hook = Holding("a", "b")
    platform = _holding_platform(hook, "a", "b", events=60)

    async def run_it() -> None:
        grid = platform.grid
        await grid.step(busy=True)
        assert platform.store.cursor() == 50  # one batch of 50 changes
        await _until(lambda: len(hook.asked) == 16)
        await grid.step(busy=True)  # the burst spent: nothing more starts
        await asyncio.sleep(0)
        assert len(hook.asked) == 16
        assert platform.store.cursor() == 60
        await grid.step()  # not busy: each subscription's own 16
        await _until(lambda: len(hook.asked) == 32)
        hook.release.set()
        await grid.settle()

    run(run_it)


def test_the_subscriptions_take_turns_at_what_may_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/azure-side.md, "Never in a VM's way, nor another subscription's": with room for
    one delivery at a time (``IN_FLIGHT`` made 1 here), the subscriptions with something due
    take turns, by name, one round each."""
    monkeypatch.setattr(delivery, "IN_FLIGHT", 1)
    hook = Holding()
    platform = _holding_platform(hook, "a", "b", "c", events=2)

    async def run_it() -> None:
        for _ in range(6):
            await platform.at(T0)

    run(run_it)
    assert hook.asked == ["a", "b", "c", "a", "b", "c"]


def test_room_left_by_one_subscription_goes_to_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """All subscriptions together have ``IN_FLIGHT`` deliveries in flight at most (made 17
    here): one subscription's own 16 first, the one more to the next; a subscription whose
    16 are all held is passed over, not the end of the round."""
    monkeypatch.setattr(delivery, "IN_FLIGHT", 17)
    hook = Holding("a")
    platform = _holding_platform(hook, "a", "b", events=20)

    async def run_it() -> None:
        await platform.grid.step()
        await _until(lambda: len(hook.asked) == 17)
        assert sorted(hook.asked) == ["a"] * 16 + ["b"]

        def asked(count: int) -> Callable[[], bool]:
            return lambda: len(hook.asked) >= count

        for count in (18, 19, 20):  # a's held: b's one place used again, a passed over
            await platform.grid.step()
            await _until(asked(count))
        assert hook.asked.count("b") == 4
        hook.release.set()
        await platform.grid.settle()

    run(run_it)


@pytest.mark.parametrize(("lag", "started"), [(-1.0, 16), (1e9, 32)])
def test_the_loop_measures_its_business_and_holds_deliveries_to_the_busy_rate(
    monkeypatch: pytest.MonkeyPatch, lag: float, started: int
) -> None:
    """docs/azure-side.md, "Never in a VM's way": the loop measures how long the event loop
    takes to come back to it; busy (any lag counts when ``BUSY_LAG`` is below zero), it
    starts its burst of 16 and then waits for the busy rate (made negligible here); never
    busy (a lag no loop reaches), each subscription gets its own 16 at once."""
    monkeypatch.setattr(delivery, "BUSY_RATE", 1e-6)
    monkeypatch.setattr(delivery, "BUSY_LAG", lag)
    monkeypatch.setattr(delivery, "MEASURE_EVERY", 0.0)
    hook = Holding("a", "b")
    platform = _holding_platform(hook, "a", "b", events=20)
    platform.grid._poll = 0.002
    rounds = Rounds(platform.grid)

    async def run_it() -> None:
        stop = asyncio.Event()
        loop = asyncio.create_task(platform.grid.run(stop))
        await _until(lambda: len(hook.asked) >= started)
        count = rounds.steps
        await _until(lambda: rounds.steps >= count + 5)
        assert len(hook.asked) == started
        hook.release.set()
        stop.set()
        await loop

    run(run_it)


def test_a_new_loop_shows_no_subscription_and_says_no_recovery_of_what_never_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The dashboard reads the views before the loop's first round: none yet. A store and a
    dead-letter folder that never failed are never said to work again. A change batch not
    busy is up to 1,000 changes: 60 are queued in one round. The validation URL is the
    base given, without its trailing slash (here a host ending in X)."""
    platform = Platform(Hook(400), dead_letters=tmp_path)
    grid = EventGrid(lambda: T0, lambda: 0, platform.store, validation_base="http://FWX/",
                     dead_letters=tmp_path)  # fmt: skip
    grid._exchange = platform.hook  # type: ignore[method-assign]
    assert grid.views == []
    sub = Subscription("ops", "http://hook.example/ops", "eventgrid", "Succeeded", "code", T0, 0)
    assert grid.validation_url(sub) == (
        "http://FWX/api/v1/eventgrid/validate?subscription=ops&code=code"
    )
    platform.store.add(sub)
    for n in range(1, 61):
        grid.on_change(change(n, event_id=f"E{n}"))
    caplog.set_level(logging.WARNING, logger="forewarn.eventgrid")

    async def run_it() -> None:
        await grid.step()
        assert platform.store.cursor() == 60  # one round, one batch
        stop = asyncio.Event()
        loop = asyncio.create_task(grid.run(stop))
        await _until(lambda: platform.store.get("ops").dead_lettered == 60)  # type: ignore[union-attr]
        stop.set()
        await loop

    run(run_it)
    assert [r.getMessage() for r in caplog.records if "again" in r.getMessage()] == []
    assert len(list(tmp_path.rglob("*.json"))) == 60
