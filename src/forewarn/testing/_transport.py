"""An in-process transport for httpx-based applications: no socket, the same answers.

``httpx.MockTransport`` serves both ``httpx.Client`` and ``httpx.AsyncClient``; its handler
turns the request into an :class:`~forewarn.server.imds.ImdsRequest` arriving at the VM's own
address, so the endpoint attributes it to that VM exactly as the socket server would, and
turns "no answer" (a VM that is down) into the error httpx raises when a real server drops the
connection unanswered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import httpx

from forewarn.server.asgi import http_date, unanswered_error
from forewarn.server.imds import (
    ImdsEndpoint,
    ImdsRequest,
    RequestIds,
    response_headers,
    split_target,
)

_T = TypeVar("_T")


class Runner(Protocol):
    """Runs a function where the platform may be touched, and returns its result."""

    def __call__(self, function: Callable[[], _T], /) -> _T: ...


def _headers(request: httpx.Request) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in request.headers.multi_items():
        key = name.lower()
        headers[key] = value if key not in headers else headers[key] + ", " + value
    return headers


def endpoint_transport(
    endpoint: ImdsEndpoint,
    address: str,
    call: Runner,
) -> httpx.MockTransport:
    """A transport on which every request comes from (and arrives at) ``address``.

    ``call`` runs the endpoint where the platform may be touched (the server's loop when one
    is running), so transports and sockets can be used side by side.
    """

    request_ids = RequestIds()

    def handler(request: httpx.Request) -> httpx.Response:
        path, query = split_target(request.url.raw_path.decode("ascii"))
        imds_request = ImdsRequest(
            method=request.method,
            path=path,
            query=query,
            headers=_headers(request),
            body=request.content,
            local_address=address,
            peer_address=address,
        )
        response, now = call(lambda: (endpoint.handle(imds_request), endpoint.service.clock.now()))
        if response.status == 0:
            raise unanswered_error(response, request)
        headers = response_headers(response, request_ids.next(), http_date(now))
        return httpx.Response(response.status, headers=headers, content=response.body)

    return httpx.MockTransport(handler)
