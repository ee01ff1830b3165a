"""The client's own bounds on a PostgreSQL journal: a server that stops answering.

docs/scale-out.md, "A silent PostgreSQL": every connection carries TCP keepalives and
``tcp_user_timeout`` (a peer gone without a word), and a write waits at most its bound
(:meth:`PostgresJournal.bounded`), after which it has not been applied and is not applied
later, even when its ``COMMIT`` was already on its way. The server goes silent through a
TCP proxy that holds what either side sends, then delivers it (tests/support/tcp_proxy.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from e2e_support import wait_until
from tcp_proxy import TcpProxy

from forewarn.commands import Tick
from forewarn.domain.clock import DEFAULT_START
from forewarn.storage import postgres
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import PostgresJournal

from .conftest import random_name, run_sql

RECORD = Tick().to_record(DEFAULT_START)


@pytest.fixture
def through_proxy(postgres_url: str) -> Iterator[tuple[PostgresJournal, TcpProxy, str]]:
    """A journal of a namespace of its own reaching the server through a proxy, the proxy,
    and the namespace's URL straight to the server."""
    namespace = random_name("bounds")
    parts = urlsplit(postgres_url)
    assert parts.hostname is not None
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        proxied = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        journal = PostgresJournal(proxied, namespace=namespace)
        try:
            yield journal, proxy, f"{postgres_url}?namespace={namespace}"
        finally:
            proxy.resume()
            journal.close()
            run_sql(postgres_url, "DELETE FROM public.forewarn_namespaces WHERE namespace = %s",
                    namespace)  # fmt: skip


def test_every_connection_carries_tcp_keepalives_and_a_user_timeout(
    through_proxy: tuple[PostgresJournal, TcpProxy, str],
) -> None:
    journal, _, _ = through_proxy
    with journal._lock:
        options = journal._connection().info.get_parameters()
    assert (options["keepalives"], options["tcp_user_timeout"]) == ("1", "10000")
    assert (options["keepalives_idle"], options["keepalives_count"]) == ("5", "2")


def test_the_server_ends_a_session_whose_front_end_vanished_within_seconds(
    through_proxy: tuple[PostgresJournal, TcpProxy, str],
) -> None:
    """A front-end gone without a word leaves its session, and the leader lock it holds, to
    the server's keepalives: asked for each session, not the operating system's two hours
    (a soak cutting the network kept the old leader's lock, and no one led again)."""
    journal, _, _ = through_proxy
    with journal._lock:
        connection = journal._connection()
        shown = {
            name: connection.execute(f"SHOW {name}").fetchone()
            for name in (
                "tcp_keepalives_idle",
                "tcp_keepalives_interval",
                "tcp_keepalives_count",
                "tcp_user_timeout",
            )
        }
    assert shown == {
        "tcp_keepalives_idle": ("5",),
        "tcp_keepalives_interval": ("2",),
        "tcp_keepalives_count": ("2",),
        "tcp_user_timeout": ("10000",),
    }


def test_a_read_the_server_never_answers_ends_at_the_bound_and_the_next_is_refused(
    through_proxy: tuple[PostgresJournal, TcpProxy, str],
) -> None:
    journal, proxy, _ = through_proxy
    proxy.silence()
    with journal.bounded(0.5):
        with pytest.raises(StoreUnavailableError, match=r"no answer from .* within 0.5 s"):
            list(journal.records())
        assert journal.expired
        with pytest.raises(StoreUnavailableError, match=r"no answer from .* within 0.5 s"):
            journal.last_sequence()  # refused without trying: the bound is over
    proxy.resume()
    with journal.bounded(5.0):  # a connection of its own again, answered
        assert journal.last_sequence() == 0
    assert not journal.expired


