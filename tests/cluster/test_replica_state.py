"""A front-end's copy of the fleet as it starts, as it is rebuilt, as it waits for the other
front-ends after a write, and as it holds first requests back after the store failed. In
process, on the in-memory stand-in for the shared journal (`stand_in_journal.py`): no database.

[ours] (docs/scale-out.md, "How front-ends stay one fleet" and "What a VM sees when PostgreSQL
restarts").
"""

from __future__ import annotations

import logging
import os
import re
import socket
from datetime import datetime, timedelta
from typing import Any

import pytest

from forewarn.cluster.replica import LIVE_SECONDS, QUIET_SECONDS, SPREAD_SECONDS, Replica
from forewarn.commands import ClockMoved, Command, ScheduleEvent, Tick, Touch
from forewarn.domain.clock import DEFAULT_START, ManualClock
from forewarn.domain.events import EventType
from forewarn.domain.platform import Platform
from forewarn.storage.errors import StoreUnavailableError

from .stand_in_journal import Builds, StandInJournal, replica_on

#: A VM that has not asked yet: its first request turns Scheduled Events on (SPEC 7).
FLEET = "vms:\n  - {name: vm0, address: 127.0.0.2, scheduledEventsEnabled: false}\n"
#: A VM whose events reach Event Grid and Resource Graph: their changes make a history.
PUBLISHED = """
availabilitySets:
  - name: west
    scheduledEventsPolicy:
      scheduledEventsAdditionalPublishingTargets: {eventGridAndResourceGraph: {enable: true}}
vms:
  - {name: vm0, address: 127.0.0.2, availabilitySet: west}
"""


def _replica(
    journal: StandInJournal | None = None,
    builds: Builds | None = None,
    clock: ManualClock | None = None,
) -> Replica:
    return replica_on(
        StandInJournal(namespace="test") if journal is None else journal,
        Builds(FLEET) if builds is None else builds,
        clock=clock,
    )


def _ticks(count: int, at: datetime = DEFAULT_START) -> list[dict[str, Any]]:
    return [Tick().to_record(at) for _ in range(count)]


# -- a new front-end ---------------------------------------------------------------------


def test_a_new_front_end_is_not_registered_not_leading_and_not_diverged() -> None:
    """It joins the namespace's list only by registering, leads only once it holds the
    leader lock (Event Grid delivers through the leader alone: a front-end that has not yet
    asked for the lock must not deliver), and its copy, built from nothing yet, shows no
    change the journal lacks."""
    replica = _replica()
    assert replica.registered is False
    assert replica.leading is False
    assert replica.diverged is False


def test_a_write_of_a_front_end_not_yet_registered_waits_for_no_other() -> None:
    """Writers wait for the front-ends in the namespace's list, and those in it for them:
    one not in it (before :meth:`Replica.register`) answers once its record committed."""
    journal = StandInJournal()
    replica = _replica(journal)
    replica.write(Tick())
    assert journal.waits == []
    assert len(journal.kept()) == 1


def test_a_front_end_is_named_by_its_host_its_pid_and_six_random_hex_digits() -> None:
    """docs/scale-out.md: each front-end is listed under "its name: host, pid and a random
    suffix" (the logs show it); [ours] the suffix is six hex digits, so two front-ends
    started by one process differ, and the name stays short enough to read in a log line."""
    first, second = _replica(), _replica()
    shape = rf"{re.escape(socket.gethostname())}/{os.getpid()}/[0-9a-f]{{6}}"
    assert re.fullmatch(shape, first.front_end), first.front_end
    assert re.fullmatch(shape, second.front_end), second.front_end
    assert first.front_end != second.front_end


def test_a_copy_nobody_serves_from_is_rebuilt_and_follows_all_the_same() -> None:
    """Until a service adopts its platforms and the leader listens for applied records,
    rebuilding and following tell nobody and fail at nothing (a replica used on its own,
    as a tool or a test would)."""
    journal = StandInJournal(_ticks(2))
    replica = _replica(journal)
    assert replica.rebuild() == 2
    journal.memory.append_many(_ticks(1))
    assert replica.catch_up() == 1
    assert replica.head == 3


