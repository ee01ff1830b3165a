"""PostgreSQL: the names a fleet is known by, and what its connections tell the server.

All [ours] (``forewarn.storage.postgres``). A namespace and a schema are checked before any
connection is made, bounds included; each journal's connections name their fleet in
``pg_stat_activity`` and give up on a dead server after a few seconds; and what one fleet locks
or listens on is its own, in its own namespace and schema, so fleets sharing a database never
wait on or wake one another.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from machine_support import require_module

from forewarn.storage import StorageError, StoreUnavailableError, StoreUrlError, open_journal
from forewarn.storage.postgres import (
    DEFAULT_NAMESPACE,
    MAX_NAMESPACE_CHARS,
    PostgresJournal,
    describe,
)

from .conftest import random_name, run_sql

#: Port 1 on loopback refuses at once: a name that passes its check gets as far as connecting.
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"


@pytest.fixture
def journals(postgres_url: str) -> Iterator[list[PostgresJournal]]:
    """Journals a test opened, closed afterwards with their namespaces in ``public`` removed."""
    opened: list[PostgresJournal] = []
    try:
        yield opened
    finally:
        for journal in opened:
            journal.close()
        for namespace in {journal.namespace for journal in opened}:
            run_sql(
                postgres_url,
                "DELETE FROM public.forewarn_namespaces WHERE namespace = %s",
                namespace,
            )


def _parameters(journal: PostgresJournal) -> dict[str, str]:
    """What the journal's connection asked the server for (libpq's view of it)."""
    return journal._connection().info.get_parameters()


def _show_application_name(journal: PostgresJournal) -> str:
    row = journal._connection().execute("SHOW application_name").fetchone()
    assert row is not None
    return str(row[0])


# -- names, checked before connecting ------------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    ["n", "n" * MAX_NAMESPACE_CHARS, "west europe", "fleet/é"],
)
def test_a_namespace_of_1_to_the_limit_characters_is_taken(namespace: str) -> None:
    """Accepted names go on to connecting, which port 1 refuses."""
    require_module("psycopg")
    with pytest.raises(StoreUnavailableError):
        PostgresJournal(UNREACHABLE, namespace=namespace)


@pytest.mark.parametrize(
    "namespace",
    ["", "n" * (MAX_NAMESPACE_CHARS + 1), "a\x00b", "\x00"],
)
def test_a_namespace_out_of_bounds_or_with_a_nul_is_refused(namespace: str) -> None:
    """PostgreSQL text cannot hold NUL; the length bound keeps a fleet's name readable."""
    require_module("psycopg")
    with pytest.raises(StoreUrlError) as raised:
        PostgresJournal(UNREACHABLE, namespace=namespace)
    assert str(raised.value) == "a namespace is 1 to 200 characters, no NUL"
    assert MAX_NAMESPACE_CHARS == 200


def test_a_schema_of_63_characters_is_taken_and_64_refused() -> None:
    """PostgreSQL keeps the first 63 bytes of an identifier: a longer schema name would be
    cut silently, and two fleets' names differing after that would share one schema."""
    require_module("psycopg")
    with pytest.raises(StoreUnavailableError):
        PostgresJournal(UNREACHABLE, schema="s" * 63)
    with pytest.raises(StoreUrlError) as raised:
        PostgresJournal(UNREACHABLE, schema="s" * 64)
    assert str(raised.value) == f"schema {'s' * 64!r} is not a plain SQL identifier"


