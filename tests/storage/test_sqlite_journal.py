"""The SQLite file: durability settings, one writer, schema versions and damaged files.

All [ours] (``forewarn.storage.sqlite``): SPEC 2 [ours: restart] needs the journal to
survive the process, which is what WAL with ``synchronous=FULL`` and the version checks are for.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from forewarn.storage import (
    CorruptStoreError,
    NewerSchemaError,
    SqliteJournal,
    StoreBusyError,
    StoreSchemaError,
    StoreUnavailableError,
)
from forewarn.storage.sqlite import APPLICATION_ID, SCHEMA_VERSION


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


def _set_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE forewarn_schema SET version = ?", (version,))
    conn.close()


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT version FROM forewarn_schema").fetchone()
        return int(row[0])
    finally:
        conn.close()


def test_appends_are_durable_on_return(path: Path) -> None:
    """Write-ahead logging with a sync at every commit, and the file held by one connection."""
    with SqliteJournal(path) as journal:
        assert journal.durability() == {
            "journal_mode": "wal",
            "synchronous": "full",
            "locking_mode": "exclusive",
        }


def _pragma(journal: SqliteJournal, name: str) -> object:
    return journal._conn.execute(f"PRAGMA {name}").fetchone()[0]


@pytest.mark.parametrize("opening", ["new file", "existing file"])
def test_the_connection_commits_durably_as_sqlite_itself_reports(path: Path, opening: str) -> None:
    """Asked of SQLite on the journal's own connection, not through ``durability()``: the
    write-ahead log, a sync of it at every commit (``synchronous`` 2 is FULL), and the file
    held by this connection alone. Per-connection settings, so a reopened file has them too.
    And no transaction Python opens of itself (no isolation level): each is the journal's own
    ``BEGIN IMMEDIATE``, which takes the write lock before anything is read."""
    if opening == "existing file":
        with SqliteJournal(path) as journal:
            journal.append({"n": 1})
    with SqliteJournal(path) as journal:
        assert journal._conn.isolation_level is None
        assert str(_pragma(journal, "journal_mode")).lower() == "wal"
        assert _pragma(journal, "synchronous") == 2
        assert str(_pragma(journal, "locking_mode")).lower() == "exclusive"
        assert journal.append({"n": 2}) == (2 if opening == "existing file" else 1)


def test_a_new_file_is_stamped_with_its_schema_version(path: Path) -> None:
    SqliteJournal(path).close()
    assert _version(path) == SCHEMA_VERSION == 1
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    finally:
        conn.close()


def test_a_second_writer_is_refused_until_the_first_closes(path: Path) -> None:
    """Two servers on one data directory would replay the same history into two platforms."""
    first = SqliteJournal(path)
    try:
        with pytest.raises(StoreBusyError, match="one writer"):
            SqliteJournal(path, busy_timeout=0.05)
        first.append({"n": 1})
    finally:
        first.close()
    with SqliteJournal(path) as second:
        assert second.last_sequence() == 1


def test_a_second_writer_waits_two_seconds_for_the_first_unless_told_otherwise(
    path: Path,
) -> None:
    """[ours] A second open waits up to 2 s for the lock (a restart whose old process is
    still closing gets through), then is refused; ``busy_timeout`` sets another bound. Read
    back from SQLite on the journal's own connection, in milliseconds."""
    with SqliteJournal(path) as journal:
        assert _pragma(journal, "busy_timeout") == 2000
    with SqliteJournal(path, busy_timeout=0.05) as journal:
        assert _pragma(journal, "busy_timeout") == 50