# -- rebuilding --------------------------------------------------------------------------


def test_at_start_up_the_journal_is_replayed_onto_the_platform_built_with_the_copy() -> None:
    """Start-up replays the journal (head 0, nothing diverged): the platform built with the
    replica is still the fresh one, so it is not built a second time (a large fleet's takes
    time), and it is the one served and adopted."""
    builds = Builds(FLEET)
    replica = _replica(StandInJournal(_ticks(2)), builds)
    adopted: list[Platform] = []
    replica.adopt = adopted.append
    assert replica.rebuild() == 2
    assert len(builds.built) == 1
    assert replica.platform is builds.built[0]
    assert adopted == [builds.built[0]]
    assert replica.diverged is False


def test_a_copy_that_has_applied_records_is_rebuilt_on_a_fresh_platform() -> None:
    """A rebuild replays the whole journal: onto a platform built anew, since the one
    served has records applied already."""
    journal = StandInJournal(_ticks(2))
    builds = Builds(FLEET)
    replica = _replica(journal, builds)
    assert replica.catch_up() == 2
    journal.memory.append_many(_ticks(1))
    assert replica.rebuild() == 3
    assert len(builds.built) == 2
    assert replica.platform is builds.built[1]
    assert replica.head == 3
    assert replica.diverged is False


def test_a_diverged_copy_is_rebuilt_on_a_fresh_platform_even_before_its_first_record() -> None:
    """A copy diverged before any record was applied (one it could not apply) may still
    show what the journal lacks: it is replayed onto a platform built anew, and from then on
    is no longer diverged (requests are answered again)."""
    builds = Builds(FLEET)
    replica = _replica(StandInJournal(), builds)
    replica.platform.advance_to(DEFAULT_START + timedelta(hours=1))  # never journaled
    replica.diverged = True
    assert replica.rebuild() == 0
    assert len(builds.built) == 2
    assert replica.platform is builds.built[1]
    assert replica.platform.now == DEFAULT_START
    assert replica.diverged is False
    assert replica.requested("vm0") is None


def test_a_diverged_copy_is_rebuilt_before_its_next_write_once_the_journal_reads_again() -> None:
    """A write to a diverged copy first replays the journal (docs/scale-out.md: "the copy
    is *diverged* and is rebuilt from the journal before it writes again"): the write is
    decided on a platform built anew, not on the one ahead of the journal."""
    builds = Builds(FLEET)
    journal = StandInJournal(_ticks(1))
    replica = _replica(journal, builds)
    replica.platform.advance_to(DEFAULT_START + timedelta(hours=1))  # never journaled
    replica.diverged = True
    replica.write(Touch("vm0"), spread=False)
    assert len(builds.built) == 2
    assert replica.platform is builds.built[1]
    assert replica.diverged is False
    assert journal.ops() == ["tick", "touch"]
    assert journal.kept()[1]["at"] == DEFAULT_START.isoformat()  # the journal's time


def test_a_rebuilt_copy_tells_its_readers_only_the_changes_they_were_not_told() -> None:
    """forewarn.domain.history: "The rebuilt history holds its replayed changes too, and
    tells those the replaced one had not (EventHistory.told) once readers listen to it"; a
    reader told a change twice would count it twice."""
    journal = StandInJournal()
    replica = _replica(journal, Builds(PUBLISHED))
    told: list[int] = []

    def adopt(platform: Platform) -> None:
        platform.history.listen(lambda change: told.append(change.sequence))

    adopt(replica.platform)
    replica.adopt = adopt
    replica.write(ScheduleEvent(EventType.FREEZE.value, ("vm0",)))
    assert told == [1]
    journal.lost_commits = 1
    with pytest.raises(StoreUnavailableError, match="could not be confirmed"):
        replica.write(ScheduleEvent(EventType.REBOOT.value, ("vm0",)))
    assert len(replica.platform.events()) == 1  # rebuilt from the journal
    assert told == [1]


