"""Event Grid's delivery rules as data, and the store that keeps deliveries until they are done.

Source: learn.microsoft.com, "Event Grid message delivery and retry": the retry schedule "10
seconds, 30 seconds, 1 minute, 5 minutes, 10 minutes, 30 minutes, 1 hour, 3 hours, 6 hours,
Every 12 hours up to 24 hours"; "maximum number of delivery attempts (default is 30) and the
event time-to-live (default is 1440 minutes)"; webhook errors for which "retry doesn't happen":
400, 413, 401, 403.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from e2e_support import http_server_in_thread

from forewarn.errors import InvalidInputError
from forewarn.eventgrid.deadletter import dead_letter
from forewarn.eventgrid.delivery import EventGrid, SubscriptionView
from forewarn.eventgrid.handshake import MAX_ENDPOINT_CHARS, check_endpoint
from forewarn.eventgrid.payloads import event_time
from forewarn.eventgrid.schedule import after_failure, delivery_outcome, retry_delay
from forewarn.eventgrid.store import Delivery, DeliveryStore, Subscription
from forewarn.server._activity import Activity
from forewarn.server.dashboard import snapshot
from forewarn.testing import ForewarnPlatform

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def test_the_documented_retry_schedule() -> None:
    waits = [retry_delay(n).total_seconds() for n in range(1, 13)]
    assert waits == [
        10,
        30,
        60,
        300,
        600,
        1800,
        3600,
        3 * 3600,
        6 * 3600,
        12 * 3600,
        12 * 3600,
        12 * 3600,
    ]


def test_each_failure_is_retried_until_the_time_to_live_runs_out() -> None:
    at, attempts = T0, 0
    times = [at]
    while True:
        attempts += 1
        again, reason = after_failure(attempts, T0, at, 503)
        if again is None:
            break
        at = again
        times.append(at)
    assert reason == "TimeToLiveExceeded"
    assert attempts == 11
    assert times[-1] - T0 == timedelta(hours=22, minutes=46, seconds=40)


def test_the_attempt_limit_and_what_is_never_retried() -> None:
    assert after_failure(3, T0, T0, 500, max_attempts=3) == (None, "MaxDeliveryAttemptsExceeded")
    for status in (400, 401, 403, 413):
        assert after_failure(1, T0, T0, status) == (None, "NonRetryableError")
    assert after_failure(1, T0, T0, None) == (T0 + timedelta(seconds=10), None)  # no answer


@pytest.mark.parametrize(
    "endpoint",
    [
        "ftp://h/x",
        "http://",
        "http//h",
        "http://h:0/",
        "http://h:99999/",
        "http://h/ x",
        "http://h/\x00",
        "http://h/é",
        "http://bücher.example/",
    ],
)
def test_bad_endpoints_are_refused(endpoint: str) -> None:
    with pytest.raises(InvalidInputError):
        check_endpoint(endpoint)


def test_each_endpoint_refusal_says_what_is_wrong() -> None:
    """[ours] Bad input, a clear error naming what is wrong (docs/azure-side.md, "Event
    Grid"): the bounds at the bound and past it."""
    longest = "http://h/" + "x" * (MAX_ENDPOINT_CHARS - len("http://h/"))
    assert check_endpoint(longest) == longest
    with pytest.raises(InvalidInputError, match=r"^the endpoint is longer than 2048 characters$"):
        check_endpoint(longest + "x")
    assert check_endpoint("http://h/!~") == "http://h/!~"  # 33 and 126: printable
    for bad in ("http://h/ x", "http://h/\x1f", "http://h/\x7f"):
        with pytest.raises(InvalidInputError, match=r"^the endpoint holds spaces or control"):
            check_endpoint(bad)
    long_unicode = "http://h/" + "é" * 300
    with pytest.raises(InvalidInputError) as refused:
        check_endpoint(long_unicode)
    assert str(refused.value) == (
        f"the endpoint {long_unicode[:200] + '...'!r} holds characters outside ASCII: "
        "percent-encode them (and write a host's name in its xn-- form)"
    )
    for length, shown in ((200, None), (201, 200)):  # shown whole up to 200 characters
        endpoint = "http://h/" + "é" * (length - len("http://h/"))
        with pytest.raises(InvalidInputError) as refused:
            check_endpoint(endpoint)
        said = endpoint if shown is None else endpoint[:shown] + "..."
        assert str(refused.value).startswith(f"the endpoint {said!r} holds")
    short = "http://h/é"
    with pytest.raises(InvalidInputError, match=re.escape(repr(short))):
        check_endpoint(short)
    assert check_endpoint("https://h/") == "https://h/"
    with pytest.raises(InvalidInputError, match=r"^the endpoint must be an http:// or https:// "
                       r"URL with a host$"):  # fmt: skip
        check_endpoint("ftp://h/")
    with pytest.raises(InvalidInputError, match=r"^the endpoint's port must be 1 to 65535$"):
        check_endpoint("http://h:0/")
    with pytest.raises(InvalidInputError, match=r"^the endpoint is not a URL: "):
        check_endpoint("http://h:99999/")


def subscription(name: str, state: str = "Succeeded", after: int = 0) -> Subscription:
    return Subscription(name, "http://127.0.0.1:9/", "eventgrid", state, "code", T0, after)


def test_the_store_keeps_deliveries_and_its_cursor_across_a_reopening(tmp_path: Path) -> None:
    path = tmp_path / "eventgrid.sqlite3"
    store = DeliveryStore(path)
    store.add(subscription("one"))
    store.add(subscription("late", after=1))
    store.add(subscription("waiting", state="AwaitingManualAction"))
    made = store.enqueue(
        [(1, T0, "id-1", {"eventgrid": "{}"}), (2, T0, "id-2", {"eventgrid": "{}"})], cursor=2
    )
    assert made == 3  # "late" gets change 2 only; "waiting" is not validated yet
    store.close()
    again = DeliveryStore(path)
    assert again.cursor() == 2
    due = again.due(T0, 10)
    assert [(d.subscription, d.grid_id) for d in due] == [
        ("one", "id-1"),
        ("late", "id-2"),
        ("one", "id-2"),
    ]
    again.failed(due[0], at=T0, status=500, outcome="500", again=T0 + timedelta(seconds=10))
    again.delivered_all(due[1:])
    assert again.due(T0, 10) == []
    (retry,) = again.due(T0 + timedelta(seconds=10), 10)
    assert (retry.attempts, retry.last_status) == (1, 500)
    assert again.get("one") is not None
    assert (again.get("one").delivered, again.get("one").failed) == (1, 1)  # type: ignore[union-attr]
    again.add_duplicates("one", 1)
    assert again.take_duplicate("one")
    assert not again.take_duplicate("one")
    assert again.remove("one")
    assert again.due(T0 + timedelta(days=1), 10) == []
    again.close()


def test_the_dashboard_shows_each_subscriptions_deliveries_and_failures() -> None:
    """The snapshot's ``eventGrid``, what the page's Event Grid table lists."""
    with ForewarnPlatform(vms=["vm0"]) as platform:
        store = DeliveryStore(None)
        grid = EventGrid(platform.service.now, lambda: 0, store, validation_base="http://x")
        shown = Subscription(
            "ops",
            "http://127.0.0.1:9/",
            "cloudevents",
            "Succeeded",
            "c",
            T0,
            0,
            7,
            2,
            1,
            "503 Service Unavailable",
            0,
            4,
        )
        grid.views = [SubscriptionView(shown, 3)]
        (row,) = snapshot(platform.service, Activity(), None, grid)["eventGrid"]
        store.close()
    assert row == {
        "name": "ops", "endpoint": "http://127.0.0.1:9/", "schema": "cloudevents",
        "provisioningState": "Succeeded", "delivered": 7, "failed": 2, "deadLettered": 1,
        "pending": 3, "duplicates": 0, "lastError": "503 Service Unavailable",
        "deadLetterFailures": 4,
    }  # fmt: skip


SEVEN_DIGITS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$")


def test_a_dead_letter_record_is_as_event_grid_writes_it(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/event-grid/delivery-and-retry, "Delivery event formats"
    (dead-letter event): ``"deadLetterReason": "MaxDeliveryAttemptsExceeded"``,
    ``"lastDeliveryOutcome": "NotFound"``, ``"publishTime": "2020-08-13T17:18:14.0265758Z"``;
    manage-event-delivery: blobs under the subscription's name in capitals, then
    ``YYYY/MM/DD/HH`` "nonzero padded"."""
    published = T0 + timedelta(microseconds=26575)
    last = datetime(2026, 5, 2, 9, 3, 4, 46578, tzinfo=UTC)
    delivery = Delivery(7, "ops-hook", "grid-7", '{"id": "grid-7"}', published, last, 29,
                        404, "NotFound", None)  # fmt: skip
    path = dead_letter(
        tmp_path, subscription("ops-hook"), delivery, at=last, status=404,
        outcome=delivery_outcome(404), reason="MaxDeliveryAttemptsExceeded", attempts=30,
    )  # fmt: skip
    assert path == tmp_path / "OPS-HOOK" / "2026" / "5" / "2" / "9" / "grid-7.json"
    (record,) = json.loads(path.read_text())
    assert record == {
        "id": "grid-7",
        "deadLetterReason": "MaxDeliveryAttemptsExceeded",
        "deliveryAttempts": 30,
        "lastDeliveryOutcome": "NotFound",
        "lastHttpStatusCode": 404,
        "publishTime": "2026-05-01T12:00:00.0265750Z",
        "lastDeliveryAttemptTime": "2026-05-02T09:03:04.0465780Z",
    }
    assert SEVEN_DIGITS.match(record["publishTime"])


def test_a_cloudevents_dead_letter_record_names_its_fields_in_lower_case(
    tmp_path: Path,
) -> None:
    """learn.microsoft.com/azure/event-grid/delivery-and-retry, "Delivery event formats",
    "CloudEvents 1.0 schema" (dead-letter event): ``"deadletterreason":
    "MaxDeliveryAttemptsExceeded"``, ``"deliveryattempts": 1``, ``"lastdeliveryoutcome":
    "NotFound"``, ``"publishtime": "2020-08-13T21:21:36.4018726Z"``, beside the CloudEvent's
    own attributes; the two fields that sample does not show are lower-cased alike [ours]."""
    last = datetime(2026, 5, 2, 9, 3, 4, 46578, tzinfo=UTC)
    event = {"specversion": "1.0", "id": "grid-8", "source": "/subscriptions/x", "type": "t"}
    delivery = Delivery(8, "ops-cloud", "grid-8", json.dumps(event), T0, last, 0, None, "",
                        None)  # fmt: skip
    cloud = Subscription("ops-cloud", "http://127.0.0.1:9/", "cloudevents", "Succeeded",
                         "code", T0, 0)  # fmt: skip
    path = dead_letter(
        tmp_path, cloud, delivery, at=last, status=404, outcome="NotFound",
        reason="MaxDeliveryAttemptsExceeded", attempts=1,
    )  # fmt: skip
    (record,) = json.loads(path.read_text())
    assert record == {
        **event,
        "deadletterreason": "MaxDeliveryAttemptsExceeded",
        "deliveryattempts": 1,
        "lastdeliveryoutcome": "NotFound",
        "lasthttpstatuscode": 404,
        "publishtime": "2026-05-01T12:00:00.0000000Z",
        "lastdeliveryattempttime": "2026-05-02T09:03:04.0465780Z",
    }


def test_the_last_delivery_outcome_is_named_as_event_grid_names_it() -> None:
    """delivery-and-retry, "Delivery event formats": ``"lastDeliveryOutcome": "NotFound"``
    (names of the answer's status, never "404 Not Found" or an exception's text); a receiver
    that does not answer within its time is ``TimedOut``."""
    assert delivery_outcome(404) == "NotFound"
    assert delivery_outcome(400) == "BadRequest"
    assert delivery_outcome(401) == "Unauthorized"
    assert delivery_outcome(403) == "Forbidden"
    assert delivery_outcome(413) == "RequestEntityTooLarge"
    assert delivery_outcome(503) == "ServiceUnavailable"
    assert delivery_outcome(500) == "InternalServerError"
    assert delivery_outcome(None, "TimedOut") == "TimedOut"


def test_event_time_has_the_samples_seven_fractional_digits() -> None:
    """learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid, the sample
    event: ``"eventTime": "2017-06-26T18:41:00.9584103Z"``, seven fractional digits."""
    assert event_time(datetime(2017, 6, 26, 18, 41, 0, 958410, tzinfo=UTC)) == (
        "2017-06-26T18:41:00.9584100Z"
    )
    assert event_time(T0) == "2026-05-01T12:00:00.0000000Z"


def test_a_dead_lettered_event_counts_as_a_failed_attempt() -> None:
    """docs/azure-side.md, "Event Grid": ``eventgrid list`` counts failed attempts, each
    retry's and the last one's, which dead-letters the event, alike [ours]; "deliveryAttempts"
    of the dead-letter record counts the same attempts (delivery-and-retry, "Delivery event
    formats")."""
    store = DeliveryStore(None)
    store.add(subscription("ops"))
    store.enqueue([(1, T0, "id-1", {"eventgrid": "{}"})], cursor=1)
    (first,) = store.due(T0, 10)
    store.failed(first, at=T0, status=503, outcome="ServiceUnavailable",
                 again=T0 + timedelta(seconds=10))  # fmt: skip
    (second,) = store.due(T0 + timedelta(seconds=10), 10)
    assert second.attempts == 1
    store.failed(second, at=T0, status=400, outcome="BadRequest", again=None, error="400 Bad")
    ops = store.get("ops")
    assert ops is not None
    assert (ops.failed, ops.dead_lettered, ops.delivered, ops.last_error) == (2, 1, 0, "400 Bad")
    assert store.pending() == {}
    store.close()


class _Failing(BaseHTTPRequestHandler):
    """A receiver answering 500 to every delivery, counting them."""

    posts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Failing.posts.append(self.headers.get("aeg-delivery-count", ""))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_nothing_is_sent_a_moment_before_its_retry() -> None:
    """The retry schedule "10 seconds, 30 seconds, 1 minute, ..." (delivery-and-retry,
    "Retry schedule") on the platform's clock: the delivery loop stepped by hand at each
    moment, its attempts awaited, so what is not sent is seen not sent without waiting."""
    _Failing.posts = []

    async def run(url: str) -> None:
        now = [T0]
        store = DeliveryStore(None)
        store.add(Subscription("ops", url + "/events", "eventgrid", "Succeeded", "c", T0, 0))
        store.enqueue([(1, T0, "id-1", {"eventgrid": "{}"})], cursor=1)
        grid = EventGrid(lambda: now[0], lambda: 0, store, validation_base="http://x")

        async def at(moment: datetime) -> int:
            now[0] = moment
            await grid.step()  # records the last outcome, then sends what is due
            await grid.settle()
            await grid.step()
            return len(_Failing.posts)

        assert await at(T0) == 1
        failed_at = T0
        for attempt, wait in enumerate((10, 30, 60, 300), start=2):
            due = failed_at + timedelta(seconds=wait)
            assert await at(due - timedelta(milliseconds=1)) == attempt - 1
            assert await at(due) == attempt
            failed_at = due
        assert _Failing.posts == ["0", "1", "2", "3", "4"]
        store.close()

    with http_server_in_thread(_Failing) as url:
        asyncio.run(run(url))


def test_outcomes_of_statuses_beyond_the_common_ones_are_named_too() -> None:
    """Every failure's status has the name .NET's ``HttpStatusCode`` gives it, whatever the
    Python version ("Delivery event formats": ``"lastDeliveryOutcome": "NotFound"``); an
    answer with no such name, and a receiver that cannot be reached at all, is Event Grid's
    ``GenericError`` ("The possible values of Outcome are NotFound, Aborted, TimedOut,
    GenericError, and Busy": learn.microsoft.com/azure/event-grid/monitor-push-reference,
    "Resource logs"), never a name of forewarn's own nor an exception's text."""
    assert delivery_outcome(422) == "UnprocessableEntity"
    assert delivery_outcome(416) == "RequestedRangeNotSatisfiable"
    assert delivery_outcome(507) == "InsufficientStorage"
    assert delivery_outcome(418) == "GenericError"
    assert delivery_outcome(599) == "GenericError"
    assert delivery_outcome(302) == "GenericError"
    assert delivery_outcome(None) == "GenericError"
    assert delivery_outcome(None, "ConnectionRefusedError: [Errno 111]") == "GenericError"


def test_a_retry_falling_exactly_at_the_time_to_live_is_still_made() -> None:
    """ "Event isn't delivered within the time-to-live period" dead-letters it
    (delivery-and-retry, "Dead-letter events"): a retry due at the very end of the 1,440
    minutes is within it; a moment later is not."""
    end = T0 + timedelta(minutes=1440)
    assert after_failure(10, T0, end - timedelta(hours=12), 503) == (end, None)
    assert after_failure(10, T0, end - timedelta(hours=12) + timedelta(microseconds=1), 503) == (
        None,
        "TimeToLiveExceeded",
    )


def test_dead_letter_records_share_their_hours_folder_and_fail_whole(tmp_path: Path) -> None:
    """Two events given up on in the same hour go to the same ``.../YYYY/MM/DD/HH/`` folder
    (manage-event-delivery); a record that cannot be written raises the write's own error
    and leaves no record behind [ours]."""
    at = datetime(2026, 5, 2, 9, 3, tzinfo=UTC)
    paths = [
        dead_letter(
            tmp_path,
            subscription("ops"),
            Delivery(n, "ops", f"grid-{n}", "{}", T0, at, 0, None, "", None),
            at=at,
            status=None,
            outcome="TimedOut",
            reason="TimeToLiveExceeded",
            attempts=1,
        )
        for n in (1, 2)
    ]
    assert paths[0].parent == paths[1].parent == tmp_path / "OPS" / "2026" / "5" / "2" / "9"
    (paths[0].parent / "grid-3.tmp").mkdir()  # where the record's temporary file would go
    with pytest.raises(IsADirectoryError):
        dead_letter(
            tmp_path, subscription("ops"),
            Delivery(3, "ops", "grid-3", "{}", T0, at, 0, None, "", None),
            at=at, status=None, outcome="TimedOut", reason="TimeToLiveExceeded", attempts=1,
        )  # fmt: skip
    assert not (paths[0].parent / "grid-3.json").exists()
