"""The official ``azure-mgmt-resourcegraph`` client runs the page's two queries against a real
``forewarn serve``, over TLS with a certificate from a local CA (``trustme``): the client
refuses to send a bearer token over plain HTTP ("Bearer token authentication is not permitted
for non-TLS protected (non-https) URLs.").

Sources: learn.microsoft.com, "Scheduled Events in Azure Resource Graph" (the two queries);
the control token is the bearer credential, as ARM takes an AAD token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.mgmt.resourcegraph import ResourceGraphClient
from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions
from azure_support import StaticToken, serving_over_tls
from e2e_support import ForewarnServer

from .test_resource_graph import FIRST_QUERY, SECOND_QUERY
from .test_resource_graph_kql import RESOURCE_ID

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ForewarnServer, str, Path]]:
    with serving_over_tls(tmp_path_factory.mktemp("arg-tls")) as (server, base, ca):
        for vm in ("solo", "db0", "web_0"):
            assert server.control.post(f"/vms/{vm}/restart").status_code == 200
        server.advance(11 * 60)  # solo's auto-approved reboot is over: Completed
        yield server, base, ca


def client(base: str, ca: Path, token: str) -> ResourceGraphClient:
    return ResourceGraphClient(StaticToken(token), base_url=base, connection_verify=str(ca))


def test_the_sdk_runs_the_pages_first_query(tls: tuple[ForewarnServer, str, Path]) -> None:
    _, base, ca = tls
    with client(base, ca, os.environ["FOREWARN_TOKEN"]) as graph:
        answer = graph.resources(QueryRequest(query=FIRST_QUERY))
    assert answer.total_records == 3
    assert answer.result_truncated == "false"
    data: list[dict[str, Any]] = answer.data  # type: ignore[assignment]
    statuses = sorted(row["properties"]["EventStatus"] for row in data)
    assert statuses == ["Completed", "Scheduled", "Scheduled"]


def test_the_sdk_runs_the_pages_second_query_and_pages(
    tls: tuple[ForewarnServer, str, Path],
) -> None:
    _, base, ca = tls
    with client(base, ca, os.environ["FOREWARN_TOKEN"]) as graph:
        first = graph.resources(
            QueryRequest(query=SECOND_QUERY, options=QueryRequestOptions(top=2))
        )
        assert (first.total_records, first.count) == (3, 2)
        rest = graph.resources(
            QueryRequest(
                query=SECOND_QUERY, options=QueryRequestOptions(top=2, skip_token=first.skip_token)
            )
        )
    rows: list[dict[str, Any]] = [*first.data, *rest.data]  # type: ignore[list-item]
    assert [row["properties_EventStatus"] for row in rows] == [
        "Scheduled",
        "Scheduled",
        "Completed",
    ]
    ids = [row["properties_EventId"] for row in rows[:2]]
    assert ids == sorted(ids)


def test_the_sdk_reads_arms_error_envelope(tls: tuple[ForewarnServer, str, Path]) -> None:
    _, base, ca = tls
    graph = client(base, ca, os.environ["FOREWARN_TOKEN"])
    with graph, pytest.raises(HttpResponseError) as raised:
        graph.resources(QueryRequest(query="maintenanceresources | union resources"))
    assert raised.value.status_code == 400
    assert raised.value.error is not None
    assert raised.value.error.code == "BadRequest"
    assert "union" in str(raised.value)


def test_a_wrong_bearer_token_is_refused(tls: tuple[ForewarnServer, str, Path]) -> None:
    _, base, ca = tls
    with client(base, ca, "not-the-token") as graph, pytest.raises(ClientAuthenticationError):
        graph.resources(QueryRequest(query=FIRST_QUERY))


def test_the_sdk_runs_a_dashboards_summarize_and_join(
    tls: tuple[ForewarnServer, str, Path],
) -> None:
    """The wider KQL (test_resource_graph_kql.py) through the client's own ``resources``:
    counts by status, and each event beside the VM or scale set of ``resources`` it is filed
    under, joined on the resource id; the table format read into the SDK's ``Table``."""
    _, base, ca = tls
    with client(base, ca, os.environ["FOREWARN_TOKEN"]) as graph:
        counts = graph.resources(
            QueryRequest(
                query="maintenanceresources | summarize count() by "
                "status = tostring(properties.EventStatus) | order by status asc"
            )
        )
        joined = graph.resources(
            QueryRequest(
                query=f"maintenanceresources | extend resourceId = {RESOURCE_ID}"
                " | join kind=inner (resources | project resourceId = tolower(id), type)"
                " on resourceId | summarize count() by type1 | order by type1 asc",
                options=QueryRequestOptions(result_format="table"),
            )
        )
    data: list[dict[str, Any]] = counts.data  # type: ignore[assignment]
    assert data == [
        {"status": "Completed", "count_": 1},
        {"status": "Scheduled", "count_": 2},
    ]
    table: dict[str, Any] = joined.data  # type: ignore[assignment]
    assert [column["name"] for column in table["columns"]] == ["type1", "count_"]
    assert table["rows"] == [
        ["microsoft.compute/virtualmachines", 2],
        ["microsoft.compute/virtualmachinescalesets", 1],
    ]
