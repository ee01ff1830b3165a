"""A front-end joining the namespace, and what it logs when a write's commit is lost
(docs/scale-out.md, "How front-ends stay one fleet"): the operator reads why its copy is
rebuilt, and that a rebuild had to wait."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

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
