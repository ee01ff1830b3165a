"""Several front-ends on one PostgreSQL namespace, in one process: one fleet, not several.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"). SPEC 1: EventId is a "Globally
unique identifier for this event"; SPEC 2: DocumentIncarnation never goes backwards. Each
front-end here is a service opened as ``forewarn serve --store postgresql://...`` opens it;
instead of their background followers, tests read what the others appended explicitly.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from forewarn.cluster import Replica, ReplicaError, tasks
from forewarn.cluster.replica import QUIET_SECONDS
from forewarn.commands import CancelEvent, Restart, StartCampaign
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.clock import ManualClock
from forewarn.domain.errors import InvalidOperationError, UnknownEventError
from forewarn.domain.events import EventStatus
from forewarn.server.control import status_of
from forewarn.server.runner import ServeSettings
from forewarn.server.state import OpenedState, StateMismatchError, open_state
from forewarn.service import ScheduledEventsService
from forewarn.storage.errors import StoreUnavailableError


def front_end(store: str, fleet: Path, **changes: object) -> OpenedState:
    values: dict[str, object] = {"fleet": fleet, "clock": "manual", "store": store, "seed": 3}
    values.update(changes)
    return open_state(ServeSettings(**values))  # type: ignore[arg-type]


def opened_front_ends(store: str, fleet: Path, count: int) -> Iterator[list[OpenedState]]:
    """``count`` front-ends on ``store`` for a fixture to yield from: their journals closed
    after the test."""
    opened = [front_end(store, fleet) for _ in range(count)]
    yield opened
    for state in opened:
        assert state.service.journal is not None
        state.service.journal.close()


@pytest.fixture
def fleet_of_three(shared_store: str, fleet_file: Path) -> Iterator[list[OpenedState]]:
    yield from opened_front_ends(shared_store, fleet_file, 3)


def replica(state: OpenedState) -> Replica:
    assert state.replica is not None
    return state.replica


def documents(service: ScheduledEventsService) -> dict[str, bytes]:
    return {vm.name: service.document_bytes(vm.name, CURRENT_VERSION) for vm in service.vms()}


def in_step(front_ends: list[OpenedState]) -> dict[str, bytes]:
    """Every front-end reads what the others appended; their documents are then identical."""
    for state in front_ends:
        replica(state).catch_up()
    seen = [documents(state.service) for state in front_ends]
    assert all(docs == seen[0] for docs in seen), "front-ends disagree"
    heads = {replica(state).head for state in front_ends}
    assert len(heads) == 1
    return seen[0]


def test_an_operation_through_one_and_an_approval_through_another_start_the_event_on_all(
    fleet_of_three: list[OpenedState],
) -> None:
    a, b, c = fleet_of_three
    (event,) = a.service.execute(Restart("WestNO_0"))
    first = in_step(fleet_of_three)
    assert event.event_id.encode() in first["WestNO_0"]
    # each VM of the set approves through a different front-end
    b.service.approve("WestNO_0", [event.event_id])
    in_step(fleet_of_three)
    c.service.approve("WestNO_1", [event.event_id])
    b.service.approve("WestNO_2", [event.event_id])
    after = in_step(fleet_of_three)
    for state in fleet_of_three:
        (view,) = state.service.events()
        assert view.event.status is EventStatus.STARTED
    assert after != first


def test_event_ids_are_the_same_everywhere_and_never_shared(
    fleet_of_three: list[OpenedState],
) -> None:
    """Operations through every front-end in turn: each event has one id on all of them,
    and no two events have the same id (the seeded ids of each process used to collide)."""
    a, b, c = fleet_of_three
    created = [
        *a.service.execute(Restart("WestNO_0")),
        *b.service.execute(Restart("WestNO_1")),
        *c.service.execute(Restart("WestNO_2")),
    ]
    in_step(fleet_of_three)
    ids = [event.event_id for event in created]
    assert len(set(ids)) == 3
    for state in fleet_of_three:
        assert {view.event.event_id for view in state.service.events()} == set(ids)


def test_a_writer_that_missed_records_catches_up_before_deciding(
    fleet_of_three: list[OpenedState],
) -> None:
    """B never read A's event, yet approving it through B works: a write reads the journal
    under the namespace's lock first (this used to be ``400 unknown event id``)."""
    a, b, _ = fleet_of_three
    (event,) = a.service.execute(Restart("WestNO_0"))
    assert b.service.events() == ()  # not followed yet
    b.service.approve("WestNO_0", [event.event_id])
    assert {view.event.event_id for view in b.service.events()} == {event.event_id}
    with pytest.raises(UnknownEventError):
        b.service.approve("WestNO_0", ["00000000-0000-4000-8000-000000000000"])
    in_step(fleet_of_three)


