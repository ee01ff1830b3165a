"""Event Grid's state: the subscriptions, and every delivery not yet done, kept durably.

One SQLite database (the standard library's): ``eventgrid.sqlite3`` in ``--data-dir``, so
subscriptions and pending deliveries survive a restart and a ``kill -9`` (each change is
committed before it counts), or in memory for a server without one. A delivery is a row
until it succeeds or is dead-lettered, so however slow a receiver, what waits for it is on
disk, not in memory. The store also keeps the number of the last change of the platform's
history (:mod:`forewarn.domain.history`) turned into deliveries: a replay makes the changes
again with the same numbers, and only those after it are new.

Every method is blocking and meant for a worker thread; a lock makes the one connection safe
to share between them. A failure of the database (a full disk, a file gone read-only) is
:class:`~forewarn.storage.errors.StoreUnavailableError`, which the delivery loop waits out: no
``sqlite3`` error leaves this module, and a transaction that failed is rolled back whole, so
the connection takes the next one once the disk has room again.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forewarn.eventgrid.payloads import Schema
from forewarn.storage.errors import StoreUnavailableError

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS subscriptions (name TEXT PRIMARY KEY, endpoint TEXT NOT NULL,"
    " schema TEXT NOT NULL, state TEXT NOT NULL, validation_code TEXT NOT NULL,"
    " expires TEXT NOT NULL, after_sequence INTEGER NOT NULL, delivered INTEGER DEFAULT 0,"
    " failed INTEGER DEFAULT 0, dead_lettered INTEGER DEFAULT 0, last_error TEXT DEFAULT '',"
    " duplicates INTEGER DEFAULT 0, letter_failures INTEGER DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS deliveries (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " subscription TEXT NOT NULL, grid_id TEXT NOT NULL, payload TEXT NOT NULL,"
    " published TEXT NOT NULL, due TEXT NOT NULL, attempts INTEGER DEFAULT 0,"
    " last_status INTEGER, last_outcome TEXT DEFAULT '', last_attempt TEXT DEFAULT '',"
    " letter TEXT DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (due, id)",
    "CREATE INDEX IF NOT EXISTS deliveries_subscription_due ON deliveries (subscription, due, id)",
)
#: Columns added since the first release, added to a file made before them:
#: (table, column, its SQL type and default).
ADDED_COLUMNS = (
    ("subscriptions", "letter_failures", "INTEGER DEFAULT 0"),
    ("deliveries", "letter", "TEXT DEFAULT ''"),
)


def stamp(moment: datetime) -> str:
    """A time as stored: UTC, fixed width, so stored times sort as text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unstamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    endpoint: str
    schema: Schema
    #: ``AwaitingManualAction`` until validated, then ``Succeeded``; ``Failed`` if never.
    state: str
    validation_code: str
    #: When an ``AwaitingManualAction`` subscription's validation URL stops working.
    expires: datetime
    #: Changes of the platform's history up to this number predate it.
    after_sequence: int
    delivered: int = 0
    failed: int = 0
    dead_lettered: int = 0
    last_error: str = ""
    #: Deliveries still to be sent twice (the ``eventgrid-duplicate`` fault).
    duplicates: int = 0
    #: Dead-letter writes that failed (the folder unwritable, the disk full), each tried
    #: again on its own schedule.
    letter_failures: int = 0


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    subscription: str
    grid_id: str
    payload: str
    published: datetime
    due: datetime
    attempts: int
    last_status: int | None
    #: Event Grid's ``lastDeliveryOutcome`` of the last attempt (``NotFound``, ``TimedOut``...).
    last_outcome: str
    last_attempt: datetime | None
    #: The ``deadLetterReason`` when the event was given up on but its dead-letter record is
    #: not written yet (the write failed): the receiver is never tried again, the write is.
    letter: str = ""


