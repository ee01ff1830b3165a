"""The client, unchanged, against a real ``forewarn serve`` process over loopback sockets.

The endpoint is found the way a deployment would configure it (the environment variable),
proxy variables pointing nowhere are set to show they are ignored (the Metadata Service is
reached directly), and platform time moves only through the control API's manual clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from e2e_support import SCHEDULED_EVENTS, ForewarnServer, start_forewarn, stopped_at_exit

from forewarn.client import (
    ENDPOINT_ENVIRONMENT_VARIABLE,
    NO_RETRY,
    Client,
    DocumentChange,
    EventSource,
    EventStatus,
    TooManyRequestsError,
)

pytestmark = pytest.mark.e2e


@dataclass
class Server:
    """The module's ``forewarn serve`` (started by e2e_support), as these tests use it."""

    forewarn: ForewarnServer

    @property
    def imds(self) -> str:
        return self.forewarn.base_url() + SCHEDULED_EVENTS

    def create(self, event_type: str, source: str = "Platform") -> str:
        return self.forewarn.create_event(event_type, ["vm0"], source=source)

    def advance(self, seconds: float) -> None:
        self.forewarn.advance(seconds)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module (start-up costs seconds); each test leaves no event behind."""
    started = start_forewarn(tmp_path_factory.mktemp("serve"), seed=1)
    with stopped_at_exit(started) as forewarn:
        yield Server(forewarn)


@pytest.fixture
def configured(server: Server, monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.setenv(ENDPOINT_ENVIRONMENT_VARIABLE, server.imds)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    return server


def test_read_approve_and_instance_over_a_socket(configured: Server) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events",
    "Start an event": the documented round trip, against ``forewarn serve`` found through
    ``FOREWARN_IMDS_ENDPOINT``."""
    with Client(lease_paths=[]) as client:
        assert client.endpoint.source == "environment"
        assert client.get().events == ()
        assert client.instance().name == "vm0"
        event_id = configured.create("Reboot", source="User")
        (event,) = client.get().events
        assert (event.event_id, event.source, event.status) == (
            event_id,
            EventSource.USER,
            EventStatus.SCHEDULED,
        )
        client.approve(event)
        configured.advance(8)  # the documented 7 s of reboot impact
        (started,) = client.get().events
        assert started.status is EventStatus.STARTED
        assert started.not_before is None
        configured.advance(10 * 60)  # "Started to Completed": the event is removed
        assert client.get().events == ()


def test_watch_over_a_socket(configured: Server) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    prepare for added events, recover from removed ones; one change per step, as in "Example
    responses"."""
    polls = {"count": 0}

    def sleep(seconds: float) -> None:
        polls["count"] += 1
        if polls["count"] > 200:
            raise AssertionError("the watch saw no change in 200 polls")
        time.sleep(min(seconds, 0.02))

    changes: list[DocumentChange] = []
    with Client(lease_paths=[]) as client:
        for change in client.watch(interval=0.05, on_error=lambda error: None):
            changes.append(change)
            if change.previous is None:
                configured.create("Freeze")
            elif change.added:
                client.approve(*change.added)
                configured.advance(8)
            elif change.started:
                configured.advance(10 * 60)
            elif change.removed:
                break
            if len(changes) > 4:
                break
    first = changes[0].incarnation
    assert [c.incarnation for c in changes] == [first, first + 1, first + 2, first + 3]
    assert [len(c.added) for c in changes] == [0, 1, 0, 0]
    assert [len(c.started) for c in changes] == [0, 0, 1, 0]
    assert [len(c.removed) for c in changes] == [0, 0, 0, 1]


def test_rate_limit_answers_are_retried(configured: Server) -> None:
    """SPEC 1: "429 over the rate limit of 5 requests per second per VM"; without
    retries a burst meets it, with the default policy every read gets through (a real wait of
    about a second, as the limit is measured in real time)."""
    statuses: list[int] = []
    with Client(lease_paths=[], retry=NO_RETRY) as hasty:
        for _ in range(8):
            try:
                hasty.get()
                statuses.append(200)
            except TooManyRequestsError as error:
                statuses.append(error.status)
    assert 429 in statuses
    with Client(lease_paths=[]) as patient:
        documents = [patient.get() for _ in range(8)]
    assert len({d.incarnation for d in documents}) == 1
