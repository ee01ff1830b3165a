"""The default store: one SQLite file per data directory, kept with the standard library.

Durability: write-ahead logging with ``synchronous=FULL``, so a commit is on disk when
``append`` returns and a killed process loses nothing it acknowledged. One writer: the file is
opened in exclusive locking mode, so a second process (a second ``forewarn serve`` on the same
data directory) is refused with :class:`StoreBusyError` instead of replaying and appending
beside the first; the kernel drops the lock when the holder dies, however it dies.

The schema carries its version in ``forewarn_schema``. Opening an older file runs the
:data:`MIGRATIONS` from its version up, in the same transaction that records the new version;
a newer file is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Self

from forewarn.storage.errors import (
    AppendConflictError,
    CorruptStoreError,
    JournalClosedError,
    NewerSchemaError,
    StorageError,
    StoreBusyError,
    StoreFullError,
    StoreSchemaError,
    StoreUnavailableError,
)
from forewarn.storage.journal import (
    check_after,
    check_metadata,
    decode_record,
    encode_batch,
    encode_record,
)

SCHEMA_VERSION = 1
#: Stamped in the file header ("FWJN"), so ``file`` and other tools can tell what it is.
APPLICATION_ID = 0x46574A4E
_PAGE = 256
#: Room a SQLite journal's file system must have left for :meth:`SqliteJournal.ping` to
#: call it usable: a few pages of the file and of its write-ahead log.
MIN_FREE_BYTES = 64 * 1024

Migration = Callable[[sqlite3.Connection], None]
#: ``MIGRATIONS[n]`` turns a version-``n`` file into version ``n + 1``; none exist yet.
MIGRATIONS: Mapping[int, Migration] = {}

#: ``PRAGMA synchronous`` reads 0 to 3, which SQLite's documentation names so.
_SYNCHRONOUS = ("off", "normal", "full", "extra")

_CREATE_V1 = (
    "CREATE TABLE forewarn_schema (version INTEGER NOT NULL)",
    "CREATE TABLE metadata (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
    "CREATE TABLE records (sequence INTEGER PRIMARY KEY NOT NULL, body TEXT NOT NULL)",
)


def _translate(exc: sqlite3.Error, where: str) -> StorageError:
    """The store's error for a driver error: damage, a competing writer, or an unusable file."""
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError):
        if "locked" in message:  # SQLITE_BUSY reads "database is locked"
            return StoreBusyError(
                f"{where} is in use by another connection or process "
                f"(one writer per journal): {message}"
            )
    elif isinstance(exc, sqlite3.DatabaseError):
        return CorruptStoreError(f"{where} is not a readable forewarn journal: {message}")
    return StoreUnavailableError(f"cannot use {where}: {message}")


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _check_file(path: str) -> bool:
    """Whether opening ``path`` will create the file; :class:`CorruptStoreError` for an empty
    one. SQLite reads a file of no bytes as a new database, but every journal this module
    opened holds its header at least: an empty file is one that lost what it held, and
    starting afresh on it would drop a history without a word."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return True
    except OSError:
        return False  # SQLite's own open says what is wrong
    if size == 0:
        raise CorruptStoreError(
            f"{path} is empty (0 bytes): it is not a forewarn journal, or lost what it held; "
            "move it away to start a new one"
        )
    return False


def _remove_new_file(path: str) -> None:
    """Remove the file an open created but could not make a journal of (and its write-ahead
    files), so the failed open leaves no empty file behind to be refused next time."""
    for name in (path, f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(OSError):
            os.remove(name)


class SqliteJournal:
    """A journal in one SQLite file, safe to share between the threads of one process."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 2.0,
        schema_version: int = SCHEMA_VERSION,
        migrations: Mapping[int, Migration] = MIGRATIONS,
    ) -> None:
        self.path = os.fspath(path)
        self._where = f"SQLite journal {self.path}"
        self._changed = threading.Condition()
        self._closed = threading.Event()  # set once, by close()
        created = _check_file(self.path)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _translate(exc, self._where) from exc
        try:
            self._prepare(schema_version, migrations)
            self._last = self._read_last()
            #: The file this connection has open (device, inode), for :meth:`ping`.
            self._identity = _identity(os.stat(self.path))
        except BaseException:
            self._conn.close()
            if created:  # a file this open created and could not make a journal (a full disk)
                _remove_new_file(self.path)
            raise

    # -- opening -------------------------------------------------------------------------

    def _prepare(self, schema_version: int, migrations: Mapping[int, Migration]) -> None:
        """Settings, the write lock and the schema, in one transaction. A failure leaves the
        transaction open: :meth:`__init__` closes the connection, which discards it."""
        conn = self._conn
        with self._translated():
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous=FULL")
            # Takes the write lock now, so a competing writer is refused at open, not later.
            conn.execute("BEGIN IMMEDIATE")
            if str(mode).lower() != "wal":
                raise StoreUnavailableError(
                    f"{self._where}: write-ahead logging unavailable ({mode})"
                )
            self._check_schema(schema_version, migrations)
            conn.execute("COMMIT")

    def _check_schema(self, schema_version: int, migrations: Mapping[int, Migration]) -> None:
        conn = self._conn
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if "forewarn_schema" not in tables:
            if tables:
                raise CorruptStoreError(
                    f"{self.path} is an SQLite database but not a forewarn journal "
                    f"(it has tables {', '.join(sorted(tables))})"
                )
            for statement in _CREATE_V1:
                conn.execute(statement)
            conn.execute("INSERT INTO forewarn_schema (version) VALUES (1)")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            found = 1
        else:
            found = self._read_version()
        if found > schema_version:
            raise NewerSchemaError(self._where, found, schema_version)
        for version in range(found, schema_version):
            migrate = migrations.get(version)
            if migrate is None:
                raise StoreSchemaError(
                    f"{self._where}: no migration from schema version {version} to {version + 1}"
                )
            migrate(conn)
        if found != schema_version:
            conn.execute("UPDATE forewarn_schema SET version = ?", (schema_version,))

    def _read_version(self) -> int:
        rows = self._conn.execute("SELECT version FROM forewarn_schema").fetchall()
        application_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
        if application_id != APPLICATION_ID:
            raise CorruptStoreError(f"{self.path} is not a forewarn journal (application id)")
        if len(rows) != 1 or not isinstance(rows[0][0], int) or rows[0][0] < 1:
            raise CorruptStoreError(f"{self._where} has a damaged schema version table: {rows}")
        version: int = rows[0][0]
        return version

    def _read_last(self) -> int:
        with self._translated():
            row = self._conn.execute("SELECT max(sequence) FROM records").fetchone()
        return int(row[0] or 0)

    # -- plumbing ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise _translate(exc, self._where) from exc

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; called with the lock held."""
        self._ensure_open()
        conn = self._conn
        with self._translated():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _ensure_open(self) -> None:
        if self._closed.is_set():
            raise JournalClosedError(f"{self._where} is closed")

    def durability(self) -> dict[str, str]:
        """The settings that make appends durable, as SQLite reports them (for diagnostics)."""
        with self._changed, self._translated():
            self._ensure_open()
            journal_mode, synchronous, locking_mode = (
                self._conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "locking_mode")
            )
        return {
            "journal_mode": journal_mode.lower(),
            "synchronous": _SYNCHRONOUS[synchronous],
            "locking_mode": locking_mode.lower(),
        }

    # -- the journal -----------------------------------------------------------------------

    def metadata(self) -> dict[str, str]:
        with self._changed, self._translated():
            self._ensure_open()
            rows = self._conn.execute("SELECT key, value FROM metadata ORDER BY key").fetchall()
        return {str(key): str(value) for key, value in rows}

    def set_metadata(self, key: str, value: str) -> None:
        check_metadata(key, value)
        with self._changed, self._transaction() as conn:
            conn.execute(
                "INSERT INTO metadata (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def append(self, record: Mapping[str, Any]) -> int:
        return self._extend([encode_record(record)])

    def append_many(self, records: Sequence[Mapping[str, Any]]) -> int:
        return self._extend(encode_batch(records))

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        """One process writes the file, so its own count is the truth to compare with."""
        return self._extend(encode_batch(records), expected=check_after(expected_last))

    def _extend(self, texts: list[str], expected: int | None = None) -> int:
        with self._changed:
            self._ensure_open()
            if expected is not None and expected != self._last:
                raise AppendConflictError(self._where, expected, self._last)
            if not texts:
                return self._last
            first = self._last + 1
            rows = [(first + offset, text) for offset, text in enumerate(texts)]
            with self._transaction() as conn:
                conn.executemany("INSERT INTO records (sequence, body) VALUES (?, ?)", rows)
            self._last = rows[-1][0]
            self._changed.notify_all()
            return self._last

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        check_after(after)
        with self._changed:
            self._ensure_open()
        return self._iterate(after)

    def _iterate(self, after: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """Page by page, releasing the lock between pages so appends are never held up."""
        while True:
            with self._changed, self._translated():
                self._ensure_open()
                page = self._conn.execute(
                    "SELECT sequence, body FROM records WHERE sequence > ? "
                    "ORDER BY sequence LIMIT ?",
                    (after, _PAGE),
                ).fetchall()
            for sequence, body in page:
                yield int(sequence), decode_record(body, int(sequence), self._where)
            if len(page) < _PAGE:
                return
            after = int(page[-1][0])

    def last_sequence(self) -> int:
        with self._changed:
            self._ensure_open()
            return self._last

    def wait_for_append(self, after: int, timeout: float) -> int:
        """Only this process writes the file, so its own appends are all there is to wait for."""
        check_after(after)
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            while True:
                self._ensure_open()
                remaining = deadline - time.monotonic()
                if self._last > after or remaining <= 0:
                    return self._last
                self._changed.wait(remaining)

    def ping(self) -> None:
        """The connection answers a read, and :attr:`path` still names the file it has open,
        readable and writable by this process.

        An open descriptor outlives its file's name: deleted, replaced or made unreadable
        under a running server, the journal would go on appending to a file that no restart
        can open, which is as unusable as a database server that went away.
        """
        with self._changed, self._translated():
            self._ensure_open()
            self._conn.execute("SELECT version FROM forewarn_schema").fetchone()
        try:
            found = os.stat(self.path)
        except OSError as exc:
            raise StoreUnavailableError(f"{self._where} is gone: {exc.strerror}") from None
        if _identity(found) != self._identity:
            raise StoreUnavailableError(f"{self._where} was replaced by another file")
        if not os.access(self.path, os.R_OK | os.W_OK):
            raise StoreUnavailableError(f"{self._where} is no longer readable and writable")
        room = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        if room.f_bavail * room.f_frsize < MIN_FREE_BYTES:
            raise StoreFullError(
                f"{self._where}: its file system has {room.f_bavail * room.f_frsize} bytes "
                "left, too few to append a change"
            )

    def close(self) -> None:
        with self._changed:
            if self._closed.is_set():
                return
            self._closed.set()
            self._changed.notify_all()
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "MIN_FREE_BYTES",
    "SCHEMA_VERSION",
    "Migration",
    "SqliteJournal",
]
