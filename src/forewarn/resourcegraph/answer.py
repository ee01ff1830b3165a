"""Answering one Resource Graph request: the query parsed and run over its tables, paged
and formatted, as the status and JSON body to send.

Pure work on data given to it (the tables' rows as JSON), so that ``forewarn serve`` runs it in a
process of its own (:class:`forewarn.server.azure.resourcegraph.QueryProcess`), away from the
interpreter that answers the VMs. Paging follows Resource Graph's (learn.microsoft.com, "Working
with large Azure resource data sets"): ``$skip`` rows jumped, at most ``$top`` a page, the rest
fetched with the ``$skipToken`` the page gave, which holds where the next page starts and which
query (and subscriptions) it is for.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forewarn.resourcegraph.kql import QueryError, parse_query
from forewarn.resourcegraph.query import RESOURCES, TABLE, column_type, run

_INVALID = (
    "Query is invalid. Please refer to the documentation for the Azure Resource Graph "
    "service and fix the error before retrying."
)


def bad_request(message: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    details = [{"code": "InvalidQuery", "message": _INVALID}]
    if detail is not None:
        details.append(detail)
    return {"error": {"code": "BadRequest", "message": message, "details": details}}


def _digest(query: str, subscriptions: tuple[str, ...] | None) -> str:
    scope = json.dumps([query, sorted(subscriptions or [])])
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def _skip_token(offset: int, digest: str) -> str:
    text = json.dumps({"skip": offset, "query": digest})
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
        return _refused(exc, exc.where or (1, 0))  # a bound passed: line 1, column 0
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
        return _refused(exc)
    digest = _digest(job.query, job.subscriptions)
    offset = job.skip
    if job.skip_token is not None:
        resumed = _offset_of(job.skip_token, digest)
        if resumed is None:
            refusal = bad_request(
                "The $skipToken is not one this query gave.",
                {"code": "InvalidSkipToken", "message": "$skipToken is invalid"},
            )
            return 400, encoded(refusal)
        offset = resumed
    page = selected[offset : offset + job.top]
    answer: dict[str, Any] = {
        "totalRecords": len(selected),
        "count": len(page),
        "data": formatted(page, job.result_format),
        "facets": [],
        "resultTruncated": "false",
    }
    if offset + job.top < len(selected):
        answer["$skipToken"] = _skip_token(offset + job.top, digest)
    return 200, encoded(answer)


def _refused(exc: QueryError, place: tuple[int, int] | None = None) -> tuple[int, bytes]:
    """The 400 of a query refused: parsing places it, running does not."""
    detail: dict[str, Any] = {"code": exc.code, "message": str(exc)}
    if place is not None:
        detail.update(line=place[0], characterPositionInLine=place[1])
    detail["token"] = exc.token or ""
    return 400, encoded(bad_request(f"{_INVALID} {exc}", detail))


def encoded(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def formatted(rows: list[dict[str, Any]], result_format: str) -> Any:
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


__all__ = ["QueryJob", "bad_request", "encoded", "execute", "formatted"]