class DeliveryStore:
    """Subscriptions and pending deliveries in one SQLite database (``None``: in memory)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: Whether this store made its file (removed again by :meth:`abandon`).
        self.made_file = path is not None and not path.exists()
        target = ":memory:" if path is None else str(path)
        self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL: a commit survives the process's death (kill -9), which is what a
            # pending delivery must survive; the journal keeps FULL for the platform itself.
            self._db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                self._db.execute(statement)
            for table, column, kind in ADDED_COLUMNS:
                present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in present:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def abandon(self) -> None:
        """Close, and remove the file if this store made it: a ``serve`` that could not
        start (its journal refused, say) leaves its data directory as it found it."""
        self.close()
        if self.made_file and self.path is not None:
            for name in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
                name.unlink(missing_ok=True)

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailableError:
        where = self.path if self.path is not None else "memory"
        return StoreUnavailableError(f"Event Grid's state in {where}: {exc}")

    def _transaction(self, statements: Iterable[tuple[str, Sequence[Any]]]) -> None:
        """Run ``statements`` in one transaction: all of them, or (rolled back) none."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, values in statements:
                    self._db.execute(sql, values)
                self._db.execute("COMMIT")  # may fail too (a full disk): rolled back below
            except BaseException as exc:
                if self._db.in_transaction:
                    # may fail when SQLite has rolled back already (the error did it)
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._unavailable(exc) from exc
                raise

    def _rows(self, sql: str, values: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, values))
            except sqlite3.Error as exc:
                raise self._unavailable(exc) from exc

    def _count(self, sql: str, values: Sequence[Any]) -> int:
        """Run one change; how many rows it changed."""
        with self._lock:
            try:
                return int(self._db.execute(sql, values).rowcount)
            except sqlite3.Error as exc:
                raise self._unavailable(exc) from exc

    # -- subscriptions ------------------------------------------------------------------

    def add(self, subscription: Subscription) -> None:
        s = subscription
        self._transaction(
            [
                (
                    "INSERT INTO subscriptions (name, endpoint, schema, state, validation_code,"
                    " expires, after_sequence) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        s.name,
                        s.endpoint,
                        s.schema,
                        s.state,
                        s.validation_code,
                        stamp(s.expires),
                        s.after_sequence,
                    ),
                )
            ]
        )

    def set_state(self, name: str, state: str, error: str = "", *, was: str | None = None) -> None:
        """Set ``name``'s state (only from state ``was``, when given)."""
        sql = "UPDATE subscriptions SET state = ?, last_error = ? WHERE name = ?"
        values: tuple[Any, ...] = (state, error, name)
        if was is not None:
            sql += " AND state = ?"
            values += (was,)
        self._transaction([(sql, values)])

    def add_duplicates(self, name: str, count: int) -> None:
        self._transaction(
            [("UPDATE subscriptions SET duplicates = duplicates + ? WHERE name = ?", (count, name))]
        )

    def take_duplicate(self, name: str) -> bool:
        """Whether this delivery is one the ``eventgrid-duplicate`` fault sends twice."""
        return (
            self._count(
                "UPDATE subscriptions SET duplicates = duplicates - 1"
                " WHERE name = ? AND duplicates > 0",
                (name,),
            )
            > 0
        )

    def remove(self, name: str) -> bool:
        found = self.get(name) is not None
        self._transaction(
            [
                ("DELETE FROM deliveries WHERE subscription = ?", (name,)),
                ("DELETE FROM subscriptions WHERE name = ?", (name,)),
            ]
        )
        return found

    def get(self, name: str) -> Subscription | None:
        rows = self._rows(_SELECT_SUBSCRIPTIONS + " WHERE name = ?", (name,))
        return _subscription(rows[0]) if rows else None

    def subscriptions(self) -> list[Subscription]:
        return [_subscription(row) for row in self._rows(_SELECT_SUBSCRIPTIONS + " ORDER BY name")]

    def pending(self) -> dict[str, int]:
        rows = self._rows("SELECT subscription, COUNT(*) FROM deliveries GROUP BY subscription")
        return {str(name): int(count) for name, count in rows}

    # -- deliveries -----------------------------------------------------------------------

    def cursor(self) -> int:
        rows = self._rows("SELECT value FROM meta WHERE key = 'cursor'")
        return int(rows[0][0]) if rows else 0

    def enqueue(
        self,
        changes: Sequence[tuple[int, datetime, str, dict[Schema, str]]],
        cursor: int,
    ) -> int:
        """For each change (its number, time, Event Grid id and payload per schema), a
        delivery to every validated subscription it does not predate; the cursor moves to
        ``cursor`` in the same transaction. The number of deliveries made."""
        subscriptions = [s for s in self.subscriptions() if s.state == "Succeeded"]
        statements: list[tuple[str, Sequence[Any]]] = []
        for sequence, at, grid_id, payloads in changes:
            for subscription in subscriptions:
                if sequence > subscription.after_sequence:
                    statements.append(
                        (
                            "INSERT INTO deliveries (subscription, grid_id, payload, published,"
                            " due) VALUES (?, ?, ?, ?, ?)",
                            (subscription.name, grid_id, payloads[subscription.schema],
                             stamp(at), stamp(at)),
                        )
                    )  # fmt: skip
        made = len(statements)
        statements.append(
            (
                "INSERT INTO meta (key, value) VALUES ('cursor', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(cursor),),
            )
        )
        self._transaction(statements)
        return made

    def due(
        self,
        now: datetime,
        limit: int,
        busy: Iterable[int] = (),
        *,
        subscription: str | None = None,
    ) -> list[Delivery]:
        """Deliveries due at ``now`` (to ``subscription`` only, when given), oldest first,
        but those already being sent."""
        skip = set(busy)
        where, values = "due <= ?", [stamp(now)]
        if subscription is not None:
            where, values = "subscription = ? AND due <= ?", [subscription, stamp(now)]
        rows = self._rows(
            _SELECT_DELIVERIES + f" WHERE {where} ORDER BY due, id LIMIT ?",
            (*values, limit + len(skip)),
        )
        return [d for d in map(_delivery, rows) if d.id not in skip][:limit]

    def due_subscriptions(self, now: datetime) -> list[str]:
        """The subscriptions with a delivery due at ``now``."""
        rows = self._rows(
            "SELECT DISTINCT subscription FROM deliveries WHERE due <= ? ORDER BY subscription",
            (stamp(now),),
        )
        return [str(row[0]) for row in rows]

    def next_due(self) -> datetime | None:
        rows = self._rows("SELECT MIN(due) FROM deliveries")
        return unstamp(rows[0][0]) if rows and rows[0][0] else None

    def delivered_all(self, deliveries: Sequence[Delivery]) -> None:
        """Deliveries answered with success, recorded in one transaction."""
        counts: dict[str, int] = {}
        statements: list[tuple[str, Sequence[Any]]] = []
        for delivery in deliveries:
            statements.append(("DELETE FROM deliveries WHERE id = ?", (delivery.id,)))
            counts[delivery.subscription] = counts.get(delivery.subscription, 0) + 1
        for name, count in counts.items():
            statements.append(
                ("UPDATE subscriptions SET delivered = delivered + ? WHERE name = ?", (count, name))
            )
        self._transaction(statements)

    def failed(
        self,
        delivery: Delivery,
        *,
        at: datetime,
        status: int | None,
        outcome: str,
        again: datetime | None,
        error: str = "",
    ) -> None:
        """An attempt failed (``outcome`` as Event Grid names it, ``error`` as the list shows
        it): tried ``again`` then, or (None) taken out as dead-lettered."""
        if again is None:
            first: tuple[str, Sequence[Any]] = (
                "DELETE FROM deliveries WHERE id = ?",
                (delivery.id,),
            )
            counter = "dead_lettered = dead_lettered + 1, failed = failed + 1"
        else:
            first = (
                "UPDATE deliveries SET attempts = attempts + 1, due = ?, last_status = ?,"
                " last_outcome = ?, last_attempt = ? WHERE id = ?",
                (stamp(again), status, outcome, stamp(at), delivery.id),
            )
            counter = "failed = failed + 1"
        self._transaction(
            [
                first,
                (
                    f"UPDATE subscriptions SET {counter}, last_error = ? WHERE name = ?",
                    (error or outcome, delivery.subscription),
                ),
            ]
        )

    def letter_waits(
        self,
        delivery: Delivery,
        *,
        at: datetime,
        status: int | None,
        outcome: str,
        reason: str,
        again: datetime,
        error: str,
        attempted: bool = True,
    ) -> None:
        """The event was given up on (``reason``) but its dead-letter record could not be
        written (``error``): it stays, never sent again, its record tried ``again`` then.
        ``attempted``: an attempt at ``at`` ended its delivery, and counts as a failed one."""
        made = 1 if attempted else 0
        self._transaction(
            [
                (
                    "UPDATE deliveries SET attempts = attempts + ?, due = ?, last_status = ?,"
                    " last_outcome = ?, last_attempt = ?, letter = ? WHERE id = ?",
                    (made, stamp(again), status, outcome, stamp(at), reason, delivery.id),
                ),
                (
                    "UPDATE subscriptions SET failed = failed + ?,"
                    " letter_failures = letter_failures + 1, last_error = ? WHERE name = ?",
                    (made, error, delivery.subscription),
                ),
            ]
        )

    def letter_failed(self, delivery: Delivery, *, again: datetime, error: str) -> None:
        """A waiting dead-letter record failed to be written again: tried ``again`` then."""
        self._transaction(
            [
                ("UPDATE deliveries SET due = ? WHERE id = ?", (stamp(again), delivery.id)),
                (
                    "UPDATE subscriptions SET letter_failures = letter_failures + 1,"
                    " last_error = ? WHERE name = ?",
                    (error, delivery.subscription),
                ),
            ]
        )

    def lettered(self, delivery: Delivery) -> None:
        """A waiting dead-letter record was written: the event is dead-lettered."""
        self._transaction(
            [
                ("DELETE FROM deliveries WHERE id = ?", (delivery.id,)),
                (
                    "UPDATE subscriptions SET dead_lettered = dead_lettered + 1 WHERE name = ?",
                    (delivery.subscription,),
                ),
            ]
        )


_SELECT_SUBSCRIPTIONS = (
    "SELECT name, endpoint, schema, state, validation_code, expires, after_sequence, delivered,"
    " failed, dead_lettered, last_error, duplicates, letter_failures FROM subscriptions"
)
_SELECT_DELIVERIES = (
    "SELECT id, subscription, grid_id, payload, published, due, attempts, last_status,"
    " last_outcome, last_attempt, letter FROM deliveries"
)


def _subscription(row: tuple[Any, ...]) -> Subscription:
    return Subscription(
        row[0], row[1], row[2], row[3], row[4], unstamp(row[5]), row[6], row[7], row[8], row[9],
        row[10], row[11], row[12],
    )  # fmt: skip


def _delivery(row: tuple[Any, ...]) -> Delivery:
    return Delivery(
        row[0], row[1], row[2], row[3], unstamp(row[4]), unstamp(row[5]), row[6], row[7], row[8],
        unstamp(row[9]) if row[9] else None, row[10] or "",
    )  # fmt: skip


__all__ = ["ADDED_COLUMNS", "Delivery", "DeliveryStore", "Subscription", "stamp", "unstamp"]
