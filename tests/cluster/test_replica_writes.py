"""How a front-end's copy writes: group commit, the time records it adds, its retries and what
it says when it gives up. In process, in the test's thread, on a stand-in for the shared
journal that keeps its records in memory and shows each transaction's append: no database.

docs/scale-out.md, "How front-ends stay one fleet": a write is one transaction that catches
up, stamps ``at = max(clock, the last record's at)``, applies the command (a ``tick`` first
when that time fires deadlines; a refused command appends nothing but the tick of a time it
moved), appends at exactly the next sequence (tried again after reading another writer's
record), commits, and only then answers; writes arriving together go in one transaction, a
write with a time of its own alone; after a commit that answers someone, a registered
front-end waits for the others. [ours]: a dropped connection is opened again once; a write
that keeps finding another writer's records gives up after MAX_ATTEMPTS, naming the
namespace.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

from forewarn.cluster import replica as replica_module
from forewarn.cluster.replica import MAX_ATTEMPTS, Replica, ReplicaError
from forewarn.commands import CancelEvent, Command, Result, ScheduleEvent, Seen, Tick
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.errors import UnknownEventError
from forewarn.domain.events import Event, EventType
from forewarn.domain.platform import Platform
from forewarn.errors import ForewarnError
from forewarn.journal_replay import Applied, replay_journal
from forewarn.storage.errors import (
    NotSerializableError,
    StoreUnavailableError,
    ValueTooLargeError,
)
from forewarn.storage.journal import MAX_RECORD_BYTES, encode_record

from .stand_in_journal import Builds, StandInJournal, Transaction, replica_on

FLEET = """
vms:
  - {name: vm0, address: 127.0.0.2, host: h1}
  - {name: vm1, address: 127.0.0.3, host: h2}
"""
UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _replica(journal: StandInJournal, *, registered: bool = False) -> Replica:
    return replica_on(
        journal, Builds(FLEET), touch_every=timedelta(minutes=5), registered=registered
    )


def freeze(vm: str, label: str = "") -> ScheduleEvent:
    return ScheduleEvent(EventType.FREEZE.value, (vm,), description=label)


def event_ids(platform: Platform) -> list[str]:
    return sorted(view.event.event_id for view in platform.events())


def replayed(journal: StandInJournal) -> Platform:
    """The platform the journal gives any front-end replaying it."""
    applied = Applied.fresh(Builds(FLEET))
    replay_journal(applied, journal.records())
    return applied.platform


# -- one turn of the event loop (write_soon) ------------------------------------------------


class Answers:
    """A ``done`` for :meth:`Replica.write_soon`: what each call was given, in order, and
    :attr:`all_in` set once ``count`` calls have come."""

    def __init__(self, count: int) -> None:
        self.outcomes: list[Result | Exception] = []
        self._count = count
        self.all_in = asyncio.Event()

    def __call__(self, outcome: Result | Exception) -> None:
        self.outcomes.append(outcome)
        if len(self.outcomes) == self._count:
            self.all_in.set()


def one_turn(replica: Replica, commands: Sequence[Command]) -> list[Result | Exception]:
    """Ask for ``commands`` in one turn of an event loop run in this thread, as a front-end's
    loop reads VMs' approvals; what each ``done`` was called with once the next turn ran."""
    answers = Answers(len(commands))

    async def turn() -> None:
        head = replica.head
        for command in commands:
            replica.write_soon(command, answers)
        assert (replica.head, answers.outcomes) == (head, [])  # queued, nothing applied yet
        await answers.all_in.wait()  # written off the loop, in one transaction, then answered

    asyncio.run(turn())
    return answers.outcomes


def test_a_command_asked_for_alone_in_a_turn_is_written_once_the_turn_has_run() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    (answer,) = one_turn(replica, [freeze("vm0")])
    assert isinstance(answer, tuple)
    assert [event.event_id for event in answer] == event_ids(replica.platform)
    assert journal.appends == [["schedule"]]


