"""Event Grid's state in PostgreSQL, for front-ends sharing a fleet (``--store postgresql://``).

The same tables and statements as :class:`~forewarn.eventgrid.store.DeliveryStore`, in a schema
of the namespace's own (``forewarn_eventgrid_`` and a digest of the journal's schema and
namespace), so every front-end sees the subscriptions any of them created, and whichever is
the fleet's leader delivers from the one list of pending deliveries and one cursor: only the
leader delivers (:mod:`forewarn.cluster.tasks`), and a new leader goes on where the last one's
committed work ends, so a delivery is made twice at most across a change of leader, as at
least once allows.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql

from forewarn.eventgrid.store import DeliveryStore
from forewarn.storage import _deadlines as deadlines
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import shut_socket, with_bounds
from forewarn.storage.urls import postgres_target

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS subscriptions (name text PRIMARY KEY, endpoint text NOT NULL,"
    " schema text NOT NULL, state text NOT NULL, validation_code text NOT NULL,"
    " expires text NOT NULL, after_sequence bigint NOT NULL, delivered bigint DEFAULT 0,"
    " failed bigint DEFAULT 0, dead_lettered bigint DEFAULT 0, last_error text DEFAULT '',"
    " duplicates bigint DEFAULT 0, letter_failures bigint DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS deliveries (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " subscription text NOT NULL, grid_id text NOT NULL, payload text NOT NULL,"
    " published text NOT NULL, due text NOT NULL, attempts integer DEFAULT 0,"
    " last_status integer, last_outcome text DEFAULT '', last_attempt text DEFAULT '',"
    " letter text DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (due, id)",
    "CREATE INDEX IF NOT EXISTS deliveries_subscription_due ON deliveries (subscription, due, id)",
    # the columns added since the first release (store.ADDED_COLUMNS), on an older schema
    "ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS letter_failures bigint DEFAULT 0",
    "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS letter text DEFAULT ''",
)


def outbox_schema(url: str) -> tuple[str, str]:
    """The connection string of the journal at ``url`` and the name of its namespace's Event
    Grid schema: one per namespace, so fleets sharing a database share no subscription."""
    conninfo, namespace, schema = postgres_target(url)
    scope = f"{schema or 'public'}\x00{namespace or 'default'}"
    return conninfo, "forewarn_eventgrid_" + hashlib.sha256(scope.encode()).hexdigest()[:16]


def drop_outbox(url: str) -> bool:
    """Drop the Event Grid schema of the namespace at ``url`` (subscriptions, deliveries,
    dead letters), as ``forewarn store delete`` does with the namespace; whether there was
    one. StoreUnavailableError when the server cannot be reached."""
    conninfo, name = outbox_schema(url)
    try:
        # one transaction, committed as the block ends (psycopg's connection context)
        with psycopg.connect(conninfo) as connection:
            found = connection.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", [name]
            ).fetchone()
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
            )
    except psycopg.Error as exc:
        raise StoreUnavailableError(f"Event Grid's state in PostgreSQL: {exc}") from exc
    return found is not None


def _statement(text: str) -> sql.SQL:
    """The shared statements' ``?`` placeholders as psycopg's."""
    return sql.SQL(text.replace("?", "%s"))


#: Seconds one call on Event Grid's store may wait on the server before its socket is shut
#: down under it (a server gone silent): the delivery loop then meets a store failure, as for
#: any other, instead of waiting for ever (and holding up serve's stop).
CALL_SECONDS = 5.0
#: Seconds to reach the server.
CONNECT_SECONDS = 5.0


class PostgresDeliveryStore(DeliveryStore):
    """:class:`DeliveryStore` on the PostgreSQL database of the journal at ``url``: each
    connection with the journal's TCP bounds, each call within :data:`CALL_SECONDS`."""

    #: No file: nothing for :meth:`abandon` to remove.
    path = None
    made_file = False

    def __init__(self, url: str) -> None:
        conninfo, name = outbox_schema(url)
        conninfo = with_bounds(conninfo, CONNECT_SECONDS)
        self._lock = threading.Lock()
        self._conninfo = conninfo
        self._schema_name = name
        with self._lock:
            self._pg = self._connect()

    @property
    def schema_name(self) -> str:
        """The namespace's own schema in the database (what a test removes afterwards)."""
        return self._schema_name

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection on the namespace's schema (made if missing); StoreUnavailableError
        when the server cannot be reached."""
        name = self._schema_name
        try:
            connection = psycopg.connect(self._conninfo, autocommit=True)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
                connection.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(name))
                )
                connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
                for statement in _SCHEMA:
                    connection.execute(_statement(statement))
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"Event Grid's state in PostgreSQL: {exc}") from exc
        return connection

    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, made again when the last one was lost (a server restarted or
        cut): a delivery store outlives any one connection."""
        if self._pg.closed:  # a broken connection is closed too (psycopg's ``broken``)
            self._pg = self._connect()
        return self._pg

    def close(self) -> None:
        with self._lock:
            self._pg.close()

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection, its socket shut down under a call still waiting after
        :data:`CALL_SECONDS`; held under the lock."""
        connection = self._connection()
        deadline = deadlines.after(CALL_SECONDS, lambda: shut_socket(connection))
        try:
            yield connection
        finally:
            deadline.cancel()

    def _transaction(self, statements: Iterable[tuple[str, Sequence[Any]]]) -> None:
        with self._lock:
            try:
                with self._bounded() as connection, connection.transaction():
                    for text, values in statements:
                        connection.execute(_statement(text), values)
            except psycopg.Error as exc:
                raise StoreUnavailableError(f"Event Grid's state in PostgreSQL: {exc}") from exc

    def _rows(self, text: str, values: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                with self._bounded() as connection:
                    return list(connection.execute(_statement(text), values).fetchall())
            except psycopg.Error as exc:
                raise StoreUnavailableError(f"Event Grid's state in PostgreSQL: {exc}") from exc

    def _count(self, text: str, values: Sequence[Any]) -> int:
        with self._lock:
            try:
                with self._bounded() as connection:
                    return int(connection.execute(_statement(text), values).rowcount)
            except psycopg.Error as exc:
                raise StoreUnavailableError(f"Event Grid's state in PostgreSQL: {exc}") from exc


__all__ = ["PostgresDeliveryStore", "drop_outbox", "outbox_schema"]
