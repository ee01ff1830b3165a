"""The client, unchanged, against a real ``forewarn serve`` process over loopback sockets.

The endpoint is found the way a deployment would configure it (the environment variable),
proxy variables pointing nowhere are set to show they are ignored (the Metadata Service is
reached directly), and platform time moves only through the control API's manual clock.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from forewarn.client import (
    ENDPOINT_ENVIRONMENT_VARIABLE,
    NO_RETRY,
    Client,
    DocumentChange,
    EventSource,
    EventStatus,
    TooManyRequestsError,
)

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

pytestmark = pytest.mark.e2e

STARTUP_SECONDS = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    imds: str
    control: httpx.Client

    def create(self, event_type: str, source: str = "Platform") -> str:
        answer = self.control.post(
            "/api/v1/events", json={"type": event_type, "resources": ["vm0"], "source": source}
        )
        assert answer.status_code == 201, answer.text
        event_id: str = answer.json()["EventId"]
        return event_id

    def advance(self, seconds: float) -> None:
        answer = self.control.post("/api/v1/clock/advance", json={"seconds": seconds})
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One server for the module (start-up costs seconds); each test leaves no event behind."""
    imds_port, control_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forewarn",
            "serve",
            "--bind",
            f"127.0.0.1:{imds_port}",
            "--control",
            f"127.0.0.1:{control_port}",
            "--clock",
            "manual",
            "--seed",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    control = httpx.Client(
        base_url=f"http://127.0.0.1:{control_port}", trust_env=False, headers=AUTH
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"forewarn serve exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                if control.get("/api/v1/clock").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("forewarn serve did not come up")
            time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{imds_port}/metadata/scheduledevents", control)
    finally:
        control.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        assert process.stderr is not None
        process.stderr.close()


@pytest.fixture
def configured(server: Server, monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.setenv(ENDPOINT_ENVIRONMENT_VARIABLE, server.imds)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    return server


def test_read_approve_and_instance_over_a_socket(configured: Server) -> None:
    """scheduled-events-windows-2024.txt, "Query for events", "Start an event": the documented
    round trip, against ``forewarn serve`` found through ``FOREWARN_IMDS_ENDPOINT``."""
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
    """scheduled-events-windows-2024.txt, "High level overview": prepare for added events,
    recover from removed ones; one change per step, as in "Example responses"."""
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
    """SPEC.md section 1: "429 over the rate limit of 5 requests per second per VM"; without
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
