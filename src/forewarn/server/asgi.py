"""The VM-facing endpoint as an ASGI app, for in-process clients (httpx ``ASGITransport``).

It calls the same :meth:`ImdsEndpoint.handle` as the socket server, so a client tested through
it sees the same bytes as one talking to ``forewarn serve``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime
from email.utils import format_datetime
from typing import Any

import httpx

from forewarn.server.imds import (
    ImdsEndpoint,
    ImdsRequest,
    ImdsResponse,
    RequestIds,
    response_headers,
    split_target,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def unanswered_error(response: ImdsResponse, request: httpx.Request | None = None) -> Exception:
    """What an httpx client meets, in-process, from a response with no answer (status 0).

    Held (an impact or the first-call delay): in-process there is no other thread to answer
    later without deadlocking a single-threaded test, so the request fails at once as one whose
    timeout is shorter than the pause ([ours], docs/faithfulness.md); a deleted VM's, never
    answered, likewise. Reset and dropped: what httpx raises when a real server does that.
    """
    if response.held_until is not None:
        message = f"the VM is paused; its request is held until {response.held_until}"
        return httpx.ReadTimeout(message, request=request)
    if response.unanswered:  # held for ever: the same, sooner
        message = "the VM is gone (deleted): nothing answers at its address"
        return httpx.ReadTimeout(message, request=request)
    if response.reset:
        return httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
    return httpx.RemoteProtocolError(
        "Server disconnected without sending a response.", request=request
    )


def http_date(moment: datetime) -> bytes:
    return format_datetime(moment, usegmt=True).encode()


class ImdsAsgiApp:
    """ASGI wrapper; the caller's address comes from the scope's ``client``/``server``."""

    def __init__(self, endpoint: ImdsEndpoint) -> None:
        self.endpoint = endpoint
        self._request_ids = RequestIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        limit = self.endpoint.limits.max_body
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > limit + 1:
                break
            if not message.get("more_body", False):
                break
        raw_path = scope.get("raw_path") or scope["path"].encode()
        target = raw_path.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        path, query = split_target(target)
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = text if key not in headers else headers[key] + ", " + text
        client = scope.get("client") or ("127.0.0.1", 0)
        server = scope.get("server") or ("127.0.0.1", 0)
        response = self.endpoint.handle(
            ImdsRequest(
                method=scope["method"],
                path=path,
                query=query,
                headers=headers,
                body=bytes(body),
                local_address=server[0],
                peer_address=client[0],
            )
        )
        if response.status == 0:
            raise unanswered_error(response)
        reply_headers = response_headers(
            response,
            self._request_ids.next(),
            http_date(self.endpoint.service.now()),
        )
        await send(
            {"type": "http.response.start", "status": response.status, "headers": reply_headers}
        )
        await send({"type": "http.response.body", "body": response.body})


__all__ = [
    "ImdsAsgiApp",
    "http_date",
    "unanswered_error",
]