def test_a_refused_command_is_refused_everywhere_and_leaves_the_fleet_in_step(
    fleet_of_three: list[OpenedState],
) -> None:
    a, b, _ = fleet_of_three
    (event,) = a.service.execute(Restart("WestNO_0"))
    a.service.advance_clock(timedelta(minutes=20))  # NotBefore passed: Started
    in_step(fleet_of_three)
    clock = replica(b).clock
    assert isinstance(clock, ManualClock)
    clock.advance(timedelta(seconds=1))  # B's clock runs on, as a system clock would
    with pytest.raises(InvalidOperationError):
        b.service.execute(CancelEvent(event.event_id))  # Started: cannot be cancelled
    # the refusal moved B's platform to its clock's time: journaled as a tick, nothing else
    last = list(replica(b).journal.records(after=replica(b).head - 1))
    assert [record["op"] for _, record in last] == ["tick"]
    in_step(fleet_of_three)


def test_time_passes_for_all_from_the_journal(fleet_of_three: list[OpenedState]) -> None:
    """A manual clock moved through A moves everyone's platform (and clock) to that time;
    the deadlines it passes fire in the same order everywhere."""
    a, b, _ = fleet_of_three
    a.service.execute(StartCampaign())
    in_step(fleet_of_three)
    moved = a.service.advance_clock(timedelta(minutes=16)).now
    in_step(fleet_of_three)
    assert b.service.now() == moved
    for state in fleet_of_three:
        (campaign,) = state.service.campaigns()
        assert campaign.step == 1
        statuses = {view.event.status for view in state.service.events()}
        assert statuses == {EventStatus.STARTED}


def test_a_front_end_answers_at_its_clocks_time_while_no_record_moves_its_platform(
    fleet_of_three: list[OpenedState],
) -> None:
    """docs/spec.md: "`Date` is the platform's time, the same clock NotBefore is read
    against"; for a front-end, its clock's between records. An answer's Date is the time it
    was answered at: "Date" is "the date and time at
    which the message was originated" (RFC 9110, section 6.6.1), and Azure's IMDS answers
    carry the current time there. A front-end's platform moves only by the journal's
    records, which come when something falls due: with none for a while, its requests are
    still answered (and its clock shown) at the clock's time, not the last record's."""
    a, _, _ = fleet_of_three
    clock = replica(a).clock
    assert isinstance(clock, ManualClock)
    first = a.service.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
    assert first is not None
    assert first.at == clock.now()
    standing = replica(a).head
    clock.advance(timedelta(seconds=90))  # as a system clock runs on: no record written
    assert first.repeats_under is not None
    assert a.service.request_again("WestNO_0", first.repeats_under) == clock.now()
    fresh = a.service.request_from("127.0.0.3", "127.0.0.1", CURRENT_VERSION)
    assert fresh is not None
    assert fresh.at == clock.now()
    assert a.service.now() == clock.now()
    assert a.service.clock_status().now == clock.now()
    assert replica(a).head == standing  # nothing was journaled to get there


def test_a_new_front_end_and_a_replay_rebuild_the_same_documents(
    fleet_of_three: list[OpenedState], shared_store: str, fleet_file: Path
) -> None:
    a, b, c = fleet_of_three
    (event,) = a.service.execute(Restart("WestNO_0"))
    b.service.approve("WestNO_0", [event.event_id])
    c.service.execute(StartCampaign())
    a.service.advance_clock(timedelta(minutes=3))
    expected = in_step(fleet_of_three)
    late = front_end(shared_store, fleet_file)
    try:
        assert documents(late.service) == expected
        assert replica(late).head == replica(a).head
    finally:
        assert late.service.journal is not None
        late.service.journal.close()


def test_front_ends_starting_on_a_new_namespace_agree_on_its_seed(
    shared_store: str, fleet_file: Path
) -> None:
    """No --seed given: the first front-end to hold the namespace lock picks one."""
    first = front_end(shared_store, fleet_file, seed=None)
    second = front_end(shared_store, fleet_file, seed=None)
    try:
        (event,) = first.service.execute(Restart("WestNO_0"))
        replica(second).catch_up()
        assert {view.event.event_id for view in second.service.events()} == {event.event_id}
        assert replica(first).journal.metadata() == replica(second).journal.metadata()
    finally:
        for state in (first, second):
            assert state.service.journal is not None
            state.service.journal.close()


