"""VM routes: list, show, document, restart, redeploy, simulate-eviction, approve."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from forewarn.domain.clock import ManualClock
from forewarn.wire.dates import format_not_before

from .control_support import START, TENANT, ok, refused

USER_RESTART = "Virtual machine is going to be restarted as requested by authorized user."
USER_REDEPLOY = "Virtual machine is going to be redeployed as requested by authorized user."


def test_list_vms_shows_host_reachable_and_receiving(http: httpx.Client) -> None:
    """SPEC 7 [doc]: a VM receives events once enabled; section 4: a VM in impact
    is down. The list is how an operator sees both, with each VM's host and group."""
    vms = {vm["name"]: vm for vm in ok(http.get("/api/v1/vms"))["vms"]}
    assert set(vms) == {
        "WestNO_0", "WestNO_1", "app0", "spot0",
        "web_0", "web_1", "plain_0", "plain_1", "batch_0", "batch_1",
    }  # fmt: skip
    west = vms["WestNO_0"]
    assert (west["host"], west["address"], west["availabilitySet"]) == ("h1", "127.0.0.2", "west")
    assert (west["reachable"], west["receiving"], west["faultDomain"]) == (True, True, 0)
    assert west["compute"]["name"] == "WestNO_0"
    assert vms["web_1"]["scaleSet"] == "web"
    assert vms["spot0"]["priority"] == "Spot"


def test_show_vm_and_unknown_vm(http: httpx.Client) -> None:
    """SPEC 1 [ours] for the control plane: an unknown VM is 404 {"error": ...}."""
    assert ok(http.get("/api/v1/vms/app0"))["host"] == "host-app"
    refused(http.get("/api/v1/vms/nope"), 404, "no virtual machine named 'nope'")


def test_document_per_api_version(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": a
    VM first sees incarnation 1 and no events. SPEC 2, "What each api-version shows": 2017-03-01
    prefixes IaaS names with "_" and has no Description."""
    assert ok(http.get("/api/v1/vms/WestNO_0/document")) == {
        "DocumentIncarnation": 1,
        "Events": [],
    }
    ok(http.post("/api/v1/vms/WestNO_0/restart"))
    old = ok(http.get("/api/v1/vms/WestNO_0/document", params={"api-version": "2017-03-01"}))
    (event,) = old["Events"]
    assert event["Resources"] == ["_WestNO_0"]
    assert "Description" not in event
    refused(
        http.get("/api/v1/vms/WestNO_0/document", params={"api-version": "latest"}),
        422,
        "unknown api-version 'latest'",
    )
    refused(http.get("/api/v1/vms/ghost/document"), 404)


def test_restart_schedules_a_user_reboot_15_minutes_ahead(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": "If you restart a VM, an event with the type Reboot is scheduled";
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling": "Reboot
    15 minutes"; SPEC 2 for the Description text."""
    (event,) = ok(http.post("/api/v1/vms/app0/restart"))["events"]
    assert (event["EventType"], event["EventStatus"], event["EventSource"]) == (
        "Reboot",
        "Scheduled",
        "User",
    )
    assert event["Resources"] == ["app0"]
    assert event["NotBefore"] == format_not_before(START + timedelta(minutes=15))
    assert event["Description"] == USER_RESTART
    assert event["audience"] == ["app0"]
    assert event["parties"] == [TENANT]
    assert event["approvedBy"] == []
    refused(http.post("/api/v1/vms/nope/restart"), 404)


def test_redeploy_schedules_a_user_redeploy_10_minutes_ahead(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": "If you redeploy a VM, an event with the type Redeploy is scheduled";
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling": "Redeploy
    10 minutes"."""
    (event,) = ok(http.post("/api/v1/vms/app0/redeploy"))["events"]
    assert (event["EventType"], event["EventSource"]) == ("Redeploy", "User")
    assert event["NotBefore"] == format_not_before(START + timedelta(minutes=10))
    assert event["Description"] == USER_REDEPLOY
    refused(http.post("/api/v1/vms/nope/redeploy"), 404)


def test_simulate_eviction_of_a_spot_vm_and_refusal_of_a_regular_one(
    http: httpx.Client, clock: ManualClock
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    "Preempt: The Spot Virtual Machine is being deleted"; "Event Scheduling": "Preempt 30 seconds".
    Only Spot VMs are evicted (SPEC 6 [doc]); asking for a regular VM is the wrong state: 409."""
    (event,) = ok(http.post("/api/v1/vms/spot0/simulate-eviction"))["events"]
    assert (event["EventType"], event["EventSource"]) == ("Preempt", "Platform")
    assert event["NotBefore"] == format_not_before(START + timedelta(seconds=30))
    refused(http.post("/api/v1/vms/app0/simulate-eviction"), 409, "not a Spot VM")
    refused(http.post("/api/v1/vms/nope/simulate-eviction"), 404)
    ok(http.post("/api/v1/clock/advance", json={"seconds": 30 + 7}))
    refused(http.get("/api/v1/vms/spot0"), 404)  # "being deleted": gone after the impact


def test_approve_all_starts_the_event_for_every_resource(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": "An
    approval of the event would allow the freeze to proceed for both WestNO_0 and WestNO_1"; once
    Started, NotBefore is "" (SPEC 2)."""
    (event,) = ok(http.post("/api/v1/hosts/h1/live-migrate"))["events"]
    approved = ok(http.post("/api/v1/vms/WestNO_1/approve", json={"eventIds": "all"}))
    assert approved == {"approved": [event["EventId"]]}
    document = ok(http.get("/api/v1/vms/WestNO_0/document"))
    assert document["DocumentIncarnation"] == 3
    (started,) = document["Events"]
    assert (started["EventStatus"], started["NotBefore"]) == ("Started", "")
    shown = ok(http.get(f"/api/v1/events/{event['EventId']}"))
    assert shown["approvedBy"] == [TENANT]


def test_approve_by_id_and_its_refusals(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "The
    service always returns a 200 success code if it's passed a valid event ID, even if another VM
    already approved the event." An id the VM cannot see changes nothing (SPEC 3 [ours]): here 404.
    A VM in impact cannot ask anything (SPEC 4 [ours]): 409."""
    (event,) = ok(http.post("/api/v1/vms/app0/restart"))["events"]
    event_id = event["EventId"]
    refused(
        http.post("/api/v1/vms/WestNO_0/approve", json={"eventIds": [event_id]}),
        404,
        "unknown event id",
    )
    assert ok(http.get(f"/api/v1/events/{event_id}"))["EventStatus"] == "Scheduled"
    ok(http.post("/api/v1/vms/app0/approve", json={"eventIds": [event_id]}))
    assert ok(http.get(f"/api/v1/events/{event_id}"))["EventStatus"] == "Started"
    refused(http.post("/api/v1/vms/app0/approve", json={"eventIds": [event_id]}), 409, "is down")
    refused(http.post("/api/v1/vms/ghost/approve", json={"eventIds": "all"}), 404)


@pytest.mark.parametrize(
    "body",
    [{}, {"eventIds": "some"}, {"eventIds": [1]}, {"eventIds": "all", "extra": 1}, []],
)
def test_approve_refuses_invalid_bodies(http: httpx.Client, body: object) -> None:
    """SPEC 3 [ours] for the control plane: invalid input is 422 naming the field."""
    refused(http.post("/api/v1/vms/app0/approve", json=body), 422, "invalid request")