def test_an_open_that_cannot_tell_whether_the_file_was_there_never_removes_it(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[ours] A failed open removes the file only when it created it (a first start on a
    full disk). When ``stat`` fails with anything but "no such file" the open cannot tell:
    here the file is another writer's journal, which a refused second open must leave be."""
    first = SqliteJournal(path)
    try:
        first.append({"n": 1})
        real_stat = os.stat

        def unreadable(name: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            if name == str(path):
                raise PermissionError(13, "Permission denied", name)
            return real_stat(name, *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(os, "stat", unreadable)
            with pytest.raises(StoreBusyError):
                SqliteJournal(path, busy_timeout=0.05)
        assert path.exists()
        assert first.append({"n": 2}) == 2
    finally:
        first.close()
    with SqliteJournal(path) as reopened:
        assert [record for _, record in reopened.records()] == [{"n": 1}, {"n": 2}]


def test_a_newer_schema_is_refused_without_touching_the_file(path: Path) -> None:
    with SqliteJournal(path) as journal:
        journal.append({"n": 1})
    _set_version(path, SCHEMA_VERSION + 1)
    before = path.read_bytes()
    with pytest.raises(NewerSchemaError) as raised:
        SqliteJournal(path)
    message = str(raised.value)
    assert str(path) in message
    assert f"version {SCHEMA_VERSION + 1}" in message
    assert "upgrade forewarn" in message
    assert path.read_bytes() == before


def test_an_older_schema_is_migrated_in_one_step_with_its_version(path: Path) -> None:
    with SqliteJournal(path) as journal:
        journal.append({"n": 1})

    def add_index(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE INDEX records_by_body ON records (body)")

    with SqliteJournal(path, schema_version=2, migrations={1: add_index}) as journal:
        assert list(journal.records()) == [(1, {"n": 1})]
        assert journal.append({"n": 2}) == 2
    assert _version(path) == 2
    conn = sqlite3.connect(path)
    try:
        indexes = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    finally:
        conn.close()
    assert ("records_by_body",) in indexes
    # And the current code now refuses it as newer.
    with pytest.raises(NewerSchemaError):
        SqliteJournal(path)


def test_a_failed_migration_leaves_the_file_as_it_was(path: Path) -> None:
    SqliteJournal(path).close()

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE scratch (x)")
        raise RuntimeError("migration bug")

    with pytest.raises(RuntimeError, match="migration bug"):
        SqliteJournal(path, schema_version=2, migrations={1: half_done})
    assert _version(path) == 1
    with SqliteJournal(path) as journal:
        assert journal.last_sequence() == 0
    conn = sqlite3.connect(path)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert "scratch" not in tables


def test_a_failed_migration_is_reported_as_itself_when_nothing_is_left_to_roll_back(
    path: Path,
) -> None:
    """A migration that ended the transaction before failing leaves the ROLLBACK nothing to
    undo, and SQLite refuses it: that refusal must not hide the migration's own error."""
    SqliteJournal(path).close()

    def ends_then_fails(conn: sqlite3.Connection) -> None:
        conn.execute("COMMIT")
        raise RuntimeError("migration bug")

    with pytest.raises(RuntimeError, match="migration bug"):
        SqliteJournal(path, schema_version=2, migrations={1: ends_then_fails})


def test_a_missing_migration_is_an_error(path: Path) -> None:
    SqliteJournal(path).close()
    with pytest.raises(StoreSchemaError, match="no migration from schema version 1 to 2"):
        SqliteJournal(path, schema_version=2, migrations={})


def test_a_file_that_is_not_sqlite_is_refused_as_corrupt(path: Path) -> None:
    path.write_bytes(b"vms:\n  - {name: vm0}\n" * 100)
    with pytest.raises(CorruptStoreError, match="not a database"):
        SqliteJournal(path)


def test_another_applications_database_is_refused(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptStoreError, match="not a forewarn journal"):
        SqliteJournal(path)


def test_a_damaged_version_table_is_refused(path: Path) -> None:
    SqliteJournal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO forewarn_schema (version) VALUES (1)")
    conn.close()
    with pytest.raises(CorruptStoreError, match="damaged schema version table"):
        SqliteJournal(path)


def test_a_place_that_cannot_hold_a_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreUnavailableError, match="unable to open"):
        SqliteJournal(tmp_path / "a-file" / "journal.sqlite3")


def test_a_journal_where_write_ahead_logging_is_unavailable_is_refused() -> None:
    """SQLite keeps an in-memory database's journal in memory whatever it is asked: no
    write-ahead log on disk, so no append would survive the process. Refused at open."""
    with pytest.raises(StoreUnavailableError, match=r"write-ahead logging unavailable \(memory\)"):
        SqliteJournal(":memory:")


@pytest.mark.parametrize(("level", "named"), [(0, "off"), (1, "normal"), (2, "full"), (3, "extra")])
def test_durability_names_each_synchronous_level(path: Path, level: int, named: str) -> None:
    """What ``durability()`` reports is what SQLite uses, by the name its documentation gives
    each ``PRAGMA synchronous`` level."""
    with SqliteJournal(path) as journal:
        reported = journal.durability()
        journal._conn.execute(f"PRAGMA synchronous={level}")  # as a misconfigured build would
        changed = journal.durability()
    assert reported["synchronous"] == "full"
    assert changed == {**reported, "synchronous": named}


def test_a_commit_is_in_the_write_ahead_log_and_the_file_is_held(path: Path) -> None:
    """The append is in ``-wal`` when it returns (the database file itself is written at a
    checkpoint), and no other connection can read the file meanwhile (exclusive locking)."""
    with SqliteJournal(path) as journal:
        journal.append({"n": 1})
        assert Path(f"{path}-wal").stat().st_size > 0
        other = sqlite3.connect(path, timeout=0.05)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("SELECT count(*) FROM records").fetchone()
        finally:
            other.close()
