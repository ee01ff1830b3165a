"""The blocking client against the real VM-facing endpoint, in process (no sockets).

The platform is a :class:`forewarn.testing.ForewarnPlatform` on a manual clock; its in-process
transport hands the endpoint each request, so what the client sees is byte for byte what
``forewarn serve`` answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from forewarn.client import (
    DEFAULT_API_VERSION,
    NO_RETRY,
    BadRequestError,
    Client,
    DocumentChange,
    EventSource,
    EventStatus,
    EventType,
    ImdsConnectionError,
    ImdsError,
    InvalidApiVersionError,
    RetryPolicy,
    ServerError,
)
from forewarn.commands import ScheduleEvent
from forewarn.domain.api_versions import NEWEST_VERSIONS
from forewarn.domain.events import EventType as PlatformEventType
from forewarn.domain.vms import Vm
from forewarn.service import ScheduledEventsService
from forewarn.testing import ForewarnPlatform

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
USER_REBOOT = "Virtual machine is going to be restarted as requested by authorized user."
LIVE_MIGRATION = (
    "Virtual machine is being paused because of a memory-preserving Live Migration operation."
)


class FakeTime:
    """A monotonic clock that moves only when slept on; each sleep also moves platform time,
    so a watch that polls once a second lives through minutes of lifecycle instantly."""

    def __init__(self, service: ScheduledEventsService | None = None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.service = service

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.service is not None:
            self.service.advance_clock(timedelta(seconds=seconds))


class World:
    """One VM (``vm0``) on a platform with the documented timings, served in process."""

    def __init__(self, *, rate_limit: float = 1000.0) -> None:
        self.time = FakeTime()
        self.platform = ForewarnPlatform(
            vms=[Vm(name="vm0", vm_id="11111111-2222-3333-4444-555555555555")],
            seed=1,
            rate_limit=rate_limit,
            monotonic=self.time.monotonic,
            # A VM under an impact closes the connection unanswered: the client's connection
            # errors (held requests, the default, are the socket tier's).
            impact=dict.fromkeys((t.value for t in PlatformEventType), "drop"),
        )
        self.service = self.platform.service
        self.time.service = self.service
        self.transport = self.platform.transport()
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.transport.handle_request(request)

    def client(self, **options: object) -> Client:
        return Client(
            "http://169.254.169.254",
            transport=httpx.MockTransport(self.handle),
            sleep=self.time.sleep,
            monotonic=self.time.monotonic,
            **options,  # type: ignore[arg-type]
        )

    def schedule(self, event_type: str, source: str = "Platform", **fields: object) -> str:
        (event,) = self.service.execute(
            ScheduleEvent(event_type, ("vm0",), source=source, **fields)  # type: ignore[arg-type]
        )
        return event.event_id


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def client(world: World) -> Iterator[Client]:
    with world.client() as client:
        yield client


def test_first_document_is_empty(client: Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": the
    first document a VM sees is ``{"DocumentIncarnation": 1, "Events": []}``."""
    document = client.get()
    assert document.incarnation == 1
    assert document.events == ()
    assert document.api_version == DEFAULT_API_VERSION == "2020-07-01"


