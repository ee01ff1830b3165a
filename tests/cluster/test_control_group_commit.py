"""The control API's writes arriving together on a front-end share one transaction.

[ours] (docs/scale-out.md, "How front-ends stay one fleet": "Writes arriving together are
committed together"). A campaign driven through the control plane (one ``POST /events`` per
VM, sent at once, as Azure's platform schedules a campaign's events at once) is journaled in
a bounded number of transactions, :data:`~forewarn.cluster.replica.MAX_GROUP` writes each,
not one a VM; a refused request is refused alone, and every front-end and every replay then
shows the same documents. Transactions are counted from PostgreSQL itself (the ``xmin`` of
the records each inserted); the requests are made to arrive together by sending them all
before the event loop runs any of them, not by timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from forewarn.cluster import replica as replica_module
from forewarn.server.control import create_control_app
from forewarn.server.state import OpenedState
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import ExclusiveWrite

from .stand_in_journal import commands_of
from .test_front_ends_in_process import front_end, in_step, replica
from .test_group_commit import VMS, transactions

#: Freezes a VM may be given several of, so a campaign of more events than VMs stays valid.
EVENTS = 12


def create_together(state: OpenedState, bodies: list[dict[str, object]]) -> list[httpx.Response]:
    """``POST /api/v1/events`` with each body, all sent before any is answered (each a task
    of one event loop, as concurrent clients of ``forewarn serve``'s control API are)."""
    app = create_control_app(state.service)

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://control") as client:
            return list(
                await asyncio.gather(*(client.post("/api/v1/events", json=b) for b in bodies))
            )

    return asyncio.run(send())


def freeze(index: int) -> dict[str, object]:
    return {"type": "Freeze", "resources": [VMS[index % len(VMS)]], "description": f"e{index}"}


def test_a_campaign_through_the_control_api_is_one_transaction_not_one_per_event(
    pair: list[OpenedState], shared_store: str, fleet_file: Path
) -> None:
    a, b = pair
    head = replica(a).head
    answers = create_together(a, [freeze(index) for index in range(EVENTS)])
    assert [answer.status_code for answer in answers] == [201] * EVENTS
    written = transactions(shared_store, head)
    assert len(written) == EVENTS
    assert len({xid for _, xid in written}) == 1
    # each request answered with its own event, in the order the journal holds them
    records = [record for _, record in replica(a).journal.records(head)]
    descriptions = [command["description"] for command in commands_of(records)]
    assert descriptions == [f"e{index}" for index in range(EVENTS)]
    assert [answer.json()["Description"] for answer in answers] == descriptions
    shown = in_step(pair)
    ids = {answer.json()["EventId"] for answer in answers}
    assert {view.event.event_id for view in b.service.events()} == ids
    late = front_end(shared_store, fleet_file)
    try:
        assert in_step([a, late]) == shown  # the journal replayed: byte for byte the same
    finally:
        assert late.service.journal is not None
        late.service.journal.close()


def test_more_writes_than_a_group_holds_are_journaled_a_group_at_a_time(
    pair: list[OpenedState], shared_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    monkeypatch.setattr(replica_module, "MAX_GROUP", 5)
    head = replica(a).head
    answers = create_together(a, [freeze(index) for index in range(EVENTS)])
    assert [answer.status_code for answer in answers] == [201] * EVENTS
    written = transactions(shared_store, head)
    groups = [xid for _, xid in written]
    assert [groups.count(xid) for xid in dict.fromkeys(groups)] == [5, 5, 2]
    in_step(pair)


def test_a_refused_request_of_a_group_is_refused_alone(
    pair: list[OpenedState], shared_store: str
) -> None:
    a, b = pair
    head = replica(a).head
    unknown: dict[str, object] = {"type": "Freeze", "resources": ["nowhere"]}
    answers = create_together(a, [freeze(0), unknown, freeze(2)])
    assert [answer.status_code for answer in answers] == [201, 404, 201]
    written = transactions(shared_store, head)
    assert len(written) == 2
    assert written[0][1] == written[1][1]
    in_step(pair)
    assert {view.event.description for view in b.service.events()} == {"e0", "e2"}


def test_once_a_group_fails_on_the_store_the_turns_later_writes_are_refused_untried(
    pair: list[OpenedState], shared_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the turn's writes is answered 503 and nothing is journaled; the store is
    tried once, not once a group (each try would wait out the bound and rebuild the copy)."""
    a, _ = pair
    monkeypatch.setattr(replica_module, "MAX_GROUP", 5)
    before = in_step(pair)
    head = replica(a).head
    tries: list[int] = []

    def lost(self: ExclusiveWrite, expected_last: int, records: object) -> int:
        tries.append(expected_last)
        raise StoreUnavailableError("the server went away during the commit")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", lost)
        answers = create_together(a, [freeze(index) for index in range(EVENTS)])
    assert [answer.status_code for answer in answers] == [503] * EVENTS
    assert len(tries) == 1
    assert "could not be confirmed" in answers[0].json()["error"]
    assert all("nothing was applied" in answer.json()["error"] for answer in answers[5:])
    assert transactions(shared_store, head) == []
    assert in_step(pair) == before
