"""forewarn.testing without sockets: the httpx transport, the SDK client, the operations and
the assertions on what the application did."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from forewarn.client import NO_RETRY, ImdsConnectionError, ImdsTransportError
from forewarn.testing import ForewarnPlatform, event_id_of

AZURE = "http://169.254.169.254"
PATH = "/metadata/scheduledevents?api-version=2020-07-01"
HEADERS = {"Metadata": "true"}


def test_an_httpx_client_reaches_the_endpoint_through_the_transport_as_its_vm() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope": every VM of an
    availability set is delivered the set's events, and "Resources" names the affected ones."""
    fleet = (
        "availabilitySets: [{name: west}]\n"
        "vms:\n"
        "  - {name: a, address: 127.0.0.2, availabilitySet: west, faultDomain: 0}\n"
        "  - {name: b, address: 127.0.0.3, availabilitySet: west, faultDomain: 1}\n"
    )
    with ForewarnPlatform(fleet=fleet) as platform:
        (event,) = platform.restart("b")
        with httpx.Client(transport=platform.transport("a"), base_url=AZURE) as client:
            response = client.get(PATH, headers=HEADERS)
            approved = client.post(
                PATH, headers=HEADERS, json={"StartRequests": [{"EventId": event.event_id}]}
            )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.headers["date"] == "Mon, 11 Apr 2022 22:11:58 GMT"
        assert response.json()["Events"][0]["Resources"] == ["b"]
        assert approved.status_code == 200
        assert platform.assert_approved(event, within=0).vm == "a"
        assert platform.requests("b") == []


def test_the_transport_serves_an_async_client_too() -> None:
    with ForewarnPlatform() as platform:
        (event,) = platform.maintain_host("host-vm0")

        async def read() -> list[str]:
            async with httpx.AsyncClient(transport=platform.transport(), base_url=AZURE) as c:
                document = (await c.get(PATH, headers=HEADERS)).json()
            return [e["EventId"] for e in document["Events"]]

        assert asyncio.run(read()) == [event.event_id]


def test_missing_metadata_header_is_refused_and_recorded() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Headers": "Failure to
    include the header in the request results in a "Bad Request" response from Metadata Service"."""
    with ForewarnPlatform() as platform:
        with httpx.Client(transport=platform.transport(), base_url=AZURE) as client:
            assert client.get(PATH).status_code == 400
        (request,) = platform.requests()
        assert request.status == 400
        assert b"Required metadata header not specified" in request.response_body
        assert platform.approvals() == []


def test_the_sdk_client_on_the_transport_and_a_vm_that_is_down() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": an
    approval lets the event proceed; a rebooting VM's endpoint does not answer (SPEC 4)."""
    with ForewarnPlatform() as platform, platform.client(retry=NO_RETRY) as client:
        (event,) = platform.redeploy("vm0")
        document = client.get()
        assert document.event(event.event_id) is not None
        client.approve(*document.events)
        with pytest.raises((ImdsConnectionError, ImdsTransportError)):
            client.get()
        assert [r.status for r in platform.requests()] == [200, 200, 0]


def test_every_operation_of_the_handle_makes_its_documented_event() -> None:
    """SPEC 6 [doc]: restart -> Reboot/User, redeploy -> Redeploy/User, Spot
    eviction -> Preempt, live migration -> Freeze, host maintenance -> Reboot, predicted
    failure -> Redeploy, hardware failure -> Reboot straight to Started."""
    fleet = (
        "vms:\n"
        "  - {name: a, address: 127.0.0.2, host: h1}\n"
        "  - {name: spot, address: 127.0.0.3, priority: Spot, host: h2}\n"
        "  - {name: c, address: 127.0.0.4, host: h3}\n"
        "scaleSets:\n"
        "  - {name: web, capacity: 2, addressStart: 127.0.0.10,\n"
        "     terminateNotification: {notBeforeTimeout: PT5M}, osImageNotification: true}\n"
    )
    with ForewarnPlatform(fleet=fleet) as platform:
        made = {
            "restart": platform.restart("a"),
            "evict": platform.evict("spot"),
            "delete": platform.delete_instances("web", "0"),
            "os-image": platform.os_image_upgrade("web", "1"),
        }
        platform.advance(timedelta(hours=1))
        made["live-migrate"] = platform.live_migrate("h1")
        platform.advance(timedelta(hours=1))
        made["maintain"] = platform.maintain_host("h1")
        platform.advance(timedelta(hours=1))
        made["predict"] = platform.predict_failure("h1")
        made["fail"] = platform.fail_host("h3")
        kinds = {
            name: [(e.event_type.value, e.source.value) for e in ev] for name, ev in made.items()
        }
        assert kinds == {
            "restart": [("Reboot", "User")],
            "evict": [("Preempt", "Platform")],
            "delete": [("Terminate", "User")],
            "os-image": [("Reboot", "Platform")],
            "live-migrate": [("Freeze", "Platform")],
            "maintain": [("Reboot", "Platform")],
            "predict": [("Redeploy", "Platform")],
            "fail": [("Reboot", "Platform")],
        }
        assert made["fail"][0].status.value == "Started"


