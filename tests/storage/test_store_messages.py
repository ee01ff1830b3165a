"""What a store's refusals say: the operator reads them in a log or a CLI error, so each
names the store, what it expected and what it found.

All [ours] (``forewarn.storage.errors``); run against every backend."""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from machine_support import require_module

from forewarn.storage import (
    AppendConflictError,
    CorruptStoreError,
    Journal,
    JournalClosedError,
    MemoryJournal,
    NewerSchemaError,
    NotSerializableError,
    SqliteJournal,
    StoreBusyError,
    StoreUnavailableError,
    StoreUrlError,
    ValueTooLargeError,
    open_journal,
)
from forewarn.storage import memory as memory_module
from forewarn.storage import sqlite as sqlite_module
from forewarn.storage.errors import CorruptRecordError
from forewarn.storage.journal import (
    MAX_BATCH_BYTES,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_VALUE_BYTES,
    MAX_RECORD_BYTES,
    check_metadata,
    encode_batch,
)
from forewarn.storage.postgres import PostgresJournal
from forewarn.storage.urls import directory_journal_path, sqlite_path

from .conftest import Store, run_sql

#: How each backend names itself in a message.
NAMES = {
    "memory": "memory journal",
    "sqlite": "SQLite journal /",
    "postgres": "PostgreSQL journal 'test_",
}


def test_a_conflict_names_the_store_and_both_ends(store: Store) -> None:
    journal: Journal = store.open()
    journal.append_many([{"n": 0}, {"n": 1}])
    with pytest.raises(AppendConflictError) as raised:
        journal.append_if(1, [{"n": "late"}])
    message = str(raised.value)
    assert message.startswith(NAMES[store.backend]), message
    assert message.endswith(" ends at record 2, not 1: another writer appended first")


def test_an_oversized_record_says_what_it_was_and_the_bound(journal: Journal) -> None:
    with pytest.raises(ValueTooLargeError) as raised:
        journal.append({"pad": "x" * MAX_RECORD_BYTES})
    size = MAX_RECORD_BYTES + len('{"pad":""}')
    assert (
        str(raised.value) == f"record is {size} bytes, over the limit of {MAX_RECORD_BYTES} bytes"
    )
    assert (raised.value.size, raised.value.limit) == (size, MAX_RECORD_BYTES)


