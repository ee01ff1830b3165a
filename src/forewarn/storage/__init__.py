"""The durable store: a journal of JSON records, kept in memory, SQLite or PostgreSQL.

forewarn is durable by journaling every state-changing command and replaying the journal at
start-up; this package is the journal and nothing more. It knows nothing of the domain: a
record is a JSON object, metadata is strings, and every backend passes the same contract tests
(``tests/storage``). Errors form one tree, drawn in :mod:`forewarn.storage.errors`.
"""

from __future__ import annotations

from forewarn.storage.errors import (
    AppendConflictError,
    CorruptStoreError,
    JournalClosedError,
    NewerSchemaError,
    NotSerializableError,
    StorageError,
    StoreBusyError,
    StoreFullError,
    StoreSchemaError,
    StoreUnavailableError,
    StoreUrlError,
    UnstorableValueError,
    ValueTooLargeError,
)
from forewarn.storage.journal import MAX_BATCH_BYTES, MAX_RECORD_BYTES, Journal
from forewarn.storage.memory import MemoryJournal
from forewarn.storage.sqlite import SqliteJournal
from forewarn.storage.urls import SQLITE_FILE_NAME, open_journal

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_RECORD_BYTES",
    "SQLITE_FILE_NAME",
    "AppendConflictError",
    "CorruptStoreError",
    "Journal",
    "JournalClosedError",
    "MemoryJournal",
    "NewerSchemaError",
    "NotSerializableError",
    "SqliteJournal",
    "StorageError",
    "StoreBusyError",
    "StoreFullError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "StoreUrlError",
    "UnstorableValueError",
    "ValueTooLargeError",
    "open_journal",
]
