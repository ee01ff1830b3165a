"""The rules of Resource Graph's paging and of the KQL operators' meanings, one test per rule.

Each test quotes its source: learn.microsoft.com, Azure Resource Graph "Working with large Azure
resource data sets" (governance/resource-graph/concepts/work-with-data) for ``$top``, ``$skip``
and ``$skipToken``; the Kusto Query Language reference (azure/data-explorer/kusto/query/) for
each operator. The table holds seven finished events of one VM plus the fixture's others, so
that paging goes over several pages.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from azure_support import FLEET, START

from forewarn.resourcegraph import query as query_module
from forewarn.testing import ForewarnPlatform

URL = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
SOLO_RESTARTS = 7


@pytest.fixture(scope="module")
def platform() -> Iterator[ForewarnPlatform]:
    """One table for the module's tests, which only read it."""
    platform = ForewarnPlatform(fleet=FLEET, start=START, seed=11)
    try:
        for _ in range(SOLO_RESTARTS):  # auto-approved: Started, then Completed
            platform.restart("solo")
            platform.advance(timedelta(minutes=11))
        platform.restart("db0")  # Scheduled
        (cancelled,) = platform.restart("web_0")
        platform.cancel(cancelled)
        yield platform
    finally:
        platform.close()


def post(platform: ForewarnPlatform, text: str, **more: Any) -> httpx.Response:
    with platform.control_client() as http:
        return http.post(URL, json={"query": text, **more})


def rows(platform: ForewarnPlatform, text: str, **more: Any) -> list[dict[str, Any]]:
    answer = post(platform, text, **more)
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


ALL = "maintenanceresources | sort by name asc | project name"


def test_skip_tokens_walk_every_page_once_in_order(platform: ForewarnPlatform) -> None:
    """ "When it's necessary to break a result set into smaller sets of records for processing
    or because a result set would exceed the maximum allowed value of 1000 returned records,
    use paging. The REST API QueryResponse provides values that indicate a results set was
    broken up: resultTruncated and $skipToken." (work-with-data, "Paging results"): following
    each page's token over four pages gives every row once, in the query's order."""
    everything = [row["name"] for row in rows(platform, ALL)]
    assert len(everything) == SOLO_RESTARTS + 2
    pages: list[list[str]] = []
    options: dict[str, Any] = {"$top": 2}
    for _ in range(len(everything)):  # a token that never ends fails, rather than hangs
        answer = post(platform, ALL, options=options).json()
        assert answer["totalRecords"] == len(everything)
        pages.append([row["name"] for row in answer["data"]])
        if "$skipToken" not in answer:
            break
        options = {"$top": 2, "$skipToken": answer["$skipToken"]}
    assert [len(page) for page in pages] == [2, 2, 2, 2, 1]
    assert [name for page in pages for name in page] == everything


def test_skip_jumps_over_the_first_records(platform: ForewarnPlatform) -> None:
    """ "The next option for working with large data sets is the Skip control. This control
    allows your query to jump over or skip the defined number of records before returning the
    results." (work-with-data, "Skipping records"); the page's token then resumes after it."""
    everything = [row["name"] for row in rows(platform, ALL)]
    answer = post(platform, ALL, options={"$skip": 3, "$top": 2}).json()
    assert [row["name"] for row in answer["data"]] == everything[3:5]
    rest = post(platform, ALL, options={"$top": 100, "$skipToken": answer["$skipToken"]}).json()
    assert [row["name"] for row in rest["data"]] == everything[5:]


def test_sort_without_a_direction_is_descending_with_nulls_last(
    platform: ForewarnPlatform,
) -> None:
    """ "asc sorts into ascending order, low to high. Default is desc, descending high to
    low." and "nulls first will place the null values at the beginning and nulls last will
    place the null values at the end. Default for asc is nulls first. Default for desc is
    nulls last." (Kusto "sort operator", Parameters). Only solo has a zone: its rows come
    first descending, last ascending."""
    base = "maintenanceresources | project zone = zones[0], name"
    unsaid = [row["zone"] for row in rows(platform, base + " | sort by zone")]
    assert unsaid == ["2"] * SOLO_RESTARTS + [None, None]
    desc = [row["zone"] for row in rows(platform, base + " | sort by zone desc")]
    assert desc == unsaid
    asc = [row["zone"] for row in rows(platform, base + " | sort by zone asc")]
    assert asc == [None, None] + ["2"] * SOLO_RESTARTS
    told = [row["zone"] for row in rows(platform, base + " | order by zone asc nulls last")]
    assert told == ["2"] * SOLO_RESTARTS + [None, None]