def test_a_newer_schema_says_where_what_it_found_and_what_is_supported(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    SqliteJournal(path).close()
    with pytest.raises(NewerSchemaError) as raised:
        SqliteJournal(path, schema_version=0)
    error = raised.value
    assert (error.where, error.found, error.supported) == (f"SQLite journal {path}", 1, 0)
    assert str(error) == (
        f"SQLite journal {path} has journal schema version 1, but this forewarn supports up to "
        "version 0: upgrade forewarn to open it"
    )


def test_a_data_directory_is_made_once_and_found_again(tmp_path: Path) -> None:
    """``--data-dir DIR``: made with its parents at the first start, used as it is after."""
    data = tmp_path / "a" / "b"
    assert directory_journal_path(data) == data / "forewarn.sqlite3"
    assert data.is_dir()
    assert directory_journal_path(data) == data / "forewarn.sqlite3"  # there already
    assert re.fullmatch(r".*forewarn\.sqlite3", str(directory_journal_path(str(data))))


#: Every call a closed journal refuses (a health check's ping among them).
CALLS_AFTER_CLOSE: dict[str, Any] = {
    "append": lambda journal: journal.append({"n": 1}),
    "append_if": lambda journal: journal.append_if(0, [{"n": 1}]),
    "records": lambda journal: list(journal.records()),
    "last_sequence": lambda journal: journal.last_sequence(),
    "metadata": lambda journal: journal.metadata(),
    "set_metadata": lambda journal: journal.set_metadata("k", "v"),
    "wait_for_append": lambda journal: journal.wait_for_append(0, 0),
    "ping": lambda journal: journal.ping(),
}


@pytest.mark.parametrize("call", sorted(CALLS_AFTER_CLOSE))
def test_a_closed_journal_says_which_it_is(store: Store, call: str) -> None:
    journal = store.open()
    journal.close()
    with pytest.raises(JournalClosedError) as raised:
        CALLS_AFTER_CLOSE[call](journal)
    message = str(raised.value)
    assert message.startswith(NAMES[store.backend]), message
    assert message.endswith(" is closed")


def test_a_place_that_cannot_hold_the_file_is_unavailable_not_busy(tmp_path: Path) -> None:
    """Busy (another writer holds it: retry later) and unavailable (this place cannot be
    used: fix the path) are told apart, and the message says which store and why."""
    (tmp_path / "a-file").write_text("x")
    path = tmp_path / "a-file" / "journal.sqlite3"
    with pytest.raises(StoreUnavailableError) as raised:
        SqliteJournal(path)
    assert not isinstance(raised.value, StoreBusyError)
    assert str(raised.value) == f"cannot use SQLite journal {path}: unable to open database file"


class _WatchedCondition:
    """A journal's condition variable whose waits are recorded (and not slept: the caller
    looks again at once, as after a spurious wake-up)."""

    def __init__(self, condition: threading.Condition) -> None:
        self._condition = condition
        self.waits: list[float] = []

    def __enter__(self) -> bool:
        return self._condition.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self._condition.__exit__(*exc_info)

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return False

    def notify_all(self) -> None:
        self._condition.notify_all()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_waiting_for_an_append_waits_as_long_as_asked_and_no_longer(
    backend: str, tmp_path: Path
) -> None:
    """A follower's poll (``timeout=0``) never waits; a wait is as long as asked, not a
    moment less: only what is already there is returned early."""
    journal: Any = (
        MemoryJournal() if backend == "memory" else SqliteJournal(tmp_path / "journal.sqlite3")
    )
    try:
        watched = _WatchedCondition(journal._changed)
        journal._changed = watched
        assert journal.wait_for_append(after=0, timeout=0) == 0
        assert watched.waits == []
        assert journal.wait_for_append(after=0, timeout=-1) == 0
        assert watched.waits == []
        assert journal.wait_for_append(after=0, timeout=0.3) == 0
        assert 0 < watched.waits[0] <= 0.3  # then looked again until the time was up
        journal._changed = watched._condition
        journal.append({"n": 1})
        assert journal.wait_for_append(after=0, timeout=0) == 1
    finally:
        journal.close()


class _SteppingClock:
    """``time.monotonic`` for a journal: each reading a quarter of a second after the last
    (exact in binary, so a reading can fall on a deadline exactly)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        reading = self.now
        self.now += 0.25
        return reading


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_wait_ends_at_its_deadline_without_waiting_again(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half a second asked, the deadline read at 0: at 0.25 the wait is for the quarter left,
    at 0.5 the time is up and the call returns, with no further wait of no time."""
    module = memory_module if backend == "memory" else sqlite_module
    journal: Any = (
        MemoryJournal() if backend == "memory" else SqliteJournal(tmp_path / "journal.sqlite3")
    )
    try:
        watched = _WatchedCondition(journal._changed)
        journal._changed = watched
        monkeypatch.setattr(module, "time", _SteppingClock())
        assert journal.wait_for_append(after=0, timeout=0.5) == 0
        assert watched.waits == [0.25]
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "sqlite://host/journal.db",
            "'sqlite://host/journal.db': SQLite URLs have no host; write "
            "sqlite:///absolute/path.db or sqlite:relative/path.db",
        ),
        ("sqlite:", "'sqlite:' names no file"),
        ("sqlite:////", "'sqlite:////' names no file"),
    ],
)
def test_a_sqlite_url_without_a_file_says_how_to_write_one(url: str, said: str) -> None:
    with pytest.raises(StoreUrlError) as raised:
        sqlite_path(url)
    assert str(raised.value) == said


def test_only_the_slashes_before_an_absolute_path_are_taken_off() -> None:
    assert sqlite_path("sqlite:////XYZ/journal.db") == "/XYZ/journal.db"
    assert sqlite_path("sqlite:///X/journal.db") == "/X/journal.db"


def test_another_applications_database_is_named_with_its_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (n)")
    conn.execute("CREATE TABLE customers (name)")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptStoreError) as raised:
        SqliteJournal(path)
    assert str(raised.value) == (
        f"{path} is an SQLite database but not a forewarn journal (it has tables customers, orders)"
    )


@pytest.mark.parametrize("version", [0, -1, "x", 1.5])
def test_a_schema_version_that_is_not_a_positive_number_is_damage(
    tmp_path: Path, version: object
) -> None:
    path = tmp_path / "journal.sqlite3"
    SqliteJournal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE forewarn_schema SET version = ?", (version,))
    conn.close()
    with pytest.raises(CorruptStoreError) as raised:
        SqliteJournal(path)
    assert str(raised.value) == (
        f"SQLite journal {path} has a damaged schema version table: [({version!r},)]"
    )


def test_a_file_of_another_application_id_is_no_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    SqliteJournal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA application_id = 7")
    conn.close()
    with pytest.raises(CorruptStoreError) as raised:
        SqliteJournal(path)
    assert str(raised.value) == f"{path} is not a forewarn journal (application id)"


