"""Event Grid's state in PostgreSQL, the rules of its own: one outbox per namespace, shared by
the fleet's front-ends, bounded, and a failure said as the store's.

Sources: docs/azure-side.md, "Event Grid" (with a shared PostgreSQL store "the subscriptions
and pending deliveries are the fleet's, in a schema of the namespace's own in that database,
so any front-end may be asked"); docs/scale-out.md ("namespace the fleet's name (default
`default`; several fleets share a database, one namespace each), `schema` the PostgreSQL
schema holding the tables (default `public`"; "A silent PostgreSQL": "connecting waits 5 s at
most", Event Grid's store "each of its calls waits 5 s at most"; "forewarn store delete"
removes a namespace's Event Grid subscriptions and deliveries). What the two stores share,
call by call, is in test_eventgrid_store.py, run on both.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from postgres_support import require_postgres
from psycopg import sql

from forewarn.eventgrid import postgres
from forewarn.eventgrid.payloads import Schema
from forewarn.eventgrid.postgres import PostgresDeliveryStore, drop_outbox, outbox_schema
from forewarn.eventgrid.store import Subscription
from forewarn.storage.errors import StoreUnavailableError

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
#: A server nothing listens on (the discard port, closed here): refused at once.
NOWHERE = "postgresql://postgres@127.0.0.1:9/test"


def subscription(name: str) -> Subscription:
    return Subscription(name, f"http://127.0.0.1:9/{name}", "eventgrid", "Succeeded", "c", T0, 0)


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    """Store URLs of namespaces of their own; their outboxes dropped afterwards."""
    made: list[str] = []
    yield made
    for url in made:
        drop_outbox(url)


def fresh(namespaces: list[str], extra: str = "") -> str:
    url = f"{require_postgres()}?namespace=outbox_{uuid.uuid4().hex[:12]}{extra}"
    namespaces.append(url)
    return url


def test_front_ends_of_one_namespace_share_its_subscriptions_and_deliveries(
    namespaces: list[str],
) -> None:
    """docs/azure-side.md: the subscriptions and pending deliveries are the fleet's, "so any
    front-end may be asked": what one front-end's store commits, another's reads at once."""
    url = fresh(namespaces)
    one, other = PostgresDeliveryStore(url), PostgresDeliveryStore(url)
    try:
        one.add(subscription("ops"))
        assert [s.name for s in other.subscriptions()] == ["ops"]
        one.enqueue([(1, T0, "id-1", {"eventgrid": "g1", "cloudevents": "c1"})], cursor=1)
        assert other.pending() == {"ops": 1}
        assert other.cursor() == 1
        assert other.remove("ops")
        assert one.subscriptions() == []
    finally:
        one.close()
        other.close()


def test_each_namespace_has_an_outbox_of_its_own(namespaces: list[str]) -> None:
    """docs/scale-out.md: "several fleets share a database, one namespace each", and the
    PostgreSQL `schema` of the journal is another place: neither sees the other's
    subscriptions (two fleets sharing one would each deliver the other's events)."""
    blue = fresh(namespaces)
    green = fresh(namespaces)
    elsewhere = blue + "&schema=elsewhere"
    namespaces.append(elsewhere)
    stores = [PostgresDeliveryStore(u) for u in (blue, green, elsewhere)]
    try:
        stores[0].add(subscription("ops"))
        assert [s.name for s in stores[0].subscriptions()] == ["ops"]
        assert stores[1].subscriptions() == []
        assert stores[2].subscriptions() == []
        assert len({s.schema_name for s in stores}) == 3
    finally:
        for store in stores:
            store.close()


