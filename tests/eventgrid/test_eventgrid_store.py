"""The delivery store's bookkeeping, call by call: what each outcome leaves for the list and
the next round.

Sources: docs/azure-side.md, "Event Grid": "Durability" (subscriptions and pending deliveries
kept in ``DATA_DIR/eventgrid.sqlite3``, each committed before it counts; a delivery removed
only once its receiver answered success; a store that fails stops nothing for good),
"Dead-lettering" (a record that cannot be written keeps its event, never sent again, the write
tried again later, each failure counted as ``deadLetterFailures``), and the list's counts
(deliveries, failed attempts, dead-lettered events, pending events); learn.microsoft.com,
"Event Grid message delivery and retry" (a failed delivery retried on a schedule, "Delivery
event formats": ``lastDeliveryOutcome``, ``lastHttpStatusCode``, ``deliveryAttempts``).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from postgres_support import require_postgres

from forewarn.eventgrid.payloads import Schema
from forewarn.eventgrid.store import (
    ADDED_COLUMNS,
    Delivery,
    DeliveryStore,
    Subscription,
    stamp,
    unstamp,
)
from forewarn.storage.errors import StoreUnavailableError

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
S10 = timedelta(seconds=10)


def subscription(
    name: str, state: str = "Succeeded", after: int = 0, schema: Schema = "eventgrid"
) -> Subscription:
    return Subscription(name, f"http://127.0.0.1:9/{name}", schema, state, "code", T0, after)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[DeliveryStore]:
    """Each rule on both stores: SQLite (one front-end) and the PostgreSQL outbox of a
    namespace of its own (front-ends sharing a fleet, docs/azure-side.md, "Durability"),
    which runs the same statements."""
    if request.param == "sqlite":
        made = DeliveryStore(None)
        try:
            yield made
        finally:
            made.close()
        return
    from forewarn.eventgrid.postgres import PostgresDeliveryStore, drop_outbox

    url = f"{require_postgres()}?namespace=store_{uuid.uuid4().hex[:12]}"
    shared = PostgresDeliveryStore(url)
    try:
        yield shared
    finally:
        shared.close()
        drop_outbox(url)


def enqueue(store: DeliveryStore, *numbers: int, at: datetime = T0) -> int:
    changes: list[tuple[int, datetime, str, dict[Schema, str]]] = [
        (n, at, f"id-{n}", {"eventgrid": f"g{n}", "cloudevents": f"c{n}"}) for n in numbers
    ]
    return store.enqueue(changes, cursor=max(numbers))


def test_a_subscription_reads_back_as_it_was_added_every_field(store: DeliveryStore) -> None:
    """What ``eventgrid list`` shows is what was stored: the name, endpoint, schema, state,
    validation code, expiry (a time in any zone kept as the same instant) and the change it
    starts after; the counts start at zero."""
    expires = datetime(2026, 5, 1, 14, 10, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    store.add(
        Subscription("b", "http://h/b", "cloudevents", "AwaitingManualAction", "k", expires, 7)
    )
    store.add(subscription("a"))
    store.add_duplicates("b", 2)
    assert store.get("b") == Subscription(
        "b", "http://h/b", "cloudevents", "AwaitingManualAction", "k",
        datetime(2026, 5, 1, 12, 10, 0, 5, tzinfo=UTC), 7, 0, 0, 0, "", 2, 0,
    )  # fmt: skip
    assert [s.name for s in store.subscriptions()] == ["a", "b"]  # by name
    assert store.get("c") is None
    assert store.cursor() == 0


def test_a_state_moves_only_from_the_state_named(store: DeliveryStore) -> None:
    """The handshake's end (docs/azure-side.md, "The handshake"): a subscription
    ``AwaitingManualAction`` becomes ``Succeeded`` or ``Failed``; one moved on meanwhile (by
    the validation URL) is not moved back."""
    store.add(subscription("ops", state="AwaitingManualAction"))
    store.set_state("ops", "Succeeded", was="AwaitingManualAction")
    store.set_state("ops", "Failed", "no answer", was="AwaitingManualAction")
    ops = store.get("ops")
    assert ops is not None
    assert (ops.state, ops.last_error) == ("Succeeded", "")
    store.set_state("ops", "Failed", "validation expired")
    ops = store.get("ops")
    assert ops is not None
    assert (ops.state, ops.last_error) == ("Failed", "validation expired")


def test_deliveries_go_to_validated_subscriptions_after_their_start(store: DeliveryStore) -> None:
    """A subscription receives events only once validated (docs/azure-side.md, "The
    handshake"), and only those after it was made; each schema gets its own payload; the
    cursor moves with them, in the same transaction, and again on the next batch."""
    store.add(subscription("grid"))
    store.add(subscription("cloud", schema="cloudevents", after=2))
    store.add(subscription("waiting", state="AwaitingManualAction"))
    assert enqueue(store, 1, 2, 3) == 4
    assert store.cursor() == 3
    due = store.due(T0, 10)
    assert [(d.subscription, d.grid_id, d.payload) for d in due] == [
        ("grid", "id-1", "g1"),
        ("grid", "id-2", "g2"),
        ("cloud", "id-3", "c3"),
        ("grid", "id-3", "g3"),
    ]
    first = due[0]  # the order made: by change, then by subscription name
    assert first == Delivery(first.id, "grid", "id-1", "g1", T0, T0, 0, None, "", None, "")
    assert enqueue(store, 4) == 2
    assert store.cursor() == 4
    assert store.pending() == {"grid": 4, "cloud": 2}


def test_what_is_due_oldest_first_but_those_being_sent(store: DeliveryStore) -> None:
    """docs/azure-side.md, "Never in a VM's way, nor another subscription's": what is due
    at a moment (its due time included), oldest first, to one subscription when asked, never
    one already being sent, up to the number asked for even with some skipped."""
    store.add(subscription("a"))
    store.add(subscription("b"))
    enqueue(store, 1)
    enqueue(store, 2, at=T0 + S10)
    enqueue(store, 3, at=T0 + 2 * S10)
    everything = store.due(T0 + 2 * S10, 10)
    assert [(d.subscription, d.grid_id) for d in everything] == [
        ("a", "id-1"), ("b", "id-1"), ("a", "id-2"), ("b", "id-2"), ("a", "id-3"), ("b", "id-3"),
    ]  # fmt: skip
    assert [d.grid_id for d in store.due(T0 + S10, 10)] == ["id-1", "id-1", "id-2", "id-2"]
    assert [d.grid_id for d in store.due(T0 + S10 - timedelta(microseconds=1), 10)] == [
        "id-1",
        "id-1",
    ]
    busy = [everything[0].id, everything[1].id]
    assert store.due(T0 + 2 * S10, 2, busy) == everything[2:4]
    assert store.due(T0 + 2 * S10, 2, busy, subscription="b") == [everything[3], everything[5]]
    assert store.due(T0 + 2 * S10, 1, subscription="b") == [everything[1]]


def test_the_subscriptions_with_something_due_and_the_next_due_time(store: DeliveryStore) -> None:
    """The delivery loop's turns: each subscription with something due once, by name, and
    when the next delivery is due (none when nothing waits)."""
    assert store.next_due() is None
    assert store.due_subscriptions(T0) == []
    store.add(subscription("b"))
    enqueue(store, 1, 2, at=T0 + S10)
    store.add(subscription("a", after=2))
    enqueue(store, 3, at=T0 + 2 * S10)
    assert store.due_subscriptions(T0 + S10 - timedelta(microseconds=1)) == []
    assert store.due_subscriptions(T0 + S10) == ["b"]
    assert store.due_subscriptions(T0 + 2 * S10) == ["a", "b"]
    assert store.next_due() == T0 + S10


def test_a_failed_attempt_is_kept_for_its_retry_with_its_outcome(store: DeliveryStore) -> None:
    """The page "Event Grid message delivery and retry": a failed delivery is retried; its
    attempts, last status, outcome and time are what the dead-letter record says at the end
    (``deliveryAttempts``, ``lastHttpStatusCode``, ``lastDeliveryOutcome``,
    ``lastDeliveryAttemptTime``); the list counts the failed attempt and shows the error, or
    the outcome when there is no text."""
    store.add(subscription("ops"))
    enqueue(store, 1)
    (first,) = store.due(T0, 10)
    at = T0 + timedelta(seconds=1)
    store.failed(first, at=at, status=503, outcome="ServiceUnavailable", again=T0 + S10,
                 error="503 Service Unavailable")  # fmt: skip
    assert store.due(T0 + S10 - timedelta(microseconds=1), 10) == []
    (retry,) = store.due(T0 + S10, 10)
    assert retry == Delivery(
        first.id, "ops", "id-1", "g1", T0, T0 + S10, 1, 503, "ServiceUnavailable", at, ""
    )
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.dead_lettered, ops.last_error) == (1, 0, "503 Service Unavailable")
    store.failed(retry, at=at, status=None, outcome="TimedOut", again=T0 + 4 * S10)
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.last_error) == (2, "TimedOut")
    assert store.pending() == {"ops": 1}


def test_successes_are_counted_per_subscription_and_leave(store: DeliveryStore) -> None:
    """A delivery is removed only once its receiver answered success (docs/azure-side.md,
    "Durability"); each subscription's count of deliveries grows by its own."""
    store.add(subscription("a"))
    store.add(subscription("b"))
    enqueue(store, 1, 2)
    due = store.due(T0, 10)
    store.delivered_all([d for d in due if d.subscription == "a"] + due[-1:])
    counts = {s.name: s.delivered for s in store.subscriptions()}
    assert counts == {"a": 2, "b": 1}
    assert store.pending() == {"b": 1}


def test_a_dead_letter_that_cannot_be_written_keeps_its_event(store: DeliveryStore) -> None:
    """docs/azure-side.md, "Dead-lettering": a record that cannot be written keeps its
    event, whose receiver is never asked again; the write is tried again later, each failure
    counted (``deadLetterFailures``); once written, the event is dead-lettered. The attempt
    that ended it counts as a failed one; an event given up on without an attempt (past its
    time to live) does not."""
    store.add(subscription("ops"))
    enqueue(store, 1, 2)
    first, second = store.due(T0, 10)
    at = T0 + timedelta(seconds=1)
    store.letter_waits(first, at=at, status=400, outcome="BadRequest",
                       reason="NonRetryableError", again=T0 + 6 * S10, error="disk full")  # fmt: skip
    store.letter_waits(second, at=at, status=None, outcome="", reason="TimeToLiveExceeded",
                       again=T0 + 6 * S10, error="disk still full", attempted=False)  # fmt: skip
    waiting = store.due(T0 + 6 * S10, 10)
    assert waiting == [
        Delivery(first.id, "ops", "id-1", "g1", T0, T0 + 6 * S10, 1, 400, "BadRequest", at,
                 "NonRetryableError"),
        Delivery(second.id, "ops", "id-2", "g2", T0, T0 + 6 * S10, 0, None, "", at,
                 "TimeToLiveExceeded"),
    ]  # fmt: skip
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.letter_failures, ops.dead_lettered) == (1, 2, 0)
    assert ops.last_error == "disk still full"
    store.letter_failed(waiting[0], again=T0 + 12 * S10, error="read-only")
    assert store.due(T0 + 12 * S10 - timedelta(microseconds=1), 10) == waiting[1:]
    ops = store.get("ops")
    assert ops is not None
    assert (ops.letter_failures, ops.last_error) == (3, "read-only")
    store.lettered(waiting[1])
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.dead_lettered, ops.letter_failures) == (1, 1, 3)
    assert store.pending() == {"ops": 1}


