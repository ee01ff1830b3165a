"""Acknowledging from outside the VM, through the Maintenance resource provider's route.

Sources: learn.microsoft.com, "Scheduled Events overview", "Acknowledging Scheduled Events":
"Azure treats an approval request from either endpoint as meaning that the event can start.
It's possible to receive the event from the IMDS endpoint and approve via the MRP REST
endpoint"; "Scheduled Events in Event Grid": ``az maintenance scheduledevents acknowledge
--ids /subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/providers/
microsoft.compute/virtualMachines/{resourceName}/providers/microsoft.maintenance/
scheduledevents/{scheduledEventId}``; the REST call as Azure's generated JavaScript SDK for the
Maintenance provider sends it (``_acknowledgeSend``: ``POST .../acknowledge`` with api-version
``2023-10-01-preview``).
"""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.cli.common import CliContext
from forewarn.domain.events import EventStatus
from forewarn.testing import ForewarnPlatform, MakePlatform

from .azure_support import FLEET, START, SUBSCRIPTION

API = "?api-version=2023-10-01-preview"


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(fleet=FLEET, start=START, seed=9)


def vm_event_id(vm: str, event_id: str, group: str = "ops-rg") -> str:
    """The id as the CLI's ``--ids`` spells it: lower-case ``resourcegroups`` and provider."""
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourcegroups/{group}/providers/microsoft.compute/"
        f"virtualMachines/{vm}/providers/microsoft.maintenance/scheduledevents/{event_id}"
    )


def test_read_through_imds_and_acknowledged_outside_it_starts_for_every_vm(
    platform: ForewarnPlatform,
) -> None:
    platform.restart("db0")
    with platform.client("db1") as client:
        (seen,) = client.get().events
    assert seen.status == "Scheduled"
    with platform.control_client() as http:
        answer = http.post(vm_event_id("db0", seen.event_id) + "/acknowledge" + API)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"value": "Success"}
    for vm in ("db0", "db1"):
        assert [e.status for e in platform.document(vm).events] == [EventStatus.STARTED]
    phases = [c.phase.value for c in platform.service.published().latest()]
    assert phases == ["Started"]


def test_a_scale_set_event_is_acknowledged_at_the_whole_set(platform: ForewarnPlatform) -> None:
    (event,) = platform.restart("web_1")
    target = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/Ops-RG/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/web/providers/Microsoft.Maintenance/scheduledevents/"
        f"{event.event_id.lower()}/acknowledge{API}"
    )
    with platform.control_client() as http:
        assert http.post(target).status_code == 200
    assert platform.document("web_1").events[0].status is EventStatus.STARTED


def test_unknown_events_and_resources_get_arms_error_envelope(platform: ForewarnPlatform) -> None:
    (event,) = platform.restart("db0")
    with platform.control_client() as http:
        ghost = http.post(
            vm_event_id("db0", "00000000-0000-0000-0000-000000000000") + "/acknowledge" + API
        )
        assert ghost.status_code == 404
        assert ghost.json()["error"]["code"] == "ResourceNotFound"
        elsewhere = http.post(vm_event_id("solo", event.event_id) + "/acknowledge" + API)
        assert elsewhere.status_code == 404
        other_group = http.post(vm_event_id("db0", event.event_id, "rg2") + "/acknowledge" + API)
        assert other_group.status_code == 404
        no_version = http.post(vm_event_id("db0", event.event_id) + "/acknowledge")
        assert no_version.status_code == 400
        assert no_version.json()["error"]["code"] == "MissingApiVersionParameter"
        old = http.post(vm_event_id("db0", event.event_id) + "/acknowledge?api-version=2020-01-01")
        assert old.json()["error"]["code"] == "InvalidApiVersionParameter"
        nonsense = http.post(f"/subscriptions/{SUBSCRIPTION}/resourcegroups/x/acknowledge{API}")
        assert nonsense.status_code == 404
        assert nonsense.json()["error"]["code"] == "InvalidResourceType"
    assert platform.document("db0").events[0].status is EventStatus.SCHEDULED


def test_the_cli_acknowledges_by_arm_id(platform: ForewarnPlatform) -> None:
    (event,) = platform.restart("db1")

    def connect(host: str, port: int) -> httpx.Client:
        return platform.control_client()

    runner = CliRunner()
    result = runner.invoke(
        main,
        ["events", "acknowledge", "--ids", vm_event_id("db1", event.event_id)],
        obj=CliContext(connect=connect),
    )
    assert result.exit_code == 0, result.output
    assert platform.document("db0").events[0].status is EventStatus.STARTED
    result = runner.invoke(
        main,
        [
            "events",
            "acknowledge",
            "--ids",
            vm_event_id("db1", "00000000-0000-0000-0000-0000000000aa"),
        ],
        obj=CliContext(connect=connect),
    )
    assert result.exit_code == 1
    assert "404: ResourceNotFound" in result.output
