"""The KQL that operations dashboards write over ``maintenanceresources`` and ``resources``,
answered byte for byte as the golden files under ``golden/`` hold, each answer read back by
``azure-mgmt-resourcegraph``'s own ``QueryResponse`` model (the one ``ResourceGraphClient.
resources`` returns).

Sources, learn.microsoft.com: Azure Resource Graph "Understanding the Azure Resource Graph query
language" ("Supported KQL language elements": count, distinct, extend, join, limit, mv-expand,
order, project, project-away, sort, summarize, take, top, where; "Resource Graph tables":
``Resources``, ``MaintenanceResources``; join "kind=innerunique (default), inner, leftouter");
"Scheduled Events in Azure Resource Graph" (the table's rows); the Kusto reference pages of
each operator and of the string operators (cited beside each case below).

Regenerate with ``FOREWARN_REGENERATE_GOLDEN=1`` and read the diff, as tests/golden/README.md
says for the VM-facing files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.mgmt.resourcegraph.models import QueryResponse
from azure_support import FLEET, START

from forewarn.testing import ForewarnPlatform

URL = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("FOREWARN_REGENERATE_GOLDEN") == "1"
#: From the id of a scheduled event to the id of the resource it is filed under.
RESOURCE_ID = "tolower(tostring(split(id, '/providers/microsoft.maintenance/')[0]))"

#: name -> (query, options): each a query a user writes, with the rule it shows.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    # "summarize operator": with no by, one row; the aggregation named count_.
    "summarize-count": ("maintenanceresources | summarize count()", {}),
    # "summarize ... by": a row per group, the by column first.
    "summarize-count-by": (
        "maintenanceresources | summarize count() by tostring(properties.EventStatus)"
        " | order by properties_EventStatus asc",
        {},
    ),
    # count, countif, dcount, min, max named and unnamed, by two columns.
    "summarize-aggregations": (
        "maintenanceresources"
        " | summarize events = count(), done = countif(properties.EventStatus == 'Completed'),"
        " dcount(resourceGroup), min(properties.DurationInSeconds),"
        " max(properties.DurationInSeconds) by type, resourceGroup",
        {},
    ),
    # "arg_max(ExprToMaximize, ExprToReturn...)": the latest state per VM.
    "summarize-arg-max": (
        "maintenanceresources | extend vm = tostring(properties.Resources[0])"
        " | summarize arg_max(properties.EventStatus, vm, properties.EventType) by vm"
        " | order by vm asc",
        {},
    ),
    # "top operator": the first N rows sorted by the expression.
    "top": (
        "maintenanceresources | top 2 by tostring(properties.Resources[0]) asc"
        " | project vm = properties.Resources[0], properties.EventStatus",
        {},
    ),
    # "extend operator": columns added, the row's own kept.
    "extend": (
        "maintenanceresources | extend status = tolower(tostring(properties.EventStatus)),"
        " vms = array_length(properties.Resources) | project status, vms, resourceGroup"
        " | order by status asc",
        {},
    ),
    # "distinct operator": one row per distinct combination.
    "distinct": ("maintenanceresources | distinct resourceGroup, type", {}),
    # "project-away operator": every column but those named.
    "project-away": (
        "maintenanceresources | where properties.Resources[0] == 'solo'"
        " | project-away id, name, properties, tenantId",
        {},
    ),
    # "String operators": has (a whole term), !has, startswith, endswith, in~, !in.
    "string-operators": (
        "maintenanceresources | where properties.Description has 'RESTARTED'"
        " and properties.Description !has 'restart' and resourceGroup startswith 'OPS'"
        " and resourceGroup endswith '-RG' and properties.EventStatus in~ ('scheduled', 'canceled')"
        " and properties.EventType !in ('Freeze')"
        " | project vm = tostring(properties.Resources[0]) | order by vm asc",
        {},
    ),
    # "mv-expand operator": a row per element of the array.
    "mv-expand": (
        "maintenanceresources | mv-expand vm = properties.Resources"
        " | project vm = tostring(vm), properties.EventStatus | order by vm asc",
        {},
    ),
    # The resources table: the fleet's VMs and scale sets.
    "resources": (
        "resources | project name, type, sku, zones, properties.hardwareProfile.vmSize"
        " | order by name asc",
        {},
    ),
    # "join operator": each event beside the resource it is filed under, on the resource id.
    "join": (
        f"maintenanceresources | extend resourceId = {RESOURCE_ID}"
        " | join kind=inner (resources | project resourceId = tolower(id), name, type)"
        " on resourceId | project resource = name1, resourceType = type1,"
        " status = properties.EventStatus | order by resource asc",
        {},
    ),
    # The same answer as a table (resultFormat table): columns with types, then rows.
    "summarize-table": (
        "maintenanceresources | summarize count() by resourceGroup",
        {"resultFormat": "table"},
    ),
}


@pytest.fixture(scope="module")
def platform() -> Iterator[ForewarnPlatform]:
    """The table of test_resource_graph.py, and a second event of solo's, Started."""
    platform = ForewarnPlatform(fleet=FLEET, start=START, seed=4)
    try:
        platform.restart("solo")  # auto-approved: Started, then Completed
        platform.advance(timedelta(minutes=11))
        platform.restart("db0")  # Scheduled
        (cancelled,) = platform.restart("web_0")
        platform.cancel(cancelled)
        platform.restart("quiet")  # publishes nothing
        platform.restart("solo")  # auto-approved: Started
        yield platform
    finally:
        platform.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_answer_is_the_golden_one_and_the_sdk_reads_it(
    platform: ForewarnPlatform, name: str
) -> None:
    text, options = CASES[name]
    with platform.control_client() as http:
        answer = http.post(URL, json={"query": text, "options": options})
    assert answer.status_code == 200, answer.text
    pretty = json.dumps(answer.json(), indent=2, sort_keys=False).encode() + b"\n"
    path = GOLDEN / f"resourcegraph-{name}.json"
    if REGENERATE:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(pretty)
    assert path.exists(), f"{path} is missing: FOREWARN_REGENERATE_GOLDEN=1 makes it"
    assert pretty.decode() == path.read_text()
    parsed = QueryResponse.deserialize(answer.json())
    assert parsed.total_records == answer.json()["totalRecords"] > 0
    assert parsed.count == answer.json()["count"]
    assert parsed.result_truncated == "false"
    assert parsed.data == answer.json()["data"]


def test_every_golden_file_has_its_case() -> None:
    made = {path.name for path in GOLDEN.glob("resourcegraph-*.json")}
    assert made == {f"resourcegraph-{name}.json" for name in CASES}
