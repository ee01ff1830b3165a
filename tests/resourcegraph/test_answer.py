"""One Resource Graph request answered, in process (:func:`forewarn.resourcegraph.answer.execute`):
paging, the page's token, the subscriptions' scope, the formats and the refusals' envelope.

Sources: learn.microsoft.com, Azure Resource Graph "Working with large Azure resource data
sets" (governance/resource-graph/concepts/work-with-data) for ``$top``, ``$skip`` and
``$skipToken``; "Troubleshoot errors" and the REST API's ``QueryResponse``, ``ErrorDetails``
and ``ColumnDataType``; docs/azure-side.md, "Resource Graph", for what is ours.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from forewarn.resourcegraph.answer import QueryJob, execute
from forewarn.resourcegraph.query import MAX_COST

SUBSCRIPTION = "1111aaaa-1111-1111-1111-111111111111"
OTHER = "2222bbbb-2222-2222-2222-222222222222"
EVENTS: list[dict[str, Any]] = [
    {"name": f"e{i}", "subscriptionId": SUBSCRIPTION if i % 3 else OTHER.upper(), "n": i}
    for i in range(7)
]
RESOURCES: list[dict[str, Any]] = [{"name": "vm", "subscriptionId": SUBSCRIPTION, "size": "é"}]
ALL = "maintenanceresources | project name"
INVALID = (
    "Query is invalid. Please refer to the documentation for the Azure Resource Graph service "
    "and fix the error before retrying."
)


def answer(
    query: str = ALL,
    *,
    top: int = 100,
    skip: int = 0,
    token: str | None = None,
    subscriptions: tuple[str, ...] | None = None,
    result_format: str = "objectArray",
    events: list[dict[str, Any]] | None = None,
) -> tuple[int, dict[str, Any]]:
    job = QueryJob(
        query=query,
        subscriptions=subscriptions,
        top=top,
        skip=skip,
        skip_token=token,
        result_format=result_format,
        events=json.dumps(EVENTS if events is None else events).encode(),
        resources=json.dumps(RESOURCES).encode(),
    )
    status, body = execute(job)
    decoded: dict[str, Any] = json.loads(body)
    return status, decoded


def names(body: dict[str, Any]) -> list[str]:
    return [row["name"] for row in body["data"]]


def token_of(skip: Any, query: str | None = None) -> str:
    """A token as this server writes one, with ``skip`` and the digest of a real one."""
    _, body = answer(query or ALL, top=1)
    real = json.loads(base64.urlsafe_b64decode(body["$skipToken"]))
    text = json.dumps({"skip": skip, "query": real["query"]})
    return base64.urlsafe_b64encode(text.encode()).decode()


def test_a_page_is_at_most_top_rows_and_its_token_resumes_after_it() -> None:
    """ "The REST API QueryResponse provides values that indicate a results set was broken up:
    resultTruncated and $skipToken" (work-with-data, "Paging results"): each page has at most
    ``$top`` rows, ``totalRecords`` all of them, ``count`` the page's; following the tokens
    gives every row once, in order, and the last page has no token."""
    status, first = answer(top=3)
    assert status == 200
    assert first["totalRecords"] == 7
    assert (first["count"], names(first)) == (3, ["e0", "e1", "e2"])
    assert (first["facets"], first["resultTruncated"]) == ([], "false")
    pages = [names(first)]
    token = first["$skipToken"]
    for _ in range(3):
        status, page = answer(top=3, token=token)
        assert (status, page["totalRecords"], page["count"]) == (200, 7, len(page["data"]))
        pages.append(names(page))
        if "$skipToken" not in page:
            break
        token = page["$skipToken"]
    assert pages == [["e0", "e1", "e2"], ["e3", "e4", "e5"], ["e6"]]


def test_no_token_when_the_page_ends_at_the_last_row() -> None:
    """ "$skipToken" is given only while records remain (work-with-data, "Paging results"):
    a page ending exactly at the last row has none; one row short of it has one."""
    assert "$skipToken" not in answer(top=7)[1]
    assert "$skipToken" not in answer(top=3, skip=4)[1]
    assert "$skipToken" in answer(top=3, skip=3)[1]
    assert "$skipToken" in answer(top=6)[1]


def test_skip_jumps_over_rows_and_the_token_resumes_after_the_page() -> None:
    """ "This control allows your query to jump over or skip the defined number of records
    before returning the results" (work-with-data, "Skipping records"); the page's token
    holds where the next page starts, ``$skip`` plus ``$top``."""
    _, page = answer(top=2, skip=3)
    assert names(page) == ["e3", "e4"]
    _, rest = answer(top=100, token=page["$skipToken"])
    assert names(rest) == ["e5", "e6"]
    _, past = answer(top=2, skip=9)
    assert (past["totalRecords"], past["count"], past["data"]) == (7, 0, [])


@pytest.mark.parametrize("skip", [0, 2])
def test_a_token_is_read_for_its_offset_the_first_row_included(skip: int) -> None:
    """[ours] (docs/azure-side.md, "Resource Graph"): a token holds where its page starts,
    row 0 included, whatever ``$skip`` the request with it says."""
    _, page = answer(top=2, skip=5, token=token_of(skip))
    assert names(page) == [f"e{skip}", f"e{skip + 1}"]


REFUSED_TOKEN = {
    "error": {
        "code": "BadRequest",
        "message": "The $skipToken is not one this query gave.",
        "details": [
            {"code": "InvalidQuery", "message": INVALID},
            {"code": "InvalidSkipToken", "message": "$skipToken is invalid"},
        ],
    }
}


@pytest.mark.parametrize(
    "token",
    [
        "not base64 !",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"skip": 1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"query": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"skip": 1, "query": "x"}).encode()).decode(),
    ],
)
def test_a_token_this_server_did_not_write_is_refused(token: str) -> None:
    """docs/azure-side.md, "Resource Graph": "a $skipToken that is not one the same query's
    page gave" is a 400 in ARM's error envelope."""
    assert answer(top=2, token=token) == (400, REFUSED_TOKEN)


