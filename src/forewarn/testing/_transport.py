"""An in-process transport for httpx-based applications: no socket, the same answers.

``httpx.MockTransport`` serves both ``httpx.Client`` and ``httpx.AsyncClient``; its handler
turns the request into an :class:`~forewarn.server.imds.ImdsRequest` arriving at the VM's own
address, so the endpoint attributes it to that VM exactly as the socket server would, and
turns "no answer" (a VM that is down) into the error httpx raises when a real server drops the
connection unanswered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import httpx

from forewarn.faults import FaultKind, FaultRule
from forewarn.server.asgi import http_date, unanswered_error
from forewarn.server.fault_hook import error_response, fault_for
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
        fault = call(lambda: fault_for(endpoint, address, address))
        if fault is None:
            return answer(request)
        return _injected(fault, request, answer)

    def answer(request: httpx.Request) -> httpx.Response:
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
        response, _, now, _ = call(lambda: endpoint.respond(imds_request))
        if response.status == 0:
            raise unanswered_error(response, request)
        headers = response_headers(response, request_ids.next(), http_date(now))
        return httpx.Response(response.status, headers=headers, content=response.body)

    def _injected(
        fault: FaultRule,
        request: httpx.Request,
        real: Callable[[httpx.Request], httpx.Response],
    ) -> httpx.Response:
        """An injected fault as httpx reports it from a real socket."""
        error = error_response(fault)
        if error is not None:
            now = call(endpoint.service.now)
            headers = response_headers(error, request_ids.next(), http_date(now))
            return httpx.Response(error.status, headers=headers, content=error.body)
        if fault.kind is FaultKind.RESET:
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        if fault.kind is FaultKind.TIMEOUT:
            # No other thread could answer later: the request times out at once, as for a
            # held request (forewarn.server.asgi.unanswered_error).
            raise httpx.ReadTimeout("no answer: an injected timeout", request=request)
        if fault.kind is FaultKind.LATENCY:
            time.sleep(fault.delay or 0.0)
            return real(request)
        whole = real(request)  # truncate
        size = len(whole.content)
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body: "
            f"received {size // 2} bytes, expected {size}",
            request=request,
        )

    return httpx.MockTransport(handler)
