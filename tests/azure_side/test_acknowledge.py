"""Acknowledging from outside the VM, through the Maintenance resource provider's route.

Sources: learn.microsoft.com, "Scheduled Events overview", "Acknowledging Scheduled Events":
"Azure treats an approval request from either endpoint as meaning that the event can start.
It's possible to receive the event from the IMDS endpoint and approve via the MRP REST
endpoint"; "Scheduled Events in Event Grid": ``az maintenance scheduledevents acknowledge
--ids /subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/providers/
microsoft.compute/virtualMachines/{resourceName}/providers/microsoft.maintenance/
scheduledevents/{scheduledEventId}``; the REST call as Azure's generated JavaScript SDK for the
Maintenance provider sends it (``_acknowledgeSend``: ``POST .../acknowledge`` with api-version
``2023-10-01-preview``); ``acknowledge_list`` (``POST .../scheduledevents`` with
``{"value": [EventIds]}``) and the answer ``{"value": "Successfully Approved"}`` from the REST
specification's examples (github.com/Azure/azure-rest-api-specs, specification/maintenance,
``examples/2025-10-01-preview/ScheduledEvents_AcknowledgeList.json``,
``examples/2023-10-01-preview/ScheduledEvents_Acknowledge.json``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from azure_support import FLEET, START, SUBSCRIPTION
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.cli.common import CliContext
from forewarn.domain.events import EventStatus
from forewarn.server.azure.maintenance import ACKNOWLEDGE_API_VERSIONS, APPROVED
from forewarn.testing import ForewarnPlatform, MakePlatform

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
    assert answer.json() == APPROVED == {"value": "Successfully Approved"}
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


def scale_set_path(event_ids: str = "") -> str:
    """The scale set web's scheduled events, as ``acknowledge_list`` posts to them."""
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ops-rg/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/web/providers/Microsoft.Maintenance/scheduledevents{event_ids}"
    )


LIST_API = "?api-version=2025-10-01-preview"


@pytest.mark.parametrize("version", sorted(ACKNOWLEDGE_API_VERSIONS))
def test_every_api_version_the_sdks_and_az_send_is_answered(
    platform: ForewarnPlatform, version: str
) -> None:
    """``az maintenance scheduledevent acknowledge`` sends 2023-10-01-preview
    (github.com/Azure/azure-cli-extensions, src/maintenance, ``_acknowledge.py``),
    ``azure-mgmt-maintenance`` 2.2.0b4 defaults to 2025-10-01-preview (its
    ``_configuration.py``), and the newest command model of ``az maintenance scheduledevents
    acknowledge`` is 2026-02-01-preview (github.com/Azure/aaz)."""
    (event,) = platform.restart("db0")
    with platform.control_client() as http:
        answer = http.post(
            f"{vm_event_id('db0', event.event_id)}/acknowledge?api-version={version}"
        )
    assert answer.json() == APPROVED
    assert platform.document("db0").events[0].status is EventStatus.STARTED


def test_arm_paths_are_matched_without_regard_to_case(platform: ForewarnPlatform) -> None:
    """ARM reads resource ids without regard to case: the Scheduled Events pages spell
    ``resourcegroups`` and ``resourceGroups``, ``Microsoft.Maintenance/scheduledevents`` and
    ``microsoft.maintenance/scheduledevents`` for the same resource (learn.microsoft.com,
    "Scheduled Events in Event Grid", "Acknowledging with the Maintenance Resource Provider
    Endpoint"; ``--ids /subscriptions/{subscriptionId}/resourcegroups/...``). Every part of
    the path, the ``/acknowledge`` suffix included, in capitals; and Resource Graph's path
    alike, so no spelling falls to the control API's own 404."""
    (event,) = platform.restart("db0")
    shouted = f"{vm_event_id('db0', event.event_id)}/acknowledge".upper()
    assert shouted.startswith("/SUBSCRIPTIONS/")
    assert shouted.endswith("/ACKNOWLEDGE")
    with platform.control_client() as http:
        answer = http.post(shouted + API)
        assert answer.status_code == 200, answer.text
        assert answer.json() == APPROVED
        graph = http.post(
            "/PROVIDERS/MICROSOFT.RESOURCEGRAPH/RESOURCES?api-version=2022-10-01",
            json={"query": "maintenanceresources"},
        )
        assert graph.status_code == 200, graph.text
        assert graph.json()["totalRecords"] == 1
        unknown = http.post(f"/SUBSCRIPTIONS/{SUBSCRIPTION}/RESOURCEGROUPS/X/NOTHING{API}")
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "InvalidResourceType"
    assert platform.document("db0").events[0].status is EventStatus.STARTED


