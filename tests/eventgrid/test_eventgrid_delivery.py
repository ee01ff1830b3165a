"""Event Grid delivery to receivers built on the official SDKs, as real processes.

Sources: learn.microsoft.com, "Scheduled Events in Event Grid" (the sample event, "Double
notifications"); "Scheduled Events overview" (the states; auto-approval: "only events with
EventStatus:Started and EventStatus:Completed are created"); Event Grid's "Webhook event
delivery" (the validation handshake of the Event Grid schema, the CloudEvents abuse-protection
OPTIONS exchange) and "Event Grid message delivery and retry" (at least once, the retry schedule
10 s, 30 s, 1 min, 5 min..., 30 attempts, 1,440 minutes to live, dead-lettering).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from azure_support import FLEET, SUBSCRIPTION
from e2e_support import ForewarnServer, clean_environment, start_forewarn, wait_for
from eventgrid_support import Receiver, receiver, subscribe, subscription

from forewarn.eventgrid.delivery import CONCURRENCY
from forewarn.eventgrid.payloads import event_time as format_event_time
from forewarn.wire.dates import format_not_before

pytestmark = pytest.mark.e2e

VM_HOSTS = ("127.0.60.1", "127.0.60.2", "127.0.60.3", "127.0.60.4", "127.0.61.1", "127.0.61.2")
GRID_TYPE = "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ForewarnServer]:
    server = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=VM_HOSTS,
        extra=("--eventgrid-timeout", "1", "--data-dir", str(tmp_path / "data")),
    )
    try:
        yield server
    finally:
        server.stop()
        server.process.assert_healthy()


def restart(server: ForewarnServer, vm: str) -> str:
    answer = server.control.post(f"/vms/{vm}/restart")
    assert answer.status_code == 200, answer.text
    event_id: str = answer.json()["events"][0]["EventId"]
    return event_id


#: "Event Grid doesn't guarantee order for event delivery, so subscribers may receive them out
#: of order" (delivery-and-retry): what arrived is compared in the lifecycle's order.
LIFECYCLE = ("Scheduled", "Started", "Completed", "Canceled")


def await_statuses(
    server: ForewarnServer, sink: Receiver, event_id: str, wanted: list[str]
) -> None:
    def arrived() -> bool:
        return sorted(sink.statuses(event_id), key=LIFECYCLE.index) == wanted

    wait_for(arrived, what=f"{wanted} at {sink.url}", server=server.process)


def test_both_schemas_get_every_state_parsed_by_the_sdks(
    server: ForewarnServer, tmp_path: Path
) -> None:
    with receiver(tmp_path, "eventgrid") as grid, receiver(tmp_path, "cloudevents") as cloud:
        assert subscribe(server.control, "grid-one", grid.url)["provisioningState"] == "Succeeded"
        created = subscribe(server.control, "cloud-one", cloud.url, "cloudevents")
        assert created["provisioningState"] == "Succeeded"
        (validation,) = grid.entries()
        assert validation["handshake"] == "Microsoft.EventGrid.SubscriptionValidationEvent"
        # "Endpoint validation with Event Grid events" (webhook-event-delivery): the sample's
        # topic is the system topic's ("/subscriptions/xxxxxxxx-..."), its validationCode a GUID
        assert validation["topic"] == f"/subscriptions/{SUBSCRIPTION}"
        assert str(uuid.UUID(validation["code"])) == validation["code"]
        assert cloud.entries()[0] == {"handshake": "options", "origin": "eventgrid.azure.net"}

        began = datetime.fromisoformat(server.clock())
        reboot = restart(server, "db0")  # Scheduled, then Started, then Completed
        cancelled = restart(server, "web_0")  # Scheduled, then Canceled
        server.cancel(cancelled)
        auto = restart(server, "solo")  # auto-approved: Started, Completed only
        for sink in (grid, cloud):
            await_statuses(server, sink, cancelled, ["Scheduled", "Canceled"])
            await_statuses(server, sink, reboot, ["Scheduled"])
        server.advance(60)  # solo's reboot (its impact) is over; its event is still Started
        solo_document = server.document("127.0.60.3")
        assert [e["EventStatus"] for e in solo_document["Events"]] == ["Started"]
        server.advance(14 * 60)
        for sink in (grid, cloud):
            await_statuses(server, sink, reboot, ["Scheduled", "Started"])
            await_statuses(server, sink, auto, ["Started", "Completed"])
        server.advance(10 * 60)
        for sink in (grid, cloud):
            await_statuses(server, sink, reboot, ["Scheduled", "Started", "Completed"])

        first = next(e for e in grid.events() if e["eventId"] == reboot)
        assert first["type"] == GRID_TYPE
        assert first["apiVersion"] == "2024-07-01"
        assert first["version"] == "3.0"
        assert first["subject"].endswith(
            f"/virtualMachines/db0/providers/microsoft.maintenance/scheduledevents/{reboot}"
        )
        assert datetime.fromisoformat(first["time"]) == began
        assert first["id"] != reboot  # "This ID is different than the scheduled event ID"
        assert first["contentType"] == "application/json; charset=utf-8"
        cloud_first = next(e for e in cloud.events() if e["eventId"] == reboot)
        assert cloud_first["contentType"] == "application/cloudevents+json; charset=utf-8"
        # on the wire, not filled in by the SDK: CloudEvents' `time` is the Event Grid schema's
        # `eventTime` ("CloudEvents v1.0 schema with Azure Event Grid"), with the sample's
        # seven fractional digits ("eventTime": "2017-06-26T18:41:00.9584103Z")
        assert first["wireTime"] == format_event_time(began)
        assert cloud_first["wireTime"] == first["wireTime"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z", first["wireTime"])
        assert cloud_first["id"] == first["id"]
        assert cloud_first["version"] == "1.0"
        # The page's sample shows a Started event with its NotBefore (the field tables say it
        # is blank once started: the pages disagree, the sample is followed): the NotBefore
        # it had while Scheduled, or the time it started when it never was (auto-approved)
        for sink in (grid, cloud):
            shown = {e["status"]: e["notBefore"] for e in sink.events() if e["eventId"] == reboot}
            assert (
                shown["Scheduled"]
                == shown["Started"]
                == format_not_before(began + timedelta(minutes=15))
            )
            assert shown["Completed"] == ""
            auto_started = next(
                e for e in sink.events() if e["eventId"] == auto and e["status"] == "Started"
            )
            assert auto_started["notBefore"] == format_not_before(began)
        ids = [e["id"] for e in grid.events()]
        assert len(ids) == len(set(ids))
        wait_for(
            lambda: subscription(server.control, "grid-one")["delivered"] == 7,
            what="the last delivery's answer",
            server=server.process,
        )
        states = subscription(server.control, "grid-one")
        assert (states["failed"], states["pending"], states["deadLettered"]) == (0, 0, 0)


def test_a_receiver_failing_three_times_gets_the_event_on_the_documented_retries(
    server: ForewarnServer, tmp_path: Path
) -> None:
    """Retries 10 s, 30 s, then 1 minute after each failure, on the platform's clock."""
    with receiver(tmp_path, "eventgrid", "--fail", "3") as sink:
        subscribe(server.control, "flaky", sink.url)
        event_id = restart(server, "db1")
        for attempt, wait in enumerate((10, 30, 60), start=1):
            wait_for(
                lambda attempt=attempt: len(sink.events()) == attempt,  # type: ignore[misc]
                what=f"attempt {attempt}",
                server=server.process,
            )
            server.advance(wait - 1)  # nothing is due a second early: see
            server.advance(1)  # test_eventgrid_rules.py, which steps the loop itself
        wait_for(lambda: len(sink.events()) == 4, what="attempt 4", server=server.process)
        answered = [e["answered"] for e in sink.events()]
        assert answered == [500, 500, 500, 200]
        wait_for(
            lambda: subscription(server.control, "flaky")["delivered"] == 1,
            what="the delivery's answer",
            server=server.process,
        )
        assert [e["attempt"] for e in sink.events()] == ["0", "1", "2", "3"]
        assert {e["id"] for e in sink.events()} == {sink.events()[0]["id"]}
        assert sink.statuses(event_id) == ["Scheduled"] * 4
        state = subscription(server.control, "flaky")
        assert (state["delivered"], state["failed"], state["pending"]) == (1, 3, 0)


