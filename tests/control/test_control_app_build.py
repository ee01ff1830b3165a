"""``forewarn serve``'s control API is built by its first request (server.runner.ControlApp):
once, whatever arrives while it is being built, and every request is answered by it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from forewarn.server.runner import ControlApp


async def _receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


async def _send(message: Any) -> None:
    pass


class _Answering:
    """An ASGI app recording the paths it was asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])


class _Queries:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_requests_arriving_during_the_build_wait_for_the_one_build() -> None:
    app, queries = _Answering(), _Queries()
    builds: list[int] = []
    release = threading.Event()

    def build() -> tuple[Any, Any]:
        builds.append(1)
        assert release.wait(timeout=30)  # the other requests arrive meanwhile
        return app, queries

    control = ControlApp(build)

    async def requests() -> None:
        first = [
            asyncio.ensure_future(control({"path": f"/{n}"}, _receive, _send)) for n in range(3)
        ]
        while not builds:  # the build has started on its thread
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*first)
        await control({"path": "/later"}, _receive, _send)

    asyncio.run(requests())
    assert builds == [1]
    assert sorted(app.paths) == ["/0", "/1", "/2", "/later"]
    control.close()
    assert queries.closed


def test_a_control_api_never_asked_starts_no_query_process_to_stop() -> None:
    def build() -> tuple[Any, Any]:
        raise AssertionError("built without a request")

    ControlApp(build).close()