def test_the_longest_names_open_a_working_journal(postgres_url: str) -> None:
    """A namespace at the limit in a schema at PostgreSQL's identifier limit is a store like
    any other. Its connections carry the fleet's name cut to the 63 bytes the server keeps,
    cut before it is sent: what the connection asks for (and a pooler in between sees) is
    what pg_stat_activity shows."""
    schema = ("forewarn_test_" + uuid.uuid4().hex * 2)[:63]
    namespace = "n" * (MAX_NAMESPACE_CHARS - 12) + uuid.uuid4().hex[:12]
    try:
        journal = PostgresJournal(postgres_url, namespace=namespace, schema=schema)
        try:
            assert journal.append({"n": 1}) == 1
            assert [record for _, record in journal.records()] == [{"n": 1}]
            name = f"forewarn {namespace}"[:63]
            assert len(name) == 63
            assert _show_application_name(journal) == name
            assert _parameters(journal)["application_name"] == name
        finally:
            journal.close()
    finally:
        run_sql(postgres_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_url_without_a_namespace_opens_the_default_one(
    postgres_url: str, postgres_schema: str
) -> None:
    """The store URL's namespace is optional (``forewarn.storage.urls``): "default"."""
    journal = open_journal(f"{postgres_url}?schema={postgres_schema}")
    try:
        assert isinstance(journal, PostgresJournal)
        assert (journal.namespace, journal.schema) == (DEFAULT_NAMESPACE, postgres_schema)
        assert DEFAULT_NAMESPACE == "default"
    finally:
        journal.close()


# -- where a journal is, as messages name it -----------------------------------------------


@pytest.mark.parametrize(
    ("conninfo", "where"),
    [
        ("postgresql://fw:s3cret@db.internal:6432/fleets", "db.internal:6432/fleets"),
        ("postgresql://fw@db.internal/fleets", "db.internal:5432/fleets"),
        ("postgresql://fw@db.internal", "db.internal:5432/fw"),
        ("postgresql://db.internal", "db.internal:5432/"),
        ("host=db.internal port=7000 user=fw", "db.internal:7000/fw"),
        ("dbname=fleets", "localhost:5432/fleets"),
        ("host=/run/postgresql dbname=fw password=s3cret", "/run/postgresql:5432/fw"),
    ],
)
def test_describe_names_host_port_and_database_without_the_password(
    conninfo: str, where: str
) -> None:
    """libpq's defaults fill what the URL leaves out: port 5432, and a database named after
    the user when none is given."""
    assert describe(conninfo) == where


# -- what each connection asks the server for ----------------------------------------------


def test_connections_name_their_fleet_and_give_up_on_a_dead_server_after_5_seconds(
    postgres_url: str, journals: list[PostgresJournal]
) -> None:
    """libpq would wait forever for a server that does not answer; pg_stat_activity shows
    which fleet each connection serves."""
    namespace = random_name("test")
    journal = PostgresJournal(postgres_url, namespace=namespace)
    journals.append(journal)
    parameters = _parameters(journal)
    assert parameters["connect_timeout"] == "5"
    assert parameters["application_name"] == f"forewarn {namespace}"
    assert _show_application_name(journal) == f"forewarn {namespace}"


@pytest.mark.parametrize(("seconds", "given"), [(2.6, "3"), (0.2, "1"), (1.0, "1")])
def test_a_connect_timeout_is_whole_seconds_and_one_at_least(
    postgres_url: str, journals: list[PostgresJournal], seconds: float, given: str
) -> None:
    """libpq takes whole seconds; a timeout of 0 would mean none at all."""
    journal = PostgresJournal(postgres_url, namespace=random_name("test"), connect_timeout=seconds)
    journals.append(journal)
    assert _parameters(journal)["connect_timeout"] == given


def test_the_urls_own_timeout_and_application_name_are_kept(
    postgres_url: str, journals: list[PostgresJournal]
) -> None:
    """An operator who names the connections or sets the timeout in the URL is obeyed."""
    journal = PostgresJournal(
        f"{postgres_url}?connect_timeout=10&application_name=fw-west",
        namespace=random_name("test"),
    )
    journals.append(journal)
    parameters = _parameters(journal)
    assert (parameters["connect_timeout"], parameters["application_name"]) == ("10", "fw-west")
    assert _show_application_name(journal) == "fw-west"


# -- what a fleet locks and listens on is its own ------------------------------------------


def _listening_on(journal: PostgresJournal) -> list[str]:
    """The channels the journal's follower connection LISTENs on, as the server has them."""
    assert journal.wait_for_append(0, 0) == 0  # opens the listening connection
    listener: Any = journal._listener
    return [row[0] for row in listener.execute("SELECT pg_listening_channels()").fetchall()]


def test_followers_of_one_fleet_share_a_channel_and_other_fleets_have_their_own(
    postgres_url: str, postgres_schema: str, journals: list[PostgresJournal]
) -> None:
    """An append wakes the followers of its own fleet, not those of every fleet in the
    database: another namespace, or the same namespace in another schema, is another fleet."""
    namespace = random_name("test")
    first = PostgresJournal(postgres_url, namespace=namespace)
    again = first.another()
    elsewhere = PostgresJournal(postgres_url, namespace=random_name("test"))
    other_schema = PostgresJournal(postgres_url, namespace=namespace, schema=postgres_schema)
    journals.extend([first, again, elsewhere, other_schema])
    channels = [_listening_on(journal) for journal in journals]
    assert all(len(found) == 1 for found in channels), channels
    assert channels[0] == channels[1]
    assert len({found[0] for found in channels}) == 3, channels


def test_fleets_in_one_database_take_their_own_write_and_leader_locks(
    postgres_url: str, postgres_schema: str, journals: list[PostgresJournal]
) -> None:
    """A fleet's writers take turns and one of its front-ends leads; another fleet's, in
    another namespace or schema, are not held up by them. The write lock and the leader lock
    are two locks: a leader writes too."""
    namespace = random_name("test")
    fleet = PostgresJournal(postgres_url, namespace=namespace)
    same_fleet = PostgresJournal(postgres_url, namespace=namespace)
    other_namespace = PostgresJournal(postgres_url, namespace=random_name("test"))
    other_schema = PostgresJournal(postgres_url, namespace=namespace, schema=postgres_schema)
    journals.extend([fleet, same_fleet, other_namespace, other_schema])
    leaderships = [journal.leadership() for journal in journals]
    try:
        assert leaderships[0].acquire()
        assert not leaderships[1].acquire()  # the same fleet: one leader
        assert leaderships[2].acquire()
        assert leaderships[3].acquire()
        with fleet.exclusive(lock_timeout=5) as write:  # its own leader is not in the way
            write.records(after=0)
            assert _writes_without_waiting(other_namespace)
            assert _writes_without_waiting(other_schema)
            assert not _writes_without_waiting(same_fleet)
    finally:
        for leadership in leaderships:
            leadership.release()


def _writes_without_waiting(journal: PostgresJournal) -> bool:
    """Whether the journal gets its write lock within a quarter of a second (in a thread of
    its own, as another front-end would)."""
    got: list[bool] = []

    def write() -> None:
        try:
            with journal.exclusive(lock_timeout=0.25) as write:
                write.records(after=0)  # the lock is held once the first read answers
                got.append(True)
        except StorageError:
            got.append(False)

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(30)
    assert got, "the write neither got the lock nor gave up"
    return got[0]