def test_the_defaults_of_a_namespace_and_schema_name_the_same_outbox() -> None:
    """docs/scale-out.md: `namespace` defaults to `default`, `schema` to `public`: a URL
    without them is the same fleet as one naming the defaults, so the same outbox; forewarn's
    parameters are not passed to libpq, any other is."""
    base = "postgresql://u@db.example:5432/forewarn"
    assert outbox_schema(base) == outbox_schema(f"{base}?namespace=default&schema=public")
    assert outbox_schema(base) != outbox_schema(f"{base}?namespace=blue")
    assert outbox_schema(base) != outbox_schema(f"{base}?schema=fleets")
    conninfo, _ = outbox_schema(f"{base}?namespace=blue&sslmode=require&schema=fleets")
    assert conninfo == f"{base}?sslmode=require"


def test_an_outbox_keeps_its_name_from_one_release_to_the_next() -> None:
    """The outbox's name is where an existing fleet's subscriptions and pending deliveries
    are: a release that named it otherwise would start every fleet afresh with nothing
    subscribed. These are the names existing fleets' outboxes have."""
    base = "postgresql://postgres@127.0.0.1:5432/test"
    assert outbox_schema(base)[1] == "forewarn_eventgrid_3bb7f9e77cb34e89"
    assert (
        outbox_schema(f"{base}?namespace=blue&schema=fleets&sslmode=disable")[1]
        == "forewarn_eventgrid_4f36dc357e4ba530"
    )


def test_the_store_keeps_its_tables_in_the_namespace_outbox(namespaces: list[str]) -> None:
    """The tables are in the outbox named for the namespace (the one ``forewarn store
    delete`` drops), none in the database's default schema."""
    url = fresh(namespaces)
    conninfo, name = outbox_schema(url)
    store = PostgresDeliveryStore(url)
    try:
        assert store.schema_name == name
        store.add(subscription("ops"))
        with psycopg.connect(conninfo, autocommit=True) as connection:
            row = connection.execute(
                sql.SQL("SELECT name FROM {}.subscriptions").format(sql.Identifier(name))
            ).fetchall()
        assert row == [("ops",)]
    finally:
        store.close()


def test_an_outbox_made_before_the_added_columns_gets_them(namespaces: list[str]) -> None:
    """An outbox of an earlier release (no ``letter_failures``, no ``letter``) is opened, its
    subscriptions kept, the columns added: a dead letter waiting is counted as on a new one."""
    url = fresh(namespaces)
    conninfo, name = outbox_schema(url)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
        connection.execute(
            "CREATE TABLE subscriptions (name text PRIMARY KEY, endpoint text NOT NULL,"
            " schema text NOT NULL, state text NOT NULL, validation_code text NOT NULL,"
            " expires text NOT NULL, after_sequence bigint NOT NULL, delivered bigint DEFAULT 0,"
            " failed bigint DEFAULT 0, dead_lettered bigint DEFAULT 0, last_error text DEFAULT '',"
            " duplicates bigint DEFAULT 0)"
        )
        connection.execute(
            "CREATE TABLE deliveries (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " subscription text NOT NULL, grid_id text NOT NULL, payload text NOT NULL,"
            " published text NOT NULL, due text NOT NULL, attempts integer DEFAULT 0,"
            " last_status integer, last_outcome text DEFAULT '', last_attempt text DEFAULT '')"
        )
        connection.execute(
            "INSERT INTO subscriptions (name, endpoint, schema, state, validation_code, expires,"
            " after_sequence) VALUES ('old', 'http://h/old', 'eventgrid', 'Succeeded', 'c',"
            " '2026-05-01T12:00:00.000000Z', 0)"
        )
    store = PostgresDeliveryStore(url)
    try:
        old = store.get("old")
        assert old is not None
        assert (old.letter_failures, old.state) == (0, "Succeeded")
        store.enqueue([(1, T0, "id-1", {"eventgrid": "g1", "cloudevents": "c1"})], cursor=1)
        (waiting,) = store.due(T0, 10)
        assert waiting.letter == ""
        store.letter_waits(waiting, at=T0, status=400, outcome="BadRequest",
                           reason="NonRetryableError", again=T0, error="disk full")  # fmt: skip
        (waiting,) = store.due(T0, 10)
        assert waiting.letter == "NonRetryableError"
        old = store.get("old")
        assert old is not None
        assert old.letter_failures == 1
    finally:
        store.close()