@pytest.mark.parametrize("skip", [True, -1, 1.0, "1", None])
def test_a_token_whose_offset_is_not_a_row_is_refused(skip: Any) -> None:
    """[ours] (docs/azure-side.md, "Resource Graph"): a token's offset is a whole number of
    rows, 0 or more; anything else in a token of this query is refused alike."""
    assert answer(top=2, token=token_of(skip)) == (400, REFUSED_TOKEN)


def test_a_token_is_for_its_query_and_subscriptions_only() -> None:
    """docs/azure-side.md, "Resource Graph": a token is one "the same query's page gave":
    another query, or the same query over other subscriptions, refuses it; the same
    subscriptions in another order or case take it."""
    scope = (SUBSCRIPTION, OTHER)
    _, page = answer(top=1, subscriptions=scope)
    token = page["$skipToken"]
    assert answer(top=1, token=token, subscriptions=(OTHER, SUBSCRIPTION))[0] == 200
    assert answer(ALL + " | take 5", top=1, token=token, subscriptions=scope)[0] == 400
    assert answer(top=1, token=token, subscriptions=(SUBSCRIPTION,))[0] == 400
    assert answer(top=1, token=token)[0] == 400
    _, unscoped = answer(top=1)
    assert answer(top=1, token=unscoped["$skipToken"], subscriptions=())[0] == 200


def test_subscriptions_scope_the_rows_without_regard_to_case() -> None:
    """The request's ``subscriptions`` are the ones queried (REST API "Resources",
    ``QueryRequest.subscriptions``); ids are GUIDs, compared without regard to case; none
    given, every row."""
    _, mine = answer(subscriptions=(SUBSCRIPTION.upper(),))
    assert names(mine) == ["e1", "e2", "e4", "e5"]
    _, other = answer(subscriptions=(OTHER,))
    assert names(other) == ["e0", "e3", "e6"]
    assert answer(subscriptions=())[1]["totalRecords"] == 7
    _, joined = answer(
        "resources | project name", subscriptions=(OTHER,), events=[]
    )  # the resources table is scoped alike
    assert joined["totalRecords"] == 0


