"""Group commit: writes arriving together on a front-end share one transaction.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"). Writes made from several threads
at once are applied and journaled in one transaction under the namespace's lock, each caller
answered once that transaction committed, with its own result or its own domain error. The
grouping is observed through PostgreSQL itself: the records one transaction inserted carry
its transaction id (``xmin``). Writers are made to arrive together by holding the
namespace's lock from another connection while they queue, not by timing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import orjson
import psycopg
import pytest

from forewarn.cluster import Replica, ReplicaError
from forewarn.commands import CancelEvent, Restart, ScheduleEvent
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.events import Event, EventType
from forewarn.server.imds import SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest, ImdsResponse
from forewarn.server.state import OpenedState
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import ExclusiveWrite, PostgresJournal

from .stand_in_journal import commands_of
from .test_front_ends_in_process import documents, front_end, in_step, replica

VMS = ("WestNO_0", "WestNO_1", "WestNO_2")


def transactions(store: str, after: int) -> list[tuple[int, str]]:
    """``(sequence, transaction id)`` of every command journaled after record ``after``, in
    journal order (a group record's commands each under its sequence)."""
    url, namespace = store.split("?namespace=")
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT sequence, xmin::text, body::text FROM public.forewarn_records "
            "WHERE namespace = %s AND sequence > %s ORDER BY sequence",
            [namespace, after],
        ).fetchall()
    return [
        (int(sequence), str(xid))
        for sequence, xid, body in rows
        for _ in commands_of([orjson.loads(body)])
    ]


def schedule(label: str, vm: str) -> ScheduleEvent:
    return ScheduleEvent(EventType.FREEZE.value, (vm,), description=label)


@contextmanager
def namespace_locked(writer: Replica) -> Iterator[None]:
    """Hold the namespace's write lock on a connection of another journal, so the writers
    started meanwhile wait for it together."""
    other = writer.journal.another()
    try:
        with other.exclusive() as transaction:
            transaction.records(after=writer.head)  # the lock is held once this answers
            yield
    finally:
        other.close()


def waiting_for_the_lock(journal: PostgresJournal) -> bool:
    """Whether a session waits for an advisory lock (the group's first writer)."""
    with psycopg.connect(journal._conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' "
            "AND application_name = %s",
            [f"forewarn {journal.namespace}"[:63]],
        ).fetchone()
    return bool(row and row[0])


def until(condition: Callable[[], bool]) -> None:
    """Wait for something another thread does (bounded: a hang is a failure, not a wait)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the writers never queued"
        time.sleep(0.01)


def concurrently(writer: Replica, calls: list[Callable[[], object]]) -> list[object]:
    """Run ``calls`` in threads of their own, all started while the namespace's lock is
    held elsewhere: the first waits for it in PostgreSQL, the others queue behind it. What
    each returned or raised."""
    outcomes: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    with namespace_locked(writer):
        threads[0].start()
        until(lambda: waiting_for_the_lock(writer.journal))
        for thread in threads[1:]:
            thread.start()
        until(lambda: len(writer._waiting) == len(calls) - 1)
    for thread in threads:
        thread.join(30)
    return outcomes


def test_every_acknowledged_write_is_journaled_in_the_order_each_caller_saw(
    pair: list[OpenedState], shared_store: str
) -> None:
    """Six threads write four events each, one after another: all 24 are in the journal, in
    fewer transactions than writes, each thread's in the order it was answered, and the
    EventId each was answered is the one the journal's replay gives its record."""
    a, b = pair
    writer = replica(a)
    head = writer.head
    answered: dict[int, list[str]] = {}

    def thread_writes(thread: int) -> Callable[[], object]:
        def writes() -> None:
            answered[thread] = []
            for n in range(4):
                (event,) = writer.write(schedule(f"t{thread}-{n}", VMS[(thread + n) % 3]))
                answered[thread].append(event.event_id)

        return writes

    outcomes = concurrently(writer, [thread_writes(thread) for thread in range(6)])
    assert outcomes == [None] * 6
    written = transactions(shared_store, head)
    assert len(written) == 24
    assert len({xid for _, xid in written}) < 24
    records = [record for _, record in writer.journal.records(after=head)]
    labels = [command["description"] for command in commands_of(records)]
    for thread in range(6):
        mine = [label for label in labels if label.startswith(f"t{thread}-")]
        assert mine == [f"t{thread}-{n}" for n in range(4)]
    in_step(pair)
    events = {view.event.description: view.event.event_id for view in b.service.events()}
    for thread, ids in answered.items():
        assert [events[f"t{thread}-{n}"] for n in range(4)] == ids


