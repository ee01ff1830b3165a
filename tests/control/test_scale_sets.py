"""Scale-set routes: delete-instances, simulate-eviction, os-image-upgrade."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from forewarn.wire.dates import format_not_before

from .control_support import START, ok, refused


def test_delete_instances_with_terminate_notification(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling":
    "Terminate User Configurable: 5 to 15 minutes" (the set's notBeforeTimeout, PT7M here); SPEC 6
    [doc]: User source, Platform for autoscale; section 3: Terminate events of one set with the same
    NotBefore all start together. Scale-set instances are named {scaleSetName}_{instanceId} (section
    2)."""
    data = ok(
        http.post("/api/v1/scale-sets/web/delete-instances", json={"instanceIds": ["0", "1"]})
    )
    assert [e["Resources"] for e in data["events"]] == [["web_0"], ["web_1"]]
    for event in data["events"]:
        assert (event["EventType"], event["EventSource"]) == ("Terminate", "User")
        assert event["NotBefore"] == format_not_before(START + timedelta(minutes=7))
    assert data["events"][0]["jobId"] == data["events"][1]["jobId"]


def test_autoscale_scale_in_is_the_platforms_doing(http: httpx.Client) -> None:
    """SPEC 6 [doc]: "delete or scale in a scale-set VM with terminate notification
    enabled | Terminate | User (Platform for autoscale)"."""
    (event,) = ok(
        http.post(
            "/api/v1/scale-sets/web/delete-instances",
            json={"instanceIds": ["1"], "autoscale": True},
        )
    )["events"]
    assert (event["EventType"], event["EventSource"]) == ("Terminate", "Platform")


def test_delete_without_terminate_notification_has_no_event(http: httpx.Client) -> None:
    """SPEC 6 [doc]: Terminate comes only "with terminate notification enabled";
    without it the instance simply goes."""
    assert ok(
        http.post("/api/v1/scale-sets/plain/delete-instances", json={"instanceIds": ["0"]})
    ) == {"events": []}
    refused(http.get("/api/v1/vms/plain_0"), 404)
    ok(http.get("/api/v1/vms/plain_1"))


def test_simulate_eviction_of_spot_instances(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Spot VM and Spot scale
    set instance evictions"; learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
    "Event Scheduling": "Preempt 30 seconds"."""
    data = ok(http.post("/api/v1/scale-sets/batch/simulate-eviction", json={"instanceIds": ["1"]}))
    (event,) = data["events"]
    assert (event["EventType"], event["Resources"]) == ("Preempt", ["batch_1"])
    assert event["NotBefore"] == format_not_before(START + timedelta(seconds=30))
    refused(
        http.post("/api/v1/scale-sets/web/simulate-eviction", json={"instanceIds": ["0"]}),
        409,
        "not a Spot VM",
    )


def test_os_image_upgrade_notification(http: httpx.Client) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
    maintenance": Guest OS upgrades and reimages give scheduled events once enabled with
    OSImageNotificationProfile, "disabled by default"; SPEC 4 [doc]: "OS image upgrade notification:
    15 min"."""
    (event,) = ok(
        http.post("/api/v1/scale-sets/web/os-image-upgrade", json={"instanceIds": ["0"]})
    )["events"]
    assert (event["EventType"], event["EventSource"]) == ("Reboot", "Platform")
    assert event["NotBefore"] == format_not_before(START + timedelta(minutes=15))
    assert sorted(event["audience"]) == ["web_0", "web_1"]  # the placement group (SPEC 5)
    assert ok(
        http.post("/api/v1/scale-sets/plain/os-image-upgrade", json={"instanceIds": ["0"]})
    ) == {"events": []}


@pytest.mark.parametrize("operation", ["delete-instances", "simulate-eviction", "os-image-upgrade"])
def test_unknown_scale_set_or_instance_is_404(http: httpx.Client, operation: str) -> None:
    """SPEC 6 [ours] for the control plane: unknown names are 404."""
    refused(
        http.post(f"/api/v1/scale-sets/nope/{operation}", json={"instanceIds": ["0"]}),
        404,
        "no scale set named 'nope'",
    )
    refused(
        http.post(f"/api/v1/scale-sets/web/{operation}", json={"instanceIds": ["9"]}),
        404,
        "web_9",
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"instanceIds": []},
        {"instanceIds": ["web_0"]},
        {"instanceIds": [0]},
        {"instanceIds": ["0"], "autoscale": "yes"},
        {"instanceIds": ["0"], "unknown": True},
    ],
)
def test_invalid_instance_bodies_are_422(http: httpx.Client, body: object) -> None:
    """SPEC 6 [ours] for the control plane: invalid input is 422, nothing changes."""
    refused(http.post("/api/v1/scale-sets/web/delete-instances", json=body), 422)
    assert ok(http.get("/api/v1/events")) == {"events": []}
