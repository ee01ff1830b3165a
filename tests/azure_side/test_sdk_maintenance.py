"""The official ``azure-mgmt-maintenance`` client acknowledges scheduled events against a real
``forewarn serve``, with its own defaults (api-version 2025-10-01-preview, the first release
with ``scheduled_events``: 2.2.0b4), over TLS with a certificate from a local CA
(``trustme``), as ARM clients refuse a bearer token over plain HTTP.

Sources: learn.microsoft.com, "Scheduled Events overview", "Acknowledging Scheduled Events"
("The acknowledgment can be sent either to the IMDS endpoint within any VM or via the
Maintenance Resource Provider (MRP) REST API endpoint"); the REST specification's examples
(github.com/Azure/azure-rest-api-specs, specification/maintenance,
``ScheduledEvents_Acknowledge.json``, ``ScheduledEvents_AcknowledgeList.json``: the answer
``{"value": "Successfully Approved"}``); "Scheduled Events in Event Grid": a scale set's
event "includes the ID of the entire Virtual Machine Scale Set".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.maintenance import MaintenanceManagementClient
from azure_support import SUBSCRIPTION, StaticToken, serving_over_tls
from e2e_support import ForewarnServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ForewarnServer, str, Path]]:
    with serving_over_tls(tmp_path_factory.mktemp("maintenance-tls")) as served:
        yield served


def client(base: str, ca: Path) -> MaintenanceManagementClient:
    """The client as a user makes it, its api-version left to its default."""
    token = StaticToken(os.environ["FOREWARN_TOKEN"])
    return MaintenanceManagementClient(
        token, SUBSCRIPTION, base_url=base, connection_verify=str(ca)
    )


def restart(server: ForewarnServer, vm: str) -> str:
    answer = server.control.post(f"/vms/{vm}/restart")
    assert answer.status_code == 200, answer.text
    (event,) = answer.json()["events"]
    event_id: str = event["EventId"]
    return event_id


def status(server: ForewarnServer, event_id: str) -> str:
    answer = server.control.get(f"/events/{event_id}")
    assert answer.status_code == 200, answer.text
    value: str = answer.json()["EventStatus"]
    return value


def test_the_sdk_acknowledges_a_vms_event_with_its_defaults(
    tls: tuple[ForewarnServer, str, Path],
) -> None:
    server, base, ca = tls
    event_id = restart(server, "db0")
    with client(base, ca) as maintenance:
        assert maintenance._config.api_version == "2025-10-01-preview"
        answer = maintenance.scheduled_events.acknowledge(
            resource_group_name="Ops-RG",
            resource_type="virtualMachines",
            resource_name="db0",
            scheduled_event_id=event_id.lower(),
        )
    assert answer.value == "Successfully Approved"
    assert status(server, event_id) == "Started"


def test_the_sdk_acknowledges_a_list_of_a_scale_sets_events(
    tls: tuple[ForewarnServer, str, Path],
) -> None:
    server, base, ca = tls
    ids = [restart(server, vm) for vm in ("web_0", "web_1")]
    with client(base, ca) as maintenance:
        answer = maintenance.scheduled_events.acknowledge_list(
            "Ops-RG", "virtualMachineScaleSets", "web", {"value": ids}
        )
    assert answer.value == "Successfully Approved"
    assert [status(server, event_id) for event_id in ids] == ["Started", "Started"]


def test_the_sdk_reads_the_refusal_of_an_event_the_resource_does_not_have(
    tls: tuple[ForewarnServer, str, Path],
) -> None:
    """An instance's own id names no event of its scale set, and the list that names an
    unknown event acknowledges none: the SDK raises ``ResourceNotFoundError`` with ARM's
    error code."""
    server, base, ca = tls
    server.advance(30 * 60)  # what other tests started is over: web_1 is up, its set idle
    event_id = restart(server, "web_1")
    assert status(server, event_id) == "Scheduled"
    with client(base, ca) as maintenance:
        with pytest.raises(ResourceNotFoundError) as one:
            maintenance.scheduled_events.acknowledge("Ops-RG", "virtualMachines", "web_1", event_id)
        ghost = "00000000-0000-0000-0000-0000000000cd"
        with pytest.raises(ResourceNotFoundError) as listed:
            maintenance.scheduled_events.acknowledge_list(
                "Ops-RG", "virtualMachineScaleSets", "web", {"value": [event_id, ghost]}
            )
    assert one.value.error is not None
    assert one.value.error.code == "ResourceNotFound"
    assert listed.value.error is not None
    assert listed.value.error.code == "ResourceNotFound"
    assert status(server, event_id) == "Scheduled"
