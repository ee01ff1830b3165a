"""The dashboard's per-VM timeline (docs/dashboard.md): what each VM asked and was shown.

A poller asks the same thing every second; each run of one request answered the same way is
one entry with a count and the time of the last, so a timeline of 100 entries reaches back
past a minute and a half of polling, and recording a poll stays a counter's increment.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forewarn.domain.vms import Vm
from forewarn.server._activity import KEPT, Activity, ActivityEndpoint
from forewarn.server.imds import ImdsRequest
from forewarn.testing import ForewarnPlatform

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def world() -> tuple[ForewarnPlatform, Activity, ActivityEndpoint]:
    harness = ForewarnPlatform(
        vms=[Vm(name="vm0", vm_id="id-vm0", address="127.0.0.1")],
        seed=1,
        start=START,
        rate_limit=1000.0,
        profile="fast",
    )
    activity = Activity()
    endpoint = ActivityEndpoint(harness.service, activity, rate_limit=1000.0)
    return harness, activity, endpoint


def request(method: str = "GET", body: bytes = b"") -> ImdsRequest:
    return ImdsRequest(
        method=method,
        path="/metadata/scheduledevents",
        query="api-version=2020-07-01",
        headers={"metadata": "true"},
        body=body,
        local_address="127.0.0.1",
        peer_address="127.0.0.1",
    )


def test_a_repeated_poll_is_one_entry_counting_every_request() -> None:
    harness, activity, endpoint = world()
    for _ in range(5):
        assert endpoint.respond(request()).response.status == 200
        harness.advance(1)
    run, document = activity.of("vm0")
    assert (run.kind, run.count, run.incarnation, document.kind) == ("request", 5, 1, "document")
    assert run.until is not None
    assert run.until - run.at == timedelta(seconds=4)
    assert activity.requests("vm0") == 5
    shown = run.to_json()
    assert (shown["count"], shown["at"], shown["until"]) == (
        5,
        START.isoformat(),
        run.until.isoformat(),
    )


def test_a_new_answer_or_another_request_starts_a_new_entry() -> None:
    harness, activity, endpoint = world()
    for _ in range(3):
        endpoint.respond(request())
    (event,) = harness.restart("vm0")
    endpoint.respond(request())  # a new document: a new entry, and the document shown
    endpoint.respond(request())
    approval = b'{"StartRequests": [{"EventId": "%s"}]}' % event.event_id.encode()
    assert endpoint.respond(request("POST", approval)).response.status == 200
    assert [
        (entry.kind, entry.method, entry.incarnation, entry.count) for entry in activity.of("vm0")
    ] == [
        ("request", "GET", 1, 3),
        ("document", "", 1, 1),
        ("request", "GET", 2, 2),
        ("document", "", 2, 1),
        ("request", "POST", None, 1),
    ]
    assert activity.requests("vm0") == 6


def test_the_timeline_keeps_the_latest_entries() -> None:
    _, activity, endpoint = world()
    for index in range(KEPT + 10):
        # Alternating requests never repeat the one before: an entry each.
        endpoint.respond(request("GET" if index % 2 else "POST", b"{}"))
    entries = activity.of("vm0")
    assert len(entries) == KEPT
    assert entries[-1].method == "GET"
    assert all(entry.count == 1 for entry in entries)
    assert activity.requests("vm0") == KEPT + 10