def test_a_receiver_down_past_the_time_to_live_ends_in_the_dead_letter_directory(
    server: ForewarnServer, tmp_path: Path
) -> None:
    with receiver(tmp_path, "eventgrid", "--status", "503") as sink:
        subscribe(server.control, "gone", sink.url)
        published = datetime.fromisoformat(server.clock())
        # a predicted hardware failure: Scheduled days ahead, so one change in 24 hours
        assert server.control.post("/hosts/h2/predict-failure").status_code == 200
        waits = [10, 30, 60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600]
        for attempt, wait in enumerate(waits, start=1):
            wait_for(
                lambda attempt=attempt: len(sink.events()) == attempt,  # type: ignore[misc]
                what=f"attempt {attempt}",
                server=server.process,
            )
            server.advance(wait)
        # the 11th attempt (22 h 46 min 40 s after publication) fails, and the next would be
        # past the 24 h to live: dead-lettered
        wait_for(
            lambda: subscription(server.control, "gone")["deadLettered"] == 1,
            what="dead-lettering",
            server=server.process,
        )
    assert len(sink.events()) == 11
    letters = list((tmp_path / "data" / "dead-letters" / "GONE").rglob("*.json"))
    assert len(letters) == 1
    (letter,) = json.loads(letters[0].read_text())
    assert letter["deadLetterReason"] == "TimeToLiveExceeded"
    assert letter["deliveryAttempts"] == 11
    assert letter["lastHttpStatusCode"] == 503
    assert letter["id"] == sink.events()[0]["id"]
    last = published + timedelta(hours=22, minutes=46, seconds=40)
    folder = letters[0].parent.relative_to(tmp_path / "data" / "dead-letters" / "GONE")
    assert folder.parts == (str(last.year), str(last.month), str(last.day), str(last.hour))
    assert datetime.fromisoformat(letter["lastDeliveryAttemptTime"]) == last


