"""PostgreSQL journal rules no other in-process test reaches: deleting a namespace, the
connect timeout a connection is opened with, a write's deadline once it is over, and
shutting down a connection that is already gone.

All [ours] (``forewarn.storage.postgres``) unless a line says otherwise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from types import SimpleNamespace

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from forewarn.storage import StoreUnavailableError, open_journal, postgres
from forewarn.storage.postgres import ExclusiveWrite, PostgresJournal, shut_socket, with_bounds

from .conftest import random_name, run_sql


@pytest.fixture
def namespaces(postgres_url: str) -> Iterator[list[str]]:
    """Namespaces of the test's own, removed afterwards."""
    names: list[str] = []
    try:
        yield names
    finally:
        for name in names:
            run_sql(postgres_url, "DELETE FROM public.forewarn_namespaces WHERE namespace = %s",
                    name)  # fmt: skip


def _journal(url: str, names: list[str]) -> PostgresJournal:
    names.append(random_name("rules"))
    journal = open_journal(f"{url}?namespace={names[-1]}")
    assert isinstance(journal, PostgresJournal)
    return journal


def test_deleting_a_namespace_removes_its_records_only_and_says_how_many(
    postgres_url: str, namespaces: list[str]
) -> None:
    """docs/scale-out.md: a namespace is deleted "with everything of it" (``forewarn store
    delete``); ``PostgresJournal.delete``: "how many records it held". Another namespace
    of the same database keeps all of its own."""
    doomed, kept = _journal(postgres_url, namespaces), _journal(postgres_url, namespaces)
    try:
        for n in range(3):
            doomed.append({"n": n})
        kept.append({"kept": True})
        assert doomed.delete() == 3
        assert doomed.delete() == 0  # nothing left to delete: no row, no records
        with open_journal(f"{postgres_url}?namespace={namespaces[0]}") as again:
            assert again.last_sequence() == 0
            assert list(again.records()) == []
        assert [body for _, body in kept.records()] == [{"kept": True}]
    finally:
        doomed.close()
        kept.close()


def _connect_timeout(conn: psycopg.Connection[object]) -> str:
    return conn.info.get_parameters()["connect_timeout"]


def test_a_connection_waits_at_most_the_time_asked_in_whole_seconds_at_least_one(
    postgres_url: str, namespaces: list[str]
) -> None:
    """libpq's ``connect_timeout`` is "in seconds (write as a decimal integer...)", and zero
    means "wait indefinitely"
    (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-CONNECT-TIMEOUT):
    a time asked for is rounded to whole seconds, never below one."""
    journal = _journal(postgres_url, namespaces)
    try:
        for asked, given in ((0.2, "1"), (3.4, "3")):
            conn = journal._connect(asked)
            try:
                assert _connect_timeout(conn) == given
            finally:
                conn.close()
        conn = journal._connect()  # none asked: the journal's own (5 s by default)
        try:
            assert _connect_timeout(conn) == "5"
        finally:
            conn.close()
    finally:
        journal.close()


def test_a_connection_opened_again_within_a_bound_waits_no_longer_than_the_bound_left(
    postgres_url: str, namespaces: list[str]
) -> None:
    """``PostgresJournal._connect``: "the time a write has left, whatever the URL says"."""
    journal = _journal(postgres_url, namespaces)
    try:
        journal._conn.close()  # dropped: the next call opens the writer's connection again
        with journal.bounded(30.0):
            assert journal.last_sequence() == 0
            assert _connect_timeout(journal._conn) == "30"
    finally:
        journal.close()


def test_a_call_once_the_deadline_is_over_is_refused_and_counted_expired(
    postgres_url: str, namespaces: list[str]
) -> None:
    """``PostgresJournal.bounded``: once the bound is over, later calls "are refused without
    trying", and ``expired`` says whether it "refused one"; before then they run."""
    journal = _journal(postgres_url, namespaces)
    try:
        with journal.bounded(60.0):
            journal._deadline = time.monotonic() + 0.95  # under a second left: still in time
            assert journal.last_sequence() == 0
            assert not journal.expired
            journal._deadline = time.monotonic() - 1.0  # over
            with pytest.raises(StoreUnavailableError, match=r"no answer from .* within 60 s"):
                journal.last_sequence()
            assert journal.expired is True
    finally:
        journal.close()