def test_a_write_whose_commit_fails_is_not_acknowledged_and_the_copy_is_rebuilt(
    fleet_of_three: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command was applied locally before the commit failed: the caller gets an error,
    and the front-end serves the journal's state again, not its own."""
    a, _, _ = fleet_of_three
    (kept,) = a.service.execute(Restart("WestNO_0"))
    before = in_step(fleet_of_three)
    from forewarn.storage.postgres import ExclusiveWrite

    def lost(self: ExclusiveWrite, expected_last: int, records: object) -> int:
        raise StoreUnavailableError("the server went away during the commit")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", lost)
        with pytest.raises(ReplicaError, match="could not be confirmed"):
            a.service.execute(Restart("WestNO_1"))
    assert not replica(a).diverged  # rebuilt at once: the store was reachable
    assert documents(a.service) == before
    assert {view.event.event_id for view in a.service.events()} == {kept.event_id}
    in_step(fleet_of_three)


def test_requests_are_journaled_at_most_once_per_interval(
    fleet_of_three: list[OpenedState],
) -> None:
    """The idle rule is judged from the journal: a VM's requests served anywhere are
    journaled in batches, once per interval, so every front-end judges it alike."""
    a, b, _ = fleet_of_three
    head = replica(a).head
    a.service.vm_request("WestNO_0")
    b.service.vm_request("WestNO_1")
    a.service.vm_request("WestNO_0")
    assert replica(a).head == head  # nothing written on the request's path
    a.service.advance_clock(replica(a).touch_every)
    b.service.advance_clock(timedelta(0))
    a.service.vm_request("WestNO_0")
    b.service.vm_request("WestNO_1")
    assert replica(a).flush_seen()
    assert replica(b).flush_seen()
    assert not replica(a).flush_seen()  # nothing new
    in_step(fleet_of_three)
    records = [record for _, record in replica(a).journal.records() if record["op"] == "seen"]
    assert [record["vms"] for record in records] == [["WestNO_0"], ["WestNO_1"]]


def test_a_repeated_poll_is_answered_again_until_a_record_applied_here_changes_the_platform(
    fleet_of_three: list[OpenedState],
) -> None:
    """[ours] A kept-alive VM's every poll repeats its last: a front-end answers it again from
    what the last one found (Arrival.repeats_under, as a single server does) while its platform
    reads the same count of changes, counting it for the idle rule as any request; never from a
    write waiting for its commit; and once a record appended elsewhere is applied here, the
    poll finds what that record shows."""
    a, b, _ = fleet_of_three
    first = a.service.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
    assert first is not None
    assert first.pause is None
    assert first.repeats_under is not None
    again = a.service.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
    assert again == first
    clock = replica(a).clock
    assert isinstance(clock, ManualClock)
    replica(a).unseen.clear()
    clock.advance(replica(a).touch_every)  # the clock alone: no record, nothing changed
    assert a.service.request_again("WestNO_0", first.repeats_under) == clock.now() > first.at
    assert replica(a).unseen == {"WestNO_0"}  # counted: journaled in the next batch
    replica(a).committing = True
    try:
        assert a.service.request_again("WestNO_0", first.repeats_under) is None
    finally:
        replica(a).committing = False
    (event,) = b.service.execute(Restart("WestNO_0"))
    replica(a).catch_up()
    assert a.service.request_again("WestNO_0", first.repeats_under) is None
    changed = a.service.request_from("127.0.0.2", "127.0.0.1", CURRENT_VERSION)
    assert changed is not None
    assert changed.document is not None
    assert event.event_id.encode() in changed.document.body


def test_writes_are_refused_while_the_store_is_unreachable_and_reads_go_on(
    fleet_of_three: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL gone: the change is refused (503 at the control API), the front-end's
    documents stay as they were, and once the server answers again writes go through."""
    a, b, _ = fleet_of_three
    a.service.execute(Restart("WestNO_0"))
    before = in_step(fleet_of_three)
    journal = replica(a).journal
    with monkeypatch.context() as patched:
        patched.setattr(journal, "_conninfo", "postgresql://postgres@127.0.0.1:1/test")
        journal._conn.close()  # as the server closes it when it goes down
        with pytest.raises(ReplicaError, match="cannot write now") as refused:
            a.service.execute(Restart("WestNO_1"))
        assert status_of(refused.value) == 503
        assert documents(a.service) == before
        assert not replica(a).diverged
    (event,) = a.service.execute(Restart("WestNO_1"))
    in_step(fleet_of_three)
    assert event.event_id in {view.event.event_id for view in b.service.events()}


def test_a_first_request_is_journaled_at_once_and_its_delay_runs_the_same_everywhere(
    shared_store: str, tmp_path: Path
) -> None:
    """SPEC 7: the first request turns Scheduled Events on after the first-call delay. On
    front-end A it is journaled as it happens, so B holds the VM for the same delay, and
    the enablement comes from the journal for both."""
    fleet = tmp_path / "quiet.yaml"
    fleet.write_text("vms:\n  - {name: quiet, address: 127.0.0.9, scheduledEventsEnabled: false}\n")
    a, b = front_end(shared_store, fleet), front_end(shared_store, fleet)
    try:
        assert a.service.vm_request("quiet") is not None  # held for the first-call delay
        ops = [record["op"] for _, record in replica(a).journal.records()]
        assert ops == ["touch"]
        replica(b).catch_up()
        assert b.service.vm_request("quiet") == a.service.vm_request("quiet")
        assert replica(b).head == 1  # a request during the delay writes nothing
        a.service.advance_clock(timedelta(minutes=2))
        replica(b).catch_up()
        assert a.service.vm_request("quiet") is None
        assert b.service.vm_request("quiet") is None
    finally:
        for state in (a, b):
            replica(state).journal.close()


def test_a_request_for_instance_metadata_journals_nothing_and_waits_for_nothing(
    shared_store: str, tmp_path: Path
) -> None:
    """SPEC 7 (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and
    Disabling Scheduled Events": enabled "the first time you make a request for events"): on a
    front-end sharing the journal, a request for instance metadata is answered at once and journals
    no first request."""
    fleet = tmp_path / "quiet.yaml"
    fleet.write_text("vms:\n  - {name: quiet, address: 127.0.0.9, scheduledEventsEnabled: false}\n")
    a = front_end(shared_store, fleet)
    try:
        arrival = a.service.request_from("127.0.0.9", "127.0.0.1", for_events=False)
        assert arrival is not None
        assert arrival.pause is None
        assert [record["op"] for _, record in replica(a).journal.records()] == []
        assert not a.service.vm_state("quiet").receiving
        events = a.service.request_from("127.0.0.9", "127.0.0.1", CURRENT_VERSION)
        assert events is not None
        assert events.pause is not None, "the first request for events waits"
        assert [record["op"] for _, record in replica(a).journal.records()] == ["touch"]
    finally:
        replica(a).journal.close()


def test_a_front_end_that_cannot_rebuild_yet_refuses_everything_until_it_has(
    fleet_of_three: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit lost with the server, and the journal unreadable since: the front-end's
    platform may show a change that never happened, so its VMs' requests, control reads
    and writes are all refused with 503 (nobody is shown it) until it has rebuilt from the
    journal; only the time is still told, which every answer's Date needs."""
    a, _, _ = fleet_of_three
    a.service.execute(Restart("WestNO_0"))
    before = in_step(fleet_of_three)
    told = a.service.now()
    journal = replica(a).journal
    from forewarn.storage.postgres import ExclusiveWrite

    def gone(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("the server is gone")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", gone)
        patched.setattr(journal, "records", gone)
        with pytest.raises(ReplicaError, match="could not be confirmed"):
            a.service.execute(Restart("WestNO_1"))
        assert replica(a).diverged
        for read in (
            lambda: a.service.vm_request("WestNO_2"),
            a.service.events,
            lambda: a.service.document("WestNO_1"),
        ):
            with pytest.raises(ReplicaError, match="rebuilding") as refused:
                read()
            assert status_of(refused.value) == 503
        assert a.service.now() == told  # the manual clock's time, not refused
        with pytest.raises(ReplicaError, match="rebuilding"):
            a.service.execute(Restart("WestNO_2"))
    replica(a).rebuild()  # the follower does this once the server answers
    assert a.service.vm_request("WestNO_2") is None
    assert documents(a.service) == before
    in_step(fleet_of_three)


def test_a_first_request_whose_touch_was_lost_with_the_server_is_refused_not_answered(
    shared_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request's own write (the touch that turns Scheduled Events on) was applied here
    and then its commit lost, the journal unreadable since: the request is refused (503)
    rather than answered from a copy that may show an enablement that never happened."""
    fleet = tmp_path / "quiet.yaml"
    fleet.write_text("vms:\n  - {name: quiet, address: 127.0.0.9, scheduledEventsEnabled: false}\n")
    state = front_end(shared_store, fleet, profile="fast")
    journal = replica(state).journal
    from forewarn.storage.postgres import ExclusiveWrite

    def gone(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("the server is gone")

    seconds = [time.monotonic()]  # the quiet period's clock, moved only below
    monkeypatch.setattr(replica(state), "_monotonic", lambda: seconds[0])
    try:
        with monkeypatch.context() as patched:
            patched.setattr(ExclusiveWrite, "append_if", gone)
            patched.setattr(journal, "records", gone)
            with pytest.raises(ReplicaError) as refused:
                state.service.vm_request("quiet")
            assert status_of(refused.value) == 503
            assert replica(state).diverged
        replica(state).rebuild()  # the follower does this once the server answers
        assert not state.service.vm_state("quiet").receiving  # the lost touch never happened
        assert list(journal.records()) == []
        with pytest.raises(ReplicaError, match="a moment ago"):  # not tried again at once
            state.service.vm_request("quiet")
        seconds[0] += QUIET_SECONDS
        assert state.service.vm_request("quiet") is None  # the client's retry: journaled now
        assert [record["op"] for _, record in journal.records()] == ["touch"]
    finally:
        journal.close()


def test_a_clock_move_that_cannot_be_journaled_is_not_made(
    fleet_of_three: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manual clock's move is a record like any change: refused (503) when its commit
    fails, the clock stays where it was, and the next write is stamped at the old time,
    not at the refused move's."""
    a, _, _ = fleet_of_three
    now = a.service.now()
    from forewarn.storage.postgres import ExclusiveWrite

    def lost(self: ExclusiveWrite, expected_last: int, records: object) -> int:
        raise StoreUnavailableError("the server went away during the commit")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", lost)
        with pytest.raises(ReplicaError) as refused:
            a.service.advance_clock(timedelta(hours=1))
        assert status_of(refused.value) == 503
    assert a.service.clock_status().now == now
    a.service.execute(Restart("WestNO_0"))
    assert replica(a).applied.head_at == now
    assert a.service.now() == now


def test_a_scaled_clock_of_another_speed_is_another_clock_kind(
    shared_store: str, fleet_file: Path
) -> None:
    """[ours] (docs/scale-out.md, "What every front-end needs": ``scaled`` with the same
    ``--scale``): deadlines fall due on the leader's clock, so a front-end counting time at
    another speed is refused at start, naming both, and opens nothing."""
    first = open_state(
        ServeSettings(fleet=fleet_file, clock="scaled", scale=60, store=shared_store)
    )
    try:
        with pytest.raises(StateMismatchError) as refused:
            open_state(
                ServeSettings(fleet=fleet_file, clock="scaled", scale=10, store=shared_store)
            )
        assert str(refused.value).endswith(
            "is served on a scaled x60 clock, not scaled x10: start every front-end of its "
            "fleet with --clock scaled --scale 60, or use another namespace "
            "(--store ...?namespace=NAME)"
        )
        same = open_state(
            ServeSettings(fleet=fleet_file, clock="scaled", scale=60, store=shared_store)
        )
        same.service.close()
    finally:
        first.service.close()


def test_the_follower_replays_a_diverged_copy_in_a_worker_thread(
    fleet_of_three: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/scale-out.md, "How front-ends stay one fleet": a copy to rebuild is replayed in a
    worker thread, through the follower's own connection, so the event loop never waits on
    the journal's read; the copy then serves the journal's state again, and only that."""
    a, b, _ = fleet_of_three
    a.service.execute(Restart("WestNO_0"))
    journal = replica(a).journal
    from forewarn.storage.postgres import ExclusiveWrite

    def gone(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("the server is gone")

    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", gone)
        patched.setattr(journal, "records", gone)
        with pytest.raises(ReplicaError, match="could not be confirmed"):
            a.service.execute(Restart("WestNO_1"))
    assert replica(a).diverged
    b.service.execute(Restart("WestNO_2"))  # appended meanwhile by another front-end
    replayed_on: list[int] = []
    replayed = replica(a).replayed

    def watched(reader: object) -> object:
        replayed_on.append(threading.get_ident())
        return replayed(reader)  # type: ignore[arg-type]

    monkeypatch.setattr(replica(a), "replayed", watched)

    async def follow_until_rebuilt() -> int:
        stop = asyncio.Event()
        reader = journal.another()
        task = asyncio.create_task(tasks.follow(replica(a), reader, stop))
        while replica(a).diverged:
            await asyncio.sleep(0.01)
        stop.set()
        await task
        reader.close()
        return threading.get_ident()

    loop_thread = asyncio.run(follow_until_rebuilt())
    assert replayed_on
    assert loop_thread not in replayed_on
    assert documents(a.service) == in_step(fleet_of_three)
    shown = [[r.name for r in view.event.resources] for view in a.service.events()]
    assert shown == [["WestNO_0"], ["WestNO_2"]]