def test_a_400_is_never_retried(server: ForewarnServer, tmp_path: Path) -> None:
    with receiver(tmp_path, "eventgrid", "--status", "400") as sink:
        subscribe(server.control, "refuses", sink.url)
        assert server.control.post("/hosts/h2/predict-failure").status_code == 200
        wait_for(
            lambda: subscription(server.control, "refuses")["deadLettered"] == 1,
            what="dead-lettering",
            server=server.process,
        )
        # taken out of the store: nothing is left to send again, whatever the clock does
        state = subscription(server.control, "refuses")
        assert (state["failed"], state["deadLettered"], state["pending"]) == (1, 1, 0)
    assert len(sink.events()) == 1


def test_the_duplicate_fault_sends_the_same_id_twice(
    server: ForewarnServer, tmp_path: Path
) -> None:
    with receiver(tmp_path, "eventgrid") as sink:
        subscribe(server.control, "twice", sink.url)
        answer = server.control.post(
            "/eventgrid/subscriptions/twice/faults",
            json={"kind": "eventgrid-duplicate", "count": 1},
        )
        assert answer.json()["duplicates"] == 1
        event_id = restart(server, "db1")
        await_statuses(server, sink, event_id, ["Scheduled", "Scheduled"])
        first, second = sink.events()
        assert first == second


