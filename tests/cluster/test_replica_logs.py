"""What a front-end logs when a write's commit is lost (docs/scale-out.md, "When PostgreSQL
fails"): the operator reads why its copy is rebuilt, and that a rebuild had to wait."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from forewarn.cluster import ReplicaError
from forewarn.commands import Restart
from forewarn.server.state import OpenedState
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.postgres import ExclusiveWrite

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
