"""Resource Graph's ``maintenanceresources`` table, queried with the KQL subset.

Sources: learn.microsoft.com, "Scheduled Events in Azure Resource Graph": the table
``maintenanceresources``, type ``microsoft.maintenance/scheduledevents``, "Every time a
scheduled event changes state it creates an update its entry in the table", the row's fields
(ID, Name, Type, TenantID, Location, Resource Group, Subscription ID, Properties, Zones) and its
two queries; Resource Graph's paging (``$top``, ``$skipToken``, learn.microsoft.com "Working
with large Azure resource data sets").
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from azure_support import FLEET, START, SUBSCRIPTION

from forewarn.resourcegraph.kql import MAX_DEPTH, MAX_QUERY_CHARS
from forewarn.testing import ForewarnPlatform, MakePlatform

URL = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
FIRST_QUERY = """maintenanceresources
| where type == "microsoft.maintenance/scheduledevents"
"""
SECOND_QUERY = """Maintenanceresources
| where type == "microsoft.maintenance/scheduledevents"
| sort by tostring(properties.EventStatus), tostring(properties.EventId) asc
| project resourceGroup, zones, properties.EventStatus, properties.NotBefore, properties.Resources, properties.EventId, properties.TargetResourceId, properties.EventType, properties.Description
"""


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    platform = make_forewarn_platform(fleet=FLEET, start=START, seed=4)
    platform.restart("solo")  # auto-approved: Started, then Completed
    platform.advance(timedelta(minutes=11))
    platform.restart("db0")  # Scheduled
    (cancelled,) = platform.restart("web_0")
    platform.cancel(cancelled)
    platform.restart("quiet")  # publishes nothing
    return platform


def query(platform: ForewarnPlatform, text: str, **more: Any) -> httpx.Response:
    with platform.control_client() as http:
        return http.post(URL, json={"query": text, **more})


def test_the_first_query_lists_every_published_event_with_the_pages_columns(
    platform: ForewarnPlatform,
) -> None:
    answer = query(platform, FIRST_QUERY)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["totalRecords"], body["count"], body["resultTruncated"]) == (3, 3, "false")
    assert "$skipToken" not in body
    statuses = {row["properties"]["EventStatus"] for row in body["data"]}
    assert statuses == {"Completed", "Scheduled", "Canceled"}
    solo = next(row for row in body["data"] if row["properties"]["Resources"] == ["solo"])
    assert list(solo) == [
        "id", "name", "type", "tenantId", "location", "resourceGroup", "subscriptionId",
        "properties", "zones",
    ]  # fmt: skip
    event_id = solo["properties"]["EventId"]
    assert solo["id"] == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/Ops-RG/providers/Microsoft.Compute/"
        f"virtualMachines/solo/providers/microsoft.maintenance/scheduledevents/{event_id}"
    )
    assert (solo["name"], solo["type"], solo["location"]) == (
        event_id,
        "microsoft.maintenance/scheduledevents",
        "eastus",
    )
    assert (solo["resourceGroup"], solo["subscriptionId"], solo["zones"]) == (
        "ops-rg",
        SUBSCRIPTION,
        ["2"],
    )
    assert solo["tenantId"] == "72f988bf-86f1-41af-91ab-2d7cd011db47"
    assert solo["properties"]["ScheduledEventApiVersion"] == "2020-07-01"
    assert solo["properties"]["NotBefore"] == ""


def test_the_second_query_sorts_and_projects(platform: ForewarnPlatform) -> None:
    body = query(platform, SECOND_QUERY).json()
    data = body["data"]
    # descending by status (KQL's default), then ascending by id
    assert [row["properties_EventStatus"] for row in data] == ["Scheduled", "Completed", "Canceled"]
    assert list(data[0]) == [
        "resourceGroup", "zones", "properties_EventStatus", "properties_NotBefore",
        "properties_Resources", "properties_EventId", "properties_TargetResourceId",
        "properties_EventType", "properties_Description",
    ]  # fmt: skip
    assert data[0]["properties_TargetResourceId"] is None  # not a field of the payload
    assert data[0]["properties_Resources"] == ["db0"]


def test_everyday_filters(platform: ForewarnPlatform) -> None:
    def ids(text: str) -> list[Any]:
        answer = query(platform, text)
        assert answer.status_code == 200, answer.text
        data: list[Any] = answer.json()["data"]
        return data

    base = "maintenanceresources | "
    assert len(ids(base + "where properties.EventStatus =~ 'completed'")) == 1
    assert len(ids(base + "where properties.EventStatus in ('Scheduled', 'Canceled')")) == 2
    assert len(ids(base + "where properties.EventStatus !in ('Scheduled', 'Canceled')")) == 1
    assert (
        len(
            ids(
                base
                + "where properties.EventStatus != 'Completed' and properties.EventType == 'Reboot'"
            )
        )
        == 2
    )
    assert (
        len(ids(base + "where properties.Resources[0] == 'solo' or resourceGroup == 'nope'")) == 1
    )
    assert len(ids(base + "where tostring(properties.Resources) contains 'web_'")) == 1
    assert ids(base + "count") == [{"Count": 3}]
    assert len(ids(base + "order by name asc | take 2")) == 2
    assert ids(
        base
        + "where properties.DurationInSeconds < 0 | project d = properties.DurationInSeconds | limit 1"
    ) == [{"d": -1}]


def test_paging_with_skip_tokens(platform: ForewarnPlatform) -> None:
    first = query(platform, FIRST_QUERY, options={"$top": 2}).json()
    assert (first["totalRecords"], first["count"]) == (3, 2)
    token = first["$skipToken"]
    second = query(platform, FIRST_QUERY, options={"$top": 2, "$skipToken": token}).json()
    assert second["count"] == 1
    assert "$skipToken" not in second
    names = {row["name"] for row in first["data"] + second["data"]}
    assert len(names) == 3
    other = query(platform, FIRST_QUERY + "| take 3", options={"$skipToken": token})
    assert other.status_code == 400  # a token is for the query that gave it


def test_table_format_and_subscription_scope(platform: ForewarnPlatform) -> None:
    table = query(
        platform, FIRST_QUERY + "| project name, zones", options={"resultFormat": "table"}
    )
    data = table.json()["data"]
    assert [c["name"] for c in data["columns"]] == ["name", "zones"]
    assert len(data["rows"]) == 3
    assert (
        query(platform, FIRST_QUERY, subscriptions=["22222222-2222-2222-2222-222222222222"]).json()[
            "totalRecords"
        ]
        == 0
    )


@pytest.mark.parametrize(
    ("text", "code", "named"),
    [
        ("maintenanceresources | union resources", "UnsupportedOperator", "union"),
        ("maintenanceresources | make-series count() on x", "UnsupportedOperator", "make-series"),
        (
            "maintenanceresources | join kind=fullouter (resources) on id",
            "UnsupportedOperator",
            "fullouter",
        ),
        ("maintenanceresources | where count() > 1", "UnsupportedFunction", "count"),
        ("maintenanceresources | summarize tolower(name)", "UnsupportedOperator", "summarize"),
        ("maintenanceresources | extend x = split(name)", "InvalidArguments", "split"),
        ("maintenanceresources | where __import__('os').system('true')", "ParserFailure", "("),
        ("maintenanceresources | project-rename a = b", "UnsupportedOperator", "project-rename"),
        ("maintenanceresources | where eval('1') == 1", "UnsupportedFunction", "eval"),
        ("maintenanceresources; .drop table x", "ParserFailure", ";"),
        ("securityresources | take 1", "UnknownTable", "securityresources"),
        ("maintenanceresources | where type == ", "ParserFailure", ""),
        (
            "maintenanceresources | where "
            + "(" * (MAX_DEPTH + 1)
            + "true"
            + ")" * (MAX_DEPTH + 1),
            "QueryTooLarge",
            "",
        ),
        (
            "maintenanceresources | where name == '" + "x" * MAX_QUERY_CHARS + "'",
            "QueryTooLarge",
            "",
        ),
    ],
)
def test_hostile_or_unsupported_queries_are_clear_400s_in_arms_envelope(
    platform: ForewarnPlatform, text: str, code: str, named: str
) -> None:
    before = query(platform, FIRST_QUERY).json()
    answer = query(platform, text)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "BadRequest"
    assert error["details"][0]["code"] == "InvalidQuery"
    assert error["details"][1]["code"] == code
    assert named in error["details"][1]["token"]
    assert query(platform, FIRST_QUERY).json() == before  # nothing changed


def test_bad_requests_are_refused_before_any_query(platform: ForewarnPlatform) -> None:
    with platform.control_client() as http:
        missing = http.post("/providers/Microsoft.ResourceGraph/resources", json={"query": "x"})
        assert missing.json()["error"]["code"] == "MissingApiVersionParameter"
        no_query = http.post(URL, json={"subscriptions": []})
        assert no_query.status_code == 400
        assert "query" in no_query.json()["error"]["message"]
        too_many = http.post(URL, json={"query": FIRST_QUERY, "options": {"$top": 5000}})
        assert too_many.status_code == 400


def test_a_refusal_says_where_as_resource_graph_does(platform: ForewarnPlatform) -> None:
    """Resource Graph's ``InvalidQuery`` error carries a detail with the ``code``, the
    ``message``, and for a parse failure the ``line`` and ``characterPositionInLine`` and the
    ``token`` (learn.microsoft.com, Azure Resource Graph "Troubleshoot errors", and the
    ``ErrorDetails`` of the REST API); a bound passed has no place, and says line 1."""
    bad = query(platform, "maintenanceresources\n| where name ==== 'x'").json()["error"]
    assert bad["details"][0] == {
        "code": "InvalidQuery",
        "message": "Query is invalid. Please refer to the documentation for the Azure Resource "
        "Graph service and fix the error before retrying.",
    }
    detail = bad["details"][1]
    assert (detail["line"], detail["characterPositionInLine"], detail["token"]) == (
        2,
        16,
        "==",
    )  # the second ==
    assert "line 2" in detail["message"]
    assert detail["message"] in bad["message"]
    long = query(platform, "maintenanceresources | where name == '" + "x" * 9000 + "'")
    detail = long.json()["error"]["details"][1]
    assert (detail["line"], detail["characterPositionInLine"]) == (1, 0)
    assert "8192 characters" in detail["message"]