def test_manual_validation_and_bad_subscriptions(server: ForewarnServer, tmp_path: Path) -> None:
    with receiver(tmp_path, "eventgrid", "--manual") as sink:
        created = subscribe(server.control, "manual", sink.url)
        assert created["provisioningState"] == "AwaitingManualAction"  # no code echoed
        (validation,) = sink.entries()
        # the asynchronous handshake: a GET of the validation URL, which carries its own
        # secret (no control token)
        answer = httpx.get(validation["url"], timeout=10)
        assert answer.status_code == 200, answer.text
        assert subscription(server.control, "manual")["provisioningState"] == "Succeeded"
        assert httpx.get(validation["url"], timeout=10).status_code == 409  # once only
    for endpoint in (
        "ftp://127.0.0.1/x",
        "not a url",
        "http://",
        "http://127.0.0.1:0/",
        "http://h/" + "x" * 5000,
        "javascript:alert(1)",
    ):
        answer = server.control.post(
            "/eventgrid/subscriptions", json={"name": "bad-one", "endpoint": endpoint}
        )
        assert answer.status_code == 422, (endpoint, answer.text)
    nobody = server.control.post(
        "/eventgrid/subscriptions",
        json={"name": "nobody", "endpoint": "http://127.0.0.1:9/"},
        timeout=40,
    )
    assert nobody.json()["provisioningState"] == "AwaitingManualAction"
    server.advance(10 * 60 + 1)
    assert subscription(server.control, "nobody")["provisioningState"] == "Failed"
    assert (
        server.control.post(
            "/eventgrid/subscriptions", json={"name": "x", "endpoint": "http://127.0.0.1/"}
        ).status_code
        == 422
    )
    assert server.control.delete("/eventgrid/subscriptions/ghost").status_code == 404
    unauthenticated = httpx.get(server.control_url + "/eventgrid/subscriptions")
    assert unauthenticated.status_code == 401


def test_a_hanging_receiver_never_slows_a_vms_poll(tmp_path: Path) -> None:
    """Delivery runs beside the VMs' endpoint, never in its way (docs/azure-side.md, "Never
    in a VM's way"): while a receiver hangs on its delivery (60 s to answer) and another sends
    20 MB back, every VM poll is answered, all of them before the hanging attempt ends."""
    server = start_forewarn(
        tmp_path, fleet=FLEET, vm_hosts=VM_HOSTS, extra=("--eventgrid-timeout", "60")
    )
    try:
        with (
            receiver(tmp_path, "eventgrid", "--hang") as sink,
            receiver(tmp_path, "eventgrid", "--huge", name="huge") as huge,
        ):
            subscribe(server.control, "hangs", sink.url)
            subscribe(server.control, "huge", huge.url)
            restart(server, "db1")
            wait_for(
                lambda: (
                    len(sink.events()) == 1 and subscription(server.control, "huge")["failed"] == 1
                ),
                what="the hanging delivery, and the huge answer read (64 KiB of it)",
                server=server.process,
            )
            assert subscription(server.control, "huge")["lastError"].startswith("500")
            with httpx.Client(headers={"Metadata": "true"}) as vm:
                for _ in range(5):  # within its rate limit of 5 a second (SPEC 1.3)
                    assert vm.get(server.url(host="127.0.60.4")).status_code == 200
            hanging = subscription(server.control, "hangs")
            assert (hanging["failed"], hanging["pending"]) == (0, 1)  # still hanging
    finally:
        server.stop()
    server.process.assert_healthy()


def test_a_receiver_that_never_answers_fails_timed_out(
    server: ForewarnServer, tmp_path: Path
) -> None:
    """ "Event Grid waits 30 seconds for a response after delivering a message. After 30
    seconds, if the endpoint hasn't responded, the message is queued for retry"
    (delivery-and-retry, "Retry schedule"): here `--eventgrid-timeout 1`."""
    with receiver(tmp_path, "eventgrid", "--hang") as sink:
        subscribe(server.control, "hangs", sink.url)
        restart(server, "db1")
        wait_for(
            lambda: subscription(server.control, "hangs")["failed"] == 1,
            what="the timeout",
            server=server.process,
        )
        state = subscription(server.control, "hangs")
        assert (state["lastError"], state["pending"]) == ("TimedOut", 1)
        assert len(sink.events()) == 1


