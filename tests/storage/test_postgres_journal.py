"""PostgreSQL: several fleets in one database, several front-ends on one fleet.

All [ours] (``forewarn.storage.postgres``). Front-ends sharing a fleet each append and follow
the others through ``records(after=n)``; that only rebuilds the same platform everywhere if
sequence numbers are strictly increasing per fleet with no gap a reader could ever observe.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from machine_support import require_module

from forewarn.storage import (
    AppendConflictError,
    CorruptStoreError,
    JournalClosedError,
    NewerSchemaError,
    StorageError,
    StoreSchemaError,
    StoreUnavailableError,
    StoreUrlError,
    open_journal,
    postgres,
)
from forewarn.storage.postgres import (
    SCHEMA_VERSION,
    Connection,
    Leadership,
    Migration,
    PostgresJournal,
    describe,
)

from .conftest import Store, random_name, run_sql

WRITERS = 2
APPENDS_PER_WRITER = 150


def _in_namespace(url: str, namespace: str, schema: str | None = None) -> str:
    return f"{url}?namespace={namespace}" + (f"&schema={schema}" if schema else "")


@pytest.fixture
def fleet(postgres_url: str) -> Iterator[Store]:
    """A fleet of its own in the shared database, removed afterwards."""
    namespace = random_name("test")
    store = Store("postgres", _in_namespace(postgres_url, namespace))
    try:
        yield store
    finally:
        store.close_all()
        _drop_namespace(postgres_url, namespace)


def _drop_namespace(url: str, namespace: str) -> None:
    run_sql(url, "DELETE FROM public.forewarn_namespaces WHERE namespace = %s", namespace)


def test_fleets_in_one_database_do_not_see_each_other(postgres_url: str) -> None:
    names = [random_name("fleet_a"), random_name("fleet_b")]
    journals = [open_journal(_in_namespace(postgres_url, name)) for name in names]
    try:
        a, b = journals
        assert a.append({"fleet": "a"}) == 1
        assert b.append({"fleet": "b"}) == 1
        assert a.append({"fleet": "a"}) == 2
        a.set_metadata("seed", "1")
        b.set_metadata("seed", "2")
        assert list(b.records()) == [(1, {"fleet": "b"})]
        assert b.last_sequence() == 1
        assert (a.metadata(), b.metadata()) == ({"seed": "1"}, {"seed": "2"})
    finally:
        for journal in journals:
            journal.close()
        for name in names:
            _drop_namespace(postgres_url, name)


def test_a_front_end_follows_what_another_appended(fleet: Store) -> None:
    writer, follower = fleet.open(), fleet.open()
    writer.append_many([{"n": 1}, {"n": 2}])
    seen = [seq for seq, _ in follower.records()]
    assert seen == [1, 2]
    outcome: list[int] = []
    waiter = threading.Thread(
        target=lambda: outcome.append(follower.wait_for_append(after=2, timeout=20))
    )
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "the follower returned before anyone appended"
    writer.append({"n": 3})
    waiter.join(10)
    assert outcome == [3]
    assert list(follower.records(after=2)) == [(3, {"n": 3})]


def test_a_follower_waiting_with_nothing_appended_sleeps_through_the_wait(fleet: Store) -> None:
    """An idle follower waits on LISTEN every second of its life: its thread sleeps until a
    notification or the timeout, where psycopg's own ``notifies(timeout=...)`` woke every
    0.1 s (counted as the waiting thread's voluntary context switches: a few for its two
    reads of the counter, where waking each 0.1 s for 2 s made twenty more)."""
    follower = fleet.open()
    follower.wait_for_append(after=0, timeout=0)  # LISTEN in force, connections open
    switches: list[int] = []

    def wait() -> None:
        status = Path(f"/proc/self/task/{threading.get_native_id()}/status")

        def voluntary() -> int:
            line = next(x for x in status.read_text().splitlines() if x.startswith("volun"))
            return int(line.split()[1])

        before = voluntary()
        assert follower.wait_for_append(after=0, timeout=2.0) == 0
        switches.append(voluntary() - before)

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(30)
    assert len(switches) == 1
    assert switches[0] < 10, switches


def test_concurrent_front_ends_get_a_gap_free_strictly_increasing_sequence(
    fleet: Store,
) -> None:
    """Two connections append at once while a third reads: every sequence 1..N is handed out
    exactly once, each writer's numbers rise, each number holds the record it was returned
    for, and the reader never sees a number before all smaller ones are visible."""
    writers = [fleet.open() for _ in range(WRITERS)]
    reader = fleet.open()
    returned: dict[int, list[tuple[int, dict[str, Any]]]] = {w: [] for w in range(WRITERS)}
    failures: list[BaseException] = []
    start = threading.Barrier(WRITERS + 1)

    def write(index: int) -> None:
        try:
            start.wait(10)
            local = 0
            while local < APPENDS_PER_WRITER:
                if local % 4 == 3:
                    batch = [{"writer": index, "local": local + k} for k in range(3)]
                    last = writers[index].append_many(batch)
                    for offset, record in enumerate(batch):
                        returned[index].append((last - len(batch) + 1 + offset, record))
                    local += len(batch)
                else:
                    record = {"writer": index, "local": local}
                    returned[index].append((writers[index].append(record), record))
                    local += 1
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    start.wait(10)
    seen = 0
    views = 0
    try:
        while True:
            finished = not any(thread.is_alive() for thread in threads)
            for sequence, _ in reader.records(after=seen):
                assert sequence == seen + 1, f"reader saw {sequence} right after {seen}"
                seen = sequence
            views += 1
            if finished:
                break
    finally:
        for thread in threads:
            thread.join(30)
    assert not failures, failures
    total = sum(len(records) for records in returned.values())
    assert total >= WRITERS * APPENDS_PER_WRITER
    for records in returned.values():
        sequences = [sequence for sequence, _ in records]
        assert sequences == sorted(sequences)
        assert len(set(sequences)) == len(sequences)
    everything = dict(pair for records in returned.values() for pair in records)
    assert sorted(everything) == list(range(1, total + 1))
    assert dict(reader.records()) == everything
    assert reader.last_sequence() == total == seen
    assert views > 1


def test_a_newer_schema_is_refused_without_writing(postgres_url: str, postgres_schema: str) -> None:
    url = _in_namespace(postgres_url, "first", postgres_schema)
    with open_journal(url) as journal:
        journal.append({"n": 1})
    run_sql(postgres_url, f'UPDATE "{postgres_schema}".forewarn_schema SET version = 99')
    with pytest.raises(NewerSchemaError) as raised:
        open_journal(_in_namespace(postgres_url, "second", postgres_schema))
    assert raised.value.found == 99
    assert raised.value.supported == SCHEMA_VERSION
    assert raised.value.where.startswith(f"PostgreSQL journal 'second' in {postgres_schema} at ")
    assert "upgrade forewarn" in str(raised.value)
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            f'SELECT namespace FROM "{postgres_schema}".forewarn_namespaces'
        ).fetchall()
    assert rows == [("first",)]


def test_an_older_schema_is_migrated_with_its_version(
    postgres_url: str, postgres_schema: str
) -> None:
    url = _in_namespace(postgres_url, "fleet", postgres_schema)
    with open_journal(url) as journal:
        journal.append({"n": 1})

    def add_column(conn: Connection, schema: str) -> None:
        conn.execute(f'ALTER TABLE "{schema}".forewarn_records ADD COLUMN origin text')

    with PostgresJournal(
        postgres_url,
        namespace="fleet",
        schema=postgres_schema,
        schema_version=2,
        migrations={1: add_column},
    ) as journal:
        assert list(journal.records()) == [(1, {"n": 1})]
    with pytest.raises(NewerSchemaError):
        open_journal(url)
    with pytest.raises(StoreSchemaError) as raised:
        PostgresJournal(postgres_url, schema=postgres_schema, schema_version=3)
    assert str(raised.value).startswith(f"PostgreSQL journal 'default' in {postgres_schema} at ")
    assert str(raised.value).endswith(": no migration from schema version 2 to 3")


def test_a_dropped_connection_fails_one_call_and_the_next_reconnects(fleet: Store) -> None:
    """A database restart must not need a forewarn restart; the call in flight is not retried,
    since whether it committed is unknown."""
    journal = fleet.open()
    journal.append({"n": 1})
    namespace = fleet.url.rsplit("=", 1)[1]
    run_sql(  # the timeout: returns once the session has ended, not when it is asked to
        fleet.url.split("?")[0],
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = %s",
        f"forewarn {namespace}"[:63],
    )
    with pytest.raises(StoreUnavailableError):
        journal.append({"n": 2})
    assert journal.append({"n": 2}) == 2


def test_an_unreachable_server_is_reported_without_its_password() -> None:
    """Port 1 on loopback refuses at once; runs even where no PostgreSQL is installed."""
    with pytest.raises(StoreUnavailableError) as raised:
        open_journal("postgresql://postgres:s3cret-pw@127.0.0.1:1/test?namespace=x")
    assert "s3cret-pw" not in str(raised.value)
    message = str(raised.value)
    assert message.startswith("cannot reach PostgreSQL journal 'x' in public at 127.0.0.1:1/test: ")


@pytest.mark.parametrize(
    "query", ["namespace=", "schema=bad-name", "schema=a;drop", "namespace=a&namespace=b"]
)
def test_bad_namespaces_and_schemas_are_refused_before_connecting(query: str) -> None:
    require_module("psycopg")
    with pytest.raises(StoreUrlError):
        open_journal(f"postgresql://postgres@127.0.0.1:1/test?{query}")


# -- several front-ends writing one fleet ----------------------------------------------------


def test_writers_holding_the_namespace_lock_take_turns_and_see_each_other(fleet: Store) -> None:
    """What a writer reads under the lock is everything committed before it got the lock, so
    it can decide on the whole journal and append right after it."""
    first, second = fleet.open(), fleet.open()
    assert isinstance(first, PostgresJournal)
    assert isinstance(second, PostgresJournal)
    seen: list[list[tuple[int, dict[str, Any]]]] = []
    entered = threading.Event()

    def later() -> None:
        with second.exclusive() as write:
            seen.append(write.records(after=0))  # the lock is held once the first read answers
            entered.set()
            write.append_if(1, [{"by": "second"}])

    with first.exclusive() as write:
        assert write.records(after=0) == []  # the lock is held once the first read answers
        thread = threading.Thread(target=later)
        thread.start()
        assert not entered.wait(0.3), "a second writer got the lock while the first held it"
        write.append_if(0, [{"by": "first"}])
    thread.join(10)
    assert seen == [[(1, {"by": "first"})]]
    assert [record["by"] for _, record in first.records()] == ["first", "second"]


def test_a_writer_waiting_too_long_for_the_lock_gets_an_error_not_a_hang(fleet: Store) -> None:
    first, second = fleet.open(), fleet.open()
    assert isinstance(first, PostgresJournal)
    assert isinstance(second, PostgresJournal)
    with first.exclusive() as holding:
        holding.records(after=0)  # the lock is held once the first read answers
        with pytest.raises(StorageError), second.exclusive(lock_timeout=0.2) as waiting:
            waiting.records(after=0)
    with second.exclusive() as write:  # the failed attempt left nothing held
        assert write.append_if(0, [{"n": 1}]) == 1


def test_a_refused_write_under_the_lock_appends_nothing(fleet: Store) -> None:
    """It is rolled back on the same connection, which stays in use: a new session per
    refused command would cost a connection set-up each, and the refusal is no fault of
    the link [ours]."""
    journal = fleet.open()
    assert isinstance(journal, PostgresJournal)

    def refused() -> None:
        with journal.exclusive() as write:
            write.append_if(0, [{"n": 1}])
            raise RuntimeError("the command was refused after all")

    def session() -> int:
        row = journal._connection().execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])

    before = session()
    with pytest.raises(RuntimeError):
        refused()
    assert journal.last_sequence() == 0
    assert session() == before


@pytest.fixture
def candidates(fleet: Store) -> Iterator[tuple[Leadership, Leadership]]:
    """Two front-ends' leader locks on one fleet, released afterwards."""
    journals = [fleet.open(), fleet.open()]
    assert all(isinstance(journal, PostgresJournal) for journal in journals)
    locks = [journal.leadership() for journal in journals if isinstance(journal, PostgresJournal)]
    try:
        yield locks[0], locks[1]
    finally:
        for lock in locks:
            lock.release()


