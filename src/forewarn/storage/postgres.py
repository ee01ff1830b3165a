"""A store in PostgreSQL, for fleets served by several front-ends or kept on a database server.

Several fleets share one database: every row carries its ``namespace`` (the fleet's name).
Several front-ends share one fleet: each appends through its own connection, and the per-namespace
counter row in ``forewarn_namespaces`` hands out sequence numbers. Taking the next number
updates that row, which locks it until the transaction commits, so numbers are handed out in
commit order: a reader never sees sequence ``n + 1`` without ``n``, and a transaction that rolls
back rolls its numbers back too. ``records(after=n)`` lets a front-end follow what the others
appended, and ``wait_for_append`` wakes on the NOTIFY each append sends on commit.

Records are stored as ``json`` (not ``jsonb``) so the text reads back exactly as written, key
order included, while staying queryable from ``psql``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from forewarn.storage import _deadlines as deadlines
from forewarn.storage.errors import (
    AppendConflictError,
    CorruptStoreError,
    JournalClosedError,
    NewerSchemaError,
    NotSerializableError,
    StorageError,
    StoreSchemaError,
    StoreUnavailableError,
    StoreUrlError,
)
from forewarn.storage.journal import (
    check_after,
    check_metadata,
    decode_record,
    encode_batch,
    encode_record,
)

SCHEMA_VERSION = 1
DEFAULT_NAMESPACE = "default"
DEFAULT_SCHEMA = "public"
MAX_NAMESPACE_CHARS = 200
_PAGE = 500

Connection = psycopg.Connection[TupleRow]
Migration = Callable[[Connection, str], None]
#: ``MIGRATIONS[n]`` turns schema version ``n`` into ``n + 1`` (given the connection and the
#: PostgreSQL schema name); none exist yet.
MIGRATIONS: Mapping[int, Migration] = {}

_CREATE_V1 = (
    "CREATE TABLE {schema}.forewarn_schema (version integer NOT NULL)",
    "CREATE TABLE {schema}.forewarn_namespaces ("
    " namespace text PRIMARY KEY,"
    " last_sequence bigint NOT NULL DEFAULT 0 CHECK (last_sequence >= 0))",
    "CREATE TABLE {schema}.forewarn_metadata ("
    " namespace text NOT NULL REFERENCES {schema}.forewarn_namespaces ON DELETE CASCADE,"
    " key text NOT NULL, value text NOT NULL, PRIMARY KEY (namespace, key))",
    "CREATE TABLE {schema}.forewarn_records ("
    " namespace text NOT NULL REFERENCES {schema}.forewarn_namespaces ON DELETE CASCADE,"
    " sequence bigint NOT NULL CHECK (sequence > 0), body json NOT NULL,"
    " appended_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, sequence))",
)
#: The front-ends serving each namespace and how far each has applied its journal, so a
#: writer can wait for the others before it answers (forewarn.cluster). Added beside schema
#: version 1 rather than by a migration: a forewarn that does not know it ignores it.
_CREATE_FRONT_ENDS = (
    "CREATE TABLE IF NOT EXISTS {schema}.forewarn_front_ends ("
    " namespace text NOT NULL REFERENCES {schema}.forewarn_namespaces ON DELETE CASCADE,"
    " front_end text NOT NULL, applied bigint NOT NULL,"
    " heartbeat timestamptz NOT NULL DEFAULT clock_timestamp(),"
    " PRIMARY KEY (namespace, front_end))"
)
#: How often a writer waiting for the other front-ends looks at their positions when no
#: notification woke it (one may arrive between two looks).
_APPLIED_LOOK_SECONDS = 0.02
#: How long a background call (the follower's wait beyond its own timeout, the leader
#: lock's, a goodbye on closing) may go unanswered before its connection is severed.
_ANSWER_SECONDS = 5.0
#: TCP keepalive and ``tcp_user_timeout`` on every connection (libpq's options, unless the
#: URL gives its own): a peer that vanished without a word is found out within about 10 s,
#: where the operating system's defaults wait two hours (keepalive) or fifteen minutes (data
#: sent and never acknowledged). A server that still acknowledges but never answers (a hung
#: host, a proxy in between) is bounded by :meth:`PostgresJournal.bounded` instead.
_TCP_BOUNDS: Mapping[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,
}


#: The server's side of the same bounds, asked for each session (libpq's ``options``, unless
#: the URL gives its own): a front-end that vanished without a word (a network dropped, a
#: machine lost) leaves a session the server would keep for hours by the operating system's
#: defaults, holding the fleet's leader lock (:class:`Leadership`) all along, so no other
#: front-end could lead. With these the server ends it within about 10 s.
SERVER_KEEPALIVES = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=2 "
    "-c tcp_user_timeout=10000"
)


def with_bounds(
    conninfo: str, connect_timeout: float, *, application_name: str | None = None
) -> str:
    """``conninfo`` with the client's own bounds (:data:`_TCP_BOUNDS`, the server's side of
    them, :data:`SERVER_KEEPALIVES`, a connect timeout) wherever the URL gives none: every
    PostgreSQL connection forewarn opens, the journal's and Event Grid's store's."""
    given = conninfo_to_dict(conninfo)
    extra: dict[str, str | int] = {k: v for k, v in _TCP_BOUNDS.items() if k not in given}
    if "connect_timeout" not in given:
        # libpq waits forever by default; a dead server must be reported, not waited on.
        extra["connect_timeout"] = max(1, round(connect_timeout))
    if "options" not in given:
        extra["options"] = SERVER_KEEPALIVES
    if application_name is not None and "application_name" not in given:
        extra["application_name"] = application_name[:63]
    # With nothing to add, make_conninfo gives the conninfo back as it is.
    return make_conninfo(conninfo, **extra)