def test_the_table_format_names_each_column_and_its_type() -> None:
    """``resultFormat: table``: ``data`` is ``columns`` (``name``, ``type``: REST API
    ``ColumnDataType``) and ``rows`` of values in the columns' order; a column some rows lack
    is null in them; ``objectArray`` is the rows as objects (REST API "Resources",
    ``ResultFormat``)."""
    rows: list[dict[str, Any]] = [
        {"name": "a", "subscriptionId": SUBSCRIPTION, "x": 1.5},
        {"name": "b", "subscriptionId": SUBSCRIPTION, "n": 2, "ok": True},
    ]
    query = "maintenanceresources | project-away subscriptionId"
    _, table = answer(query, result_format="table", events=rows)
    assert table["data"] == {
        "columns": [
            {"name": "name", "type": "string"},
            {"name": "x", "type": "number"},
            {"name": "n", "type": "integer"},
            {"name": "ok", "type": "boolean"},
        ],
        "rows": [["a", 1.5, None, None], ["b", None, 2, True]],
    }
    _, objects = answer(query, events=rows)
    assert objects["data"] == [{"name": "a", "x": 1.5}, {"name": "b", "n": 2, "ok": True}]


def test_the_body_is_compact_utf8_json() -> None:
    """The answer is JSON (REST API "Resources": ``application/json``), written compactly and
    in UTF-8, not escaped to ASCII [ours]."""
    job = QueryJob("resources | project size", None, 100, 0, None, "objectArray", b"[]",
                   json.dumps(RESOURCES).encode())  # fmt: skip
    status, body = execute(job)
    assert status == 200
    assert (
        body
        == (
            '{"totalRecords":1,"count":1,"data":[{"size":"é"}],"facets":[],"resultTruncated":"false"}'
        ).encode()
    )


def test_a_query_refused_by_the_parser_says_where() -> None:
    """ "Troubleshoot errors": the ``InvalidQuery`` error's details name the ``code``, the
    ``message``, the ``line`` and ``characterPositionInLine`` and the ``token``; a bound
    passed has no place and says line 1, column 0 [ours]; the error's message is the
    generic one and the detail's."""
    status, body = answer("maintenanceresources\n| where name ==== 'x'")
    assert status == 400
    error = body["error"]
    detail = {
        "code": "ParserFailure",
        "message": "unexpected '==' at line 2, column 16: not part of the supported query language",
        "line": 2,
        "characterPositionInLine": 16,
        "token": "==",
    }
    assert error == {
        "code": "BadRequest",
        "message": f"{INVALID} {detail['message']}",
        "details": [{"code": "InvalidQuery", "message": INVALID}, detail],
    }
    _, long = answer("maintenanceresources | where name == '" + "x" * 9000 + "'")
    assert long["error"]["details"][1] == {
        "code": "QueryTooLarge",
        "message": "the query is longer than 8192 characters",
        "line": 1,
        "characterPositionInLine": 0,
        "token": "",
    }


def test_a_query_refused_while_it_runs_names_the_code_and_part() -> None:
    """ "Troubleshoot errors": the details name the ``code`` and the part; a query refused as
    it runs (an unknown table, a bound on its work [ours]) has no place in the text."""
    status, body = answer("securityresources | take 1")
    assert status == 400
    message = (
        "the table 'securityresources' is not known here; this server answers "
        "maintenanceresources, resources"
    )
    assert body["error"] == {
        "code": "BadRequest",
        "message": f"{INVALID} {message}",
        "details": [
            {"code": "InvalidQuery", "message": INVALID},
            {"code": "UnknownTable", "message": message, "token": "securityresources"},
        ],
    }
    terms = " or ".join(["n == 1"] * 800)  # 3 terms each, "or" one more: 2,401 a row
    many = [{"name": "x", "subscriptionId": SUBSCRIPTION, "n": 1}] * (MAX_COST // 2401 + 1)
    _, costly = answer(f"maintenanceresources | where {terms}", events=many)
    assert costly["error"]["details"][1]["code"] == "QueryTooExpensive"
    assert costly["error"]["details"][1]["token"] == "where"