def test_one_leader_at_a_time_and_the_next_takes_over_when_it_is_gone(
    candidates: tuple[Leadership, Leadership],
) -> None:
    leading, waiting = candidates
    assert leading.acquire()
    assert leading.acquire()  # held, and asked again: still ours
    assert not waiting.acquire()
    leading.release()
    assert waiting.acquire()
    assert not leading.acquire()


def test_a_leader_gives_the_lock_back_before_its_session_ends(
    candidates: tuple[Leadership, Leadership], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[ours] A stopping leader hands over at once: it unlocks before closing, since the
    server drops a closed session's locks only once its backend has ended, which a loaded
    server may take a while to do. Shown with the session kept open past the release."""
    leading, waiting = candidates
    assert leading.acquire()
    left_open: list[psycopg.Connection[Any]] = []
    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Connection, "close", lambda self: left_open.append(self))
        leading.release()
    try:
        assert len(left_open) == 1
        assert waiting.acquire()
    finally:
        for conn in left_open:
            conn.close()


def test_a_leader_whose_session_dies_hands_over(
    candidates: tuple[Leadership, Leadership], fleet: Store, postgres_url: str
) -> None:
    """SIGKILL of a leader ends its session: the server drops the lock with it."""
    leading, waiting = candidates
    assert leading.acquire()
    assert not waiting.acquire()
    namespace = fleet.url.rpartition("namespace=")[2]
    run_sql(  # only this fleet's sessions holding an advisory lock: the leader's; the timeout
        # waits until it has ended (without one the server ends it later, and the lock with it)
        postgres_url,
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
        "WHERE application_name = %s "
        "AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)",
        f"forewarn {namespace}"[:63],
    )
    assert waiting.acquire()
    with pytest.raises(StoreUnavailableError):
        leading.acquire()  # its session is gone: it knows it is not the leader


def test_conditional_appenders_in_several_processes_leave_no_gap_and_no_duplicate(
    fleet: Store,
) -> None:
    """Front-ends are processes: three of them appending at once, each on what it read,
    leave every record once, numbered without a gap, each right after what its writer read;
    the conflicts they met were reported to them, not merged. Their first appends are made
    on the same read of an empty journal: exactly one is taken, the other two are refused
    with a conflict."""
    writers, per_writer = 3, 60
    child = Path(__file__).with_name("append_conditionally.py")
    processes = [
        subprocess.Popen(
            [sys.executable, str(child), fleet.url, str(writer), str(per_writer)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for writer in range(writers)
    ]
    for process in processes:  # each has read the end of the journal: empty
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
    for process in processes:  # then all append at once
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outcomes = []
    for process in processes:
        output, _ = process.communicate(timeout=90)
        assert process.returncode == 0
        first_conflicted, conflicts = map(int, output.split())
        outcomes.append(first_conflicted)
        assert conflicts >= first_conflicted  # each one a refused append it read again for
    assert sorted(outcomes) == [0, 1, 1]
    records = list(fleet.open().records())
    assert [sequence for sequence, _ in records] == list(range(1, writers * per_writer + 1))
    written = sorted((record["writer"], record["n"]) for _, record in records)
    assert written == sorted((w, n) for w in range(writers) for n in range(per_writer))
    assert all(record["after"] == sequence - 1 for sequence, record in records)


def test_a_writer_waits_for_the_front_ends_behind_it_and_no_longer_than_told(
    fleet: Store,
) -> None:
    """[ours] (docs/scale-out.md, "How front-ends stay one fleet"): a writer waits until every
    other live front-end reported the record applied; bounded; the silent are not waited for."""
    writer, other = fleet.open(), fleet.open()
    assert isinstance(writer, PostgresJournal)
    assert isinstance(other, PostgresJournal)
    assert writer.wait_applied("w", 5, timeout=5, live_within=3) == ()  # nobody else listed
    with writer.exclusive() as write:  # a writer's own report commits with its write
        write.append_if(0, [{"n": 1}])
        write.report_applied("w", 1)
    other.report_applied("o", 0)
    started = time.monotonic()
    assert writer.wait_applied("w", 1, timeout=0.3, live_within=3) == ("o",)
    assert time.monotonic() - started >= 0.3
    reporter = threading.Timer(0.1, other.report_applied, ["o", 1])
    reporter.start()
    assert writer.wait_applied("w", 1, timeout=5, live_within=3) == ()  # once it reports
    reporter.join()
    other.report_applied("o", 1)
    assert other.wait_applied("o", 1, timeout=0, live_within=3) == ()  # "w" has it too
    assert writer.wait_applied("w", 2, timeout=0, live_within=0.0) == ()  # "o" heard too long ago
    other.forget_front_end("gone", silent_for=3600)  # nobody that silent: both stay
    assert writer.wait_applied("w", 2, timeout=0, live_within=3) == ("o",)
    other.forget_front_end("o")
    assert writer.wait_applied("w", 2, timeout=0, live_within=3) == ()


def test_a_writer_that_waited_is_left_listening_to_nothing(fleet: Store) -> None:
    """The wait LISTENs for the front-ends' reports on the writer's own connection; once it
    returns, whether every front-end reported or the time ran out, the connection listens to
    nothing again: left listening, it would be sent every report of every front-end for as
    long as it lives."""
    writer, other = fleet.open(), fleet.open()
    assert isinstance(writer, PostgresJournal)
    assert isinstance(other, PostgresJournal)

    def channels() -> list[str]:
        query = "SELECT pg_listening_channels()"
        return [row[0] for row in writer._connection().execute(query).fetchall()]

    writer.append({"n": 1})
    other.report_applied("o", 0)
    assert writer.wait_applied("w", 1, timeout=0.05, live_within=60) == ("o",)  # ran out
    assert channels() == []
    reporter = threading.Timer(0.1, other.report_applied, ["o", 1])
    reporter.start()
    try:
        assert writer.wait_applied("w", 1, timeout=30, live_within=60) == ()  # reported
    finally:
        reporter.join()
    assert channels() == []


def test_a_waiting_writer_is_woken_by_the_report_it_waits_for(
    fleet: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[ours] (docs/scale-out.md, "How front-ends stay one fleet"): the writer LISTENs for
    the front-ends' reports, so one that comes while it waits ends the wait at once. Its own
    look at the table is made rare here, so only the notification can end the wait before a
    third front-end joins, 10 s later, behind: a writer still waiting then would name it."""
    from forewarn.storage import postgres

    monkeypatch.setattr(postgres, "_APPLIED_LOOK_SECONDS", 60.0)
    writer, other = fleet.open(), fleet.open()
    assert isinstance(writer, PostgresJournal)
    assert isinstance(other, PostgresJournal)
    writer.report_applied("w", 0)
    other.report_applied("o", 0)
    writer.append({"n": 1})
    report = threading.Timer(0.5, other.report_applied, ("o", 1))
    joins = threading.Timer(10, other.report_applied, ("late", 0))
    report.start()
    joins.start()
    try:
        assert writer.wait_applied("w", 1, timeout=30, live_within=60) == ()
    finally:
        joins.cancel()
        report.join()
        joins.join()


def test_an_exclusive_write_still_refuses_to_append_anywhere_but_the_end(fleet: Store) -> None:
    """The write lock keeps front-ends taking turns, but a writer that does not take it (an
    older forewarn) may have appended: the append inside the lock is conditional all the
    same, and says where the journal ends."""
    journal = fleet.open()
    assert isinstance(journal, PostgresJournal)
    journal.append({"n": 1})
    with journal.exclusive() as write:
        with pytest.raises(AppendConflictError, match="ends at record 1, not 0"):
            write.append_if(0, [{"n": "late"}])
        assert write.append_if(1, [{"n": 2}]) == 2
    assert [record for _, record in journal.records()] == [{"n": 1}, {"n": 2}]


def test_a_namespace_whose_row_was_removed_says_so(fleet: Store) -> None:
    journal = fleet.open()
    journal.append({"n": 1})
    _drop_namespace(fleet.url.split("?")[0], fleet.url.rsplit("=", 1)[1])
    with pytest.raises(CorruptStoreError) as raised:
        journal.last_sequence()
    message = str(raised.value)
    assert message.startswith("PostgreSQL journal 'test_"), message
    assert message.endswith(": the namespace row is gone")


def test_a_follower_waits_on_one_listening_connection_however_often_it_waits(
    fleet: Store,
) -> None:
    """Each wait reuses the connection that LISTENs: a new one per wait, never closed, would
    use up the server's connections one poll at a time."""
    journal = fleet.open()
    name = f"forewarn {fleet.url.rsplit('=', 1)[1]}"

    def connections() -> int:
        import psycopg

        with psycopg.connect(fleet.url.split("?")[0], autocommit=True) as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            row = conn.execute(query, [name]).fetchone()
        assert row is not None
        return int(row[0])

    journal.wait_for_append(0, 0)
    opened = connections()
    for _ in range(3):
        assert journal.wait_for_append(0, 0) == 0
    assert connections() == opened


def test_another_journal_on_the_namespace_reads_the_same_schema(
    postgres_url: str, postgres_schema: str
) -> None:
    """A front-end's follower opens its own journal with ``another()``: on a fleet kept in a
    schema of its own it must read that schema, not the default one."""
    namespace = random_name("test")
    journal = open_journal(_in_namespace(postgres_url, namespace, postgres_schema))
    assert isinstance(journal, PostgresJournal)
    try:
        journal.append({"n": 1})
        follower = journal.another()
        try:
            assert (follower.schema, follower.namespace) == (postgres_schema, namespace)
            assert list(follower.records()) == [(1, {"n": 1})]
        finally:
            follower.close()
    finally:
        journal.close()


@pytest.mark.parametrize(
    "tables",
    [("forewarn_records",), ("forewarn_namespaces",), ("forewarn_namespaces", "forewarn_records")],
)
def test_journal_tables_without_their_version_table_are_damage_not_a_new_store(
    postgres_url: str, postgres_schema: str, tables: tuple[str, ...]
) -> None:
    """[ours] A schema holding any of the journal's tables but not the version table was
    damaged (or made by hand): it is refused, saying so, rather than created over."""
    run_sql(postgres_url, f'CREATE SCHEMA "{postgres_schema}"')
    for table in tables:
        run_sql(postgres_url, f'CREATE TABLE "{postgres_schema}".{table} (n integer)')
    with pytest.raises(CorruptStoreError) as raised:
        PostgresJournal(postgres_url, schema=postgres_schema)
    assert str(raised.value) == (
        f"PostgreSQL journal 'default' in {postgres_schema} at {describe(postgres_url)} "
        "has journal tables but no version table"
    )


@pytest.mark.parametrize(
    ("versions", "shown"),
    [([], "[]"), ([0], "[(0,)]"), ([-1], "[(-1,)]"), ([1, 1], "[(1,), (1,)]")],
)
def test_a_version_table_without_one_positive_version_is_damage(
    postgres_url: str, postgres_schema: str, versions: list[int], shown: str
) -> None:
    """[ours] The version table holds one row, a version from 1 on; anything else is
    refused as damage, showing what it holds, not read as a version to migrate from."""
    PostgresJournal(postgres_url, schema=postgres_schema).close()
    table = f'"{postgres_schema}".forewarn_schema'
    run_sql(postgres_url, f"DELETE FROM {table}")
    for version in versions:
        run_sql(postgres_url, f"INSERT INTO {table} VALUES (%s)", version)
    with pytest.raises(CorruptStoreError) as raised:
        PostgresJournal(postgres_url, schema=postgres_schema)
    assert str(raised.value) == (
        f"PostgreSQL journal 'default' in {postgres_schema} at {describe(postgres_url)} "
        f"has a damaged schema version table: {shown}"
    )


def _terminate_sessions(url: str, namespace: str) -> None:
    """End every session of the namespace's journals on the server, as a database restart
    would, and wait until they are gone (the server ends them asynchronously)."""
    name = f"forewarn {namespace}"[:63]
    run_sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        name,
    )
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        while (row := conn.execute(query, [name]).fetchone()) and row[0] > 0:
            assert time.monotonic() < deadline, "the sessions were not ended"
            time.sleep(0.02)


