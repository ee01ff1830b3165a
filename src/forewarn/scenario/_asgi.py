"""The control app called in this process, through httpx with no socket: what in-process
scenario runs and tests drive it with. Apart from :mod:`forewarn.scenario.client`, which
names these too, so that talking to a running ``forewarn serve`` imports httpx only to
connect."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


class AsgiTransport(httpx.BaseTransport):
    """A synchronous httpx transport that calls an ASGI app in this thread.

    httpx's own ``ASGITransport`` is async-only; the CLI and the scenario runner are not, so
    each request runs on a private event loop, closed with the client.
    """

    def __init__(self, app: Any) -> None:
        self._asgi = httpx.ASGITransport(app=app)
        self._loop = asyncio.Runner()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()  # a streamed body becomes bytes, which the async transport can send

        async def call() -> tuple[int, httpx.Headers, bytes]:
            response = await self._asgi.handle_async_request(request)
            body = await response.aread()
            return response.status_code, response.headers, body

        status, headers, body = self._loop.run(call())
        return httpx.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        self._loop.close()


def in_process_client(app: Any) -> httpx.Client:
    """An HTTP client whose requests go straight to ``app`` (close it when done)."""
    return httpx.Client(transport=AsgiTransport(app), base_url="http://control.invalid")


__all__ = ["AsgiTransport", "in_process_client"]