def test_a_rebuild_moves_a_manual_clock_to_the_last_journaled_move() -> None:
    """docs/scale-out.md: a manual clock moved through any front-end is a record too, and
    moves every front-end's manual clock with it, a front-end starting later too."""
    moved = DEFAULT_START + timedelta(hours=3)
    clock = ManualClock(DEFAULT_START)
    replica = _replica(StandInJournal([ClockMoved().to_record(moved)]), clock=clock)
    assert replica.rebuild() == 1
    assert clock.now() == moved


# -- waiting for the other front-ends ----------------------------------------------------


@pytest.fixture
def registered() -> tuple[Replica, StandInJournal]:
    """A front-end in the namespace's list, six records into the journal: its next write is
    record 7."""
    journal = StandInJournal(_ticks(6))
    replica = _replica(journal)
    replica.register()
    assert replica.head == 6
    return replica, journal


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "forewarn.cluster" and record.levelno == logging.WARNING
    ]


def test_a_write_answered_without_a_lagging_front_end_logs_which_and_after_how_long(
    registered: tuple[Replica, StandInJournal], caplog: pytest.LogCaptureFixture
) -> None:
    """docs/scale-out.md: past the bound the writer "answers anyway and logs which
    front-end lagged"; [ours] with how long the answer waited (measured by the front-end's
    monotonic clock: the wait may take longer than the bound when the server is slow)."""
    replica, journal = registered
    journal.lagging = ("east/7/0a0b0c", "west/9/1d2e3f")
    journal.waited = 1.0
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        replica.write(Tick())
    assert journal.waits == [(replica.front_end, 7, SPREAD_SECONDS, LIVE_SECONDS)]
    assert _warnings(caplog) == [
        "answered after 1000 ms without east/7/0a0b0c, west/9/1d2e3f having applied record 7"
    ]


def test_a_write_every_front_end_applied_in_time_logs_nothing(
    registered: tuple[Replica, StandInJournal], caplog: pytest.LogCaptureFixture
) -> None:
    replica, journal = registered
    journal.waited = 0.01
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        replica.write(Tick())
    assert len(journal.waits) == 1
    assert _warnings(caplog) == []


def test_a_write_whose_wait_fails_is_answered_and_logged_as_unknown_elsewhere(
    registered: tuple[Replica, StandInJournal], caplog: pytest.LogCaptureFixture
) -> None:
    """The record committed: the write is acknowledged (the others follow from the journal),
    and the log says which record may not be everywhere yet, and why."""
    replica, journal = registered
    journal.unreachable = StoreUnavailableError("the server went away")
    with caplog.at_level(logging.WARNING, logger="forewarn.cluster"):
        assert replica.write(Tick()) == ()
    assert len(journal.kept()) == 7
    assert _warnings(caplog) == [
        "record 7 committed; whether others applied it is unknown: the server went away"
    ]


# -- first requests after the store failed -----------------------------------------------


def _failing_first_writes(
    replica: Replica, journal: StandInJournal, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[float, Command]]:
    """Every write ``replica`` tries, with the monotonic time then; each fails as the store
    does."""
    tried: list[tuple[float, Command]] = []

    def write(command: Command, *, spread: bool = True) -> tuple[()]:
        tried.append((journal.now, command))
        raise StoreUnavailableError("the server is down")

    monkeypatch.setattr(replica, "write", write)
    return tried


