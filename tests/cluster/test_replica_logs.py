"""A front-end joining the namespace, and what it logs when a write's commit is lost
(docs/scale-out.md, "How front-ends stay one fleet"): the operator reads why its copy is
rebuilt, and that a rebuild had to wait."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forewarn.cluster import ReplicaError
from forewarn.cluster.replica import FORGET_SECONDS
from forewarn.commands import Restart
from forewarn.server.state import OpenedState
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import ExclusiveWrite

from .front_ends import front_end_rows, silence
from .test_front_ends_in_process import front_end, replica


@pytest.fixture
def a(shared_store: str, fleet_file: Path) -> Iterator[OpenedState]:
    state = front_end(shared_store, fleet_file)
    yield state
    replica(state).journal.close()


def _lost(*args: object, **kwargs: object) -> object:
    raise StoreUnavailableError("the server went away during the commit")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "forewarn.cluster" and record.levelno == logging.WARNING
    ]


def test_a_lost_commit_is_logged_with_its_cause_and_the_rebuild(
    a: OpenedState,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING):
        patched.setattr(ExclusiveWrite, "append_if", _lost)
        with pytest.raises(ReplicaError):
            a.service.execute(Restart("WestNO_1"))
    assert _warnings(caplog) == [
        "state ahead of the journal (the server went away during the commit): "
        "rebuilding from the journal"
    ]


def test_a_rebuild_that_cannot_read_the_journal_is_logged_as_postponed(
    a: OpenedState,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = replica(a).journal
    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING):
        patched.setattr(ExclusiveWrite, "append_if", _lost)
        patched.setattr(journal, "records", _lost)
        with pytest.raises(ReplicaError):
            a.service.execute(Restart("WestNO_1"))
    assert _warnings(caplog) == [
        "state ahead of the journal (the server went away during the commit): "
        "rebuilding from the journal",
        "rebuild postponed: the server went away during the commit",
    ]
    assert replica(a).diverged


def test_joining_forgets_front_ends_long_silent_and_reports_what_was_applied_since(
    shared_store: str, fleet_file: Path
) -> None:
    """docs/scale-out.md: a front-end joins the namespace's list, removing those silent for
    FORGET_SECONDS, then reads what was appended since its start-up replay and reports it, so
    writers wait for it from then on, and never for one that is gone."""
    first = front_end(shared_store, fleet_file)
    second = front_end(shared_store, fleet_file)  # replayed the journal: empty then
    try:
        replica(first).register()
        first.service.execute(Restart("WestNO_0"))  # after the second's replay
        silence(shared_store, replica(first).front_end, FORGET_SECONDS + 1)
        replica(second).register()
        assert replica(second).head == replica(first).head == 1
        assert front_end_rows(shared_store) == {replica(second).front_end: 1}
    finally:
        for state in (first, second):
            replica(state).journal.close()


@pytest.fixture
def quiet(shared_store: str, tmp_path: Path) -> Iterator[OpenedState]:
    """A front-end whose one VM has not asked yet: its first request turns Scheduled Events
    on (SPEC 7), and is journaled as it happens."""
    fleet = tmp_path / "quiet.yaml"
    fleet.write_text("vms:\n  - {name: quiet, address: 127.0.0.9, scheduledEventsEnabled: false}\n")
    state = front_end(shared_store, fleet)
    yield state
    replica(state).journal.close()


def test_a_request_to_a_diverged_copy_is_refused_until_it_is_rebuilt(
    a: OpenedState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26.1's rule: a change nobody may see until it is durable. A copy whose last
    write's commit was lost (and the journal unreadable since) may show that change, so a
    VM's request is refused (503) rather than answered from it, until the copy is rebuilt."""
    with monkeypatch.context() as patched:
        patched.setattr(ExclusiveWrite, "append_if", _lost)
        patched.setattr(replica(a).journal, "records", _lost)
        with pytest.raises(ReplicaError):
            a.service.execute(Restart("WestNO_1"))
        with pytest.raises(ReplicaError, match="rebuilding its state from the journal"):
            replica(a).requested("WestNO_2")
    replica(a).rebuild()  # the follower does this once the server answers
    assert replica(a).requested("WestNO_2") is None


def test_a_first_request_is_journaled_without_waiting_for_other_front_ends(
    quiet: OpenedState, shared_store: str, tmp_path: Path
) -> None:
    """A VM's request is answered from the event loop: its journaled touch never waits for
    other front-ends to apply it (only operations and approvals do)."""
    replica(quiet).register()
    silent = front_end(shared_store, tmp_path / "quiet.yaml")  # registered, never applies
    try:
        replica(silent).register()
        waits = _lagging_waits(quiet)
        assert quiet.service.vm_request("quiet") is not None  # the first call's delay
        assert [record["op"] for _, record in replica(quiet).journal.records()] == ["touch"]
        assert waits == []
    finally:
        replica(silent).journal.close()


def test_a_first_request_the_store_cannot_take_is_refused_and_not_retried_at_once(
    quiet: OpenedState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The touch that turns Scheduled Events on cannot be journaled (the store refuses the
    write before anything is applied): the request is refused, nothing changes here, and
    the next request within QUIET_SECONDS is refused without asking the store again."""
    with monkeypatch.context() as patched:
        patched.setattr(replica(quiet).journal, "exclusive", _lost)
        with pytest.raises(
            ReplicaError, match="cannot write now, nothing was applied: the server went away"
        ):
            replica(quiet).requested("quiet")
    assert not replica(quiet).diverged
    assert not quiet.service.vm_state("quiet").receiving
    with pytest.raises(ReplicaError, match="a moment ago"):  # the store works, not asked
        replica(quiet).requested("quiet")
    assert list(replica(quiet).journal.records()) == []


def test_requests_within_the_interval_leave_nothing_to_journal(a: OpenedState) -> None:
    """A VM's requests are journaled once per interval (``touch_every``): before it has
    passed since the last, there is nothing to write; after, one Seen record."""
    a.service.vm_request("WestNO_0")
    assert not replica(a).flush_seen()
    a.service.advance_clock(replica(a).touch_every)
    a.service.vm_request("WestNO_0")
    assert replica(a).flush_seen()
    seen = [r["vms"] for _, r in replica(a).journal.records() if r["op"] == "seen"]
    assert seen == [["WestNO_0"]]


def _lagging_waits(state: OpenedState) -> list[object]:
    """Every wait ``state``'s writes make for the other front-ends, from now on."""
    waits: list[object] = []
    journal = replica(state).journal
    wait_applied = journal.wait_applied

    def recorded(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        waits.append(args)
        return wait_applied(*args, **kwargs)

    journal.wait_applied = recorded  # type: ignore[method-assign]
    return waits
