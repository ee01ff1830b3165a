"""Errors the durable store raises, whichever backend is behind it.

Callers decide what a failure means (the server stops rather than answer for a change it could
not keep); the store only says which kind of failure it was, without leaking the driver's own
exception types.

    ForewarnError
    └── StorageError                 anything the store could not do
        ├── StoreUnavailableError    cannot reach or open it: server down, bad path, no driver
        │   ├── StoreBusyError       another process is already the writer of this SQLite file
        │   ├── StoreFullError       a SQLite file's file system has no room left to append
        │   └── ReplicaError         a shared store's front-end cannot write now (forewarn.cluster)
        ├── StoreUrlError            a store URL that names no backend, or names it wrongly
        ├── StoreSchemaError         the store holds something this version cannot use
        │   ├── CorruptStoreError    not a forewarn journal, or damaged
        │   │   └── CorruptRecordError   one record that is not a JSON object within bounds
        │   └── NewerSchemaError     written by a newer forewarn: refused, never guessed at
        ├── UnstorableValueError     a value the journal will not keep
        │   ├── NotSerializableError not a JSON object of JSON values (or a metadata non-string)
        │   └── ValueTooLargeError   over its size bound (a record over 1 MiB, ...)
        ├── AppendConflictError      a conditional append found records it had not seen
        └── JournalClosedError       used after close()
"""

from __future__ import annotations

from forewarn.errors import ForewarnError


class StorageError(ForewarnError):
    """Root of every error the store raises on purpose."""


class StoreUnavailableError(StorageError):
    """The store cannot be reached or opened; retrying later may succeed."""


class StoreBusyError(StoreUnavailableError):
    """Another process already writes this journal.

    Two servers replaying and appending to one SQLite file would each hold a different
    platform in memory while sharing one history, so the second is refused.
    """


class StoreFullError(StoreUnavailableError):
    """The file system holding a SQLite journal has no room left: the next change would be
    refused (found by a health check before any change is: ``/readyz``)."""


class StoreUrlError(StorageError):
    """The store URL cannot be understood."""


class StoreSchemaError(StorageError):
    """The store's contents are not a journal this version can read and write."""


class CorruptStoreError(StoreSchemaError):
    """The file or database is not a forewarn journal, or is damaged."""


class CorruptRecordError(CorruptStoreError):
    """A record whose stored body is not a JSON object within the bounds the journal writes
    (:data:`~forewarn.storage.journal.MAX_RECORD_BYTES`): edited or damaged. It names the
    record's position, so whoever replays can name the first bad record."""

    def __init__(self, where: str, position: int, reason: str) -> None:
        super().__init__(f"{where}: record {position}: {reason}")
        self.position = position
        self.reason = reason


class NewerSchemaError(StoreSchemaError):
    """The store was written by a newer forewarn.

    Reading a newer schema with older code could silently drop what the newer code wrote,
    and writing to it could break the newer code, so the store is not touched at all.
    """

    def __init__(self, where: str, found: int, supported: int) -> None:
        super().__init__(
            f"{where} has journal schema version {found}, but this forewarn supports up to "
            f"version {supported}: upgrade forewarn to open it"
        )
        self.where = where
        self.found = found
        self.supported = supported


class UnstorableValueError(StorageError):
    """A record or metadata value the journal refuses; nothing was written."""


class NotSerializableError(UnstorableValueError):
    """Not representable as JSON exactly: it would not read back as it was written."""


class ValueTooLargeError(UnstorableValueError):
    """Over its size bound: one command never needs that much, so it is a bug or an abuse."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class AppendConflictError(StorageError):
    """A conditional append (``append_if``) expected the journal to end at one sequence and
    found it longer: another writer appended first, and nothing was written.

    The caller reads what it missed, checks its command again and retries, or gives up.
    """

    def __init__(self, where: str, expected: int, found: int) -> None:
        super().__init__(
            f"{where} ends at record {found}, not {expected}: another writer appended first"
        )
        self.expected = expected
        self.found = found


class JournalClosedError(StorageError):
    """The journal was closed; a closed journal cannot say anything durable."""


__all__ = [
    "AppendConflictError",
    "CorruptRecordError",
    "CorruptStoreError",
    "JournalClosedError",
    "NewerSchemaError",
    "NotSerializableError",
    "StorageError",
    "StoreBusyError",
    "StoreFullError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "StoreUrlError",
    "UnstorableValueError",
    "ValueTooLargeError",
]
