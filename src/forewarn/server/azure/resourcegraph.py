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
asked, :data:`MAX_TOP` at most), the rest fetched with the ``$skipToken`` the page gave
(:mod:`forewarn.resourcegraph.answer`). The ``resources`` table lists the fleet's VMs and scale
sets (:mod:`forewarn.wire.resources`).

The loop reads the tables at one instant and hands them, as JSON, to a runner: under ``forewarn
serve`` a process of its own (:class:`QueryProcess`), so a heavy query never takes the VM-facing
endpoint's interpreter; in process (the pytest plugin) a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.process
import multiprocessing
import os
import re
import signal
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from forewarn.domain.history import EventChange
from forewarn.resourcegraph.answer import QueryJob, bad_request, encoded, execute
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


#: How a job is run: in a worker thread (in process), or in the query process.
QueryRunner = Callable[[QueryJob], Awaitable[tuple[int, bytes]]]


#: How much lower the query process's CPU priority is than ``forewarn serve``'s (``nice``):
#: on a busy machine the VM-facing process is scheduled first.
QUERY_NICENESS = 10


async def in_thread(job: QueryJob) -> tuple[int, bytes]:
    """Run ``job`` in a worker thread: in process, where there is no other process to use."""
    return await asyncio.to_thread(execute, job)


def _query_process_setup() -> None:
    """The query process yields the CPU to ``forewarn serve`` (:data:`QUERY_NICENESS`) and
    leaves Ctrl-C to it, which stops it (no second traceback from a process the user never
    started)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(QUERY_NICENESS)


#: Seconds ``forewarn serve``'s stop waits for the query process once it is told to end.
CLOSE_SECONDS = 2.0


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
            context = multiprocessing.get_context("spawn")  # no copy of the server's state
            self._pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=context, initializer=_query_process_setup
            )
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, execute, job)
        except concurrent.futures.process.BrokenProcessPool:
            # A broken pool shuts itself down: its own thread fails every pending query, then
            # ends and joins its processes (CPython's ``terminate_broken``).
            if self._pool is pool:
                self._pool = None
            refusal = {
                "error": {
                    "code": "ServiceUnavailable",
                    "message": "The query process stopped while running the query; retry.",
                }
            }
            return 503, encoded(refusal)

    def close(self) -> None:
        """Stop the query process at once: a query still running is of no use to a server
        on its way out, and waiting for it (or for a niced process to be scheduled on a busy
        machine) held ``forewarn serve``'s stop past its bound."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # The executor's own processes (CPython keeps them in ``_processes``): terminated,
        # then joined within a bound, since shutdown() alone waits for a running query.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=CLOSE_SECONDS)
            if process.is_alive():  # stopped, or never scheduled: what SIGTERM cannot end
                process.kill()
                process.join(timeout=CLOSE_SECONDS)


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
                kept = (change, encoded(arg_row(change)))
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
    run_job: QueryRunner = runner or in_thread

    async def resources(request: Request) -> Response:
        refused = api_version_error(request, RESOURCE_GRAPH_API_VERSIONS)
        if refused is not None:
            return refused
        try:
            body = QueryIn.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            refusal = bad_request(f"The request is invalid: {where}: {first['msg']}")
            return JSONResponse(refusal, status_code=400)
        options = body.options or _Options()
        # The tables read at one instant on the loop (references to immutable changes), their
        # rows encoded in a worker thread, the query run by ``run_job``.
        changes = list(service.published().latest())
        fleet = b"[]"
        if _RESOURCES_NAMED.search(body.query):
            fleet = encoded(resource_rows(service.vms()))
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


__all__ = [
    "DEFAULT_TOP",
    "MAX_TOP",
    "PATH",
    "RESOURCE_GRAPH_API_VERSIONS",
    "QueryIn",
    "QueryProcess",
    "QueryRunner",
    "in_thread",
    "resource_graph_router",
]