def test_closing_wakes_a_follower_waiting_for_an_append(fleet: Store) -> None:
    """[ours] A follower blocked in ``wait_for_append`` when its journal is closed (the
    front-end stopping) is woken at once and told the journal is closed, and the close does
    not wait out the follower's timeout."""
    journal = fleet.open()
    outcome: list[BaseException] = []

    def follow() -> None:
        try:
            journal.wait_for_append(after=0, timeout=30)
        except BaseException as exc:
            outcome.append(exc)

    follower = threading.Thread(target=follow)
    follower.start()
    follower.join(0.5)
    assert follower.is_alive(), "the follower returned before anyone appended"
    started = time.monotonic()
    journal.close()
    follower.join(10)
    assert time.monotonic() - started < 10
    assert not follower.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], JournalClosedError)


def test_a_journal_whose_server_dropped_it_still_closes(fleet: Store, postgres_url: str) -> None:
    """[ours] A front-end stopping after the database restarted under it closes cleanly:
    waking its follower is attempted, and what the lost connection says about it is not
    an error of the close."""
    journal = fleet.open()
    assert journal.wait_for_append(0, 0) == 0  # a follower's connection, listening, as well
    _terminate_sessions(postgres_url, fleet.url.rpartition("namespace=")[2])
    journal.close()
    with pytest.raises(JournalClosedError):
        journal.last_sequence()


