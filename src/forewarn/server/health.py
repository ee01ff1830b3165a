"""``/livez``, ``/readyz`` and ``/healthz``: is this ``forewarn serve`` alive, and ready?

Answered on the control port without the token, since a container's ``HEALTHCHECK``, a
Kubernetes probe or a load balancer carries none, and so they tell nothing of the fleet.

Liveness, ``GET /livez``: ``200 {"status": "alive"}`` whenever the process answers at all,
whatever its store does (a liveness probe restarts what fails it, and a restart mends no
store). Readiness, ``GET /readyz`` and ``GET /healthz`` (its first name, kept): ``200
{"status": "ready"}`` when it is ready, and ``503 {"status": "unready", "reason": ...}``
when it is not, because

- it is shutting down (SIGTERM or SIGINT received),
- a VM-facing listener is no longer serving,
- its store cannot be used: a PostgreSQL server that cannot be reached, or whose check does
  not answer within :data:`STORE_TIMEOUT`; a SQLite file deleted, replaced or made
  inaccessible under the running server, or whose file system is full
  (:meth:`forewarn.storage.Journal.ping`), or
- the store refused a change a moment ago, so changes are refused now
  (:meth:`forewarn.service.ScheduledEventsService.write_refused`).

With ``serve --workers``, the answer also says how many worker processes listen, of how
many wanted (``"workers": {"up": 2, "wanted": 2}``); the VM-facing endpoint counts as
listening while one does.

The reason is one short sentence; the store's own error (which names its address) goes to
the server's log, once each time readiness changes. The store is checked in a worker thread,
one check at a time, and a result is reused for :data:`FRESH_FOR` seconds, so callers hammering
the route without a token cost the store at most one check a second, and a check that hangs
(a server that stopped answering) never starts another beside it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from forewarn.defaults import HEALTH_PATH, LIVE_PATH, READY_PATH
from forewarn.server._serve_logging import log
from forewarn.storage.errors import StorageError, StoreFullError, StoreUnavailableError

__all__ = ["FRESH_FOR", "STORE_TIMEOUT", "Health", "Readiness", "health_router"]

#: Seconds a store check may take before the store counts as not answering: readiness is
#: answered within 3 s, below the Kubernetes probes' timeout in deploy/kubernetes/, with
#: room to spare (writes wait on the store off the event loop: forewarn.cluster.replica).
STORE_TIMEOUT = 1.0
#: Seconds a store check's result is reused.
FRESH_FOR = 1.0

LOGGER = logging.getLogger("forewarn.health")


@dataclass(frozen=True)
class Readiness:
    """Ready, or not with a short reason a caller without the token may read."""

    ready: bool
    reason: str | None = None


class Health:
    """Readiness from four looks: shutting down, listeners serving, store usable, changes
    not being refused."""

    def __init__(
        self,
        check_store: Callable[[], None],
        *,
        listening: Callable[[], bool] = lambda: True,
        stopping: Callable[[], bool] = lambda: False,
        store_timeout: float = STORE_TIMEOUT,
        fresh_for: float = FRESH_FOR,
        clock: Callable[[], float] = time.monotonic,
        workers: Callable[[], tuple[int, int]] | None = None,
        writes: Callable[[], str | None] = lambda: None,
    ) -> None:
        #: ``serve --workers``: how many worker processes are up, of how many wanted.
        self.workers = workers
        self._check_store = check_store
        self._writes = writes
        self._listening = listening
        self._stopping = stopping
        self._store_timeout = store_timeout
        self._fresh_for = fresh_for
        self._clock = clock
        self._lock = asyncio.Lock()
        self._checked_at: float | None = None
        #: The last check's reason for the caller, and its detail for the log.
        self._store_problem: str | None = None
        self._store_detail = ""
        #: A check still running in its thread (one that outlived its timeout).
        self._pending: asyncio.Future[None] | None = None
        self._reported: Readiness = Readiness(True)

    async def readiness(self) -> Readiness:
        if self._stopping():
            found = Readiness(False, "shutting down")
        elif not self._listening():
            found = Readiness(False, "the VM-facing endpoint is not listening")
        else:
            problem = await self._store() or self._writes()
            found = Readiness(problem is None, problem)
        self._report(found)
        return found

    async def _store(self) -> str | None:
        async with self._lock:  # one check at a time; those who waited reuse its result
            now = self._clock()
            if self._checked_at is None or now - self._checked_at >= self._fresh_for:
                self._store_problem, self._store_detail = await self._check()
                self._checked_at = self._clock()
            return self._store_problem

    async def _check(self) -> tuple[str | None, str]:
        """The store's problem for the caller (None: none) and its detail for the log."""
        if self._pending is None or self._pending.done():
            loop = asyncio.get_running_loop()
            self._pending = loop.run_in_executor(None, self._check_store)
        pending = self._pending
        done, _ = await asyncio.wait({pending}, timeout=self._store_timeout)
        if not done:  # left running: the next check waits on it rather than start another
            return "the store does not answer", f"no answer within {self._store_timeout:g} s"
        error = pending.exception()
        if error is None:
            return None, ""
        if isinstance(error, StoreFullError):
            return "the store's file system is full", str(error)
        if isinstance(error, StoreUnavailableError):
            return "the store cannot be reached", str(error)
        if isinstance(error, StorageError):
            return "the store cannot be used", str(error)
        return f"the store check failed ({type(error).__name__})", str(error)

    def _report(self, found: Readiness) -> None:
        """Log a change of readiness once, with the detail the caller is not shown."""
        if found == self._reported:
            return
        self._reported = found
        if found.ready:
            log(LOGGER, logging.INFO, "ready again")
        else:
            detail = self._store_detail if found.reason == self._store_problem else ""
            log(LOGGER, logging.WARNING, f"not ready: {found.reason}", detail=detail)


def health_router(health: Health) -> APIRouter:
    """``GET /livez``, and ``GET /readyz`` and ``/healthz`` answering ``health``'s
    readiness; the guard lets them through."""
    router = APIRouter()

    @router.get(LIVE_PATH, tags=["health"])
    async def livez() -> JSONResponse:
        """Liveness: any answer is 200, while the process serves; never anything of the
        fleet, nor of its store."""
        return JSONResponse({"status": "alive"}, headers={"Cache-Control": "no-store"})

    async def readyz() -> JSONResponse:
        """Readiness (200 or 503 with the reason); never anything of the fleet."""
        found = await health.readiness()
        body: dict[str, object] = (
            {"status": "ready"} if found.ready else {"status": "unready", "reason": found.reason}
        )
        if health.workers is not None:
            up, wanted = health.workers()
            body["workers"] = {"up": up, "wanted": wanted}
        return JSONResponse(
            body, status_code=200 if found.ready else 503, headers={"Cache-Control": "no-store"}
        )

    unready: dict[int | str, dict[str, Any]] = {
        503: {"description": "alive, but not ready: the reason says why"}
    }
    for path in (READY_PATH, HEALTH_PATH):
        router.add_api_route(path, readyz, methods=["GET"], tags=["health"], responses=unready)
    return router
