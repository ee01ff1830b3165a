"""Event routes (list, create, show, cancel) and the clock (show, advance, set)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from forewarn.config.fleet import default_fleet
from forewarn.domain.clock import ManualClock
from forewarn.domain.timing import DOCUMENTED
from forewarn.scenario import in_process_client
from forewarn.scenario.inprocess import service_for_fleet
from forewarn.server.control import create_control_app
from forewarn.wire.dates import format_not_before

from .control_support import START, ok, refused


def _create(http: httpx.Client, **fields: object) -> dict[str, object]:
    body = {"type": "Reboot", "resources": ["app0"], **fields}
    created: dict[str, object] = ok(http.post("/api/v1/events", json=body), status=201)
    return created


def test_create_list_show_cancel(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": "in
    rare cases, the operation will be canceled by Azure before it starts. In that case the event
    will be removed from the Events array"."""
    event = _create(http, source="User", description="d", durationInSeconds=9, noticeSeconds=1200)
    assert event["NotBefore"] == format_not_before(START + timedelta(minutes=20))
    assert (event["EventSource"], event["Description"], event["DurationInSeconds"]) == (
        "User",
        "d",
        9,
    )
    listed = ok(http.get("/api/v1/events"))["events"]
    assert [e["EventId"] for e in listed] == [event["EventId"]]
    assert ok(http.get(f"/api/v1/events/{event['EventId']}")) == listed[0]
    cancelled = http.delete(f"/api/v1/events/{event['EventId']}")
    assert (cancelled.status_code, cancelled.content) == (204, b"")
    assert ok(http.get("/api/v1/events")) == {"events": []}
    assert ok(http.get("/api/v1/vms/app0/document")) == {"DocumentIncarnation": 3, "Events": []}
    refused(http.delete(f"/api/v1/events/{event['EventId']}"), 404, "unknown event id")
    refused(http.get(f"/api/v1/events/{event['EventId']}"), 404)


def test_a_started_event_cannot_be_cancelled(http: httpx.Client) -> None:
    """SPEC 4 [doc]: the platform cancels an event "while Scheduled"; an event
    never moves back from Started (section 2). Cancelling a Started one is 409."""
    event = _create(http, started=True)
    assert (event["EventStatus"], event["NotBefore"]) == ("Started", "")
    refused(http.delete(f"/api/v1/events/{event['EventId']}"), 409, "only a Scheduled event")


@pytest.mark.parametrize(
    ("fields", "status", "fragment"),
    [
        # learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
        # "Reboot 15 minutes" minimum notice.
        ({"noticeSeconds": 60}, 422, "needs at least 900 s"),
        ({"resources": ["ghost"]}, 404, "ghost"),
        ({"resources": []}, 422, "resources"),
        ({"resources": ["app0", "app0"]}, 422, "twice"),
        ({"type": "Completed"}, 422, "type"),
        ({"source": "Operator"}, 422, "source"),
        ({"durationInSeconds": "9"}, 422, "durationInSeconds"),
        ({"durationInSeconds": -2}, 422, "durationInSeconds"),
        ({"durationInSeconds": 10**12}, 422, "durationInSeconds"),
        ({"noticeSeconds": -1}, 422, "noticeSeconds"),
        ({"noticeSeconds": 1e300}, 422, "noticeSeconds"),
        ({"started": "yes"}, 422, "started"),
        ({"EventType": "Reboot"}, 422, "EventType"),
    ],
)
def test_create_refusals(
    http: httpx.Client, fields: dict[str, object], status: int, fragment: str
) -> None:
    """SPEC 4 [doc] for the notice; [ours] for the statuses: nothing is created."""
    body = {"type": "Reboot", "resources": ["app0"], **fields}
    refused(http.post("/api/v1/events", json=body), status, fragment)
    assert ok(http.get("/api/v1/events")) == {"events": []}


def test_clock_show_advance_set(http: httpx.Client, clock: ManualClock) -> None:
    """SPEC 4 [doc]: an unapproved event starts at its NotBefore; the manual clock
    is how a test gets there without waiting (SPEC 4 [ours])."""
    shown = ok(http.get("/api/v1/clock"))
    assert shown == {
        "now": START.isoformat(),
        "kind": "ManualClock",
        "profile": "documented",
        "nextDeadline": None,
    }
    event = _create(http)
    assert (
        ok(http.get("/api/v1/clock"))["nextDeadline"] == (START + timedelta(minutes=15)).isoformat()
    )
    moved = ok(http.post("/api/v1/clock/advance", json={"seconds": 900}))
    assert moved["now"] == (START + timedelta(minutes=15)).isoformat()
    assert ok(http.get(f"/api/v1/events/{event['EventId']}"))["EventStatus"] == "Started"
    later = START + timedelta(hours=1)
    assert ok(http.post("/api/v1/clock/set", json={"now": later.isoformat()}))["now"] == (
        later.isoformat()
    )
    assert clock.now() == later
    assert ok(http.get("/api/v1/events")) == {"events": []}  # removed 10 minutes after start


@pytest.mark.parametrize(
    ("path", "body", "status", "fragment"),
    [
        ("/api/v1/clock/advance", {"seconds": -1}, 422, "seconds"),
        ("/api/v1/clock/advance", {"seconds": "60"}, 422, "seconds"),
        ("/api/v1/clock/advance", {"seconds": 1e300}, 422, "seconds"),
        ("/api/v1/clock/advance", {}, 422, "seconds"),
        ("/api/v1/clock/set", {"now": "2022-04-11T22:11:59"}, 422, "timezone"),
        ("/api/v1/clock/set", {"now": "yesterday"}, 422, "now"),
        ("/api/v1/clock/set", {"now": "2000-01-01T00:00:00Z"}, 409, "only moves forward"),
        ("/api/v1/clock/set", {"now": "9999-01-01T00:00:00Z"}, 422, "9000"),
    ],
)
def test_clock_refusals(
    http: httpx.Client, clock: ManualClock, path: str, body: object, status: int, fragment: str
) -> None:
    """SPEC 4 [ours]: a clock only moves forward, by a bounded, valid amount."""
    refused(http.post(path, json=body), status, fragment)
    assert clock.now() == START


def test_a_real_clock_cannot_be_moved() -> None:
    """SPEC 4 [ours]: only `serve --clock manual` moves on request; others 409."""

    class FixedClock:
        def now(self) -> datetime:
            return datetime(2030, 1, 1, tzinfo=UTC)

    service = service_for_fleet(default_fleet(), FixedClock(), timing=DOCUMENTED)
    with in_process_client(create_control_app(service)) as http:
        assert ok(http.get("/api/v1/clock"))["kind"] == "FixedClock"
        refused(http.post("/api/v1/clock/advance", json={"seconds": 1}), 409, "manual clock")
        refused(
            http.post("/api/v1/clock/set", json={"now": "2031-01-01T00:00:00Z"}),
            409,
            "manual clock",
        )