def test_a_leader_whose_session_was_ended_lets_go_quietly(
    candidates: tuple[Leadership, Leadership], fleet: Store, postgres_url: str
) -> None:
    """[ours] A leader stopping after its session was ended (a database restart) releases
    without an error: the server already dropped the lock with the session."""
    leading, waiting = candidates
    assert leading.acquire()
    _terminate_sessions(postgres_url, fleet.url.rpartition("namespace=")[2])
    leading.release()
    assert waiting.acquire()


def test_another_journal_gives_up_on_a_server_as_soon_as_its_first(
    postgres_url: str, fleet: Store
) -> None:
    """[ours] A follower opened with ``another()`` waits for an unreachable server no
    longer than the journal it came from was told to."""
    namespace = fleet.url.rpartition("namespace=")[2]
    with (
        PostgresJournal(postgres_url, namespace=namespace, connect_timeout=2) as first,
        first.another() as follower,
    ):
        parameters = follower._connection().info.get_parameters()
        assert parameters.get("connect_timeout") == "2"


class _Clock:
    """``time.monotonic`` for the journal module, moved on only by the waits it makes."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class _WatchedConnection:
    """A journal's connection whose waits for notifications are recorded and not slept: each
    one moves the clock on by the time it asked for, as if nothing came meanwhile. What it
    sends to the server is recorded too, and then sent."""

    def __init__(self, conn: Connection, clock: _Clock) -> None:
        self._conn = conn
        self._clock = clock
        self.waits: list[float] = []
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, params: Any = None) -> Any:
        self.sent.append(query if isinstance(query, str) else query.as_string(self._conn))
        return self._conn.execute(query, params)

    def notifies(self, *, timeout: float, stop_after: int | None = None) -> Iterator[object]:
        self.waits.append(timeout)
        assert len(self.waits) < 10, f"still waiting after its deadline: {self.waits}"
        self._clock.now += timeout
        return iter(())


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from forewarn.storage import postgres

    clock = _Clock()
    monkeypatch.setattr(postgres, "time", clock)
    return clock


def test_a_follower_waits_as_long_as_asked_and_no_longer(
    fleet: Store, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[ours] (``Journal.wait_for_append``): a follower's poll (``timeout=0``, or less) never
    waits; a wait lasts the time asked, not a moment less, and ends when that time is up,
    rather than wait again for nothing. The same as the memory and SQLite journals'."""
    journal = fleet.open()
    assert isinstance(journal, PostgresJournal)
    assert journal.wait_for_append(after=0, timeout=0) == 0  # opens the listening connection
    assert journal._listener is not None
    watched = _WatchedConnection(journal._listener, clock)
    journal._listener = watched  # type: ignore[assignment]
    # Its one wait on the socket, as the connection's own wait: recorded, not slept.
    monkeypatch.setattr(
        postgres, "_wait_for_notify", lambda conn, timeout: list(conn.notifies(timeout=timeout))
    )
    assert journal.wait_for_append(after=0, timeout=0) == 0
    assert journal.wait_for_append(after=0, timeout=-1) == 0
    assert watched.waits == []
    assert journal.wait_for_append(after=0, timeout=0.5) == 0
    assert watched.waits == [0.5]
    journal.append({"n": 1})
    assert journal.wait_for_append(after=0, timeout=0.5) == 1
    assert watched.waits == [0.5]