def test_the_first_first_request_is_tried_whatever_the_monotonic_clock_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A monotonic clock's origin is unspecified (Python's ``time.monotonic``): one that
    reads half a second is no reason to hold a first request back, as no store failed yet."""
    journal = StandInJournal()
    journal.now = 0.5
    replica = _replica(journal)
    tried = _failing_first_writes(replica, journal, monkeypatch)
    with pytest.raises(StoreUnavailableError, match="the server is down"):
        replica.requested("vm0")
    assert tried == [(0.5, Touch("vm0"))]


def test_first_requests_are_held_back_for_exactly_the_quiet_period_after_a_store_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/scale-out.md ("What a VM sees when PostgreSQL restarts"): after a refused first
    request, "the next are refused without trying for 5 s, as each try holds up the other
    requests" (QUIET_SECONDS); [ours] once that long has passed, the next is tried."""
    journal = StandInJournal()
    replica = _replica(journal)
    tried = _failing_first_writes(replica, journal, monkeypatch)
    journal.now = 10.0
    with pytest.raises(StoreUnavailableError, match="the server is down"):
        replica.requested("vm0")
    journal.now = 10.0 + QUIET_SECONDS - 0.001
    with pytest.raises(StoreUnavailableError, match="the store failed a moment ago"):
        replica.requested("vm0")
    journal.now = 10.0 + QUIET_SECONDS
    with pytest.raises(StoreUnavailableError, match="the server is down"):
        replica.requested("vm0")
    assert tried == [(10.0, Touch("vm0")), (10.0 + QUIET_SECONDS, Touch("vm0"))]


# -- readiness and a copy rebuilt beside the event loop ----------------------------------


def test_readiness_says_refusing_for_exactly_the_quiet_period_after_a_refused_write() -> None:
    """docs/control.md, "Health": ``/readyz`` is unready with "the store refused a change a
    moment ago" while "a change was answered 503 in the last seconds: 5 with PostgreSQL"
    (QUIET_SECONDS); ready again once they have passed; and unready while the copy is being
    rebuilt (diverged)."""
    journal = StandInJournal()
    journal.down = StoreUnavailableError("the server is down")
    replica = _replica(journal)
    assert replica.refusing() is False
    journal.now = 10.0
    with pytest.raises(StoreUnavailableError):
        replica.write_group([Tick()])
    for moment in (10.0, 10.0 + QUIET_SECONDS - 0.001):
        journal.now = moment
        assert replica.refusing() is True
    journal.now = 10.0 + QUIET_SECONDS
    assert replica.refusing() is False
    replica.diverged = True
    assert replica.refusing() is True


def test_readiness_is_ready_whatever_the_monotonic_clock_reads() -> None:
    """A monotonic clock's origin is unspecified (Python's ``time.monotonic``): one that
    reads half a second says nothing of a refusal, before any write or after one the store
    took."""
    journal = StandInJournal()
    journal.now = 0.5
    replica = _replica(journal)
    assert replica.refusing() is False
    replica.write_group([Tick()])
    assert replica.refusing() is False


def test_a_copy_replayed_beside_the_loop_is_served_only_while_still_diverged() -> None:
    """``Replica.install``: the follower replays the journal in a worker thread
    (``replayed``) and serves the result only if no write rebuilt the copy meanwhile; it
    says which."""
    journal = StandInJournal(_ticks(2))
    builds = Builds(FLEET)
    replica = _replica(journal, builds)
    replica.catch_up()
    served = replica.platform
    adopted: list[Platform] = []
    replica.adopt = adopted.append
    dropped = replica.replayed(journal)  # type: ignore[arg-type]
    assert replica.install(dropped) is False  # not diverged: dropped
    assert replica.platform is served
    assert adopted == []
    replica.diverged = True
    applied = replica.replayed(journal)  # type: ignore[arg-type]
    assert replica.install(applied) is True
    assert replica.platform is applied.platform is builds.built[-1]
    assert adopted == [applied.platform]
    assert replica.diverged is False
    assert replica.head == 2


def test_a_copy_replayed_beside_the_loop_moves_a_manual_clock_too() -> None:
    """docs/scale-out.md: a manual clock moved through any front-end is a record, and moves
    every front-end's manual clock, a copy rebuilt by the follower's thread too."""
    moved = DEFAULT_START + timedelta(hours=3)
    clock = ManualClock(DEFAULT_START)
    journal = StandInJournal([ClockMoved().to_record(moved)])
    replica = _replica(journal, clock=clock)
    replica.replayed(journal)  # type: ignore[arg-type]
    assert clock.now() == moved
