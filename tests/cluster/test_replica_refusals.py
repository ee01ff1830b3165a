"""What a front-end's copy says when it refuses, and what it does with a first request the
fleet refuses to journal. In process, on the stand-in journal (`stand_in_journal.py`) made
unreadable: no database.

[ours] (docs/serve.md, "State that survives restarts", "When the store fails ...";
docs/scale-out.md "What a VM sees when PostgreSQL restarts"): a copy whose write could not be
confirmed refuses every read and write until it is rebuilt, saying so and, when it tried to
rebuild and could not, why; a first request the fleet itself refuses is answered as things stand and
logged, and the next one tries again (only the store failing holds first requests back).
"""

from __future__ import annotations

import logging

import pytest

from forewarn.cluster.replica import Replica, ReplicaError
from forewarn.commands import Command, Seen, Tick, Touch
from forewarn.domain.clock import DEFAULT_START
from forewarn.errors import ForewarnError
from forewarn.storage.errors import StoreUnavailableError

from .stand_in_journal import Builds, StandInJournal, replica_on

#: A VM that has not asked yet: its first request turns Scheduled Events on (SPEC 7).
FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2, scheduledEventsEnabled: false}\n"
REBUILDING = (
    "this front-end is rebuilding its state from the journal after a write whose commit "
    "could not be confirmed, and cannot read the journal now"
)


def _replica() -> Replica:
    """A copy on a journal whose server went away."""
    journal = StandInJournal(namespace="test")
    journal.unreadable = StoreUnavailableError("the server is down")
    return replica_on(journal, Builds(FLEET))


def test_a_diverged_copy_refuses_a_request_saying_why() -> None:
    replica = _replica()
    replica.diverged = True
    with pytest.raises(ReplicaError) as raised:
        replica.requested("vm0")
    assert str(raised.value) == REBUILDING


def test_a_diverged_copy_that_cannot_rebuild_refuses_a_write_naming_the_cause() -> None:
    """The write first tries to rebuild the copy; the read that failed is named."""
    replica = _replica()
    replica.diverged = True
    with pytest.raises(ReplicaError) as raised:
        replica.write(Tick())
    assert str(raised.value) == f"{REBUILDING}: the server is down"
    assert isinstance(raised.value.__cause__, StoreUnavailableError)
    assert replica.diverged is True  # still to be rebuilt


def test_a_first_request_the_fleet_refuses_is_answered_logged_and_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    replica = _replica()
    tried: list[tuple[Command, bool]] = []

    def refused(command: Command, *, spread: bool = True) -> tuple[()]:
        tried.append((command, spread))
        raise ForewarnError("vm0 is being deleted")

    monkeypatch.setattr(replica, "write", refused)
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        assert replica.requested("vm0") is None
        assert replica.requested("vm0") is None  # no quiet period: only the store has one
    assert tried == [(Touch("vm0"), False)] * 2  # waiting for no other front-end
    assert [record.getMessage() for record in caplog.records] == [
        "cannot journal vm0's first request: vm0 is being deleted"
    ] * 2


def test_records_fetched_again_are_passed_over_and_a_gap_stops_the_taking() -> None:
    """A follower's fetch may overlap what it applied (its head moved meanwhile) or, read
    from the head, start after a gap: only the records right after the head are applied,
    counted, and told (the leader wakes on it)."""
    replica = _replica()
    told: list[int] = []
    replica.on_change = lambda: told.append(replica.head)
    tick = Tick().to_record(DEFAULT_START)
    assert replica.apply_fetched([(1, tick), (2, tick)]) == 2
    assert replica.apply_fetched([(1, tick), (2, tick), (3, tick)]) == 1
    assert replica.apply_fetched([(5, tick), (6, tick)]) == 0  # record 4 first
    assert replica.apply_fetched([(3, tick)]) == 0
    assert (replica.head, told) == (3, [2, 3])


def test_the_vms_seen_are_journaled_in_one_record_that_waits_for_no_other_front_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests are answered from the event loop: the Seen record that batches them answers
    nobody, so it never waits for the other front-ends to apply it."""
    replica = _replica()
    written: list[tuple[Command, bool]] = []

    def write(command: Command, *, spread: bool = True) -> tuple[()]:
        written.append((command, spread))
        return ()

    monkeypatch.setattr(replica, "write", write)
    replica.unseen.update({"vm1", "vm0"})
    assert replica.flush_seen() is True
    assert replica.flush_seen() is False  # nothing seen since
    assert written == [(Seen(("vm0", "vm1")), False)]
    assert replica.unseen == set()
