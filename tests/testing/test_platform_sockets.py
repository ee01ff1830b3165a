"""forewarn.testing over real sockets: what an application reaches, and what is recorded.

The handle serves the real VM-facing endpoint, so the documented behaviour holds through it;
these tests check the handle's own promises (SPEC 1 [ours] for one address per VM)
and quote the documents for the behaviour they lean on.
"""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import httpx
import pytest
import requests

from forewarn.testing import ForewarnPlatform

API = {"api-version": "2020-07-01"}
HEADERS = {"Metadata": "true"}

PAIR = """
availabilitySets:
  - name: west
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 0, host: h1}
"""


def _get(session: requests.Session, url: str) -> requests.Response:
    return session.get(url + "/metadata/scheduledevents", params=API, headers=HEADERS, timeout=5)


def _approve(session: requests.Session, url: str, event_id: str) -> requests.Response:
    return session.post(
        url + "/metadata/scheduledevents",
        params=API,
        headers=HEADERS,
        json={"StartRequests": [{"EventId": event_id}]},
        timeout=5,
    )


def test_an_application_reads_and_approves_over_a_socket_and_every_request_is_recorded() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "The
    service always returns a 200 success code if it's passed a valid event ID"; "Headers": "The
    Metadata:true header is required for all scheduled events requests"."""
    with ForewarnPlatform() as platform, requests.Session() as session:
        assert platform.url.startswith("http://127.0.0.1:")
        (event,) = platform.restart("vm0")
        platform.advance(60)

        document = _get(session, platform.url).json()
        assert [e["EventId"] for e in document["Events"]] == [event.event_id]
        assert _approve(session, platform.url, event.event_id.lower()).status_code == 200

        approval = platform.assert_approved(event, by="vm0", within=timedelta(minutes=1))
        assert approval.event_ids == (event.event_id,)
        assert approval.at == platform.now
        assert approval.headers["metadata"] == "true"
        assert approval.headers["content-type"] == "application/json"
        recorded = platform.requests("vm0")
        assert [(r.method, r.status) for r in recorded] == [("GET", 200), ("POST", 200)]
        assert recorded[0].params == API
        assert platform.appeared_at(event) == approval.at - timedelta(minutes=1)


def test_each_vm_of_a_fleet_answers_at_its_own_address_on_one_port() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": events of an
    availability set "are delivered to all other VMs in the same group"; "check the Resources
    field"."""
    with ForewarnPlatform(fleet=PAIR) as platform, requests.Session() as session:
        assert platform.urls == {
            "WestNO_0": f"http://127.0.0.2:{platform.port}",
            "WestNO_1": f"http://127.0.0.3:{platform.port}",
        }
        (event,) = platform.restart("WestNO_1")
        seen_by_leader = _get(session, platform.url_for("WestNO_0")).json()["Events"]
        assert [e["Resources"] for e in seen_by_leader] == [["WestNO_1"]]
        assert _approve(session, platform.url_for("WestNO_0"), event.event_id).status_code == 200

        platform.assert_approved(event, by="WestNO_0")
        with pytest.raises(AssertionError, match="not approved by WestNO_1"):
            platform.assert_approved(event, by="WestNO_1")
        assert [r.vm for r in platform.requests()] == ["WestNO_0", "WestNO_0"]
        assert platform.requests("WestNO_1") == []


def test_vms_by_name_get_consecutive_loopback_addresses() -> None:
    with ForewarnPlatform(vms=["a", "b", "c"]) as platform:
        assert [url.rsplit(":", 1)[0] for url in platform.urls.values()] == [
            "http://127.0.0.2",
            "http://127.0.0.3",
            "http://127.0.0.4",
        ]
        with pytest.raises(ValueError, match="has 3 VMs"):
            _ = platform.url
        with pytest.raises(ValueError, match="no VM named 'd'"):
            platform.url_for("d")


def test_a_vm_that_is_down_does_not_answer_and_the_silence_is_recorded() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Use the API": once
    approved, "Azure generates a new scheduled event payload with EventStatus:"Started" and triggers
    the start of the maintenance event"; a rebooting VM cannot reach its endpoint (SPEC 4). With
    the ``drop`` policy the connection closes unanswered."""
    with ForewarnPlatform(impact={"Reboot": "drop"}) as platform, requests.Session() as session:
        (event,) = platform.restart("vm0")
        _approve(session, platform.url, event.event_id)
        with pytest.raises(requests.ConnectionError):
            _get(session, platform.url)
        assert platform.requests()[-1].status == 0
        assert not platform.vm_state().reachable

        platform.advance(timedelta(minutes=11))  # impact (7 s) and Started period (10 min)
        assert _get(session, platform.url).json()["Events"] == []
        assert platform.event(event) is None


def test_a_request_during_an_impact_is_held_until_the_clock_passes_its_end() -> None:
    """The default ``hold`` policy (docs/faithfulness.md): a paused VM's own call "simply takes
    longer" and completes once the VM runs again, here once the manual clock passes the
    impact's end (the documented 7 s,
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events "Impact Duration: 7
    seconds"); the answer shows the event Started, never a reset."""
    with ForewarnPlatform() as platform, requests.Session() as session:
        (event,) = platform.restart("vm0")
        _approve(session, platform.url, event.event_id)
        answers: list[requests.Response] = []
        poller = threading.Thread(target=lambda: answers.append(_get(session, platform.url)))
        poller.start()
        poller.join(1.0)
        assert poller.is_alive(), "the request was answered during the impact"
        platform.advance(timedelta(seconds=6))
        poller.join(0.5)
        assert poller.is_alive(), "answered before the impact ended"
        platform.advance(timedelta(seconds=1))
        poller.join(5)
        assert not poller.is_alive()
        (answer,) = answers
        assert answer.status_code == 200
        assert answer.json()["Events"][0]["EventStatus"] == "Started"