def test_user_reboot_is_read_approved_and_started(world: World, client: Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": restarting a VM schedules a Reboot; "Start an event": approving lets it start
    before NotBefore; the Started event shows ``NotBefore`` as ``""`` ("Example responses")."""
    event_id = world.schedule("Reboot", source="User", description=USER_REBOOT)
    (event,) = client.get().events
    assert event.event_id == event_id
    assert event.event_type is EventType.REBOOT
    assert event.source is EventSource.USER
    assert event.status is EventStatus.SCHEDULED
    assert event.not_before == START + timedelta(minutes=15)  # Reboot's minimum notice
    assert event.impacts("vm0")

    client.approve(event)
    world.service.advance_clock(timedelta(seconds=8))  # past the 7 s reboot, when vm0 is back
    document = client.get()
    (started,) = document.events
    assert started.event_id == event_id
    assert started.status is EventStatus.STARTED
    assert started.not_before is None
    assert document.incarnation == 3


def test_several_events_are_approved_in_one_request(world: World, client: Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, Python sample: "You can
    confirm multiple events in a single request if needed"; the body is ``{"StartRequests":
    [{"EventId": ...}]}`` ("Start an event")."""
    first = world.schedule("Freeze", description=LIVE_MIGRATION, duration_seconds=5)
    second = world.schedule("Redeploy")
    document = client.get()
    world.requests.clear()
    client.approve(*document.events)
    (post,) = world.requests
    assert post.method == "POST"
    assert json.loads(post.content) == {"StartRequests": [{"EventId": first}, {"EventId": second}]}
    world.service.advance_clock(timedelta(seconds=8))
    assert {e.status for e in client.get().events} == {EventStatus.STARTED}


def test_approving_an_unknown_event_is_refused_and_changes_nothing(
    world: World, client: Client
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "A 400
    error code indicates that the request header or payload was malformed"; SPEC 3 [ours]: an id the
    VM cannot see is 400 with no state change. Not transient, so not retried."""
    event_id = world.schedule("Reboot", source="User")
    before = client.get()
    world.requests.clear()
    with pytest.raises(BadRequestError) as caught:
        client.approve(event_id, "00000000-0000-0000-0000-000000000000")
    assert caught.value.status == 400
    assert caught.value.attempts == 1
    assert len(world.requests) == 1
    assert client.get() == before


def test_approving_no_events_sends_nothing(world: World, client: Client) -> None:
    """SPEC 3: the body carries a StartRequests array; an empty one is refused
    (400), so approving nothing sends nothing [ours]. Ids must be non-empty strings."""
    client.approve()
    client.approve(*client.get().events)
    assert [r.method for r in world.requests] == ["GET"]
    with pytest.raises(ValueError, match="not an EventId"):
        client.approve("")


def test_metadata_header_on_every_request(world: World, client: Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Headers": "The
    Metadata:true header is required for all scheduled events requests"; SPEC 1: required on GET and
    POST."""
    event_id = world.schedule("Reboot", source="User")
    client.get()
    client.instance()
    client.approve(event_id)
    assert [r.url.path for r in world.requests] == [
        "/metadata/scheduledevents",
        "/metadata/instance/compute",
        "/metadata/scheduledevents",
    ]
    assert [r.method for r in world.requests] == ["GET", "GET", "POST"]
    assert all(r.headers["Metadata"] == "true" for r in world.requests)
    assert all("x-forwarded-for" not in r.headers for r in world.requests)


def test_default_api_version_is_the_current_one(world: World, client: Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability": "the current version is 2020-07-01"."""
    client.get()
    (request,) = world.requests
    assert request.url.path == "/metadata/scheduledevents"
    assert request.url.params["api-version"] == "2020-07-01"


def test_older_api_versions_see_what_they_know(world: World) -> None:
    """SPEC 2, "What each api-version shows": Terminate exists from 2019-01-01,
    Preempt from 2017-11-01, Description from 2019-04-01; "An event whose type a version does
    not know is not shown to that version at all"; 2017-03-01 prefixes IaaS names with _."""
    world.schedule("Terminate", notice_seconds=300)
    world.schedule("Preempt")
    freeze = world.schedule("Freeze", description=LIVE_MIGRATION, duration_seconds=5)
    seen: dict[str, list[str]] = {}
    for version in ("2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01"):
        with world.client(api_version=version) as old:
            document = old.get()
        assert document.api_version == version
        seen[version] = sorted(str(e.event_type) for e in document.events)
        event = document.event(freeze)
        assert event is not None
        assert event.impacts("vm0")
        assert event.resources == (("_vm0",) if version == "2017-03-01" else ("vm0",))
        assert (event.description is None) == (version < "2019-04-01")
        assert event.source is None
        assert event.duration_seconds is None
    assert seen["2017-03-01"] == seen["2017-08-01"] == ["Freeze"]
    assert seen["2017-11-01"] == ["Freeze", "Preempt"]
    assert seen["2019-01-01"] == seen["2019-04-01"] == ["Freeze", "Preempt", "Terminate"]


def test_latest_is_not_an_api_version(world: World) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability": "{latest} ... is no longer supported"; SPEC 1: 400 with ``newest-versions``, not
    retried."""
    with (
        world.client(api_version="latest") as client,
        pytest.raises(InvalidApiVersionError) as caught,
    ):
        client.get()
    assert caught.value.newest_versions == NEWEST_VERSIONS
    assert "api-version is invalid" in caught.value.message
    assert len(world.requests) == 1


def test_instance_compute_metadata(client: Client) -> None:
    """SPEC 8: handlers check whether their own VM is among an event's Resources;
    its name is ``compute.name`` of the instance metadata."""
    compute = client.instance()
    assert compute.name == "vm0"
    assert compute.vm_id == "11111111-2222-3333-4444-555555555555"
    assert compute.platform_fault_domain == 0


def test_a_vm_in_impact_gets_no_answer_until_it_is_back(world: World) -> None:
    """SPEC 4: a Started Reboot takes the VM down for the impact (7 s documented);
    its endpoint closes connections unanswered meanwhile, a transient error the client retries
    on its injected sleep, which here is also what brings the VM back."""
    event_id = world.schedule("Reboot", source="User")
    retry = RetryPolicy(attempts=10, initial_delay=1.0, max_delay=1.0, jitter=0.0)
    with world.client(retry=retry) as client:
        client.approve(event_id)
        document = client.get()
    assert document.events[0].status is EventStatus.STARTED
    assert world.time.sleeps == [1.0] * 7
    with world.client(retry=RetryPolicy(attempts=1)) as client:
        world.schedule("Freeze", duration_seconds=5)
        freeze = client.get().events[-1]
        client.approve(freeze)
        with pytest.raises(ImdsConnectionError):
            client.get()


# -- watch ---------------------------------------------------------------------------------


def test_watch_follows_a_freeze_through_its_lifecycle_polling_once_a_second() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview"
    pseudo code and "Example responses": incarnation 1 (empty) -> 2 Freeze Scheduled -> 3 Started ->
    4 removed; each change is reported once, as added, changed (Scheduled -> Started) and removed.
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": "poll
    the service once per second". The endpoint keeps its real 5 requests per second limit (SPEC
    1)."""
    world = World(rate_limit=5.0)
    changes: list[DocumentChange] = []
    errors: list[ImdsError] = []
    freeze_id = ""
    with world.client(retry=NO_RETRY) as client:
        for change in client.watch(on_error=errors.append):
            changes.append(change)
            if len(changes) == 1:
                freeze_id = world.schedule("Freeze", description=LIVE_MIGRATION)
            if len(changes) == 4:
                break
    first, scheduled, started, removed = changes
    assert (first.previous, first.incarnation, first.added) == (None, 1, ())
    assert [e.event_id for e in scheduled.added] == [freeze_id]
    assert scheduled.changed == ()
    assert scheduled.removed == ()
    assert started.added == started.removed == ()
    assert [e.event_id for e in started.started] == [freeze_id]
    (update,) = started.changed
    assert update.before.not_before is not None
    assert update.after.not_before is None
    assert [e.event_id for e in removed.removed] == [freeze_id]
    assert [c.incarnation for c in changes] == [1, 2, 3, 4]
    # Every wait was the one-second poll rhythm.
    sleeps = world.time.sleeps
    assert set(sleeps) == {1.0}
    # Nobody approved, so the Freeze started at its NotBefore, 15 minutes after it was created
    # ("Event scheduling", Freeze: 15 minutes), and was removed 5 minutes after it started: a
    # live migration's Started period as Microsoft's mock server captured it
    # (github.com/Azure-Samples/scheduled-events-mock-server, main.py, "Live Migration"),
    # shorter than the typical "Started to Completed ... 10 minutes".
    assert len(sleeps) == 15 * 60 + 5 * 60
    # While frozen (the 7 s "Impact Duration") the VM's endpoint answered nothing; with no
    # retries and an on_error that keeps going, those polls were reported and skipped.
    assert len(errors) == 7
    assert all(isinstance(e, ImdsConnectionError) for e in errors)
    assert len(world.requests) == len(sleeps) + 1


def test_watch_yields_only_when_the_incarnation_moves(world: World) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, Python sample: it polls
    ``while (last_document_incarnation == found_document_incarnation)`` and handles a document only
    once the incarnation changed."""

    def sleep(seconds: float) -> None:
        world.time.sleep(seconds)
        if len(world.time.sleeps) == 5:
            world.schedule("Redeploy")

    with Client(
        "http://169.254.169.254",
        transport=httpx.MockTransport(world.handle),
        sleep=sleep,
        monotonic=world.time.monotonic,
    ) as client:
        watch = client.watch()
        first = next(watch)
        second = next(watch)
        watch.close()
    assert (first.incarnation, second.incarnation) == (1, 2)
    assert len(world.requests) == 6  # five polls saw incarnation 1 again and yielded nothing


def test_watch_approving_user_events_as_the_docs_sample_does(world: World) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, Python sample: "Approve
    all user initiated events"; the approved Reboot starts without waiting for its NotBefore ("Start
    an event")."""
    user_event = ""
    approved_at = 0.0
    with world.client() as client:
        # While vm0 reboots its endpoint answers nothing; this handler keeps polling.
        for change in client.watch(on_error=lambda error: None):
            if change.previous is None:
                user_event = world.schedule("Reboot", source="User", description=USER_REBOOT)
                continue
            for event in change.added:
                if event.source == EventSource.USER and event.is_scheduled:
                    client.approve(event)
                    approved_at = world.time.now
            if change.started:
                assert [e.event_id for e in change.started] == [user_event]
                break
    # Seen Started once the 7 s reboot was over, not 15 minutes later at NotBefore.
    assert 7 <= world.time.now - approved_at < 15


def test_watch_errors_end_it_unless_the_caller_keeps_going(world: World) -> None:
    """The caller decides what is fatal: without ``on_error`` an error that outlives the
    retries ends the watch; with it, the watch goes on with the next poll."""
    failing = {"left": 3}

    def flaky(request: httpx.Request) -> httpx.Response:
        if failing["left"] > 0:
            failing["left"] -= 1
            return httpx.Response(500, json={"error": "Internal server error"})
        return world.handle(request)

    def client() -> Client:
        return Client(
            "http://169.254.169.254",
            transport=httpx.MockTransport(flaky),
            retry=RetryPolicy(attempts=1),
            sleep=world.time.sleep,
            monotonic=world.time.monotonic,
        )

    with client() as ending, pytest.raises(ImdsError):
        next(ending.watch())
    errors: list[ImdsError] = []
    with client() as going_on:
        change = next(going_on.watch(on_error=errors.append))
    assert change.incarnation == 1
    assert [type(e) for e in errors] == [ServerError, ServerError]
    assert world.time.sleeps == [1.0, 1.0]


def test_watch_polls_at_once_when_handling_took_longer_than_the_interval(world: World) -> None:
    world.time.service = None
    with world.client() as client:
        watch = client.watch(interval=1.0)
        next(watch)
        world.time.now += 5.0  # the handler of the first change took 5 s
        world.schedule("Redeploy")
        next(watch)
        watch.close()
    assert world.time.sleeps == []  # no wait: the next poll was overdue