def test_a_commit_held_on_its_way_past_the_bound_is_never_applied(
    through_proxy: tuple[PostgresJournal, TcpProxy, str],
) -> None:
    """The COMMIT leaves before the bound and is held by the silent network until after it:
    the writer is told the write failed at the bound, so the server must not commit when the
    COMMIT arrives. It ends the transaction itself first (``idle_in_transaction_session_
    timeout``: half the write's time left when it began)."""
    journal, proxy, direct = through_proxy

    def append_then_commit_into_the_silence() -> None:
        with journal.bounded(2.0), journal.exclusive() as transaction:
            transaction.append_if(0, [RECORD])  # answered: the append is in the transaction
            proxy.silence_at(b"COMMIT")  # and the COMMIT that follows is held

    with pytest.raises(StoreUnavailableError, match="within 2 s"):
        append_then_commit_into_the_silence()
    assert proxy.held() > 0
    proxy.resume()
    # The COMMIT is delivered. A later write holds the same lock once the first transaction
    # has ended, however it ended: what the journal holds then is final.
    with journal.bounded(5.0), journal.exclusive() as transaction:
        assert transaction.records(after=0) == []
    parts = urlsplit(direct)
    namespace = parts.query.removeprefix("namespace=")
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as conn:
        count = conn.execute(
            "SELECT count(*) FROM public.forewarn_records WHERE namespace = %s", [namespace]
        ).fetchone()
    assert count == (0,)


def test_the_followers_wait_and_the_leader_lock_end_when_the_server_falls_silent(
    through_proxy: tuple[PostgresJournal, TcpProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background connections (the follower's LISTEN, the leader lock's session) are
    bounded too, so neither they nor a shutdown waiting on them wait for ever: a wait for an
    append ends its own timeout plus the background bound after it began, and a look at the
    leader lock the bound after it began (here 0.5 s, 5 s in a front-end)."""
    monkeypatch.setattr(postgres, "_ANSWER_SECONDS", 0.5)
    journal, proxy, _ = through_proxy
    assert journal.wait_for_append(0, 0) == 0  # listening, answered
    leadership = journal.leadership()
    assert leadership.acquire()
    proxy.silence()
    with pytest.raises(StoreUnavailableError, match="server closed the connection"):
        journal.wait_for_append(0, 0.1)
    with pytest.raises(StoreUnavailableError, match="server closed the connection"):
        leadership.acquire()
    leadership.release()  # its session severed: nothing to wait on
    proxy.resume()
    # A session of its own again, holding the lock once the server has ended the severed
    # one (it learns of it when the proxy passes its close on, a moment after resuming).
    wait_until(leadership.acquire, what="the leader lock taken again", timeout=30)
    leadership.release()
    assert journal.wait_for_append(0, 0) == 0


def test_taking_the_leader_lock_ends_when_the_server_falls_silent_on_the_try(
    through_proxy: tuple[PostgresJournal, TcpProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session opened for the leader lock whose ``pg_try_advisory_lock`` is never answered
    is severed at the background bound (0.5 s here): an error, not a front-end stuck."""
    monkeypatch.setattr(postgres, "_ANSWER_SECONDS", 0.5)
    journal, proxy, _ = through_proxy
    leadership = journal.leadership()
    proxy.silence_at(b"pg_try_advisory_lock")
    with pytest.raises(StoreUnavailableError):
        leadership.acquire()
    assert proxy.held() > 0


def test_giving_the_leader_lock_back_ends_when_the_server_falls_silent(
    through_proxy: tuple[PostgresJournal, TcpProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Leadership.release`` gives the lock back, then closes the session: an unlock never
    answered is severed at the background bound, and the session closed all the same (the
    server then releases the lock with it)."""
    monkeypatch.setattr(postgres, "_ANSWER_SECONDS", 0.5)
    journal, proxy, _ = through_proxy
    leadership = journal.leadership()
    assert leadership.acquire()
    proxy.silence_at(b"pg_advisory_unlock")
    leadership.release()
    assert proxy.held() > 0


def test_closing_a_journal_ends_when_the_server_falls_silent(
    through_proxy: tuple[PostgresJournal, TcpProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PostgresJournal.close`` first wakes a waiter with a notification on the writer's
    connection: never answered, it is severed at the background bound, so a shutdown does
    not wait on a silent server for ever."""
    monkeypatch.setattr(postgres, "_ANSWER_SECONDS", 0.5)
    journal, proxy, _ = through_proxy
    assert journal.wait_for_append(0, 0) == 0  # listening: close() has a waiter to wake
    proxy.silence_at(b"pg_notify")
    journal.close()
    assert proxy.held() > 0


def test_bounded_calls_start_no_thread_each(
    through_proxy: tuple[PostgresJournal, TcpProxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call of a front-end is bounded, several a second while it is idle: the bounds
    are kept by one thread (``forewarn.storage._deadlines``), not a timer thread each."""
    journal, _, _ = through_proxy
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for _ in range(20):
        with journal.bounded(5.0):
            assert journal.last_sequence() == 0
    assert started in ([], ["forewarn deadlines"])