def test_a_restart_mid_retry_loses_nothing(tmp_path: Path) -> None:
    """A receiver fails once; forewarn is killed (SIGKILL) before the retry; after the restart
    the pending delivery is made at its time, and nothing is sent twice that was delivered."""
    data = tmp_path / "data"
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    extra = ("--data-dir", str(data))
    with receiver(tmp_path, "eventgrid", "--fail", "1") as sink:
        first = start_forewarn(first_dir, fleet=FLEET, vm_hosts=VM_HOSTS, extra=extra)
        try:
            subscribe(first.control, "survives", sink.url)
            event_id = restart(first, "db1")
            # killed once the failure is recorded: killed before, the attempt is the store's
            # to make again at once (at least once), which is not this test's case
            wait_for(
                lambda: (
                    len(sink.events()) == 1
                    and subscription(first.control, "survives")["failed"] == 1
                ),
                what="the failed attempt, recorded",
                server=first.process,
            )
        finally:
            first.process.process.kill()  # no goodbye
            first.process.process.wait(10)
            first.stop()  # closes its log and client
        second = start_forewarn(second_dir, fleet=FLEET, vm_hosts=VM_HOSTS, extra=extra)
        try:
            # pending, due 10 s of platform time after the failure (the store's due times survive
            # a reopening: test_eventgrid_rules.py)
            assert subscription(second.control, "survives")["pending"] == 1
            second.advance(10)
            await_statuses(second, sink, event_id, ["Scheduled", "Scheduled"])
            wait_for(
                lambda: subscription(second.control, "survives")["pending"] == 0,
                what="the delivery's answer",
                server=second.process,
            )
            assert subscription(second.control, "survives")["provisioningState"] == "Succeeded"
        finally:
            second.stop()
        second.process.assert_healthy()