def test_a_scale_set_event_is_not_acknowledged_through_one_of_its_vms(
    platform: ForewarnPlatform,
) -> None:
    """ "If you're using a Virtual Machine Scale Sets, then the scheduled event ID includes
    the ID of the entire Virtual Machine Scale Set, not just the impacted VMs"
    (learn.microsoft.com, "Scheduled Events in Event Grid", "Finding the Virtual Machine ID
    for a Virtual Machine in a Virtual Machine Scale Set"): the event is the set's resource,
    and an instance's id names none, as a VM's name spelled as a standalone VM or the
    instance's own id under the set."""
    (event,) = platform.restart("web_1")
    instance = vm_event_id("web_1", event.event_id)
    under_the_set = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/Ops-RG/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/web/virtualMachines/1/providers/Microsoft.Maintenance/"
        f"scheduledevents/{event.event_id}"
    )
    with platform.control_client() as http:
        as_vm = http.post(f"{instance}/acknowledge{API}")
        assert as_vm.status_code == 404
        assert as_vm.json()["error"]["code"] == "ResourceNotFound"
        assert http.post(f"{under_the_set}/acknowledge{API}").status_code == 404
    assert platform.document("web_1").events[0].status is EventStatus.SCHEDULED
    with platform.control_client() as http:
        at_the_set = http.post(scale_set_path(f"/{event.event_id}/acknowledge") + API)
    assert at_the_set.json() == APPROVED
    assert platform.document("web_1").events[0].status is EventStatus.STARTED


def test_a_list_of_events_is_acknowledged_at_once(platform: ForewarnPlatform) -> None:
    """``acknowledge_list``: ``{"value": [EventIds]}`` posted to the resource's
    scheduledevents, answered as the REST specification's example answers it."""
    ids = [event.event_id for vm in ("web_0", "web_1") for event in platform.restart(vm)]
    with platform.control_client() as http:
        answer = http.post(scale_set_path() + LIST_API, json={"value": [i.lower() for i in ids]})
    assert answer.status_code == 200, answer.text
    assert answer.json() == APPROVED
    shown = {
        e.event_id: e.status for vm in ("web_0", "web_1") for e in platform.document(vm).events
    }
    assert shown == dict.fromkeys(ids, EventStatus.STARTED)