def _check_names(namespace: str, schema: str) -> None:
    if not namespace or len(namespace) > MAX_NAMESPACE_CHARS or "\x00" in namespace:
        raise StoreUrlError(f"a namespace is 1 to {MAX_NAMESPACE_CHARS} characters, no NUL")
    if not (schema.isidentifier() and schema.isascii() and len(schema) <= 63):
        raise StoreUrlError(f"schema {schema!r} is not a plain SQL identifier")


def describe(conninfo: str) -> str:
    """Where a conninfo points, without its password."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise StoreUrlError(f"unreadable PostgreSQL URL: {exc}") from exc
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def shut_socket(conn: Connection | None) -> None:
    """Shut ``conn``'s socket down, from any thread: a call waiting on it in another thread
    fails at once as on a lost connection (the descriptor stays open until the connection is
    closed, so nothing else can be given its number meanwhile)."""
    if conn is None:
        return
    with contextlib.suppress(OSError, psycopg.Error):
        duplicate = socket.socket(fileno=os.dup(conn.pgconn.socket))
        with duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def _answered_within(seconds: float, *conns: Callable[[], Connection | None]) -> Iterator[None]:
    """Calls on the connections ``conns`` give, made in the block, end ``seconds`` from
    now at the latest: a server that stops answering while its host still acknowledges (a
    hung server, a proxy gone silent) is not seen by TCP's own bounds. For the background
    connections (the follower's, the leader's), so that they, and a shutdown waiting on
    them, never wait on it for ever."""

    def sever() -> None:
        for conn in conns:
            shut_socket(conn())

    deadline = deadlines.after(seconds, sever)
    try:
        yield
    finally:
        deadline.cancel()


def _wait_for_notify(conn: Connection, timeout: float) -> None:
    """Until a notification reaches ``conn`` (or anything else its socket receives: the
    caller's next query reads it), or ``timeout`` seconds: one wait on the socket.
    psycopg's own ``notifies(timeout=...)`` wakes every 0.1 s for the whole wait, ten
    wake-ups a second for every idle follower."""
    for _ in conn.notifies(timeout=0, stop_after=1):  # one already read, during a query
        return
    waiting = select.poll()
    waiting.register(conn.pgconn.socket, select.POLLIN)
    waiting.poll(max(0, math.ceil(timeout * 1000)))


def _lock_key(purpose: str, schema: str, namespace: str) -> int:
    """A signed 64-bit advisory lock key for one purpose of one namespace."""
    digest = hashlib.sha256(f"forewarn:{purpose}\x00{schema}\x00{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], signed=True)  # big-endian, Python's default


class PostgresJournal:
    """One namespace of a PostgreSQL journal; several instances may share it, across processes."""

    def __init__(
        self,
        conninfo: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        schema: str = DEFAULT_SCHEMA,
        connect_timeout: float = 5.0,
        schema_version: int = SCHEMA_VERSION,
        migrations: Mapping[int, Migration] = MIGRATIONS,
    ) -> None:
        _check_names(namespace, schema)
        self.namespace = namespace
        self.schema = schema
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._where = f"PostgreSQL journal {namespace!r} in {schema} at {describe(conninfo)}"
        digest = hashlib.sha256(f"{schema}\x00{namespace}".encode()).hexdigest()[:40]
        self._channel = f"forewarn_{digest}"
        #: Where front-ends say they applied records (:meth:`report_applied`).
        self._applied_channel = f"forewarn_{digest}_applied"
        # Two advisory lock keys of the namespace's own: its writers' turn, and its leader.
        self._write_key = _lock_key("write", schema, namespace)
        self._leader_key = _lock_key("leader", schema, namespace)
        self._lock = threading.Lock()
        self._listen_lock = threading.Lock()
        self._listener: Connection | None = None
        self._closed = False
        #: While :meth:`bounded` runs: when calls on the writer's connection must have ended
        #: (:func:`time.monotonic`), and whether that moment came with a call still waiting.
        self._deadline: float | None = None
        self._bound = 0.0
        self._expired = False
        self._conn = self._connect()
        try:
            self._prepare(schema_version, migrations)
        except BaseException:
            self._conn.close()
            raise

    # -- connections -----------------------------------------------------------------------

    def _connect(self, timeout: float | None = None) -> Connection:
        """A new connection, waiting ``timeout`` seconds at most (the journal's connect
        timeout by default, or the URL's own)."""
        conninfo = self._conninfo
        if timeout is not None:  # the time a write has left, whatever the URL says
            conninfo = make_conninfo(conninfo, connect_timeout=max(1, round(timeout)))
        # So pg_stat_activity shows which fleet each connection serves.
        conninfo = with_bounds(
            conninfo, self._connect_timeout, application_name=f"forewarn {self.namespace}"
        )
        try:
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot reach {self._where}: {exc}") from exc

    def _connection(self) -> Connection:
        """The writer connection, opened again if the server dropped it since the last call."""
        if self._closed:
            raise JournalClosedError(f"{self._where} is closed")
        remaining = None if self._deadline is None else self._deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            self._expired = True
            raise StoreUnavailableError(self._too_late())
        if self._conn.closed:  # by close(), or broken: psycopg counts a broken one closed
            self._conn.close()
            self._conn = self._connect(remaining)
        return self._conn

    @contextlib.contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Every call on the writer's connection within the block has ended ``seconds`` from
        now: one still waiting then has its connection severed under it (the socket shut
        down, so the call fails as on a lost connection, and the server rolls back whatever
        it had begun), and later ones are refused without trying
        (:class:`StoreUnavailableError`, as for a server that cannot be reached).

        TCP's own bounds cannot see a server that hangs while its host still acknowledges
        (or a proxy in front of it that does): only a deadline of the client's own can.
        Nested blocks keep the outer deadline; :attr:`expired` says whether it came with a
        call waiting, or refused one."""
        if self._deadline is not None:
            yield
            return
        self._deadline = time.monotonic() + seconds
        self._expired = False
        deadline = deadlines.after(seconds, self._sever)
        self._bound = seconds
        try:
            yield
        finally:
            deadline.cancel()
            self._deadline = None

    def _too_late(self) -> str:
        return f"no answer from {self._where} within {self._bound:g} s"

    @property
    def expired(self) -> bool:
        """Whether the last :meth:`bounded` block ran out of time."""
        return self._expired

    def _sever(self) -> None:
        """Shut the writer connection's socket down under the call waiting on it (from the
        deadlines' thread, :mod:`forewarn.storage._deadlines`: the waiting call holds the
        journal's lock)."""
        self._expired = True
        shut_socket(self._conn)

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as exc:
            if self._expired:  # severed by bounded(): say so, not what libpq saw then
                raise StoreUnavailableError(self._too_late()) from exc
            raise StoreUnavailableError(f"lost {self._where}: {exc}") from exc
        except psycopg.errors.UndefinedTable as exc:
            raise CorruptStoreError(f"{self._where} lost its tables: {exc}") from exc
        except psycopg.DataError as exc:
            raise NotSerializableError(f"{self._where} refused a value: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"{self._where}: {exc}") from exc

    def _table(self, name: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(name))

    # -- opening -------------------------------------------------------------------------

    def _prepare(self, schema_version: int, migrations: Mapping[int, Migration]) -> None:
        conn = self._conn
        with self._translated(), conn.transaction():
            # Two front-ends starting at once must not both create the tables.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"forewarn:{self.schema}"])
            schema_id = sql.Identifier(self.schema)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema_id))
            found = self._stored_version()
            if found is None:
                for statement in _CREATE_V1:
                    conn.execute(sql.SQL(statement).format(schema=schema_id))
                conn.execute(
                    sql.SQL("INSERT INTO {} (version) VALUES (1)").format(
                        self._table("forewarn_schema")
                    )
                )
                found = 1
            if found > schema_version:
                raise NewerSchemaError(self._where, found, schema_version)
            for version in range(found, schema_version):
                migrate = migrations.get(version)
                if migrate is None:
                    raise StoreSchemaError(
                        f"{self._where}: no migration from schema version {version} to "
                        f"{version + 1}"
                    )
                migrate(conn, self.schema)
            if found != schema_version:
                conn.execute(
                    sql.SQL("UPDATE {} SET version = %s").format(self._table("forewarn_schema")),
                    [schema_version],
                )
            conn.execute(sql.SQL(_CREATE_FRONT_ENDS).format(schema=schema_id))
            conn.execute(
                sql.SQL("INSERT INTO {} (namespace) VALUES (%s) ON CONFLICT DO NOTHING").format(
                    self._table("forewarn_namespaces")
                ),
                [self.namespace],
            )

    def _stored_version(self) -> int | None:
        """The schema version, or None for a schema with no forewarn tables yet."""
        conn = self._conn

        def exists(table: str) -> bool:
            name = self._table(table).as_string()
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()
            return bool(row and row[0])

        if not exists("forewarn_schema"):
            if exists("forewarn_records") or exists("forewarn_namespaces"):
                raise CorruptStoreError(f"{self._where} has journal tables but no version table")
            return None
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}").format(self._table("forewarn_schema"))
        ).fetchall()
        if len(rows) != 1 or not isinstance(rows[0][0], int) or rows[0][0] < 1:
            raise CorruptStoreError(f"{self._where} has a damaged schema version table: {rows}")
        version: int = rows[0][0]
        return version

    # -- the journal -----------------------------------------------------------------------

    def metadata(self) -> dict[str, str]:
        with self._lock, self._translated():
            rows = (
                self._connection()
                .execute(
                    sql.SQL("SELECT key, value FROM {} WHERE namespace = %s ORDER BY key").format(
                        self._table("forewarn_metadata")
                    ),
                    [self.namespace],
                )
                .fetchall()
            )
        return {str(key): str(value) for key, value in rows}

    def set_metadata(self, key: str, value: str) -> None:
        check_metadata(key, value)
        with self._lock, self._translated():
            self._connection().execute(
                sql.SQL(
                    "INSERT INTO {} (namespace, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
                ).format(self._table("forewarn_metadata")),
                [self.namespace, key, value],
            )

    def append(self, record: Mapping[str, Any]) -> int:
        return self._extend([encode_record(record)])

    def append_many(self, records: Sequence[Mapping[str, Any]]) -> int:
        return self._extend(encode_batch(records))

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        texts = encode_batch(records)
        expected = check_after(expected_last)
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                return self._insert(conn, texts, expected)

    def _extend(self, texts: list[str]) -> int:
        if not texts:
            return self.last_sequence()
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                return self._insert(conn, texts, None)

    def _insert(self, conn: Connection, texts: list[str], expected: int | None) -> int:
        """Take the next sequence numbers from the counter row (all of them, or none when
        ``expected`` is given and the journal no longer ends there), insert, and notify."""
        condition = sql.SQL("" if expected is None else " AND last_sequence = %s")
        params: list[object] = [len(texts), self.namespace]
        if expected is not None:
            params.append(expected)
        # One statement: the counter moves, the records go in after the old end, and the
        # NOTIFY (delivered only on commit, so a woken follower always finds the records) is
        # queued, or, when the condition fails, none of the three happens. The records go as
        # a binary array: in text form each quote of their JSON is escaped, which took 2 ms
        # of a 100-record append's 3.
        params.extend([self.namespace, len(texts), texts, self._channel])
        row = conn.execute(
            sql.SQL(
                "WITH bumped AS (UPDATE {} SET last_sequence = last_sequence + %s "
                "WHERE namespace = %s{} RETURNING last_sequence), "
                "inserted AS (INSERT INTO {} (namespace, sequence, body) "
                "SELECT %s, bumped.last_sequence - %s + ordinality, body::json "
                "FROM bumped, unnest(%b::text[]) WITH ORDINALITY AS batch(body, ordinality)) "
                "SELECT last_sequence, pg_notify(%s, last_sequence::text) FROM bumped"
            ).format(
                self._table("forewarn_namespaces"), condition, self._table("forewarn_records")
            ),
            params,
        ).fetchone()
        if row is None:
            found = self._read_last(conn)  # raises when the namespace row itself is gone
            raise AppendConflictError(self._where, expected or 0, found)
        return int(row[0])

    # -- several writers -------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, lock_timeout: float = 5.0) -> Iterator[ExclusiveWrite]:
        """One transaction holding the namespace's write lock (``pg_advisory_xact_lock``)
        from its first read on: what the writer reads in it is everything committed before,
        and what it appends with :meth:`ExclusiveWrite.append_if` commits when the block ends
        without an error.

        Every front-end of a fleet writes this way, so they take turns: each one catches up
        with the others' records, decides, and appends, with nobody appending in between.
        Waiting for the lock is bounded by ``lock_timeout`` (a stuck writer elsewhere is an
        error here, not a hang); the lock goes with the transaction, however it ends.

        The transaction runs in libpq's pipeline mode: statements are sent as they are made
        and the server is only waited on where a result is needed. Beginning, taking the lock
        and the first read are one round trip (the lock is held once that read answers, and
        is taken before it on the server), an append with its reports another, and the
        commit a third, where a statement each way took eleven. ``BEGIN`` and ``COMMIT`` are
        sent as statements of the pipeline: psycopg's own transaction block would wait on
        the server twice more.
        """
        with self._lock, self._translated():
            conn = self._connection()
            try:
                with conn.pipeline() as pipeline:
                    milliseconds = max(1, round(lock_timeout * 1000))
                    conn.execute("BEGIN")
                    conn.execute(f"SET LOCAL lock_timeout = {milliseconds}")
                    conn.execute(f"SET LOCAL statement_timeout = {milliseconds * 2}")
                    # The server ends the session (rolling back) if the next statement keeps
                    # it waiting ``idle``: a COMMIT held up on its way (by a network or a
                    # proxy gone silent) finds no transaction when it arrives late.
                    idle = self._idle_bound()
                    idle_ms = max(1, round(idle * 1000))
                    conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {idle_ms}")
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._write_key])
                    yield ExclusiveWrite(self, conn)
                    if self._deadline is not None:
                        # The idle timeout counts only once the server has answered a Sync
                        # (results fetched in a pipeline are asked for without one): one
                        # round trip more for a write that is bounded.
                        pipeline.sync()
                        if time.monotonic() + idle > self._deadline:
                            # Sent now, a COMMIT held up on its way could commit after the
                            # bound, once its writer was told the write failed: only one
                            # sent while the server's idle timeout ends first may go.
                            self._expired = True
                            raise StoreUnavailableError(self._too_late())
                    conn.execute("COMMIT")  # answered as the pipeline ends: done, or raised
            except BaseException:
                self._roll_back(conn)
                raise

    def _idle_bound(self) -> float:
        """How long the server waits, in a write's transaction, for the writer's next
        statement: half the write's time left (:meth:`bounded`), so that a COMMIT sent in
        the first half can only commit before the bound is over; 10 s unbounded."""
        if self._deadline is None:
            return 10.0
        return max((self._deadline - time.monotonic()) / 2, 0.001)

    @staticmethod
    def _roll_back(conn: Connection) -> None:
        """End a transaction of :meth:`exclusive` that failed, keeping the connection when
        the server can still roll it back; otherwise the connection is closed, which rolls
        the transaction back on the server as well (and the next call opens another)."""
        if conn.closed:
            return
        try:
            if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()

    def another(self) -> PostgresJournal:
        """A second journal on the same namespace, with connections of its own (a follower
        reading beside a writer)."""
        return PostgresJournal(
            self._conninfo,
            namespace=self.namespace,
            schema=self.schema,
            connect_timeout=self._connect_timeout,
        )

    def delete(self) -> int:
        """Delete the namespace (``forewarn store delete``): its records, metadata and
        front-ends' positions go with its row (``ON DELETE CASCADE``); how many records it
        held. The caller holds its :meth:`leadership`, so no front-end is serving it."""
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._write_key])
                row = conn.execute(
                    sql.SQL("DELETE FROM {} WHERE namespace = %s RETURNING last_sequence").format(
                        self._table("forewarn_namespaces")
                    ),
                    [self.namespace],
                ).fetchone()
        return 0 if row is None else int(row[0])

    def leadership(self) -> Leadership:
        """The namespace's leader lock, on a connection of its own (see :class:`Leadership`)."""
        return Leadership(self, self._leader_key)

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        check_after(after)
        if self._closed:
            raise JournalClosedError(f"{self._where} is closed")
        return self._iterate(after)

    def _iterate(self, after: int) -> Iterator[tuple[int, dict[str, Any]]]:
        query = sql.SQL(
            "SELECT sequence, body::text FROM {} WHERE namespace = %s AND sequence > %s "
            "ORDER BY sequence LIMIT %s"
        ).format(self._table("forewarn_records"))
        while True:
            with self._lock, self._translated():
                page = self._connection().execute(query, [self.namespace, after, _PAGE]).fetchall()
            for sequence, body in page:
                yield int(sequence), decode_record(body, int(sequence), self._where)
            if len(page) < _PAGE:
                return
            after = int(page[-1][0])

    def last_sequence(self) -> int:
        with self._lock, self._translated():
            return self._read_last(self._connection())

    def _read_last(self, conn: Connection) -> int:
        row = conn.execute(
            sql.SQL("SELECT last_sequence FROM {} WHERE namespace = %s").format(
                self._table("forewarn_namespaces")
            ),
            [self.namespace],
        ).fetchone()
        if row is None:
            raise CorruptStoreError(f"{self._where}: the namespace row is gone")
        return int(row[0])

    def wait_for_append(self, after: int, timeout: float) -> int:
        """Wait on LISTEN, on a connection of its own so appends are never held up.

        LISTEN is in force before the sequence is read, so an append committed between the
        read and the wait still wakes the waiter.
        """
        check_after(after)
        deadline = time.monotonic() + max(timeout, 0.0)
        bound = max(timeout, 0.0) + _ANSWER_SECONDS
        with (
            self._listen_lock,
            self._translated(),
            _answered_within(bound, lambda: self._listener),
        ):
            listener = self._listening()
            while True:
                if self._closed:
                    raise JournalClosedError(f"{self._where} is closed")
                last = self._read_last(listener)
                remaining = deadline - time.monotonic()
                if last > after or remaining <= 0:
                    return last
                _wait_for_notify(listener, remaining)

    def _listening(self) -> Connection:
        if self._closed:
            raise JournalClosedError(f"{self._where} is closed")
        listener = self._listener
        if listener is None or listener.closed:
            if listener is not None:
                listener.close()
            listener = self._connect()
            listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self._listener = listener
        return listener

    # -- front-ends and how far each has applied -------------------------------------------

    def report_applied(self, front_end: str, position: int) -> None:
        """Front-end ``front_end`` has applied records 1..``position`` (and is alive: the
        report is its heartbeat); writers waiting for it are notified. A position never goes
        back: a follower's report sent after a write's own may carry an older one."""
        with self._lock, self._translated():
            self._upsert_applied(self._connection(), front_end, position)

    def _upsert_applied(self, conn: Connection, front_end: str, position: int) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (namespace, front_end, applied) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, front_end) DO UPDATE "
                "SET applied = greatest({}.applied, excluded.applied), "
                "heartbeat = clock_timestamp()"
            ).format(self._table("forewarn_front_ends"), self._table("forewarn_front_ends")),
            [self.namespace, front_end, position],
        )
        conn.execute("SELECT pg_notify(%s, %s)", [self._applied_channel, str(position)])

    def forget_front_end(self, front_end: str, *, silent_for: float | None = None) -> None:
        """Remove ``front_end`` (stopping), or with ``silent_for`` every front-end whose last
        heartbeat is older than that many seconds (those killed long ago)."""
        table = self._table("forewarn_front_ends")
        with self._lock, self._translated():
            conn = self._connection()
            if silent_for is None:
                query = sql.SQL("DELETE FROM {} WHERE namespace = %s AND front_end = %s")
                conn.execute(query.format(table), [self.namespace, front_end])
            else:
                query = sql.SQL(
                    "DELETE FROM {} WHERE namespace = %s AND front_end <> %s "
                    "AND heartbeat < clock_timestamp() - make_interval(secs => %s)"
                )
                conn.execute(query.format(table), [self.namespace, front_end, silent_for])

    def wait_applied(
        self, front_end: str, position: int, *, timeout: float, live_within: float
    ) -> tuple[str, ...]:
        """Wait until every other front-end heard from within ``live_within`` seconds has
        applied record ``position``, for at most ``timeout`` seconds; the ones that had not
        by then (none: all have). One query when nobody lags; otherwise LISTEN on the
        front-ends' reports while waiting, on the writer's connection."""
        check_after(position)
        deadline = time.monotonic() + max(timeout, 0.0)
        query = sql.SQL(
            "SELECT front_end FROM {} WHERE namespace = %s AND front_end <> %s "
            "AND applied < %s AND heartbeat > clock_timestamp() - make_interval(secs => %s) "
            "ORDER BY front_end"
        ).format(self._table("forewarn_front_ends"))
        params = [self.namespace, front_end, position, live_within]
        channel = sql.Identifier(self._applied_channel)
        with self._lock, self._translated():
            conn = self._connection()
            listening = False
            try:
                while True:
                    lagging = tuple(str(row[0]) for row in conn.execute(query, params))
                    remaining = deadline - time.monotonic()
                    if not lagging or remaining <= 0:
                        return lagging
                    if not listening:  # then look again: a report may have come meanwhile
                        conn.execute(sql.SQL("LISTEN {}").format(channel))
                        listening = True
                        continue
                    wait = min(remaining, _APPLIED_LOOK_SECONDS)
                    for _ in conn.notifies(timeout=wait, stop_after=1):
                        pass
            finally:
                if listening and not conn.closed:
                    conn.execute(sql.SQL("UNLISTEN {}").format(channel))
                    for _ in conn.notifies(timeout=0):  # what arrived before UNLISTEN
                        pass

    def ping(self) -> None:
        """A connection of its own reads the namespace's counter, then closes: the writer's
        connection may be held by a long write, and a health check must neither wait behind
        it nor hold it up. Bounded by the connect timeout while the server cannot be reached.
        """
        if self._closed:
            raise JournalClosedError(f"{self._where} is closed")
        conn = self._connect()
        try:
            with self._translated():
                conn.execute(
                    sql.SQL("SELECT last_sequence FROM {} WHERE namespace = %s").format(
                        self._table("forewarn_namespaces")
                    ),
                    [self.namespace],
                ).fetchone()
        finally:
            conn.close()

    def close(self) -> None:
        """Close both connections, first waking a waiter of this journal so it can stop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._listener is not None:
                with (
                    contextlib.suppress(psycopg.Error),
                    _answered_within(_ANSWER_SECONDS, lambda: self._conn),
                ):
                    self._conn.execute("SELECT pg_notify(%s, 'closed')", [self._channel])
            self._conn.close()
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ExclusiveWrite:
    """What a writer holding the namespace's write lock may do (``PostgresJournal.exclusive``)."""

    def __init__(self, journal: PostgresJournal, conn: Connection) -> None:
        self._journal = journal
        self._conn = conn

    def records(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        """Every record after ``after``, read inside the transaction."""
        rows = self._conn.execute(
            sql.SQL(
                "SELECT sequence, body::text FROM {} WHERE namespace = %s AND sequence > %s "
                "ORDER BY sequence"
            ).format(self._journal._table("forewarn_records")),
            [self._journal.namespace, check_after(after)],
        ).fetchall()
        where = self._journal._where
        return [
            (int(sequence), decode_record(body, int(sequence), where)) for sequence, body in rows
        ]

    def metadata(self) -> dict[str, str]:
        """The namespace's metadata, read inside the transaction."""
        rows = self._conn.execute(
            sql.SQL("SELECT key, value FROM {} WHERE namespace = %s").format(
                self._journal._table("forewarn_metadata")
            ),
            [self._journal.namespace],
        ).fetchall()
        return {str(key): str(value) for key, value in rows}

    def set_metadata(self, key: str, value: str) -> None:
        """Set one key; committed with the transaction (so front-ends starting together on a
        new namespace agree on one seed: the first to hold the lock writes it)."""
        check_metadata(key, value)
        self._conn.execute(
            sql.SQL(
                "INSERT INTO {} (namespace, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
            ).format(self._journal._table("forewarn_metadata")),
            [self._journal.namespace, key, value],
        )

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        """Append at exactly ``expected_last + 1``...; commits with the transaction."""
        return self._journal._insert(self._conn, encode_batch(records), check_after(expected_last))

    def report_applied(self, front_end: str, position: int) -> None:
        """:meth:`PostgresJournal.report_applied`, committed with the transaction: a writer
        has applied what it read and wrote in it by the time it commits."""
        self._journal._upsert_applied(self._conn, front_end, check_after(position))


class Leadership:
    """A session-level ``pg_try_advisory_lock`` held on a connection of its own.

    Whoever holds it is the fleet's one leader; PostgreSQL releases it the moment that
    connection ends, so a leader killed with SIGKILL hands over as soon as its connection is
    gone (at once on a local socket; within the TCP keepalive elsewhere).
    """

    def __init__(self, journal: PostgresJournal, key: int) -> None:
        self._journal = journal
        self._key = key
        self._conn: Connection | None = None

    def acquire(self) -> bool:
        """Hold the lock (True), or find it held by another session (False). Raises
        :class:`StoreUnavailableError` when the server cannot be reached."""
        with self._journal._translated():
            held = self._conn
            if held is not None and not held.closed:
                with _answered_within(_ANSWER_SECONDS, lambda: held):
                    held.execute("SELECT 1")  # still ours while the session lives
                return True
            self.release()
            conn = self._journal._connect()
            try:
                with _answered_within(_ANSWER_SECONDS, lambda: conn):
                    query = "SELECT pg_try_advisory_lock(%s)"
                    row = conn.execute(query, [self._key]).fetchone()
            except BaseException:
                conn.close()
                raise
            if row is None or not row[0]:
                conn.close()
                return False
            self._conn = conn
            return True

    def release(self) -> None:
        """Let go of the lock, then close its session; idempotent. The lock is given back
        explicitly first: closing alone leaves it held until the server's backend has ended,
        which a loaded server may take a while to do, and the next leader's try would fail."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.closed:
                with (
                    contextlib.suppress(psycopg.Error),
                    _answered_within(_ANSWER_SECONDS, lambda: conn),
                ):
                    conn.execute("SELECT pg_advisory_unlock(%s)", [self._key])
        finally:
            conn.close()


__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_SCHEMA",
    "MAX_NAMESPACE_CHARS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Connection",
    "ExclusiveWrite",
    "Leadership",
    "Migration",
    "PostgresJournal",
    "describe",
    "shut_socket",
    "with_bounds",
]