def test_a_call_at_the_deadline_itself_is_refused(
    postgres_url: str, namespaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PostgresJournal.bounded``: every call within the block "has ended ``seconds`` from
    now": at that moment the bound is over, so a call made then is refused."""
    journal = _journal(postgres_url, namespaces)
    try:
        with journal.bounded(60.0):
            monkeypatch.setattr(postgres, "time", SimpleNamespace(monotonic=lambda: 1000.0))
            journal._deadline = 1000.0
            with pytest.raises(StoreUnavailableError, match="within 60 s"):
                journal.last_sequence()
    finally:
        monkeypatch.undo()
        journal.close()


def test_shutting_down_a_connection_already_gone_is_not_an_error(postgres_url: str) -> None:
    """``shut_socket`` runs from a deadline's timer, whenever it fires: on a connection
    closed meanwhile (psycopg refuses to give its socket), or one whose descriptor is no
    longer a socket (an OSError), it does nothing rather than raise in that thread."""
    closed = psycopg.connect(postgres_url, autocommit=True)
    closed.close()
    shut_socket(closed)
    not_a_socket = psycopg.connect(postgres_url, autocommit=True)
    try:
        with open(os.devnull, "rb") as devnull:
            os.dup2(devnull.fileno(), not_a_socket.pgconn.socket)
        shut_socket(not_a_socket)
    finally:
        not_a_socket.close()


def test_the_urls_own_server_options_are_kept(postgres_url: str) -> None:
    """``with_bounds``: the client's bounds go "wherever the URL gives none"; docs/scale-out.md:
    any other libpq parameter "passes through"."""
    given = "host=127.0.0.1 options='-c statement_timeout=4321'"
    assert conninfo_to_dict(with_bounds(given, 5.0))["options"] == "-c statement_timeout=4321"
    with psycopg.connect(
        with_bounds(f"{postgres_url}?options=-c%20statement_timeout%3D4321", 5.0)
    ) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("4321ms",)


def _idle_ms(write: ExclusiveWrite) -> int:
    conn = write._conn
    row = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert row is not None
    value = str(row[0])
    return int(value.removesuffix("ms")) if value.endswith("ms") else int(value[:-1]) * 1000


def test_a_write_gives_the_server_half_its_time_left_to_wait_for_its_next_statement(
    postgres_url: str, namespaces: list[str]
) -> None:
    """``PostgresJournal._idle_bound``: "half the write's time left (:meth:`bounded`), so
    that a COMMIT sent in the first half can only commit before the bound is over; 10 s
    unbounded"."""
    journal = _journal(postgres_url, namespaces)
    try:
        with journal.exclusive() as write:
            assert _idle_ms(write) == 10_000
        with journal.bounded(60.0), journal.exclusive() as write:
            assert 25_000 < _idle_ms(write) <= 30_000
    finally:
        journal.close()


def test_a_write_begun_as_its_bound_ends_gives_the_server_the_least_wait(
    postgres_url: str, namespaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half of almost nothing left is still a wait, the least one (a millisecond), never
    more: PostgreSQL reads ``idle_in_transaction_session_timeout = 0`` as no timeout at all
    (https://www.postgresql.org/docs/current/runtime-config-client.html), and a longer one
    would let a COMMIT held on its way arrive after the bound. The commit is then refused."""
    journal = _journal(postgres_url, namespaces)
    try:
        with journal.bounded(60.0):
            monkeypatch.setattr(postgres, "time", SimpleNamespace(monotonic=lambda: 1000.0))
            journal._deadline = 1000.0005
            with pytest.raises(StoreUnavailableError), journal.exclusive() as write:
                assert _idle_ms(write) == 1
    finally:
        monkeypatch.undo()
        journal.close()