def test_a_list_naming_an_unknown_event_acknowledges_none_of_them(
    platform: ForewarnPlatform,
) -> None:
    """All or none [ours: the specification's error names each refused id in ``details``
    (``ScheduledEventsListAcknowledgeError``), so no partial answer is needed]."""
    (event,) = platform.restart("web_0")
    (elsewhere,) = platform.restart("db0")
    ghost = "00000000-0000-0000-0000-0000000000AB"
    with platform.control_client() as http:
        answer = http.post(
            scale_set_path() + LIST_API, json={"value": [event.event_id, ghost, elsewhere.event_id]}
        )
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "ResourceNotFound"
    assert [d["target"] for d in error["details"]] == [ghost, elsewhere.event_id]
    assert {d["code"] for d in error["details"]} == {"ResourceNotFound"}
    assert platform.document("web_0").events[0].status is EventStatus.SCHEDULED
    assert platform.document("db0").events[0].status is EventStatus.SCHEDULED


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "InvalidRequestContent"),
        (b"{", "InvalidRequestContent"),
        (b'{"value": []}', "InvalidRequestContent"),
        (b'{"value": ["x"], "more": 1}', "InvalidRequestContent"),
        (b'{"value": [1]}', "InvalidRequestContent"),
        (b'{"value": ["not-a-guid"]}', "InvalidScheduledEventId"),
        (b'{"value": ["../../x"]}', "InvalidScheduledEventId"),
    ],
)
def test_a_malformed_list_is_refused(platform: ForewarnPlatform, body: bytes, code: str) -> None:
    platform.restart("web_0")
    with platform.control_client() as http:
        answer = http.post(scale_set_path() + LIST_API, content=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code
    assert platform.document("web_0").events[0].status is EventStatus.SCHEDULED


def test_the_list_is_answered_only_for_the_api_versions_that_have_it(
    platform: ForewarnPlatform,
) -> None:
    """``acknowledge_list`` came with 2025-10-01-preview (the REST specification's example,
    ``az maintenance scheduledevents list-acknowledge``); 2023-10-01-preview has only the
    single ``acknowledge``."""
    (event,) = platform.restart("web_0")
    with platform.control_client() as http:
        old = http.post(scale_set_path() + API, json={"value": [event.event_id]})
    assert old.status_code == 400
    assert old.json()["error"]["code"] == "InvalidApiVersionParameter"
    assert platform.document("web_0").events[0].status is EventStatus.SCHEDULED


def test_each_refusal_says_what_it_refuses(platform: ForewarnPlatform) -> None:
    """ARM's error envelope (the "ErrorResponse" of every management REST specification, and
    the Maintenance specification's ``ScheduledEventsListAcknowledgeError``: ``details`` of
    ``target``, ``code``, ``message``), each message naming what it is about."""
    (event,) = platform.restart("web_0")
    ghost = "00000000-0000-0000-0000-0000000000EF"
    nowhere = f"/subscriptions/{SUBSCRIPTION}/resourcegroups/Ops-RG/providers/x"
    with platform.control_client() as http:
        one = http.post(vm_event_id("db0", ghost) + "/acknowledge" + API).json()
        listed = http.post(scale_set_path() + LIST_API, json={"value": [ghost]}).json()
        malformed = http.post(scale_set_path() + LIST_API, json={"value": ["g", ghost]}).json()
        content = http.post(scale_set_path() + LIST_API, json={"value": "x"}).json()
        route = http.post(nowhere + "/providers/Microsoft.Maintenance/scheduledevents" + LIST_API)
    assert one == {
        "error": {
            "code": "ResourceNotFound",
            "message": f"The Resource 'Microsoft.Maintenance/scheduledevents/{ghost}' under "
            "resource group 'ops-rg' was not found.",
        }
    }
    assert listed == {
        "error": {
            "code": "ResourceNotFound",
            "message": f"The Resource 'Microsoft.Maintenance/scheduledevents/{ghost}' under "
            "resource group 'ops-rg' was not found.",
            "details": [{"target": ghost, "code": "ResourceNotFound", "message": "not found"}],
        }
    }
    assert malformed == {
        "error": {
            "code": "InvalidScheduledEventId",
            "message": "A scheduled event id is a GUID (00000000-0000-0000-0000-000000000000).",
            "details": [
                {"target": "g", "code": "InvalidScheduledEventId", "message": "not a GUID"}
            ],
        }
    }
    assert content["error"]["code"] == "InvalidRequestContent"
    assert content["error"]["message"].startswith("The request content is invalid: value: ")
    assert route.status_code == 404
    assert route.json() == {
        "error": {
            "code": "InvalidResourceType",
            "message": "The resource type could not be found for the request path "
            f"'{nowhere}/providers/Microsoft.Maintenance/scheduledevents'.",
        }
    }
    assert platform.document("web_0").events[0].status is EventStatus.SCHEDULED
    assert event.status is EventStatus.SCHEDULED


@pytest.mark.parametrize(
    "spell",
    [
        lambda path: path.replace("/acknowledge", "/Acknowledge"),
        lambda path: path.replace("scheduledevents", "scheduledEvents").replace(
            "microsoft.maintenance", "Microsoft.Maintenance"
        ),
        lambda path: path.replace("virtualMachines", "VIRTUALMACHINES").replace("db0", "DB0"),
        lambda path: path.rsplit("/", 2)[0] + "/" + path.rsplit("/", 2)[1].lower() + "/acknowledge",
    ],
    ids=["suffix", "provider", "resource", "event-id"],
)
def test_each_part_of_the_id_is_read_without_regard_to_case(
    platform: ForewarnPlatform, spell: Any
) -> None:
    """ARM ids are read without regard to case ("Scheduled Events in Event Grid" spells the
    same id ``resourcegroups``/``resourceGroups``, ``microsoft.maintenance``/
    ``Microsoft.Maintenance``): each part spelt otherwise on its own, the rest as the CLI's
    ``--ids`` spells it, still acknowledges the event."""
    (event,) = platform.restart("db0")
    path = spell(f"{vm_event_id('db0', event.event_id)}/acknowledge")
    assert path != f"{vm_event_id('db0', event.event_id)}/acknowledge"
    with platform.control_client() as http:
        answer = http.post(path + API)
    assert answer.status_code == 200, answer.text
    assert platform.document("db0").events[0].status is EventStatus.STARTED
