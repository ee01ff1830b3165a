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
import concurrent.futures
import concurrent.futures.process
import functools
import hashlib
import json
import multiprocessing
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from forewarn.domain.history import EventChange
from forewarn.resourcegraph.kql import QueryError, parse_query
from forewarn.resourcegraph.query import RESOURCES, TABLE, column_type, run
from forewarn.server.azure._arm import api_version_error
from forewarn.service import ScheduledEventsService
from forewarn.wire.maintenance import arg_row
from forewarn.wire.resources import resource_rows

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


def _bad_request(message: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    details = [{"code": "InvalidQuery", "message": _INVALID}]
    if detail is not None:
        details.append(detail)
    return {"error": {"code": "BadRequest", "message": message, "details": details}}


def _digest(query: str, subscriptions: tuple[str, ...] | None) -> str:
    scope = json.dumps([query, sorted(subscriptions or [])])
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


@dataclass(frozen=True, slots=True)
class QueryJob:
    """One validated request and the tables it reads, as JSON: what :func:`execute` needs,
    picklable, so that it can run in another process."""

    query: str
    subscriptions: tuple[str, ...] | None
    top: int
    skip: int
    skip_token: str | None
    result_format: str
    events: bytes
    resources: bytes


def execute(job: QueryJob) -> tuple[int, bytes]:
    """The status and JSON body answering ``job``: the query parsed, run over the tables,
    paged and formatted. Pure CPU, no service: it runs in the query process of ``forewarn
    serve`` (:class:`QueryProcess`), or a worker thread in process."""
    try:
        query = parse_query(job.query)
    except QueryError as exc:
        line, column = exc.where or (1, 0)
        detail = {
            "code": exc.code,
            "message": str(exc),
            "line": line,
            "characterPositionInLine": column,
            "token": exc.token or "",
        }
        return 400, _encoded(_bad_request(f"{_INVALID} {exc}", detail))
    wanted = {s.lower() for s in job.subscriptions} if job.subscriptions else None

    def table(blob: bytes) -> Callable[[], list[dict[str, Any]]]:
        def rows() -> list[dict[str, Any]]:
            every: list[dict[str, Any]] = json.loads(blob)
            if wanted is None:
                return every
            return [row for row in every if str(row["subscriptionId"]).lower() in wanted]

        return rows

    try:
        selected = run(query, {TABLE: table(job.events), RESOURCES: table(job.resources)})
    except QueryError as exc:
        detail = {"code": exc.code, "message": str(exc), "token": exc.token or ""}
        return 400, _encoded(_bad_request(f"{_INVALID} {exc}", detail))
    digest = _digest(job.query, job.subscriptions)
    offset = job.skip
    if job.skip_token is not None:
        resumed = _offset_of(job.skip_token, digest)
        if resumed is None:
            refusal = _bad_request(
                "The $skipToken is not one this query gave.",
                {"code": "InvalidSkipToken", "message": "$skipToken is invalid"},
            )
            return 400, _encoded(refusal)
        offset = resumed
    page = selected[offset : offset + job.top]
    answer: dict[str, Any] = {
        "totalRecords": len(selected),
        "count": len(page),
        "data": _formatted(page, job.result_format),
        "facets": [],
        "resultTruncated": "false",
    }
    if offset + job.top < len(selected):
        answer["$skipToken"] = _skip_token(offset + job.top, digest)
    return 200, _encoded(answer)


def _encoded(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


#: How a job is run: in a worker thread (in process), or in the query process.
QueryRunner = Callable[[QueryJob], Awaitable[tuple[int, bytes]]]


class QueryProcess:
    """Queries run in a process of their own, so that however long one takes, the VM-facing
    endpoint of the same ``forewarn serve`` keeps its interpreter (a worker thread would
    share it: two clients looping on a heavy query took another VM's poll p99 from 7 ms to
    over 100 ms). One process, spawned on the first query; a query that kills it is a 503
    and the next query spawns another."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    async def __call__(self, job: QueryJob) -> tuple[int, bytes]:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=context)
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, execute, job)
        except concurrent.futures.process.BrokenProcessPool:
            if self._pool is pool:
                self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            refusal = {
                "error": {
                    "code": "ServiceUnavailable",
                    "message": "The query process stopped while running the query; retry.",
                }
            }
            return 503, _encoded(refusal)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class _EventRows:
    """The ``maintenanceresources`` rows as one JSON array, each row encoded once: a change
    is immutable, so its row is kept while the change is the event's latest, and a query
    costs the loop a lookup per row rather than building and encoding the table again."""

    def __init__(self) -> None:
        self._encoded: dict[int, tuple[EventChange, bytes]] = {}

    def blob(self, changes: list[EventChange]) -> bytes:
        old = self._encoded
        new: dict[int, tuple[EventChange, bytes]] = {}
        for change in changes:
            kept = old.get(id(change))
            if kept is None or kept[0] is not change:
                kept = (change, _encoded(arg_row(change)))
            new[id(change)] = kept
        self._encoded = new
        return b"[" + b",".join(encoded for _, encoded in new.values()) + b"]"


_RESOURCES_NAMED = re.compile(r"(?<![a-z0-9_])resources(?![a-z0-9_])", re.IGNORECASE)


def resource_graph_router(
    service: ScheduledEventsService, runner: QueryRunner | None = None
) -> APIRouter:
    """The route; ``runner`` runs each query (a worker thread unless given: ``forewarn
    serve`` gives a :class:`QueryProcess`)."""
    router = APIRouter(include_in_schema=False)
    events = _EventRows()
    run_job: QueryRunner = runner or functools.partial(asyncio.to_thread, execute)

    async def resources(request: Request) -> Response:
        refused = api_version_error(request, RESOURCE_GRAPH_API_VERSIONS)
        if refused is not None:
            return refused
        try:
            body = QueryIn.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            refusal = _bad_request(f"The request is invalid: {where}: {first['msg']}")
            return JSONResponse(refusal, status_code=400)
        options = body.options or _Options()
        # The tables read at one instant on the loop (references to immutable changes), their
        # rows encoded in a worker thread, the query run by ``run_job``.
        changes = list(service.published().latest())
        fleet = b"[]"
        if _RESOURCES_NAMED.search(body.query):
            fleet = _encoded(resource_rows(service.vms()))
        job = QueryJob(
            query=body.query,
            subscriptions=tuple(body.subscriptions) if body.subscriptions else None,
            top=options.top or DEFAULT_TOP,
            skip=options.skip or 0,
            skip_token=options.skip_token,
            result_format=options.result_format,
            events=await asyncio.to_thread(events.blob, changes),
            resources=fleet,
        )
        status, answer = await run_job(job)
        return Response(answer, status_code=status, media_type="application/json")

    router.add_api_route(PATH, resources, methods=["POST"])
    return router


def _formatted(rows: list[dict[str, Any]], result_format: str) -> Any:
    if result_format == "objectArray":
        return rows
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
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
    "QueryJob",
    "QueryProcess",
    "QueryRunner",
    "execute",
    "resource_graph_router",
]