def test_commands_of_one_turn_go_in_one_transaction_each_answered_with_its_own_outcome() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    answers = one_turn(replica, [freeze("vm0"), CancelEvent(UNKNOWN), freeze("vm1")])
    assert journal.appends == [["schedule", "schedule"]]  # the refused one alone left out
    assert isinstance(answers[1], UnknownEventError)
    first, third = answers[0], answers[2]
    assert isinstance(first, tuple)
    assert isinstance(third, tuple)
    assert [event.resources[0].name for event in (*first, *third)] == ["vm0", "vm1"]


def test_a_caller_that_fails_to_take_its_answer_is_logged_and_the_others_still_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    answers: list[Result | Exception] = []

    def gone(outcome: Result | Exception) -> None:
        raise ConnectionResetError("the VM hung up")

    async def turn() -> None:
        answered = asyncio.Event()

        def answer(outcome: Result | Exception) -> None:
            answers.append(outcome)
            answered.set()

        replica.write_soon(freeze("vm0"), gone)
        replica.write_soon(freeze("vm1"), answer)
        await answered.wait()

    with caplog.at_level(logging.ERROR, logger="forewarn.cluster"):
        asyncio.run(turn())
    assert [record.getMessage() for record in caplog.records] == ["answering a write of a group"]
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], ConnectionResetError)
    assert len(answers) == 1
    assert isinstance(answers[0], tuple)
    assert journal.appends == [["schedule", "schedule"]]


def test_a_turn_whose_commit_is_lost_answers_every_write_with_the_same_refusal() -> None:
    """docs/scale-out.md: a commit that cannot be known fails every write of the group with
    the same 503, the copy rebuilt as for a single write."""
    journal = StandInJournal()
    replica = _replica(journal)
    journal.lost_commits = 1
    answers = one_turn(replica, [freeze("vm0"), freeze("vm1")])
    assert len(answers) == 2
    assert isinstance(answers[0], ReplicaError)
    assert answers[1] is answers[0]
    assert "could not be confirmed" in str(answers[0])
    assert (replica.head, event_ids(replica.platform), replica.diverged) == (0, [], False)


def test_a_command_the_journal_cannot_keep_is_answered_with_why_before_the_turn() -> None:
    """The journal keeps only valid Unicode: the caller is told so at once, and nothing is
    queued or written."""
    journal = StandInJournal()
    replica = _replica(journal)
    answers: list[Result | Exception] = []
    replica.write_soon(freeze("vm0", "\ud800"), answers.append)  # no event loop needed
    assert len(answers) == 1
    assert isinstance(answers[0], NotSerializableError)
    assert (journal.began, replica.head) == (0, 0)


def test_the_writes_of_a_turn_wait_for_the_other_front_ends_and_a_group_does_by_default() -> None:
    """Approvals answer VMs: each group waits (once) for every other live front-end to apply
    it, as ``write_group`` does unless told otherwise."""
    journal = StandInJournal()
    replica = _replica(journal, registered=True)
    one_turn(replica, [freeze("vm0"), freeze("vm1")])  # one record: a group
    assert journal.waited_for() == [1]
    replica.write_group([freeze("vm0", "again")])
    assert journal.waited_for() == [1, 2]
    replica.write_group([freeze("vm1", "again")], spread=False)
    assert journal.waited_for() == [1, 2]
    assert journal.reports == [0, 1, 2, 3]  # joining, then in each write's transaction
    assert journal.reporters == {replica.front_end}


def test_a_write_from_a_thread_waits_for_the_other_front_ends_unless_nobody_waits_on_it() -> None:
    journal = StandInJournal()
    replica = _replica(journal, registered=True)
    replica.write(freeze("vm0"))
    replica.write(Seen(("vm0",)), spread=False)
    replica.write(freeze("vm1"), spread=True)
    assert journal.waited_for() == [1, 3]


# -- writes from several threads (write) ----------------------------------------------------