def test_an_empty_file_is_refused_as_a_journal_that_lost_what_it_held(tmp_path: Path) -> None:
    """SQLite would read a file of no bytes as a new database, but every journal holds its
    header at least: starting afresh on it would drop a history without a word. The file is
    left as it was, for the operator to move away."""
    path = tmp_path / "journal.sqlite3"
    path.touch()
    with pytest.raises(CorruptStoreError) as raised:
        SqliteJournal(path)
    assert str(raised.value) == (
        f"{path} is empty (0 bytes): it is not a forewarn journal, or lost what it held; "
        "move it away to start a new one"
    )
    assert path.stat().st_size == 0
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["journal.sqlite3"]


def test_a_file_that_is_not_sqlite_is_named_as_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    path.write_bytes(b"vms:\n  - {name: vm0}\n" * 100)
    with pytest.raises(CorruptStoreError) as raised:
        SqliteJournal(path)
    assert str(raised.value) == (
        f"SQLite journal {path} is not a readable forewarn journal: file is not a database"
    )


def test_a_migration_the_database_refuses_is_reported_as_the_store_being_unusable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    SqliteJournal(path).close()

    def refused(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(StoreUnavailableError) as raised:
        SqliteJournal(path, schema_version=2, migrations={1: refused})
    assert str(raised.value) == f"cannot use SQLite journal {path}: disk I/O error"


def _damage_record(store: Store, sequence: int, body: str) -> None:
    """Overwrite one stored record's body behind the journal's back, as an edit of the file
    or the table would (PostgreSQL keeps only valid JSON: the damage must be JSON there)."""
    if store.backend == "sqlite":
        conn = sqlite3.connect(store.url.removeprefix("sqlite:///"))
        try:
            with conn:
                conn.execute("UPDATE records SET body = ? WHERE sequence = ?", (body, sequence))
        finally:
            conn.close()
    else:
        url, _, namespace = store.url.partition("?namespace=")
        run_sql(
            url,
            "UPDATE public.forewarn_records SET body = %s::json "
            "WHERE namespace = %s AND sequence = %s",
            body,
            namespace,
            sequence,
        )


def test_a_damaged_record_is_named_by_its_store_and_position(durable_store: Store) -> None:
    """A store's file or table can be edited: a record no append wrote is refused when it is
    read, naming where it is, so the operator knows which row to look at."""
    journal = durable_store.open()
    journal.append_many([{"n": 1}, {"n": 2}, {"n": 3}])
    journal.close()
    _damage_record(durable_store, 2, "[1, 2]")
    reopened = durable_store.open()
    records = reopened.records()
    assert next(records) == (1, {"n": 1})
    with pytest.raises(CorruptRecordError) as raised:
        next(records)
    assert raised.value.position == 2
    message = str(raised.value)
    assert message.startswith(NAMES[durable_store.backend]), message
    assert ": record 2: its body is a JSON array, not an object" in message
    if durable_store.backend == "postgres":  # a writer's read, inside its transaction, too
        assert isinstance(reopened, PostgresJournal)
        with reopened.exclusive() as write, pytest.raises(CorruptRecordError) as raised:
            write.records(after=0)
        assert raised.value.position == 2
        assert str(raised.value).startswith(NAMES["postgres"])


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "redis://127.0.0.1/0",
            "unknown store 'redis' in 'redis://127.0.0.1/0': use memory:, sqlite:///path, "
            "postgresql://... or a directory",
        ),
        (
            "memory:x",
            "unknown store 'memory' in 'memory:x': use memory:, sqlite:///path, "
            "postgresql://... or a directory",
        ),
        ("", "an empty store URL names no store"),
    ],
)
def test_a_store_url_naming_no_store_says_which_there_are(url: str, said: str) -> None:
    """``--store`` is typed by an operator: the refusal lists the kinds of store there are."""
    with pytest.raises(StoreUrlError) as raised:
        open_journal(url)
    assert str(raised.value) == said


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("namespace=", "a namespace is 1 to 200 characters, no NUL"),
        ("namespace=a%00b", "a namespace is 1 to 200 characters, no NUL"),
        ("schema=bad-name", "schema 'bad-name' is not a plain SQL identifier"),
    ],
)
def test_a_postgresql_url_with_a_bad_name_says_the_rule_it_broke(query: str, said: str) -> None:
    """Checked before any connection is made (port 1 would refuse one)."""
    require_module("psycopg")
    with pytest.raises(StoreUrlError) as raised:
        open_journal(f"postgresql://postgres@127.0.0.1:1/test?{query}")
    assert str(raised.value) == said


