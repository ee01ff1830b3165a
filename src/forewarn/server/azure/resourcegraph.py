"""Azure Resource Graph's query API, on the control port, over the published events.

``POST /providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01`` with
``{"query": "..."}`` (and optionally ``subscriptions`` and ``options`` ``$top``, ``$skip``,
``$skipToken``, ``resultFormat``), answered in Resource Graph's shape: ``totalRecords``,
``count``, ``data``, ``facets``, ``resultTruncated`` and, while rows remain, ``$skipToken``
(the shape ``azure-mgmt-resourcegraph``'s ``QueryResponse`` reads). The table is
``maintenanceresources``: one row per published event with its latest state, Completed and
Canceled ones kept (learn.microsoft.com, "Scheduled Events in Azure Resource Graph"; the bound
is :data:`forewarn.domain.history.FINISHED_KEPT`). A query outside the supported subset is a
400 in ARM's error envelope naming the part refused.

Paging follows Resource Graph's: at most ``$top`` rows a page (:data:`DEFAULT_TOP` unless
asked, :data:`MAX_TOP` at most), the rest fetched with the ``$skipToken`` the page gave.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from forewarn.domain.history import EventChange
from forewarn.resourcegraph.kql import Query, QueryError, parse_query
from forewarn.resourcegraph.query import column_type, run
from forewarn.server.azure._arm import api_version_error, arm_error
from forewarn.service import ScheduledEventsService
from forewarn.wire.maintenance import arg_row

#: The api-versions answered: the page's 2022-10-01, and azure-mgmt-resourcegraph's default.
RESOURCE_GRAPH_API_VERSIONS = frozenset({"2021-03-01", "2022-10-01", "2024-04-01"})
#: Rows a page holds unless ``$top`` says otherwise, and the most it may ask.
DEFAULT_TOP = 100
MAX_TOP = 1000
PATH = "/providers/Microsoft.ResourceGraph/resources"

_INVALID = (
    "Query is invalid. Please refer to the documentation for the Azure Resource Graph "
    "service and fix the error before retrying."
)


class _Options(BaseModel):
    """``QueryRequestOptions``: the keys Resource Graph's REST API names, and no others (a
    misspelt ``$skiptoken`` or ``top`` would otherwise be ignored and the query answered as
    if it had not been asked for)."""

    model_config = ConfigDict(extra="forbid")  # by the wire's names only: not `top`

    top: StrictInt | None = Field(default=None, alias="$top", ge=1, le=MAX_TOP)
    skip: StrictInt | None = Field(default=None, alias="$skip", ge=0, le=10_000_000)
    skip_token: str | None = Field(default=None, alias="$skipToken", max_length=512)
    result_format: Literal["objectArray", "table"] = Field(
        default="objectArray", alias="resultFormat"
    )
    # Taken and without effect here: every subscription of the fleet is in scope.
    allow_partial_scopes: StrictBool | None = Field(default=None, alias="allowPartialScopes")
    authorization_scope_filter: (
        Literal["AtScopeAndBelow", "AtScopeAndAbove", "AtScopeExact", "AtScopeAboveAndBelow"] | None
    ) = Field(default=None, alias="authorizationScopeFilter")


class QueryIn(BaseModel):
    """Resource Graph's ``QueryRequest``; management groups and facets are taken and ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    query: str = Field(max_length=64 * 1024)
    subscriptions: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None, max_length=1000
    )
    options: _Options | None = None


def _bad_request(message: str, detail: dict[str, Any] | None = None) -> JSONResponse:
    details = [{"code": "InvalidQuery", "message": _INVALID}]
    if detail is not None:
        details.append(detail)
    return arm_error(400, "BadRequest", message, details)


def _digest(request: QueryIn) -> str:
    scope = json.dumps([request.query, sorted(request.subscriptions or [])])
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def _skip_token(offset: int, digest: str) -> str:
    text = json.dumps({"skip": offset, "query": digest}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode()


def _offset_of(token: str, digest: str) -> int | None:
    """Where ``token`` resumes, or None when it is no token this query gave."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        offset, given = decoded["skip"], decoded["query"]
    except (ValueError, KeyError, TypeError):
        return None
    if given != digest or type(offset) is not int or offset < 0:  # not True, not 1.0
        return None
    return offset


def resource_graph_router(service: ScheduledEventsService) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def resources(request: Request) -> Response:
        refused = api_version_error(request, RESOURCE_GRAPH_API_VERSIONS)
        if refused is not None:
            return refused
        try:
            body = QueryIn.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            return _bad_request(f"The request is invalid: {where}: {first['msg']}")
        try:
            # Off the event loop the VMs are answered on: the first query also builds the
            # grammar's parser (a fifth of a second, made on first use, not at start-up).
            query = await asyncio.to_thread(parse_query, body.query)
        except QueryError as exc:
            line, column = exc.where or (1, 0)
            return _bad_request(
                f"{_INVALID} {exc}",
                {
                    "code": exc.code,
                    "message": str(exc),
                    "line": line,
                    "characterPositionInLine": column,
                    "token": exc.token or "",
                },
            )
        wanted = {s.lower() for s in body.subscriptions} if body.subscriptions else None
        # The table read at one instant on the loop (references to immutable changes), its
        # rows built and the query run in a worker thread: a query over a large table does
        # not hold the VMs' requests up for its whole length.
        changes = list(service.published().latest())
        try:
            selected = await asyncio.to_thread(_selected, query, changes, wanted)
        except QueryError as exc:
            return _bad_request(
                f"{_INVALID} {exc}",
                {"code": exc.code, "message": str(exc), "token": exc.token or ""},
            )
        options = body.options or _Options()
        digest = _digest(body)
        offset = options.skip or 0
        if options.skip_token is not None:
            resumed = _offset_of(options.skip_token, digest)
            if resumed is None:
                return _bad_request(
                    "The $skipToken is not one this query gave.",
                    {"code": "InvalidSkipToken", "message": "$skipToken is invalid"},
                )
            offset = resumed
        top = options.top or DEFAULT_TOP
        page = selected[offset : offset + top]
        answer: dict[str, Any] = {
            "totalRecords": len(selected),
            "count": len(page),
            "data": _formatted(page, options.result_format),
            "facets": [],
            "resultTruncated": "false",
        }
        if offset + top < len(selected):
            answer["$skipToken"] = _skip_token(offset + top, digest)
        return JSONResponse(answer)

    router.add_api_route(PATH, resources, methods=["POST"])
    return router


def _selected(query: Query, changes: list[EventChange], wanted: set[str] | None) -> list[Any]:
    rows = (
        arg_row(change)
        for change in changes
        if wanted is None or change.where.subscription_id.lower() in wanted
    )
    return run(query, rows)


def _formatted(rows: list[dict[str, Any]], result_format: str) -> Any:
    if result_format == "objectArray":
        return rows
    names = list(rows[0]) if rows else []
    return {
        "columns": [
            {"name": name, "type": column_type(row.get(name) for row in rows)} for name in names
        ],
        "rows": [[row.get(name) for name in names] for row in rows],
    }


__all__ = [
    "DEFAULT_TOP",
    "MAX_TOP",
    "PATH",
    "RESOURCE_GRAPH_API_VERSIONS",
    "QueryIn",
    "resource_graph_router",
]