def queued_behind(replica: Replica, writes: list[Callable[[], object]]) -> list[object]:
    """Run ``writes`` in threads of their own while this thread's write holds its
    transaction open, each started once the one before has queued; what each returned or
    raised."""
    journal = replica.journal
    assert isinstance(journal, StandInJournal)
    outcomes: list[object] = [None] * len(writes)
    threads: list[threading.Thread] = []

    def run(index: int) -> None:
        try:
            outcomes[index] = writes[index]()
        except Exception as exc:
            outcomes[index] = exc

    def queue_them(began: int) -> None:
        if began:
            return
        for index in range(len(writes)):
            threads.append(threading.Thread(target=run, args=(index,)))
            threads[-1].start()
            deadline = time.monotonic() + 10
            while len(replica._waiting) < index + 1:  # queued, waiting for this turn
                assert time.monotonic() < deadline, "the write never queued"
                time.sleep(0.001)

    journal.on_begin = queue_them
    replica.write(freeze("vm0", "first"))
    for thread in threads:
        thread.join(30)
    return outcomes


def test_writes_made_while_a_transaction_runs_go_together_in_the_next() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    outcomes = queued_behind(
        replica,
        [
            lambda: replica.write(freeze("vm1", "second")),
            lambda: replica.write(CancelEvent(UNKNOWN)),
            lambda: replica.write(freeze("vm0", "third")),
        ],
    )
    assert journal.appends == [["schedule"], ["schedule", "schedule"]]
    assert isinstance(outcomes[1], UnknownEventError)
    second, third = outcomes[0], outcomes[2]
    assert isinstance(second, tuple)
    assert isinstance(third, tuple)
    assert [event.description for event in (*second, *third)] == ["second", "third"]
    assert all(isinstance(event, Event) for event in (*second, *third))