def test_a_postgresql_url_libpq_cannot_read_is_refused_with_libpqs_reason() -> None:
    require_module("psycopg")
    with pytest.raises(StoreUrlError) as raised:
        open_journal("postgresql://postgres@127.0.0.1:1/test?bogus=1")
    message = str(raised.value)
    assert message.startswith("unreadable PostgreSQL URL: "), message
    assert '"bogus"' in message


def test_a_postgresql_store_without_its_driver_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL support is an optional extra (``forewarn.storage.urls``): a store URL that
    needs it names the package to install, not an import error."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # ``import psycopg`` fails
    monkeypatch.delitem(sys.modules, "forewarn.storage.postgres")  # imported again, and fails
    with pytest.raises(StoreUnavailableError) as raised:
        open_journal("postgresql://postgres@127.0.0.1:1/test")
    assert str(raised.value) == (
        "PostgreSQL stores need the psycopg driver: pip install 'forewarn[postgres]'"
    )


def test_an_unreachable_postgresql_server_is_named_without_the_password() -> None:
    """Port 1 on loopback refuses at once: the message says which journal, in which schema,
    on which server and database, then libpq's reason."""
    require_module("psycopg")
    with pytest.raises(StoreUnavailableError) as raised:
        open_journal("postgresql://fw:s3cret-pw@127.0.0.1:1/fleets?namespace=west&schema=fw")
    message = str(raised.value)
    assert message.startswith(
        "cannot reach PostgreSQL journal 'west' in fw at 127.0.0.1:1/fleets: "
    )
    assert "s3cret-pw" not in message


# -- what a refused record batch or metadata entry says ------------------------------------


def test_a_batch_of_64_mebibytes_is_kept_and_one_byte_more_is_refused_whole() -> None:
    """[ours] (``MAX_BATCH_BYTES``): one transaction's records are bounded as a whole, so a
    single ``append_many`` cannot pin more memory than that; at the bound exactly it is
    kept. Every backend encodes a batch with :func:`encode_batch` before writing any of it."""
    full = {"pad": "x" * (MAX_RECORD_BYTES - len('{"pad":""}'))}  # 1 MiB encoded
    batch = [full] * (MAX_BATCH_BYTES // MAX_RECORD_BYTES)
    assert sum(len(text) for text in encode_batch(batch)) == MAX_BATCH_BYTES == 64 * 1024 * 1024
    with pytest.raises(ValueTooLargeError) as raised:
        encode_batch([*batch, {}])  # "{}": two bytes more
    size = MAX_BATCH_BYTES + 2
    assert str(raised.value) == f"batch is {size} bytes, over the limit of {MAX_BATCH_BYTES} bytes"
    assert (raised.value.size, raised.value.limit) == (size, MAX_BATCH_BYTES)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        (7, "x", "metadata key must be a string, not <class 'int'>"),
        ("seed", b"42", "metadata value must be a string, not <class 'bytes'>"),
        ("a\x00b", "x", "metadata key holds a NUL character"),
        ("k", "a\x00b", "metadata value holds a NUL character"),
        ("k\ud800", "x", "metadata key is not valid Unicode"),
        ("k", "\udcff", "metadata value is not valid Unicode"),
        ("", "x", "metadata keys are 1 to 256 characters"),
        ("k" * 257, "x", "metadata keys are 1 to 256 characters"),
    ],
)
def test_refused_metadata_says_whether_the_key_or_the_value_and_why(
    key: Any, value: Any, said: str
) -> None:
    """[ours]: every backend keeps metadata as text (PostgreSQL text holds no NUL), so each
    refuses alike, naming which of the two is wrong for the caller to fix."""
    with pytest.raises(NotSerializableError) as raised:
        check_metadata(key, value)
    assert str(raised.value) == said


def test_metadata_bounds_are_inclusive_and_a_value_over_them_is_named_by_its_key() -> None:
    """[ours] (``MAX_METADATA_KEY_CHARS``, ``MAX_METADATA_VALUE_BYTES``): a key of 256
    characters and a value of 16 MiB (the fleet file's text) are kept; a byte more is refused
    with the key it was for, its size and the bound."""
    check_metadata("k" * MAX_METADATA_KEY_CHARS, "x" * MAX_METADATA_VALUE_BYTES)
    too_long = "é" * (MAX_METADATA_VALUE_BYTES // 2) + "x"  # UTF-8 bytes are counted
    with pytest.raises(ValueTooLargeError) as raised:
        check_metadata("fleet", too_long)
    size = MAX_METADATA_VALUE_BYTES + 1
    assert str(raised.value) == (
        f"metadata value 'fleet' is {size} bytes, over the limit of "
        f"{MAX_METADATA_VALUE_BYTES} bytes"
    )
    assert (raised.value.size, raised.value.limit) == (size, 16 * 1024 * 1024)
