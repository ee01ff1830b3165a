"""The documented client, run unchanged against the endpoint in-process (SPEC 8).

The sample is learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample",
as the documentation prints it (the one copy, ``examples/handlers/docs_sample.py``). Its functions
run with ``requests`` and ``sleep`` swapped for stand-ins that call :meth:`ImdsEndpoint.handle` and
move the manual clock, so the sample's once-a-second loop runs in no time and never touches a
socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import orjson
import pytest

from forewarn.domain import descriptions
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.server.imds import ImdsResponse

if TYPE_CHECKING:
    from endpoint.conftest import Imds

#: The sample as the documentation prints it; the end-to-end tier checks this copy against
#: the reference text byte for byte and runs it against a real server.
DOCUMENTED_SAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "handlers" / "docs_sample.py"
).read_text(encoding="utf-8")

#: A poll loop that never sees a change would spin for ever; an hour of polls is plenty.
MAX_POLLS = 3600


@dataclass
class SampleResponse:
    """The two things the sample reads of a ``requests`` response."""

    response: ImdsResponse

    @property
    def status_code(self) -> int:
        return self.response.status

    def json(self) -> Any:
        return orjson.loads(self.response.body)


class InProcessRequests:
    """``requests.get`` / ``requests.post`` as the sample calls them, answered by the endpoint
    for one VM; a VM that is down gets no answer, as ``requests`` would raise."""

    def __init__(self, imds: Imds, vm: str) -> None:
        self.imds = imds
        self.vm = vm
        self.calls: list[tuple[str, int]] = []

    def _send(
        self, method: str, url: str, headers: dict[str, str], params: Any, body: bytes
    ) -> Any:
        response = self.imds.request(
            method,
            self.vm,
            path=urlsplit(url).path,
            query=urlencode(params),
            headers=headers,
            body=body,
        )
        self.calls.append((method, response.status))
        if response.status == 0:
            raise ConnectionError("Connection aborted: the VM is down")
        return SampleResponse(response)

    def get(self, url: str, headers: dict[str, str], params: Any) -> Any:
        return self._send("GET", url, headers, params, b"")

    def post(self, url: str, headers: dict[str, str], params: Any, data: str) -> Any:
        return self._send("POST", url, headers, params, data.encode())


def load_sample(imds: Imds, vm: str) -> tuple[dict[str, Any], InProcessRequests]:
    namespace: dict[str, Any] = {"__name__": "documented_sample"}
    exec(compile(DOCUMENTED_SAMPLE, "scheduled-events-windows-2024.txt", "exec"), namespace)
    transport = InProcessRequests(imds, vm)
    polls = 0

    def sleep(seconds: float) -> None:
        nonlocal polls
        polls += 1
        assert polls <= MAX_POLLS, "the sample polled for an hour and saw no change"
        imds.monotonic.advance(seconds)
        imds.advance(timedelta(seconds=seconds))

    namespace["requests"] = transport
    namespace["sleep"] = sleep
    return namespace, transport


def status_of(imds: Imds, event_id: str) -> EventStatus | None:
    live = {view.event.event_id: view.event.status for view in imds.platform.events()}
    return live.get(event_id)


@pytest.fixture
def vm0(imds: Imds) -> Imds:
    imds.add_vm("vm0")
    imds.monotonic.step = 0.0  # only the sample's sleep(1) moves the limiter's clock
    return imds


def test_the_sample_reads_the_first_document_at_once(
    vm0: Imds, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample's ``main`` starts from ``last_document_incarnation = "-1"``, so its first
    poll returns the current document."""
    sample, transport = load_sample(vm0, "vm0")
    assert sample["advanced_sample"]("-1") == 1
    assert transport.calls == [("GET", 200)]
    assert capsys.readouterr().out == "Processed events from document: 1\n"


def test_the_sample_approves_a_user_event_at_once(
    vm0: Imds, capsys: pytest.CaptureFixture[str]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": "Typically events with a user event source can be immediately approved"; the
    sample polls once a second ("Polling frequency"), never gets 429, and its approval starts the
    event."""
    sample, transport = load_sample(vm0, "vm0")
    sample["advanced_sample"]("-1")
    vm0.advance(timedelta(seconds=42))
    event = vm0.schedule(
        EventType.REBOOT, "vm0", source=EventSource.USER, description=descriptions.USER_RESTART
    )
    assert sample["advanced_sample"](1) == 2
    assert transport.calls[1:] == [("GET", 200), ("POST", 200)]
    assert status_of(vm0, event.event_id) is EventStatus.STARTED
    assert capsys.readouterr().out.splitlines()[-1] == "Processed events from document: 2"


def test_the_sample_approves_short_freezes_and_leaves_the_rest(
    vm0: Imds, capsys: pytest.CaptureFixture[str]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": "freeze
    events less that 9 seconds are considered no impact. This will immediately approve them"; other
    platform events are logged by Description and wait for their NotBefore."""
    sample, _ = load_sample(vm0, "vm0")
    sample["advanced_sample"]("-1")
    short = vm0.schedule(
        EventType.FREEZE, "vm0", description=descriptions.LIVE_MIGRATION, duration_seconds=5
    )
    long = vm0.schedule(EventType.FREEZE, "vm0", description="long", duration_seconds=30)
    reboot = vm0.schedule(EventType.REBOOT, "vm0", description=descriptions.HOST_MAINTENANCE)
    capsys.readouterr()
    assert sample["advanced_sample"](1) == 4
    assert status_of(vm0, short.event_id) is EventStatus.STARTED
    assert status_of(vm0, long.event_id) is EventStatus.SCHEDULED
    assert status_of(vm0, reboot.event_id) is EventStatus.SCHEDULED
    assert capsys.readouterr().out.splitlines() == [
        "long",
        "Host server is undergoing maintenance.",
        "Processed events from document: 4",
    ]


def test_the_sample_sees_every_change_when_it_polls_each_second(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    "The DocumentIncarnation is changing every time there's new information in Events"; a
    once-a-second poller in the same availability set notices the event, its start at NotBefore (10
    minutes of notice for Redeploy, "Event scheduling") and its removal ten minutes later
    ("EventStatus: "Started" to Completed (event removed from Events array): 10 minutes")."""
    imds.add_vm("web_0", availability_set="web")
    imds.add_vm("web_1", availability_set="web")
    imds.monotonic.step = 0.0
    sample, transport = load_sample(imds, "web_0")
    last = sample["advanced_sample"]("-1")
    imds.schedule(EventType.REDEPLOY, "web_1", description=descriptions.EMERGENCY_REPAIR)
    seen: list[tuple[int, timedelta]] = []
    while len(seen) < 3:
        last = sample["advanced_sample"](last)
        seen.append((last, imds.clock.now() - imds.start))
    assert seen == [
        (2, timedelta(seconds=2)),
        (3, timedelta(minutes=10, seconds=1)),
        (4, timedelta(minutes=20, seconds=1)),
    ]
    assert {status for _, status in transport.calls} == {200}
