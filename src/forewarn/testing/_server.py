"""The VM-facing endpoint on real sockets, in a thread of its own, for one test.

The application under test must reach forewarn the way it reaches Azure: over TCP, with its
own HTTP library. So the endpoint listens on loopback, one address per VM on one free port,
served by :func:`forewarn.server.http.start_imds_server` on an event loop in a background
thread. The platform is not thread-safe, so that loop becomes the only thread that touches it:
:meth:`ServerThread.call` runs anything the test asks for on the loop and waits for it.

Stopping closes the listeners and every connection still open (an application's keep-alive
session would otherwise leave a transport for the garbage collector to warn about), aborting
those a plain close would leave waiting on a client that stopped reading, then the loop, and
joins the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from forewarn.server.http import ImdsProtocol, start_imds_server
from forewarn.server.imds import ImdsEndpoint

_T = TypeVar("_T")

#: How long a call into the server's loop may take before the test fails instead of hanging.
CALL_TIMEOUT = 10.0
START_TIMEOUT = 10.0
#: Binding every VM's address on one port can race another process for it; try a new port.
BIND_ATTEMPTS = 20
#: How many bursts of connections accepted while stopping are let in before the listeners
#: close: clients that keep connecting cannot hold a stop up for longer.
_ACCEPT_ROUNDS = 10


class _TrackingLoop(asyncio.SelectorEventLoop):
    """An event loop that remembers the protocols of the servers it created, so that stopping
    can close connections a client left open (``Server.close`` only stops listening)."""

    def __init__(self) -> None:
        super().__init__()
        self.protocols: list[ImdsProtocol] = []

    async def create_server(
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        *args: Any,
        **kwargs: Any,
    ) -> asyncio.Server:
        def tracked() -> asyncio.BaseProtocol:
            protocol = protocol_factory()
            if isinstance(protocol, ImdsProtocol):
                self.protocols.append(protocol)
            return protocol

        return await super().create_server(tracked, *args, **kwargs)


def _accepts(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is asyncio's making of a transport for a connection just accepted."""
    return getattr(task.get_coro(), "__name__", "") == "_accept_connection2"


class ServerThread:
    """The endpoint listening on ``hosts`` (one port for all), on a loop in its own thread."""

    def __init__(self, endpoint: ImdsEndpoint, hosts: Sequence[str]) -> None:
        if not hosts:
            raise ValueError("at least one address to listen on")
        self.endpoint = endpoint
        self.hosts = tuple(hosts)
        self.port = 0
        self._loop = _TrackingLoop()
        self._servers: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self._run, name="forewarn-imds-server", daemon=True)
        self._started = threading.Event()
        self._stopped = False

    # -- lifetime --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(START_TIMEOUT):  # pragma: no cover - a wedged machine
            raise RuntimeError("the forewarn test server did not start")
        try:
            self.port = self.call_async(self._listen())
        except BaseException:
            self.stop()
            raise

    def is_running(self) -> bool:
        """Started, not stopped, and its thread alive."""
        return self.port != 0 and not self._stopped and self._thread.is_alive()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            try:
                self.call_async(self._close_all())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(CALL_TIMEOUT)
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.close()

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.call_soon(self._started.set)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _listen(self) -> int:
        last_error: OSError | None = None
        for _ in range(BIND_ATTEMPTS):
            try:
                first = await start_imds_server(self.endpoint, self.hosts[0], 0)
            except OSError as exc:
                raise OSError(f"cannot listen on {self.hosts[0]}: {exc}") from exc
            self._servers = [first]
            port: int = first.sockets[0].getsockname()[1]
            try:
                for host in self.hosts[1:]:
                    self._servers.append(await start_imds_server(self.endpoint, host, port))
            except OSError as exc:
                last_error = exc
                await self._close_all()
                continue
            return port
        raise OSError(f"no free port on every one of {', '.join(self.hosts)}: {last_error}")

    async def _close_all(self) -> None:
        # A connection accepted in the loop's last turn gets its transport from a task that
        # has not run yet (asyncio accepts a burst at once). Once its server is closed that
        # task fails and leaves the socket for the garbage collector to warn about in
        # whatever test runs then: those tasks run first, so that their protocols are
        # tracked and closed below. No await between the last look and ``close()``: nothing
        # is accepted in between.
        deadline = self._loop.time() + CALL_TIMEOUT / 2  # within the stop's own bound
        for _ in range(_ACCEPT_ROUNDS):
            accepting = [t for t in asyncio.all_tasks() if _accepts(t)]
            left = deadline - self._loop.time()
            if not accepting or left <= 0:
                break
            await asyncio.wait(accepting, timeout=left)
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        protocols, self._loop.protocols = self._loop.protocols, []
        for protocol in protocols:
            protocol.close_idle()
        # Transports finish closing on the loop's next iterations; one still sending to a
        # client that stopped reading (a flood's unread answers) would not, and would be left
        # for the garbage collector to warn about in whatever test runs then: it is aborted.
        for _ in range(3):
            await asyncio.sleep(0)
        for protocol in protocols:
            protocol.abort()
        for _ in range(3):
            await asyncio.sleep(0)

    # -- running things on the loop --------------------------------------------------------

    def call(self, function: Callable[[], _T]) -> _T:
        """``function()`` run on the server's loop, between two requests; its result."""
        if threading.get_ident() == self._thread.ident:
            return function()
        if self._stopped:
            raise RuntimeError("the forewarn test server has stopped")
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():  # pragma: no cover - cancelled
                return
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(CALL_TIMEOUT)

    def call_async(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT)
