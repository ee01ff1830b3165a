"""From a store URL to a journal [ours] (``forewarn.storage.urls``).

``forewarn serve --data-dir DIR`` stores ``sqlite:///`` + the resolved path of
``DIR/forewarn.sqlite3`` (``forewarn.server.state``), which begins ``sqlite:////``; both that and
the three-slash form name the same absolute file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forewarn.storage import (
    SQLITE_FILE_NAME,
    MemoryJournal,
    SqliteJournal,
    StoreUnavailableError,
    StoreUrlError,
    open_journal,
)
from forewarn.storage.urls import is_postgres_url, postgres_target, sqlite_path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///srv/forewarn/journal.db", "/srv/forewarn/journal.db"),
        ("sqlite:////srv/forewarn/journal.db", "/srv/forewarn/journal.db"),
        ("sqlite:relative/journal.db", "relative/journal.db"),
    ],
)
def test_sqlite_urls_name_files(url: str, path: str) -> None:
    assert sqlite_path(url) == path


@pytest.mark.parametrize("url", ["sqlite://host/journal.db", "sqlite:", "sqlite:///"])
def test_sqlite_urls_without_a_local_file_are_refused(url: str) -> None:
    with pytest.raises(StoreUrlError):
        sqlite_path(url)


def test_three_and_four_slashes_open_the_same_file(tmp_path: Path) -> None:
    file = tmp_path / "journal.db"
    with open_journal(f"sqlite://{file}") as journal:
        assert isinstance(journal, SqliteJournal)
        journal.append({"n": 1})
    with open_journal(f"sqlite:///{file}") as journal:
        assert journal.last_sequence() == 1


def test_a_relative_sqlite_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    open_journal("sqlite:here.db").close()
    assert (tmp_path / "here.db").is_file()


def test_a_directory_holds_its_journal_file(tmp_path: Path) -> None:
    directory = tmp_path / "data" / "fleet-a"
    with open_journal(str(directory)) as journal:
        journal.append({"n": 1})
    assert (directory / SQLITE_FILE_NAME).is_file()
    with open_journal(str(directory / SQLITE_FILE_NAME)) as journal:
        assert journal.last_sequence() == 1


def test_a_directory_that_cannot_be_made_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreUnavailableError, match="cannot create data directory"):
        open_journal(str(tmp_path / "a-file" / "data"))


@pytest.mark.parametrize("url", ["memory:", "memory://"])
def test_memory_is_a_fresh_journal_each_time(url: str) -> None:
    with open_journal(url) as first, open_journal(url) as second:
        assert isinstance(first, MemoryJournal)
        first.append({"n": 1})
        assert second.last_sequence() == 0


@pytest.mark.parametrize("url", ["", "redis://127.0.0.1/0", "mysql://db/forewarn", "memory:x"])
def test_unknown_stores_are_refused(url: str) -> None:
    with pytest.raises(StoreUrlError):
        open_journal(url)


def test_postgres_urls_keep_libpq_parameters_and_take_out_ours() -> None:
    conninfo, namespace, schema = postgres_target(
        "postgresql://fw:p%40ss@db.internal:6432/fleets"
        "?sslmode=require&namespace=west%20europe&schema=forewarn&application_name=fw"
    )
    assert conninfo == (
        "postgresql://fw:p%40ss@db.internal:6432/fleets?sslmode=require&application_name=fw"
    )
    assert (namespace, schema) == ("west europe", "forewarn")
    assert postgres_target("postgres://h/db") == ("postgres://h/db", None, None)


def test_a_parameter_of_ours_given_twice_is_refused() -> None:
    with pytest.raises(StoreUrlError, match="namespace is given twice"):
        postgres_target("postgresql://h/db?namespace=a&namespace=b")


@pytest.mark.parametrize(
    ("url", "postgres"),
    [
        ("postgresql://postgres@127.0.0.1:5432/test?namespace=a", True),
        ("POSTGRES://db/x", True),
        ("sqlite:///tmp/x.db", False),
        ("memory:", False),
        ("/var/lib/forewarn", False),
        ("/data/postgresql://x", False),
    ],
)
def test_a_postgresql_store_is_told_by_its_scheme_alone(url: str, postgres: bool) -> None:
    """Only PostgreSQL stores may be shared by several front-ends (docs/scale-out.md); the
    same test decides which backend opens the URL."""
    assert is_postgres_url(url) is postgres
