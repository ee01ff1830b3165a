"""``forewarn replay``'s endpoint, on a real socket in this process, on a manual clock: the
recorded documents byte for byte at their recorded times, but for the headers made per
response; conditional GETs on the recorded ETag; other api-versions; approvals answered as
Azure answers them, changing nothing.

The trace is the shipped example made from the documentation's own live-migration flow
(learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Example Event Flow":
DocumentIncarnation 1 to 4).
"""

from __future__ import annotations

import json
from datetime import timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from forewarn.clocks import ScaledClock
from forewarn.domain.clock import ManualClock
from forewarn.scenario import in_process_client
from forewarn.server.trace_replay import (
    ReplayError,
    ReplaySettings,
    create_replay_app,
    load_replay,
    replay_clock,
)
from forewarn.trace.format import load_trace, parse_trace

from .trace_support import EXAMPLE, replayed, trace_bytes

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"


def test_each_recorded_document_is_served_byte_for_byte_at_its_time() -> None:
    trace = load_trace(EXAMPLE)
    with replayed(EXAMPLE) as replay:
        request_ids = set()
        for document in trace.documents:
            replay.move_to(document.at)
            response = replay.get()
            assert response.status_code == 200
            assert response.content == document.body.encode()
            assert response.headers["ETag"] == document.headers["ETag"]
            assert response.headers["Content-Type"] == document.headers["Content-Type"]
            assert response.headers["Server"] == document.headers["Server"]
            assert response.headers["Date"] == format_datetime(document.at, usegmt=True)
            assert response.headers["Content-Length"] == str(len(document.body))
            request_ids.add(response.headers["x-ms-request-id"])
            replay.advance(timedelta(milliseconds=500))  # the example's shortest gap is 1 s
            assert replay.get().content == document.body.encode(), "until the next change"
        assert len(request_ids) == len(trace.documents), "a new request id each time"


def test_the_recorded_etag_answers_a_conditional_get_with_304() -> None:
    with replayed(EXAMPLE) as replay:
        replay.advance(timedelta(seconds=1))  # incarnation 2
        assert replay.get(**{"If-None-Match": '"2"'}).status_code == 304
        assert replay.get(**{"If-None-Match": '"1"'}).status_code == 200


def test_another_api_version_is_shown_the_recorded_events_its_way() -> None:
    """2019-01-01 shows no Description, EventSource or DurationInSeconds (the documentation's
    version table: they came with 2019-04-01, 2019-08-01, 2020-07-01)."""
    with replayed(EXAMPLE) as replay:
        replay.advance(timedelta(seconds=1))
        (shown,) = replay.get("2019-01-01").json()["Events"]
        assert shown == {
            "EventId": EVENT_ID,
            "EventStatus": "Scheduled",
            "EventType": "Freeze",
            "ResourceType": "VirtualMachine",
            "Resources": ["WestNO_0", "WestNO_1"],
            "NotBefore": "Mon, 20 Apr 2026 22:26:58 GMT",
        }
        assert replay.get("latest").status_code == 400, "checked as forewarn's endpoint checks"
        assert httpx.get(replay.url, params={"api-version": "2020-07-01"}).status_code == 400


def test_an_approval_is_answered_as_azure_answers_and_changes_nothing() -> None:
    """ "The service always returns a 200 success code if it's passed a valid event ID"
    (learn.microsoft.com .../linux/scheduled-events, "Start an event"); the recording goes
    on as it went."""
    with replayed(EXAMPLE) as replay:
        replay.advance(timedelta(seconds=1))
        before = replay.get().content

        def approve(event_id: str) -> int:
            body = json.dumps({"StartRequests": [{"EventId": event_id}]})
            response = httpx.post(
                replay.url,
                params={"api-version": "2020-07-01"},
                headers={"Metadata": "true"},
                content=body,
                trust_env=False,
            )
            return response.status_code

        assert approve(EVENT_ID.lower()) == 200
        assert approve("00000000-0000-0000-0000-000000000000") == 400
        assert replay.get().content == before
        ((_, ids),) = replay.endpoint.approvals
        assert ids == (EVENT_ID,)


def test_the_recorded_vm_is_the_trace_s() -> None:
    with replayed(EXAMPLE) as replay:
        name = httpx.get(
            replay.url.replace("scheduledevents", "instance/compute/name"),
            params={"api-version": "2021-02-01", "format": "text"},
            headers={"Metadata": "true"},
        )
        assert name.text == "WestNO_0"


def test_the_replay_tells_where_it_is() -> None:
    trace = load_trace(EXAMPLE)
    with replayed(EXAMPLE) as replay:
        replay.advance(timedelta(seconds=1))
        with in_process_client(create_replay_app(replay.endpoint)) as http:
            status = http.get("/api/v1/replay").json()
            assert status["vm"] == "WestNO_0"
            assert status["shown"] == {"line": 3, "incarnation": 2}
            assert status["next"] == {
                "line": 4,
                "at": "2026-04-20T22:26:58.000Z",
                "in": 900.0,
            }
            assert status["documents"] == len(trace.documents)


def test_clocks_start_at_the_trace_and_run_as_asked() -> None:
    trace = load_trace(EXAMPLE)
    manual = replay_clock(trace, manual=True, speed=1)
    assert isinstance(manual, ManualClock)
    assert manual.now() == trace.start.at
    scaled = replay_clock(trace, manual=False, speed=60)
    assert isinstance(scaled, ScaledClock)
    assert scaled.factor == 60
    assert timedelta(0) <= scaled.now() - trace.start.at < timedelta(minutes=1)


def test_a_trace_without_documents_is_refused(tmp_path: Path) -> None:
    only_start = trace_bytes("vm0", [(load_trace(EXAMPLE).start.at, 1, [])]).splitlines()[0]
    path = tmp_path / "empty.trace"
    path.write_bytes(only_start + b"\n")
    trace = parse_trace(path.read_bytes(), str(path))
    with pytest.raises(ReplayError, match=r"empty\.trace: holds no document to replay"):
        load_replay(ReplaySettings(path, manual=True), trace)