def test_every_registered_operation_is_a_method_of_the_handle() -> None:
    """SPEC 6 [seen]: the memory-preserving host update, a Freeze of about 9 s with
    the host-maintenance description, reached as ``update_host`` with no method written for it;
    an unknown name is still an AttributeError."""
    with ForewarnPlatform(vms=["a"]) as platform:
        (event,) = platform.update_host("host-a")
        assert (event.event_type.value, event.duration_seconds) == ("Freeze", 9)
        assert event.description == "Host server is undergoing maintenance."
        (again,) = platform.perform("update_host", "host-a")
        assert again.event_type.value == "Freeze"
        with pytest.raises(AttributeError, match="update_hosts"):
            platform.update_hosts("host-a")
        with pytest.raises(ValueError, match="no operation 'reboot'; known: restart, "):
            platform.perform("reboot", "a")


def test_a_cancelled_event_vanishes() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling": "in
    rare cases, the operation will be canceled by Azure before it starts. In that case the event
    will be removed from the Events array"."""
    with ForewarnPlatform() as platform:
        event = platform.schedule("Reboot", "vm0", notice=timedelta(minutes=20))
        assert platform.document().events[0].event_id == event.event_id
        platform.cancel(event)
        assert platform.document().events == ()
        assert platform.event(event) is None


def test_a_maintenance_campaign_starts_with_one_fault_domain() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Use the API": "VMs in
    different fault domains won't be impacted by routine maintenance operations at the same
    time"."""
    fleet = (
        "availabilitySets: [{name: s, faultDomains: 2}]\n"
        "vms:\n"
        "  - {name: a, address: 127.0.0.2, availabilitySet: s, faultDomain: 0}\n"
        "  - {name: b, address: 127.0.0.3, availabilitySet: s, faultDomain: 1}\n"
    )
    with ForewarnPlatform(fleet=fleet) as platform:
        events = platform.start_maintenance()
        assert [[r.name for r in e.resources] for e in events] == [["a"]]


def test_assertions_say_what_the_application_did_instead() -> None:
    with ForewarnPlatform() as platform:
        (event,) = platform.restart("vm0")
        with pytest.raises(AssertionError, match="no approvals at all"):
            platform.assert_approved(event)
        platform.advance(30)
        with platform.client(retry=NO_RETRY) as client:
            client.approve(event.event_id)
        with pytest.raises(AssertionError, match="approved 30 s after it appeared"):
            platform.assert_approved(event, within=10)
        assert platform.assert_approved(event, within=30).vm == "vm0"
        with pytest.raises(AssertionError, match=f"event {event.event_id} was approved"):
            platform.assert_not_approved(event)
        with pytest.raises(AssertionError, match=f"approvals seen: {event.event_id} by vm0"):
            platform.assert_approved("0" * 8 + "-0000-0000-0000-" + "0" * 12)


def test_an_event_not_made_through_the_handle_counts_from_when_it_was_first_shown() -> None:
    with ForewarnPlatform(profile="fast") as platform:
        platform.start_maintenance(event_type="Freeze")
        platform.advance(1)
        with platform.client(retry=NO_RETRY) as client:
            (shown,) = client.get().events
            platform.advance(1)
            client.approve(shown)
        # Made through the handle at 22:11:58, shown a second later, approved a second after.
        assert platform.appeared_at(shown) == datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
        platform._created.clear()  # as if another component had made it
        assert platform.appeared_at(shown) == datetime(2022, 4, 11, 22, 11, 59, tzinfo=UTC)
        platform.assert_approved(shown, within=1)
        with pytest.raises(AssertionError, match="approved 1 s after it appeared"):
            platform.assert_approved(shown, within=0.5)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown timing profile 'slow'"):
        ForewarnPlatform(profile="slow")
    with pytest.raises(ValueError, match="either vms"):
        ForewarnPlatform(vms=["a"], fleet="vms: [{name: b}]")
    with pytest.raises(ValueError, match=r"unknown event type in 'notice\.Sleep'"):
        ForewarnPlatform(timing={"notice.Sleep": 1})
    with pytest.raises(TypeError, match="choose the profile with profile="):
        ForewarnPlatform(timing="fast")  # type: ignore[arg-type]
    with ForewarnPlatform(timing={"notice.Reboot": 60}) as platform:
        (event,) = platform.restart("vm0")
        assert event.not_before == platform.now + timedelta(seconds=60)
    assert event_id_of("abc") == "ABC"


def test_the_transport_is_usable_while_the_socket_server_runs() -> None:
    with ForewarnPlatform() as platform:
        platform.serve()
        with httpx.Client(transport=platform.transport(), base_url=AZURE) as client:
            assert client.get(PATH, headers=HEADERS).json()["DocumentIncarnation"] == 1
        with httpx.Client(base_url=platform.url) as client:
            assert client.get(PATH, headers=HEADERS).status_code == 200
        assert len(platform.requests()) == 2
        platform.clear_requests()
        assert platform.requests() == []