def test_writes_from_threads_go_in_transactions_of_at_most_max_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/scale-out.md, "A silent PostgreSQL": writes asked for together go in one
    transaction, "100 at most, `MAX_GROUP`"; more go in the transactions after it (here
    with a bound of 2)."""
    monkeypatch.setattr(replica_module, "MAX_GROUP", 2)
    journal = StandInJournal()
    replica = _replica(journal)
    outcomes = queued_behind(
        replica, [functools.partial(replica.write, freeze(vm)) for vm in ("vm1", "vm0", "vm1")]
    )
    assert journal.appends == [["schedule"], ["schedule", "schedule"], ["schedule"]]
    assert all(isinstance(outcome, tuple) for outcome in outcomes)


def test_a_write_with_a_time_of_its_own_goes_alone() -> None:
    """A manual clock's move is stamped with its own time: the writes queued before it go
    in one transaction, it in the next alone, those after it in another."""
    journal = StandInJournal()
    replica = _replica(journal)
    later = DEFAULT_START + timedelta(hours=1)
    queued_behind(
        replica,
        [
            lambda: replica.write(Tick()),
            lambda: replica.write(freeze("vm1")),
            lambda: replica.write(Tick(), at=later),
            lambda: replica.write(Tick(), at=later + timedelta(hours=1)),
            lambda: replica.write(freeze("vm0")),
        ],
    )
    assert journal.appends == [
        ["schedule"],
        ["tick", "schedule"],
        ["tick"],
        ["tick"],
        ["schedule"],
    ]
    stamps = [record["at"] for _, record in journal.records(after=2)]  # (2: tick, schedule)
    assert stamps == [stamp.isoformat() for stamp in (later, *[later + timedelta(hours=1)] * 2)]


def test_a_write_with_its_own_time_is_checked_with_that_time_before_anything_is_applied() -> None:
    """A record the journal would find too large only as stamped with the write's own time
    (a longer stamp than the clock's) is refused before anything is applied, not after
    (which would leave the copy ahead of the journal, to be rebuilt)."""
    journal = StandInJournal()
    replica = _replica(journal)
    at = DEFAULT_START + timedelta(microseconds=1)  # ".000001": seven bytes more
    overhead = len(encode_record(Seen(("",)).to_record(DEFAULT_START)))
    name = "x" * (MAX_RECORD_BYTES - overhead - 3)  # 3 bytes short of the limit
    with pytest.raises(ValueTooLargeError):
        replica.write(Seen((name,)), at=at)
    assert (journal.began, replica.head, replica.diverged) == (0, 0, False)
    assert replica.write(Seen((name,))) == ()  # as the clock stamps it, it is kept


# -- one transaction, and trying again (write_group) ----------------------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "forewarn.cluster" and record.levelno == logging.WARNING
    ]


def test_a_connection_the_server_dropped_is_opened_again_once() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    journal.dropped = 1
    (event,) = replica.write(freeze("vm0"))
    assert (journal.began, journal.appends) == (2, [["schedule"]])
    journal.dropped = 2
    with pytest.raises(ReplicaError) as raised:
        replica.write(freeze("vm1"))
    assert (
        str(raised.value)
        == "cannot write now, nothing was applied: the server closed the connection"
    )
    assert isinstance(raised.value.__cause__, StoreUnavailableError)
    assert journal.began == 4  # once more, not again
    assert event_ids(replica.platform) == [event.event_id]  # nothing of it applied
    assert not replica.diverged


def test_a_write_another_writer_appended_before_is_tried_again_on_a_rebuilt_copy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only a writer not taking the namespace's lock (an older forewarn) can append first.
    The copy had applied the write: it is rebuilt from the journal (and says why), then the
    write is tried again after the other's record."""
    journal = StandInJournal()
    replica = _replica(journal)
    journal.others = [[freeze("vm1", "other").to_record(DEFAULT_START)]]
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        (event,) = replica.write(freeze("vm0", "mine"))
    assert _warnings(caplog) == [
        "state ahead of the journal (another writer appended first): rebuilding from the journal"
    ]
    assert journal.ops() == ["schedule", "schedule"]
    assert journal.appends == [["schedule"]]
    assert event_ids(replica.platform) == event_ids(replayed(journal))
    assert replayed(journal).event(event.event_id).event.description == "mine"


def test_a_write_that_keeps_finding_another_writer_first_gives_up_naming_the_namespace() -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    journal.others = [[Tick().to_record(DEFAULT_START)] for _ in range(MAX_ATTEMPTS)]
    with pytest.raises(ReplicaError) as raised:
        replica.write(freeze("vm0"))
    assert str(raised.value) == "fleet_a: other writers kept appending first; try again"
    assert (journal.began, journal.appends) == (MAX_ATTEMPTS, [])
    assert journal.ops() == ["tick"] * MAX_ATTEMPTS
    assert (replica.head, event_ids(replica.platform)) == (MAX_ATTEMPTS, [])


def test_a_lost_commit_is_not_tried_again_and_says_the_copy_is_rebuilt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = StandInJournal()
    replica = _replica(journal)
    journal.lost_commits = 1
    with pytest.raises(ReplicaError) as raised, caplog.at_level(logging.WARNING):
        replica.write(freeze("vm0"))
    assert _warnings(caplog) == [
        "state ahead of the journal (the server went away during the commit): "
        "rebuilding from the journal"
    ]
    assert str(raised.value) == (
        "the change could not be confirmed (the server went away during the commit): it may "
        "or may not have been applied, and this front-end rebuilds its state from the "
        "journal, which says which"
    )
    assert journal.began == 1
    assert (replica.head, event_ids(replica.platform), replica.diverged) == (0, [], False)


# -- what one transaction appends (_write_once) ---------------------------------------------


def test_a_manual_clock_moved_through_another_front_end_moves_here_as_the_write_catches_up() -> (
    None
):
    journal = StandInJournal()
    replica = _replica(journal)
    later = DEFAULT_START + timedelta(hours=1)
    journal.memory.append(Tick().to_record(later))  # the other front-end's clock move
    replica.write(freeze("vm0"))
    assert replica.clock.now() == later
    assert [record["at"] for _, record in journal.records()] == [later.isoformat()] * 2


def test_records_the_follower_applied_while_a_write_read_them_are_applied_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """forewarn.cluster.replica: a write applies what others appended before its own
    command, passing over what "the follower may have applied meanwhile": every record is
    applied once, as replaying the journal would."""
    journal = StandInJournal()
    replica = _replica(journal)
    journal.memory.append(freeze("vm1", "theirs").to_record(DEFAULT_START))
    read = Transaction.records

    def read_then_followed(self: Transaction, after: int) -> list[tuple[int, dict[str, Any]]]:
        fetched = read(self, after)
        replica.apply_fetched(fetched)  # the follower, between the read and the write's step
        return fetched

    monkeypatch.setattr(Transaction, "records", read_then_followed)
    replica.write(freeze("vm0", "mine"))
    assert sorted(view.event.description for view in replica.platform.events()) == [
        "mine",
        "theirs",
    ]
    assert event_ids(replica.platform) == event_ids(replayed(journal))
    assert (replica.head, journal.ops()) == (2, ["schedule", "schedule"])


def test_a_time_that_fires_deadlines_is_journaled_before_the_commands_stamped_with_it() -> None:
    """The tick goes first even when the deadline is exactly the write's time; a tick asked
    for is that record itself."""
    journal = StandInJournal()
    replica = _replica(journal)
    (first,) = replica.write(freeze("vm0"))
    assert first.not_before is not None
    assert isinstance(replica.clock, ManualClock)
    replica.clock.set(first.not_before)
    (second,) = replica.write(freeze("vm1"))
    assert journal.appends == [["schedule"], ["tick", "schedule"]]
    assert [record["at"] for _, record in journal.records(after=1)] == [
        first.not_before.isoformat()
    ] * 2
    assert second.not_before is not None
    replica.clock.set(second.not_before)
    replica.write(Tick())
    assert journal.appends[2:] == [["tick"]]
    assert event_ids(replica.platform) == event_ids(replayed(journal))


def test_a_refused_command_appends_nothing_unless_it_moved_the_time() -> None:
    """Refused at the last record's time: nothing to journal. Refused later: the domain
    moved the platform's time before refusing, so a tick alone journals that much. An
    accepted command later is its own record of the time, with no tick."""
    journal = StandInJournal()
    replica = _replica(journal)
    with pytest.raises(UnknownEventError):
        replica.write(CancelEvent(UNKNOWN))
    assert (journal.began, journal.appends, replica.head) == (1, [], 0)
    assert isinstance(replica.clock, ManualClock)
    replica.clock.advance(timedelta(minutes=1))
    with pytest.raises(UnknownEventError):
        replica.write(CancelEvent(UNKNOWN))
    assert journal.appends == [["tick"]]
    replica.clock.advance(timedelta(minutes=1))
    replica.write(freeze("vm0"))
    assert journal.appends == [["tick"], ["schedule"]]
    assert [record["at"] for _, record in journal.records()] == [
        (DEFAULT_START + timedelta(minutes=minutes)).isoformat() for minutes in (1, 2)
    ]


def test_a_group_whose_every_command_is_refused_tells_nobody_and_waits_for_nobody() -> None:
    """Nothing was journaled: the leader is not woken, no other front-end waited for."""
    journal = StandInJournal()
    replica = _replica(journal, registered=True)
    told: list[int] = []
    replica.on_change = lambda: told.append(replica.head)
    outcomes = replica.write_group([CancelEvent(UNKNOWN), CancelEvent(UNKNOWN)])
    assert all(isinstance(outcome, UnknownEventError) for outcome in outcomes)
    assert (told, journal.waited_for(), journal.appends) == ([], [], [])
    outcomes = replica.write_group([CancelEvent(UNKNOWN), freeze("vm0")])
    assert isinstance(outcomes[0], ForewarnError)
    assert (told, journal.waited_for(), journal.appends) == ([1], [1], [["schedule"]])
