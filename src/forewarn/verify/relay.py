"""The handler's VM address: one stable socket in front of each trial's fresh platform.

Every trial runs on a platform of its own (:class:`forewarn.testing.ForewarnPlatform`, its own
port), yet a handler that lives through all the trials, or one the user started against the
address forewarn printed (``--attach``), keeps talking to one address. The relay listens there
and passes each new connection, byte for byte, to the current trial's VM; when a trial ends
the old platform closes its connections and the relay closes their other halves, so the
handler sees what any HTTP client sees when a server closes an idle keep-alive connection.

While no trial is current (between two), a new connection waits for the next one rather than
being refused. The relay also notes when connections open and when request bytes arrive, in
real (monotonic) time: the platform's record misses requests that never got an answer (a
deleted VM, an injected timeout), and connection reuse is only visible here.

``--namespace`` needs the listening socket inside a network namespace:
:func:`socket_in_namespace` makes it there (``setns`` on one short-lived thread) and the relay
serves it from the host's namespace, where the platforms are.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from forewarn.verify.model import VerifyError
from forewarn.wire.errors import MISSING_METADATA_HEADER, error_body

_T = TypeVar("_T")

#: How long a call into the relay's loop may take.
CALL_TIMEOUT = 10.0
#: ``CLONE_NEWNET`` from <sched.h>: the namespace kind ``setns`` joins.
CLONE_NEWNET = 0x40000000


def _bad_request() -> bytes:
    body = error_body(MISSING_METADATA_HEADER)
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


@dataclass(frozen=True, slots=True)
class Traffic:
    """One thing the relay saw: a connection opened (``"open"``) or request bytes
    (``"data"``) from the handler, at ``at`` (monotonic seconds), on connection ``conn``; or
    request bytes the relay answered 400 itself (``"refused"``, :meth:`Relay.refuse_until`)."""

    at: float
    kind: str
    conn: int
    #: For ``"refused"`` (a request the relay answered 400 itself): its request line.
    detail: str = ""


class Relay:
    """A TCP relay on ``host:port`` (or an already bound ``sock``) to the current target."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self._port = port
        self._sock = sock
        self._monotonic = monotonic
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="forewarn-verify-relay", daemon=True)
        self._server: asyncio.Server | None = None
        self._target: tuple[str, int] | None = None
        self._target_set: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._traffic: list[Traffic] = []
        self._lock = threading.Lock()
        self._next_conn = 0
        self._refuse_until = 0.0
        self.address: tuple[str, int] = (host, port)

    # -- lifetime --------------------------------------------------------------------------

    def start(self) -> tuple[str, int]:
        """Listen; the address bound. ``VerifyError`` when it is taken or not allowed."""
        self._thread.start()
        try:
            self.address = self._call(self._listen())
        except OSError as error:
            self.stop()
            where = f"{self._host}:{self._port}"
            raise VerifyError(f"cannot listen on {where}: {error.strerror or error}") from None
        return self.address

    def stop(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CALL_TIMEOUT)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT)

    async def _listen(self) -> tuple[str, int]:
        self._target_set = asyncio.Event()
        if self._sock is not None:
            self._server = await asyncio.start_server(self._relay, sock=self._sock)
        else:
            self._server = await asyncio.start_server(self._relay, self._host, self._port)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()
        # Connections still waiting (for a target, for the other side) end here, not as
        # "Task was destroyed but it is pending!" on standard error after the run's last line.
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # -- the trial's target ----------------------------------------------------------------

    def point_at(self, target: tuple[str, int] | None) -> None:
        """New connections go to ``target`` from now on (None: they wait for the next)."""

        def change() -> None:
            assert self._target_set is not None
            self._target = target
            if target is None:
                self._target_set.clear()
            else:
                self._target_set.set()

        self._loop.call_soon_threadsafe(change)

    def traffic(self, since: float = 0.0) -> list[Traffic]:
        """What the relay saw at or after ``since`` (monotonic seconds)."""
        with self._lock:
            return [item for item in self._traffic if item.at >= since]

    def _note(self, kind: str, conn: int, detail: str = "") -> None:
        with self._lock:
            self._traffic.append(Traffic(self._monotonic(), kind, conn, detail))

    def refuse_until(self, moment: float) -> None:
        """Until ``moment`` (monotonic seconds) every request the handler sends is answered
        400, as Azure answers a request missing its ``Metadata: true`` header or its
        api-version, and its connection closed; nothing reaches the platform."""
        self._refuse_until = moment

    def _refusing(self) -> bool:
        return self._monotonic() < self._refuse_until

    # -- one connection --------------------------------------------------------------------

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One handler connection, relayed; ended by :meth:`_close` without ending cancelled:
        asyncio's stream server asks a connection's finished task for its exception, which a
        cancelled task raises, and logs a traceback (seen when a run was interrupted)."""
        try:
            await self._relay_connection(reader, writer)
        except asyncio.CancelledError:
            return  # the relay is closing: this connection is over, nothing more to do

    async def _relay_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._next_conn += 1
        conn = self._next_conn
        self._note("open", conn)
        self._writers.add(writer)
        try:
            assert self._target_set is not None
            await self._target_set.wait()
            assert self._target is not None
            try:
                up_reader, up_writer = await asyncio.open_connection(*self._target)
            except OSError:
                return  # the trial's platform went away at that moment: a refused connection
            self._writers.add(up_writer)
            try:
                await asyncio.gather(
                    self._pipe(reader, up_writer, conn, writer),
                    self._pipe(up_reader, writer, None),
                )
            finally:
                self._writers.discard(up_writer)
                up_writer.close()
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: int | None,
        back: asyncio.StreamWriter | None = None,
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if conn is not None and back is not None and self._refusing():
                    line = chunk.split(b"\r\n", 1)[0].decode("latin-1", "replace")
                    self._note("refused", conn, line[:300])
                    back.write(BAD_REQUEST)
                    await back.drain()
                    back.close()
                    break
                if conn is not None:
                    self._note("data", conn)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # one side is done: so is the other (an upstream close closes the handler's side)
            writer.close()


def socket_in_namespace(namespace: str, host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` inside the network namespace ``namespace``
    (``/run/netns/NAME``), made on a thread that joins it and exits; needs root."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    made: list[socket.socket] = []
    failed: list[str] = []

    def make() -> None:
        try:
            fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
        except OSError as error:
            failed.append(f"no network namespace {namespace}: {error.strerror}")
            return
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                failed.append(f"cannot enter {namespace}: {os.strerror(ctypes.get_errno())}")
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((host, port))
                listener.listen(128)
            except OSError as error:
                listener.close()
                failed.append(f"cannot listen on {host}:{port} in {namespace}: {error.strerror}")
                return
            listener.setblocking(False)
            made.append(listener)
        finally:
            os.close(fd)

    # The thread keeps the namespace it joined; it ends at once, so nothing else runs there.
    thread = threading.Thread(target=make, name="forewarn-verify-netns")
    thread.start()
    thread.join()
    if failed:
        raise VerifyError(failed[0])
    return made[0]


#: What the relay answers while it refuses: Azure's 400 for a request without ``Metadata:
#: true`` (learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and
#: debugging"; docs/spec.md SPEC 1.1, SPEC 1.2).
BAD_REQUEST = _bad_request()

__all__ = ["BAD_REQUEST", "CLONE_NEWNET", "Relay", "Traffic", "socket_in_namespace"]
