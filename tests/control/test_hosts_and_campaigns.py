"""Host routes (live-migrate, update, maintain, predict-failure, fail) and maintenance campaigns."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from forewarn.wire.dates import format_not_before

from .control_support import START, ok, refused

LIVE_MIGRATION = (
    "Virtual machine is being paused because of a memory-preserving Live Migration operation."
)


def test_list_hosts(http: httpx.Client) -> None:
    """SPEC 6 [ours]: host operations name hosts; the list shows who is on each."""
    hosts = {h["name"]: h["vms"] for h in ok(http.get("/api/v1/hosts"))["hosts"]}
    assert hosts["h1"] == ["WestNO_0", "WestNO_1"]
    assert (hosts["host-web"], hosts["host-web-1"]) == (["web_0"], ["web_1"])


def test_live_migration_matches_the_documented_example(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    Freeze, Resources ["WestNO_0","WestNO_1"], NotBefore "Mon, 11 Apr 2022 22:26:58 GMT" (15 minutes
    after this test's start), the Live Migration description, EventSource Platform,
    DurationInSeconds 5."""
    (event,) = ok(http.post("/api/v1/hosts/h1/live-migrate"))["events"]
    assert {k: v for k, v in event.items() if k != "EventId"} | {"EventId": "-"} == {
        "EventId": "-",
        "EventStatus": "Scheduled",
        "EventType": "Freeze",
        "ResourceType": "VirtualMachine",
        "Resources": ["WestNO_0", "WestNO_1"],
        "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
        "Description": LIVE_MIGRATION,
        "EventSource": "Platform",
        "DurationInSeconds": 5,
        "audience": ["WestNO_0", "WestNO_1"],
        "parties": [event["parties"][0]],
        "approvedBy": [],
        "approvedByVms": [],
        "jobId": event["jobId"],
    }


@pytest.mark.parametrize(
    ("action", "event_type", "status", "notice", "description"),
    [
        # learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
        # "Reboot 15 minutes"; "Event Properties": Description example "Host server is undergoing
        # maintenance."
        ("maintain", "Reboot", "Scheduled", timedelta(minutes=15),
         "Host server is undergoing maintenance."),
        # SPEC 6 [seen]: the memory-preserving host update, a Freeze with the
        # host-maintenance description, 15 minutes ahead.
        ("update", "Freeze", "Scheduled", timedelta(minutes=15),
         "Host server is undergoing maintenance."),
        # learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling":
        # degraded hardware predicted to fail, "Azure tries to give 7 days' advance notice when
        # possible".
        ("predict-failure", "Redeploy", "Scheduled", timedelta(days=7),
         "Host server is undergoing an emergency repair."),
        # learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event scheduling":
        # hardware failure, "an event will be created for all impacted VMs with EventType = Reboot
        # and EventStatus = Started".
        ("fail", "Reboot", "Started", None, "Virtual machine has encountered a failure."),
    ],
)  # fmt: skip
def test_host_actions(
    http: httpx.Client,
    action: str,
    event_type: str,
    status: str,
    notice: timedelta | None,
    description: str,
) -> None:
    (event,) = ok(http.post(f"/api/v1/hosts/h1/{action}"))["events"]
    assert (event["EventType"], event["EventStatus"], event["EventSource"]) == (
        event_type,
        status,
        "Platform",
    )
    assert event["Resources"] == ["WestNO_0", "WestNO_1"]
    assert event["Description"] == description
    expected = "" if notice is None else format_not_before(START + notice)
    assert event["NotBefore"] == expected


@pytest.mark.parametrize(
    "action", ["live-migrate", "update", "maintain", "predict-failure", "fail"]
)
def test_unknown_host_is_404(http: httpx.Client, action: str) -> None:
    """SPEC 6 [ours] for the control plane: an unknown host is 404."""
    refused(http.post(f"/api/v1/hosts/h9/{action}"), 404, "no virtual machine runs on host 'h9'")
    refused(http.post(f"/api/v1/hosts/h1/{action}-now"), 404, "no route")


def test_campaign_serializes_fault_domains(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "VMs in different fault domains won't be impacted by routine maintenance operations at the same
    time. However, they may have operations serialized one after another. VMs in one fault domain
    can receive scheduled events with EventStatus:"Scheduled" shortly after another fault domain's
    maintenance is completed.\""""
    started = ok(http.post("/api/v1/campaigns", json={"vms": ["web_0", "web_1"]}), status=201)
    (first,) = started["events"]
    assert first["Resources"] == ["web_0"]
    assert started["campaign"]["steps"] == 2
    assert started["campaign"]["currentEvents"] == [first["EventId"]]
    (running,) = ok(http.get("/api/v1/campaigns"))["campaigns"]
    assert running["step"] == 1
    ok(http.post("/api/v1/vms/web_0/approve", json={"eventIds": "all"}))
    ok(http.post("/api/v1/clock/advance", json={"seconds": 600}))  # Started -> removed
    (second,) = ok(http.get("/api/v1/events"))["events"]
    assert (second["Resources"], second["EventStatus"]) == (["web_1"], "Scheduled")
    assert ok(http.get("/api/v1/campaigns"))["campaigns"][0]["step"] == 2


def test_campaign_over_every_vm_freezing(http: httpx.Client) -> None:
    """SPEC 4 [doc]: routine maintenance, memory-preserving (Freeze) or reboot."""
    started = ok(http.post("/api/v1/campaigns", json={"eventType": "Freeze"}), status=201)
    assert started["events"]
    assert {e["EventType"] for e in started["events"]} == {"Freeze"}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"eventType": "Redeploy"}, 422),
        ({"vms": []}, 422),
        ({"vms": "WestNO_0"}, 422),
        ({"vms": ["ghost"]}, 404),
    ],
)
def test_campaign_refusals(http: httpx.Client, body: object, status: int) -> None:
    """SPEC 4 [ours] for the control plane: campaigns reboot or freeze known VMs."""
    refused(http.post("/api/v1/campaigns", json=body), status)
    assert ok(http.get("/api/v1/campaigns")) == {"campaigns": []}


def test_campaign_kinds_choose_each_steps_maintenance(http: httpx.Client) -> None:
    """SPEC 6: the memory-preserving host update, "the most common real event": a Platform
    Freeze of about 9 s described "Host server is undergoing maintenance."."""
    started = ok(
        http.post("/api/v1/campaigns", json={"vms": ["web_0", "web_1"], "kinds": ["update"]}),
        status=201,
    )
    (first,) = started["events"]
    assert (first["EventType"], first["DurationInSeconds"], first["Description"]) == (
        "Freeze",
        9,
        "Host server is undergoing maintenance.",
    )
    refused(http.post("/api/v1/campaigns", json={"kinds": ["reboot-everything"]}), 422, "kinds")
    refused(http.post("/api/v1/campaigns", json={"kinds": []}), 422, "kinds")