def test_a_failing_outbox_is_the_store_s_failure_named_and_recovers(
    namespaces: list[str],
) -> None:
    """docs/azure-side.md, "Durability": a store that fails stops nothing for good, so each
    failure is the store's (``StoreUnavailableError``, which the delivery loop waits out),
    named as Event Grid's state in PostgreSQL: a read, a count, a transaction, whichever
    statement meets it; a transaction refused keeps none of its changes, and once the cause
    is gone the store goes on. The failure is the outbox dropped under the store."""
    url = fresh(namespaces)
    store = PostgresDeliveryStore(url)
    try:
        store.add(subscription("ops"))
        store.add_duplicates("ops", 1)
        assert drop_outbox(url)
        for call in (
            store.subscriptions,  # a read
            lambda: store.take_duplicate("ops"),  # a count
            lambda: store.add(subscription("more")),  # a transaction
        ):
            with pytest.raises(StoreUnavailableError) as failed:
                call()
            assert str(failed.value).startswith("Event Grid's state in PostgreSQL: ")
            assert "subscriptions" in str(failed.value)  # what PostgreSQL said
    finally:
        store.close()
    again = PostgresDeliveryStore(url)
    try:
        assert again.subscriptions() == []  # the outbox made afresh, nothing half done
    finally:
        again.close()


def test_a_transaction_refused_part_way_keeps_none_of_it(namespaces: list[str]) -> None:
    """A batch of deliveries and the cursor are one transaction: a refusal of its last
    statement (a trigger on the cursor's row, as a full disk would) leaves neither."""
    url = fresh(namespaces)
    conninfo, name = outbox_schema(url)
    store = PostgresDeliveryStore(url)
    try:
        store.add(subscription("ops"))
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
            connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger AS"
                " $$ BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql"
            )
            connection.execute(
                "CREATE TRIGGER refusing BEFORE INSERT OR UPDATE ON meta"
                " FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        changes: list[tuple[int, datetime, str, dict[Schema, str]]] = [
            (1, T0, "id-1", {"eventgrid": "g1", "cloudevents": "c1"})
        ]
        with pytest.raises(StoreUnavailableError, match=r"^Event Grid's state in PostgreSQL: "):
            store.enqueue(changes, cursor=1)
        assert store.pending() == {}
        assert store.cursor() == 0
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP TRIGGER refusing ON {}.meta").format(sql.Identifier(name))
            )
        store.enqueue(changes, cursor=1)
        assert (store.pending(), store.cursor()) == ({"ops": 1}, 1)
    finally:
        store.close()


def test_an_unreachable_server_is_the_store_s_failure() -> None:
    """Opening the outbox, or dropping it, on a server that cannot be reached fails as the
    store's failure, named; nothing waits on it."""
    with pytest.raises(StoreUnavailableError, match=r"^Event Grid's state in PostgreSQL: "):
        PostgresDeliveryStore(NOWHERE)
    with pytest.raises(StoreUnavailableError, match=r"^Event Grid's state in PostgreSQL: "):
        drop_outbox(NOWHERE)


def test_dropping_an_outbox_says_whether_there_was_one(namespaces: list[str]) -> None:
    """``forewarn store delete`` removes the namespace's Event Grid state and says whether
    there was any (docs/scale-out.md)."""
    url = fresh(namespaces)
    PostgresDeliveryStore(url).close()
    assert drop_outbox(url)
    assert not drop_outbox(url)


def test_the_store_s_bounds_are_the_documented_ones() -> None:
    """docs/scale-out.md, "A silent PostgreSQL": "connecting waits 5 s at most" and Event
    Grid's store "each of its calls waits 5 s at most before its connection is shut down
    under it" (a call's bound at work: test_eventgrid_silent_store.py)."""
    assert postgres.CONNECT_SECONDS == 5.0
    assert postgres.CALL_SECONDS == 5.0