def test_removing_a_subscription_takes_its_deliveries(store: DeliveryStore) -> None:
    store.add(subscription("a"))
    store.add(subscription("b"))
    enqueue(store, 1)
    assert store.remove("a")
    assert not store.remove("a")
    assert store.pending() == {"b": 1}
    assert [s.name for s in store.subscriptions()] == ["b"]


def test_a_failing_database_is_unavailable_naming_where_and_keeps_nothing_half_done(
    tmp_path: Path,
) -> None:
    """docs/azure-side.md, "Durability": a store that fails (a full disk) stops nothing for
    good, so its failure is the store's (``StoreUnavailableError``, which the loop waits out),
    named by where it is; a transaction that failed keeps none of its changes, and the next
    one goes through once the cause is gone. The failure is made by another connection to
    the file: a trigger refusing the cursor's write, the last statement of a batch."""
    path = tmp_path / "eventgrid.sqlite3"
    store = DeliveryStore(path)
    store.add(subscription("ops"))
    enqueue(store, 1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute(
        "CREATE TRIGGER full BEFORE UPDATE ON meta BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    with pytest.raises(StoreUnavailableError) as refused:
        enqueue(store, 2)
    assert str(refused.value) == f"Event Grid's state in {path}: disk full"
    assert isinstance(refused.value.__cause__, sqlite3.Error)
    assert (store.cursor(), store.pending()) == (1, {"ops": 1})  # no delivery of change 2
    other.execute("DROP TRIGGER full")
    assert enqueue(store, 2) == 1
    assert (store.cursor(), store.pending()) == (2, {"ops": 2})
    other.execute("DROP TABLE subscriptions")
    with pytest.raises(StoreUnavailableError, match=r": no such table: subscriptions$"):
        store.get("ops")
    with pytest.raises(StoreUnavailableError, match=r": no such table: subscriptions$"):
        store.take_duplicate("ops")
    other.close()
    store.close()
    memory = DeliveryStore(None)
    memory.add(subscription("ops"))
    with pytest.raises(StoreUnavailableError, match=r"^Event Grid's state in memory: UNIQUE"):
        memory.add(subscription("ops"))
    memory.close()


def test_a_store_that_could_not_start_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    """A ``serve`` that could not start leaves its data directory as it found it
    (docs/azure-side.md, "Durability"; ``DeliveryStore.abandon``): the files this store made
    go, the write-ahead log's included; a file that was there before stays."""
    path = tmp_path / "eventgrid.sqlite3"
    made = DeliveryStore(path)
    made.add(subscription("ops"))
    assert made.made_file
    assert path.exists()
    assert Path(f"{path}-wal").exists()
    made.abandon()
    assert sorted(tmp_path.iterdir()) == []
    kept = DeliveryStore(path)
    kept.close()
    again = DeliveryStore(path)
    assert not again.made_file
    again.abandon()
    assert path.exists()
    assert not DeliveryStore(None).made_file


def test_a_file_made_before_the_added_columns_gets_them(tmp_path: Path) -> None:
    """Durability across versions: a file written before the dead-letter retries existed
    opens, with the columns added (``letter_failures`` 0, ``letter`` empty) and its rows
    kept."""
    path = tmp_path / "eventgrid.sqlite3"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute(
        "CREATE TABLE subscriptions (name TEXT PRIMARY KEY, endpoint TEXT NOT NULL,"
        " schema TEXT NOT NULL, state TEXT NOT NULL, validation_code TEXT NOT NULL,"
        " expires TEXT NOT NULL, after_sequence INTEGER NOT NULL, delivered INTEGER DEFAULT 0,"
        " failed INTEGER DEFAULT 0, dead_lettered INTEGER DEFAULT 0, last_error TEXT DEFAULT '',"
        " duplicates INTEGER DEFAULT 0)"
    )
    old.execute(
        "CREATE TABLE deliveries (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " subscription TEXT NOT NULL, grid_id TEXT NOT NULL, payload TEXT NOT NULL,"
        " published TEXT NOT NULL, due TEXT NOT NULL, attempts INTEGER DEFAULT 0,"
        " last_status INTEGER, last_outcome TEXT DEFAULT '', last_attempt TEXT DEFAULT '')"
    )
    old.execute(
        "INSERT INTO subscriptions (name, endpoint, schema, state, validation_code, expires,"
        " after_sequence, failed) VALUES ('ops', 'http://h/', 'eventgrid', 'Succeeded', 'c',"
        " ?, 0, 4)",
        (stamp(T0),),
    )
    old.execute(
        "INSERT INTO deliveries (subscription, grid_id, payload, published, due)"
        " VALUES ('ops', 'id-1', 'g1', ?, ?)",
        (stamp(T0), stamp(T0)),
    )
    old.close()
    assert [(t, c) for t, c, _ in ADDED_COLUMNS] == [
        ("subscriptions", "letter_failures"),
        ("deliveries", "letter"),
    ]
    store = DeliveryStore(path)
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.letter_failures) == (4, 0)
    (waiting,) = store.due(T0, 10)
    assert (waiting.grid_id, waiting.letter) == ("id-1", "")
    store.close()
    reopened = DeliveryStore(path)  # the columns there now: added once
    assert reopened.get("ops") == ops
    reopened.close()


@pytest.mark.usefixtures("server_zone_east")
def test_stored_times_are_utc_and_sort_as_text() -> None:
    """Times are stored as fixed-width UTC text, so the database orders due times as text
    ([ours], the store's module docstring), whatever the server's own zone."""
    zoned = datetime(2026, 5, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    assert stamp(zoned) == "2026-05-01T12:00:00.000005Z"
    assert unstamp("2026-05-01T12:00:00.000005Z") == zoned
    assert unstamp(stamp(zoned)).tzinfo is UTC