def test_a_group_is_one_transaction_and_a_refused_write_is_refused_alone(
    pair: list[OpenedState], shared_store: str
) -> None:
    a, b = pair
    writer = replica(a)
    head = writer.head
    outcomes = concurrently(
        writer,
        [
            partial(writer.write, Restart("WestNO_0")),
            partial(writer.write, schedule("first", "WestNO_1")),
            partial(writer.write, CancelEvent("00000000-0000-4000-8000-000000000000")),
            partial(writer.write, schedule("second", "WestNO_2")),
        ],
    )
    assert isinstance(outcomes[2], UnknownEventError)
    for index in (0, 1, 3):
        created = outcomes[index]
        assert isinstance(created, tuple)
        assert [type(event) for event in created] == [Event]
    written = transactions(shared_store, head)
    # the first writer alone (it took the lock's turn before the others queued), then the
    # three that queued behind it in one transaction, the refused one leaving no record
    assert len(written) == 3
    assert written[1][1] == written[2][1] != written[0][1]
    in_step(pair)
    assert {view.event.description for view in b.service.events()} >= {"first", "second"}


def test_write_group_refuses_one_command_and_journals_the_others(
    pair: list[OpenedState], shared_store: str
) -> None:
    a, _ = pair
    writer = replica(a)
    head = writer.head
    outcomes = writer.write_group(
        [
            schedule("kept", "WestNO_0"),
            CancelEvent("00000000-0000-4000-8000-000000000000"),
            Restart("WestNO_1"),
        ]
    )
    assert isinstance(outcomes[1], UnknownEventError)
    assert isinstance(outcomes[0], tuple)
    assert isinstance(outcomes[2], tuple)
    written = transactions(shared_store, head)
    assert [sequence for sequence, _ in written] == [head + 1, head + 2]
    assert len({xid for _, xid in written}) == 1
    ops = [record["op"] for _, record in writer.journal.records(after=head)]
    assert ops == ["schedule", "restart"]  # the refused write ended the first record