def test_acknowledged_outside_the_vm_every_door_shows_it_started(
    server: ForewarnServer, tmp_path: Path
) -> None:
    """ "It's possible to receive the event from the IMDS endpoint and approve via the MRP REST
    endpoint" (overview, "Acknowledging Scheduled Events"); "the content of the payload is the
    same regardless of which one you choose"."""
    with receiver(tmp_path, "eventgrid") as sink:
        run = subprocess.run(
            [sys.executable, "-m", "forewarn", "eventgrid", "subscribe", "--name", "doors",
             "--endpoint", sink.url, "--control", server.control_address, "-o", "json"],
            capture_output=True, text=True, timeout=60, env=clean_environment(), check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["provisioningState"] == "Succeeded"
        restart(server, "db0")
        (seen,) = server.document("127.0.60.2")["Events"]  # db1 sees it: one availability set
        event_id = seen["EventId"]
        arm_id = (
            f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ops-rg/providers/microsoft.compute/"
            f"virtualMachines/db0/providers/microsoft.maintenance/scheduledevents/{event_id}"
        )
        run = subprocess.run(
            [sys.executable, "-m", "forewarn", "events", "acknowledge", "--ids", arm_id,
             "--control", server.control_address],
            capture_output=True, text=True, timeout=60, env=clean_environment(), check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        # db1's poller sees it Started at once; db0, rebooting, once its impact is over
        assert server.document("127.0.60.2")["Events"][0]["EventStatus"] == "Started"
        server.advance(60)
        assert server.document("127.0.60.1")["Events"][0]["EventStatus"] == "Started"
        await_statuses(server, sink, event_id, ["Scheduled", "Started"])
        answer = httpx.post(
            server.control_url.removesuffix("/api/v1")
            + "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01",
            json={"query": f"maintenanceresources | where name == '{event_id}'"},
            headers=server.control.headers,
            timeout=60,  # the first query starts the query process: seconds under load
        )
        (row,) = answer.json()["data"]
        delivered = next(
            e for e in sink.events() if e["eventId"] == event_id and e["status"] == "Started"
        )
        assert row["properties"]["EventStatus"] == "Started"
        assert row["id"] == delivered["subject"]
        assert row["properties"]["Resources"] == delivered["resources"] == seen["Resources"]


def test_a_hanging_receiver_delays_no_other_subscription(tmp_path: Path) -> None:
    """Event Grid delivers to each subscription independently ("It delivers each message at
    least once for each subscription", delivery-and-retry): a receiver that never answers
    fills its own slots (CONCURRENCY), and a healthy subscription's 24 deliveries all arrive
    before the hanging receiver's first attempt has even timed out (60 s)."""
    server = start_forewarn(
        tmp_path, fleet=FLEET, vm_hosts=VM_HOSTS, extra=("--eventgrid-timeout", "60")
    )
    try:
        with (
            receiver(tmp_path, "eventgrid", "--hang", name="hangs") as hanging,
            receiver(tmp_path, "eventgrid", name="healthy") as healthy,
        ):
            subscribe(server.control, "a-hangs", hanging.url)  # first in every due order
            subscribe(server.control, "b-healthy", healthy.url)
            for _ in range(3):
                for vm in ("db0", "db1", "web_0", "web_1"):
                    server.cancel(restart(server, vm))  # Scheduled, then Canceled
            wait_for(
                lambda: len(healthy.events()) == 24,
                what="every change at the healthy receiver",
                server=server.process,
            )
            hung = subscription(server.control, "a-hangs")
            assert (hung["failed"], hung["delivered"]) == (0, 0)  # none of its 60 s is over
            assert hung["pending"] == 24
            wait_for(  # its own slots, all taken
                lambda: len(hanging.events()) == CONCURRENCY,
                what="the hanging receiver's slots taken",
                server=server.process,
            )
            wait_for(
                lambda: subscription(server.control, "b-healthy")["delivered"] == 24,
                what="the healthy deliveries recorded",
                server=server.process,
            )
    finally:
        server.stop()
    server.process.assert_healthy()


def test_an_unwritable_dead_letter_folder_makes_no_retry_storm(tmp_path: Path) -> None:
    """A 400 is never retried ("400 Bad Request ... it immediately sends the event to the
    dead-letter endpoint", delivery-and-retry, "Dead-letter events"). When the record cannot
    be written, the receiver is never asked again: the write is tried again a minute of
    platform time later [ours], each failure counted and shown by ``forewarn eventgrid
    list``, the folder's failure said once, not per attempt; once the folder can be written,
    the record is, as Event Grid writes it."""
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the dead-letter folder's parent should be")
    letters = blocker / "letters"
    server = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=VM_HOSTS,
        extra=("--eventgrid-timeout", "1", "--dead-letter-dir", str(letters)),
    )
    try:
        with receiver(tmp_path, "eventgrid", "--status", "400") as sink:
            subscribe(server.control, "refuses", sink.url)
            assert server.control.post("/hosts/h2/predict-failure").status_code == 200
            wait_for(
                lambda: subscription(server.control, "refuses")["deadLetterFailures"] == 1,
                what="the failed dead-letter write counted",
                server=server.process,
            )
            server.advance(59)
            server.advance(1)  # the write's own retry falls due: it fails again
            wait_for(
                lambda: subscription(server.control, "refuses")["deadLetterFailures"] == 2,
                what="the dead-letter write tried again",
                server=server.process,
            )
            assert len(sink.events()) == 1  # the receiver was asked once, never again
            state = subscription(server.control, "refuses")
            assert (state["failed"], state["deadLettered"], state["pending"]) == (1, 0, 1)
            assert state["lastError"].startswith("dead-letter write failed")
            listed = subprocess.run(
                [sys.executable, "-m", "forewarn", "eventgrid", "list",
                 "--control", server.control_address],
                capture_output=True, text=True, timeout=60, env=clean_environment(), check=True,
            ).stdout.splitlines()  # fmt: skip
            header = listed[0].split()
            row = dict(zip(header, listed[1].split(), strict=False))
            assert (row["NAME"], row["DEAD-LETTER-FAILED"], row["PENDING"]) == ("refuses", "2", "1")

            blocker.unlink()  # the folder can be made now
            server.advance(60)
            wait_for(
                lambda: subscription(server.control, "refuses")["deadLettered"] == 1,
                what="the dead-letter record written",
                server=server.process,
            )
            assert len(sink.events()) == 1
            state = subscription(server.control, "refuses")
            assert (state["failed"], state["deadLetterFailures"], state["pending"]) == (1, 2, 0)
    finally:
        server.stop()
    server.process.assert_healthy()
    output = server.process.output()
    assert output.count("dead letters cannot be written") == 1, output  # once per minute
    assert "dead letters are written under" in output
    (path,) = letters.rglob("*.json")
    (letter,) = json.loads(path.read_text())
    assert letter["deadLetterReason"] == "NonRetryableError"
    assert (letter["deliveryAttempts"], letter["lastHttpStatusCode"]) == (1, 400)
    assert letter["lastDeliveryOutcome"] == "BadRequest"
    assert letter["id"] == sink.events()[0]["id"]


def test_an_endpoint_outside_ascii_is_refused_naming_it_and_nothing_is_kept(
    server: ForewarnServer,
) -> None:
    """[ours] Bad input: a clear 422 naming the endpoint, no subscription half made (an HTTP
    request line and Host header are ASCII: RFC 9112, section 2.2)."""
    for endpoint in ("http://127.0.0.1:9/événements", "http://bücher.example/x", "http://h/✓"):
        answer = server.control.post(
            "/eventgrid/subscriptions", json={"name": "unicode", "endpoint": endpoint}
        )
        assert answer.status_code == 422, answer.text
        assert endpoint in answer.json()["error"], answer.text
        assert "ASCII" in answer.json()["error"]
        listed = server.control.get("/eventgrid/subscriptions").json()["subscriptions"]
        assert listed == []


def test_no_attempt_is_made_past_the_time_to_live_after_a_clock_jump(
    server: ForewarnServer, tmp_path: Path
) -> None:
    """ "By default, Event Grid expires all events that aren't delivered within 24 hours"
    (delivery-and-retry, "Retry schedule"): a retry due before the clock jumped 48 hours is
    not made after it; the event is dead-lettered TimeToLiveExceeded with the one attempt
    that was made, its outcome and time."""
    with receiver(tmp_path, "eventgrid", "--status", "503") as sink:
        subscribe(server.control, "expires", sink.url)
        assert server.control.post("/hosts/h2/predict-failure").status_code == 200  # 7 days
        wait_for(
            lambda: subscription(server.control, "expires")["failed"] == 1,
            what="the first attempt",
            server=server.process,
        )
        server.advance(48 * 3600)
        wait_for(
            lambda: subscription(server.control, "expires")["deadLettered"] == 1,
            what="dead-lettering",
            server=server.process,
        )
        assert len(sink.events()) == 1
        assert subscription(server.control, "expires")["failed"] == 1
    (path,) = (tmp_path / "data" / "dead-letters" / "EXPIRES").rglob("*.json")
    (letter,) = json.loads(path.read_text())
    assert letter["deadLetterReason"] == "TimeToLiveExceeded"
    assert (letter["deliveryAttempts"], letter["lastHttpStatusCode"]) == (1, 503)
    assert letter["lastDeliveryOutcome"] == "ServiceUnavailable"
    assert letter["lastDeliveryAttemptTime"] == letter["publishTime"] == letter["eventTime"]