def test_a_writer_waits_for_the_others_as_long_as_asked_and_no_longer(
    fleet: Store, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[ours] (docs/scale-out.md, "How front-ends stay one fleet"): a writer that may not
    wait (``timeout=0``) asks once and returns who lags, without listening; one that waits
    listens, waits the time asked, looks a last time when it is up and stops listening,
    taking what came before it stopped without waiting for more. Its own looks at the table
    are made rare here, so the one wait is the whole time."""
    from forewarn.storage import postgres

    monkeypatch.setattr(postgres, "_APPLIED_LOOK_SECONDS", 60.0)
    writer, other = fleet.open(), fleet.open()
    assert isinstance(writer, PostgresJournal)
    assert isinstance(other, PostgresJournal)
    writer.append({"n": 1})
    other.report_applied("o", 0)
    watched = _WatchedConnection(writer._connection(), clock)
    writer._conn = watched  # type: ignore[assignment]
    assert writer.wait_applied("w", 1, timeout=0, live_within=60) == ("o",)
    assert watched.waits == []
    assert len(watched.sent) == 1
    assert not any("LISTEN" in sent.upper() for sent in watched.sent)
    watched.sent.clear()
    assert writer.wait_applied("w", 1, timeout=0.5, live_within=60) == ("o",)
    assert watched.waits == [0.5, 0]  # the time asked, then what came before the UNLISTEN
    assert [sent.split(" ")[0].upper() for sent in watched.sent] == [
        "SELECT",
        "LISTEN",
        "SELECT",
        "SELECT",
        "UNLISTEN",
    ]


class _NamesOnly(PostgresJournal):
    """A journal that never connects: only the names it derives are looked at."""

    def _connect(self, timeout: float | None = None) -> Connection:
        return cast(Connection, None)

    def _prepare(self, schema_version: int, migrations: Mapping[int, Migration]) -> None:
        pass


def test_every_release_meets_on_the_same_locks_and_channels() -> None:
    """[ours] (docs/scale-out.md): front-ends of two releases share one fleet during a
    rolling upgrade, so the advisory lock keys and the NOTIFY channels of a namespace must
    not change from one release to the next: the values below are those of the releases
    before. Each namespace of each schema has its own."""
    expected = {
        ("public", "default"): (
            -7278786129213133456,
            -5321190466892832415,
            "forewarn_3bb7f9e77cb34e89724131a1c91c95ce2c4500c5",
        ),
        ("forewarn", "fleet-a"): (
            7303600930602461113,
            2681179301643544390,
            "forewarn_a7c34b4e8bb4a1c1f4db40c6ed297e465ec4f154",
        ),
    }
    for (schema, namespace), (write, leader, channel) in expected.items():
        journal = _NamesOnly("postgresql:///test", namespace=namespace, schema=schema)
        assert (journal._write_key, journal._leader_key) == (write, leader)
        assert (journal._channel, journal._applied_channel) == (channel, f"{channel}_applied")