def test_a_lost_commit_refuses_the_whole_group_and_the_copy_is_rebuilt(
    pair: list[OpenedState], shared_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of the group gets the same refusal, nothing of any is shown, and the
    front-end serves the journal's state again (then writes on as usual)."""
    a, _ = pair
    writer = replica(a)
    a.service.execute(Restart("WestNO_0"))
    before = in_step(pair)
    head = writer.head

    def lost(self: ExclusiveWrite, expected_last: int, records: object) -> int:
        raise StoreUnavailableError("the server went away during the commit")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", lost)
        outcomes = concurrently(writer, [partial(writer.write, schedule("lost", vm)) for vm in VMS])
    assert all(isinstance(outcome, ReplicaError) for outcome in outcomes)
    assert all("could not be confirmed" in str(outcome) for outcome in outcomes)
    assert not writer.diverged  # rebuilt at once: the store was reachable
    assert documents(a.service) == before
    assert transactions(shared_store, head) == []
    writer.write(schedule("after", "WestNO_1"))
    in_step(pair)


def test_replaying_a_grouped_journal_gives_byte_identical_documents(
    pair: list[OpenedState], shared_store: str, fleet_file: Path
) -> None:
    a, _ = pair
    writer = replica(a)
    (event,) = a.service.execute(Restart("WestNO_0"))
    concurrently(
        writer,
        [
            partial(writer.write, schedule("x", "WestNO_2")),
            *[partial(a.service.approve, vm, [event.event_id]) for vm in VMS],
        ],
    )
    shown = in_step(pair)
    late = front_end(shared_store, fleet_file)
    try:
        assert documents(late.service) == shown
    finally:
        assert late.service.journal is not None
        late.service.journal.close()


ADDRESSES = {"WestNO_0": "127.0.0.2", "WestNO_1": "127.0.0.3", "WestNO_2": "127.0.0.4"}


def vm_request(vm: str, body: bytes = b"") -> ImdsRequest:
    return ImdsRequest(
        method="POST" if body else "GET",
        path=SCHEDULED_EVENTS_PATH,
        query=f"api-version={CURRENT_VERSION.name}",
        headers={"metadata": "true"},
        body=body,
        local_address=ADDRESSES[vm],
        peer_address="127.0.0.1",
    )


def approve_together(endpoint: ImdsEndpoint, approvals: list[tuple[str, str]]) -> list[object]:
    """VMs' approvals read in one turn of the event loop, as ``forewarn serve`` reads the
    requests that arrived together; what each is answered. Nothing is applied before the
    turn has ended."""
    writer = endpoint.service._replica
    assert writer is not None

    async def turn() -> list[object]:
        loop = asyncio.get_running_loop()
        head = writer.head
        replies: list[asyncio.Future[ImdsResponse | Exception]] = []
        for vm, event_id in approvals:
            body = orjson.dumps({"StartRequests": [{"EventId": event_id}]})
            response = endpoint.handle(vm_request(vm, body))
            assert response.status == 0
            assert response.later is not None
            reply: asyncio.Future[ImdsResponse | Exception] = loop.create_future()
            response.later(reply.set_result)
            replies.append(reply)
        assert writer.head == head  # queued, not applied
        return [await reply for reply in replies]

    return asyncio.run(turn())


def test_approvals_of_one_turn_share_a_transaction_and_a_refused_one_is_refused_alone(
    pair: list[OpenedState], shared_store: str
) -> None:
    a, b = pair
    events = {vm: a.service.execute(Restart(vm))[0].event_id for vm in VMS}
    endpoint = ImdsEndpoint(a.service, group_writes=True)
    for vm in VMS:  # first requests: Scheduled Events on
        assert endpoint.handle(vm_request(vm)).status == 200
    head = replica(a).head
    unknown = "00000000-0000-4000-8000-000000000000"
    answers = approve_together(
        endpoint,
        [("WestNO_0", events["WestNO_0"]), ("WestNO_1", unknown), ("WestNO_2", events["WestNO_2"])],
    )
    assert [getattr(answer, "status", answer) for answer in answers] == [200, 400, 200]
    written = transactions(shared_store, head)
    assert len(written) == 2
    assert written[0][1] == written[1][1]
    in_step(pair)
    approved = {view.event.event_id for view in b.service.events() if view.approvers}
    assert approved == {events["WestNO_0"], events["WestNO_2"]}


def test_approvals_of_one_turn_whose_commit_is_lost_are_all_refused(
    pair: list[OpenedState], shared_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    events = {vm: a.service.execute(Restart(vm))[0].event_id for vm in VMS}
    endpoint = ImdsEndpoint(a.service, group_writes=True)
    for vm in VMS:
        assert endpoint.handle(vm_request(vm)).status == 200
    before = in_step(pair)
    head = replica(a).head

    def lost(self: ExclusiveWrite, expected_last: int, records: object) -> int:
        raise StoreUnavailableError("the server went away during the commit")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", lost)
        answers = approve_together(endpoint, list(events.items()))
    assert [getattr(answer, "status", answer) for answer in answers] == [503] * 3
    assert not replica(a).diverged
    assert documents(a.service) == before
    assert transactions(shared_store, head) == []
