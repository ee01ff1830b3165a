"""The control API of a test's platform, in the test's process: no port, no token.

``forewarn serve`` offers the control API (``/api/v1``: events, the clock, VMs, hosts, scale
sets, faults) on a port of its own for the CLI, scenarios and the dashboard. A test that drives
its platform the way those do, or that tests them, gets the same app here behind an
``httpx.Client`` whose requests go straight to it. Like the VM-facing transport, a request runs
where the platform may be touched: on the socket server's loop once that runs, else on a
private loop in the caller's thread.

The app's framework is imported only when a client is made: the pytest plugin is loaded by
every test run and has no use for it otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from forewarn.service import ScheduledEventsService
from forewarn.testing._server import ServerThread

#: The base URL of the in-process control client; nothing resolves it, nothing listens there.
CONTROL_BASE_URL = "http://control.invalid"

_Answer = tuple[int, httpx.Headers, bytes]


class ControlTransport(httpx.BaseTransport):
    """A synchronous transport calling an ASGI app on the server's loop, or on its own."""

    def __init__(self, app: Any, server: Callable[[], ServerThread | None]) -> None:
        self._asgi = httpx.ASGITransport(app=app)
        self._server = server
        self._runner: asyncio.Runner | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()  # a streamed body becomes bytes, which the async transport can send
        status, headers, body = self._run(self._answer(request))
        return httpx.Response(status, headers=headers, content=body, request=request)

    async def _answer(self, request: httpx.Request) -> _Answer:
        response = await self._asgi.handle_async_request(request)
        body = await response.aread()
        return response.status_code, response.headers, body

    def _run(self, coroutine: Coroutine[Any, Any, _Answer]) -> _Answer:
        server = self._server()
        if server is not None:
            return server.call_async(coroutine)
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coroutine)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


def control_app(service: ScheduledEventsService) -> Any:
    """``service``'s control app (a FastAPI app): building one takes about a tenth of a second
    of CPU (each route's parameters and models are analysed), so a platform builds its own once
    and every client it hands out shares it."""
    from forewarn.server.control import create_control_app  # the framework, deferred

    return create_control_app(service)


def control_client(app: Any, server: Callable[[], ServerThread | None]) -> httpx.Client:
    """An ``httpx.Client`` on a control ``app``; ``server`` is the socket server, if one runs
    at the time of a request."""
    return httpx.Client(transport=ControlTransport(app, server), base_url=CONTROL_BASE_URL)