def test_contains_and_startswith_ignore_case(platform: ForewarnPlatform) -> None:
    """``contains``: "RHS occurs as a subsequence of LHS", case-insensitive, ``contains_cs``
    the case-sensitive one; ``startswith`` likewise (Kusto "String operators", "Operators on
    strings": ``"FabriKam" contains "BRik"`` is true)."""
    total = SOLO_RESTARTS + 2
    assert len(rows(platform, "maintenanceresources | where resourceGroup contains 'OPS-R'")) == (
        total
    )
    assert len(rows(platform, "maintenanceresources | where resourceGroup startswith 'OpS'")) == (
        total
    )
    assert rows(platform, "maintenanceresources | where resourceGroup contains 'nope'") == []


def _forged(token: str, **changes: Any) -> str:
    """A page's own token with ``changes`` made to what it holds."""
    held = json.loads(base64.urlsafe_b64decode(token.encode()))
    return base64.urlsafe_b64encode(json.dumps({**held, **changes}).encode()).decode()


@pytest.mark.parametrize("skip", [True, 1.0, -1, "2", None])
def test_a_skip_token_not_holding_an_offset_is_refused(
    platform: ForewarnPlatform, skip: Any
) -> None:
    """ "$skipToken ... the token to continue from" (work-with-data, "Paging results"): only a
    token a page gave resumes; one whose offset is not a whole number of rows (``true``, which
    Python would read as 1) is a 400, not a page from somewhere."""
    token = post(platform, ALL, options={"$top": 2}).json()["$skipToken"]
    answer = post(platform, ALL, options={"$top": 2, "$skipToken": _forged(token, skip=skip)})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["details"][1]["code"] == "InvalidSkipToken"


def test_a_token_resumes_at_the_offset_it_holds_the_first_row_included(
    platform: ForewarnPlatform,
) -> None:
    """A token holding offset 0 is the first page again; one holding 3 resumes at the fourth
    row (work-with-data, "Paging results": the token says where the next page starts)."""
    everything = [row["name"] for row in rows(platform, ALL)]
    token = post(platform, ALL, options={"$top": 2}).json()["$skipToken"]
    for offset in (0, 3):
        options = {"$top": 2, "$skipToken": _forged(token, skip=offset)}
        assert [row["name"] for row in rows(platform, ALL, options=options)] == everything[
            offset : offset + 2
        ]


@pytest.mark.parametrize(
    "options", [{"$skiptoken": "x"}, {"top": 2}, {"$first": 2}, {"allowPartialScopes": "yes"}]
)
def test_unknown_or_mistyped_options_are_refused(
    platform: ForewarnPlatform, options: dict[str, Any]
) -> None:
    """``QueryRequestOptions`` has ``$skipToken``, ``$top``, ``$skip``, ``resultFormat``,
    ``allowPartialScopes`` and ``authorizationScopeFilter`` (Resource Graph REST API,
    "Resources - Resources", QueryRequestOptions): a key outside them is a 400 naming it, not
    an option silently not applied."""
    answer = post(platform, ALL, options=options)
    assert answer.status_code == 400, answer.text
    assert next(iter(options)) in answer.json()["error"]["message"]


def test_the_options_azure_documents_are_taken(platform: ForewarnPlatform) -> None:
    """The same page's keys are all accepted; the scope ones change nothing here."""
    options = {
        "$top": 3,
        "$skip": 1,
        "resultFormat": "objectArray",
        "allowPartialScopes": True,
        "authorizationScopeFilter": "AtScopeAndBelow",
    }
    everything = [row["name"] for row in rows(platform, ALL)]
    assert [row["name"] for row in rows(platform, ALL, options=options)] == everything[1:4]


def test_a_query_past_the_cost_bound_is_a_400_naming_it(
    platform: ForewarnPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ours (docs/azure-side.md, "Resource Graph"): a query whose evaluations (rows times
    terms) would pass the bound is refused before it runs, naming the bound and the operator,
    in ARM's envelope; the table is unchanged. The bound is lowered here so that this small
    table reaches it."""
    before = rows(platform, ALL)
    monkeypatch.setattr(query_module, "MAX_COST", 50)
    answer = post(platform, "maintenanceresources | where " + " or ".join(["isnull(name)"] * 5))
    assert answer.status_code == 400, answer.text
    detail = answer.json()["error"]["details"][1]
    assert (detail["code"], detail["token"]) == ("QueryTooExpensive", "where")
    assert "limit of 50 evaluations" in detail["message"]
    monkeypatch.undo()
    assert rows(platform, ALL) == before
