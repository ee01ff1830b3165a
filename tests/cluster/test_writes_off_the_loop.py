"""A write made on the event loop waits on the shared journal in a thread of its own, and no
VM is shown what it applied before its commit is answered.

docs/scale-out.md, "A silent PostgreSQL": "A VM's request arriving while a write applied on
this front-end waits for its commit's answer ... waits, without holding the loop, and is
answered once the commit is confirmed (then showing it) or refused (then from the journal's
state ...): no VM is shown a change that is then rolled back." In process, on the stand-in
journal of ``test_replica_writes`` whose append is held until the test lets it go: the event
loop runs the poll while the write's thread is held there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from forewarn.cluster.replica import ReplicaError
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.server.imds import AFRESH, SCHEDULED_EVENTS_PATH, ImdsEndpoint, ImdsRequest
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError

from .test_replica_writes import StandInJournal, Transaction, _replica, freeze


def poll(vm_address: str) -> ImdsRequest:
    return ImdsRequest(
        method="GET",
        path=SCHEDULED_EVENTS_PATH,
        query=f"api-version={CURRENT_VERSION.name}",
        headers={"metadata": "true"},
        body=b"",
        local_address=vm_address,
        peer_address="127.0.0.1",
    )


def events_shown(endpoint: ImdsEndpoint) -> list[str]:
    response = endpoint.handle(poll("127.0.0.2"))  # vm0's
    assert response.status == 200, response
    return [event["EventType"] for event in orjson.loads(response.body)["Events"]]


def held_commit(
    monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop, *, lost: bool
) -> tuple[asyncio.Future[None], threading.Event]:
    """Hold every append (sent with the commit) in the writes' thread until the returned
    event is set; the future is done once one is held. ``lost``: the append then fails as
    a commit whose answer never came."""
    reached: asyncio.Future[None] = loop.create_future()
    go = threading.Event()
    append_if = Transaction.append_if

    def reach() -> None:
        if not reached.done():
            reached.set_result(None)

    def held(self: Transaction, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        loop.call_soon_threadsafe(reach)
        go.wait(30)  # a guard: the test sets it
        if lost:
            raise StoreUnavailableError("the server went away during the commit")
        return append_if(self, expected_last, records)

    monkeypatch.setattr(Transaction, "append_if", held)
    return reached, go


@pytest.mark.parametrize("lost", [False, True], ids=["confirmed", "lost"])
def test_a_poll_during_a_commit_waits_for_its_answer_without_holding_the_loop(
    monkeypatch: pytest.MonkeyPatch, lost: bool
) -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    service = ScheduledEventsService(replica.platform, replica.clock, replica=replica)
    endpoint = ImdsEndpoint(service, group_writes=True)
    assert events_shown(endpoint) == []

    async def scenario() -> tuple[list[str], list[object]]:
        loop = asyncio.get_running_loop()
        reached, go = held_commit(monkeypatch, loop, lost=lost)
        write = loop.create_task(service.execute_async(freeze("vm0")))
        await reached  # applied here, its commit held: the loop runs on meanwhile
        assert replica.committing
        response = endpoint.handle(poll("127.0.0.2"))
        assert response.status == 0
        assert response.later is not None  # not answered from the platform now
        replies: list[object] = []
        answered: asyncio.Future[None] = loop.create_future()

        def reply(outcome: object) -> None:
            replies.append(outcome)
            answered.set_result(None)

        response.later(reply)
        assert replies == []  # waits for the commit's answer
        go.set()
        outcomes = await asyncio.gather(write, return_exceptions=True)
        await answered
        assert not replica.committing
        return [type(outcome).__name__ for outcome in outcomes], replies

    outcomes, replies = asyncio.run(scenario())
    assert replies == [AFRESH]  # handled afresh, now that the commit was answered
    if lost:
        assert outcomes == [ReplicaError.__name__]
        assert events_shown(endpoint) == []  # rebuilt from the journal: never shown
        assert journal.ops() == []
    else:
        assert outcomes == ["tuple"]
        assert events_shown(endpoint) == ["Freeze"]
        assert journal.ops() == ["schedule"]