def test_refuse_resets_the_connection_as_for_a_vm_that_is_off() -> None:
    """The ``refuse`` policy (docs/faithfulness.md): the connection is reset at once."""
    with ForewarnPlatform(impact={"Reboot": "refuse"}) as platform, requests.Session() as s:
        (event,) = platform.restart("vm0")
        _approve(s, platform.url, event.event_id)
        with pytest.raises(requests.ConnectionError, match=r"reset|aborted"):
            _get(s, platform.url)


def test_platform_time_moves_only_when_told() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": an
    event "will move into the Started state after it's been approved or the NotBefore time
    passes"."""
    with ForewarnPlatform() as platform, requests.Session() as session:
        start = platform.now
        (event,) = platform.restart("vm0")
        assert _get(session, platform.url).json()["Events"][0]["EventStatus"] == "Scheduled"
        assert platform.now == start
        assert platform.advance(15 * 60) == start + timedelta(minutes=15)
        view = platform.event(event)
        assert view is not None
        assert view.event.status.value == "Started"
        platform.assert_not_approved(event)


def test_an_application_thread_and_the_test_use_the_platform_at_the_same_time() -> None:
    """The platform is touched only on the server's loop, whatever thread asks."""
    # No first-call delay: 50 hours pass while "a" may not have asked yet, and a first call
    # after 24 h idle is otherwise held for up to two minutes of a clock that no longer moves.
    with ForewarnPlatform(
        vms=["a", "b"], rate_limit=10_000, timing={"first_call_delay": 0}
    ) as platform:
        stop = threading.Event()
        statuses: list[int] = []

        def poll() -> None:
            with requests.Session() as session:
                for _ in range(400):
                    if stop.is_set():
                        return
                    statuses.append(_get(session, platform.url_for("a")).status_code)

        thread = threading.Thread(target=poll)
        thread.start()
        try:
            for _ in range(50):
                platform.live_migrate("host-b")
                platform.advance(3600)
        finally:
            stop.set()
            thread.join(10)
        assert not thread.is_alive()
        assert set(statuses) == {200}
        assert len(platform.requests("a")) == len(statuses)


def test_closing_stops_listening_and_closes_kept_alive_connections() -> None:
    platform = ForewarnPlatform()
    session = requests.Session()
    try:
        assert _get(session, platform.url).status_code == 200  # a kept-alive connection
        port = platform.port
        platform.close()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
            pass
        with pytest.raises(RuntimeError, match="closed"):
            platform.serve()
    finally:
        session.close()
        platform.close()


def test_the_rate_limit_is_the_documented_one_unless_told() -> None:
    """SPEC 1 [doc: IMDS overview]: 429 over 5 requests per second per VM."""
    with ForewarnPlatform() as platform, requests.Session() as session:
        statuses = [_get(session, platform.url).status_code for _ in range(12)]
        assert 429 in statuses
        assert [r.status for r in platform.requests()] == statuses


def test_wait_for_approval_gives_up_after_its_timeout() -> None:
    with ForewarnPlatform() as platform:
        (event,) = platform.restart("vm0")
        with pytest.raises(AssertionError, match=r"not approved within 0\.05 s"):
            platform.wait_for_approval(event, timeout=0.05)
        with pytest.raises(AssertionError, match="no matching request"):
            platform.wait_for_request(timeout=0.05)


FIRST_CALL_FLEET = "vms:\n  - {name: vm0, scheduledEventsEnabled: false}\n"


def test_the_first_call_is_answered_after_the_first_call_delay() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling and disabling
    Scheduled Events": "You should expect a delayed response in your first call of up to two minutes
    and you'll start receiving events within 5 minutes." The first call is held for the profile's
    ``first_call_delay`` (2 minutes documented), here on the manual clock; a client with a
    shorter timeout meets it as a timeout."""
    with ForewarnPlatform(fleet=FIRST_CALL_FLEET) as platform, requests.Session() as session:
        assert not platform.vm_state().receiving
        with pytest.raises(requests.exceptions.ReadTimeout):
            session.get(
                platform.url + "/metadata/scheduledevents", params=API, headers=HEADERS, timeout=1
            )
        answers: list[requests.Response] = []
        poller = threading.Thread(target=lambda: answers.append(_get(session, platform.url)))
        poller.start()
        poller.join(0.5)
        assert poller.is_alive(), "answered before the first-call delay"
        platform.advance(timedelta(minutes=2))
        poller.join(5)
        assert not poller.is_alive()
        assert answers[0].status_code == 200
        assert platform.vm_state().receiving


def test_in_process_a_held_request_fails_at_once_as_a_timeout() -> None:
    """docs/faithfulness.md: the in-process transport has no other thread to answer a held
    request later, so rather than deadlock a single-threaded test it raises
    ``httpx.ReadTimeout`` at once, as a client whose timeout is shorter than the pause."""
    with ForewarnPlatform(fleet=FIRST_CALL_FLEET) as platform:
        client = httpx.Client(transport=platform.transport(), base_url="http://169.254.169.254")
        with pytest.raises(httpx.ReadTimeout):
            client.get("/metadata/scheduledevents", params=API, headers=HEADERS)
        platform.advance(timedelta(minutes=2))
        assert client.get("/metadata/scheduledevents", params=API, headers=HEADERS).is_success
