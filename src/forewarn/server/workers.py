"""``forewarn serve --workers N``: every core of one machine answering the VMs of one fleet.

One ``forewarn serve`` answers on one core. With ``--workers N`` it starts N worker
processes, each a front-end of the fleet's shared PostgreSQL journal (docs/scale-out.md)
listening on the same VM-facing addresses with ``SO_REUSEPORT``, so the kernel spreads the
VMs over them, each VM's connections to one worker (:mod:`forewarn.server.http._reuseport`).
The process the user started supervises them and is itself a front-end without VM-facing
listeners: it serves the control API, the dashboard and ``/healthz`` (the dashboard's stream
and scenario runs live in one process, so one process serves them all), holds the leader
role (the time's records, Event Grid's deliveries), runs the impact hooks and logs the
events once, and writes the control API's token.

Start-up order: the store (``--store postgresql://...``, or a PostgreSQL of its own under
the data directory: :mod:`forewarn.server.embedded_postgres`), the journal opened and
checked once by the supervising process (so a refused fleet or a damaged journal is one
line, not N workers failing), the VM-facing addresses checked free, the workers started and
each waited for until it listens, then the control API. A worker that dies is started again
after a pause that doubles from :data:`FIRST_PAUSE` to :data:`LONGEST_PAUSE` while it keeps
dying young (one log line each time); the others answer meanwhile. Its exit is what wakes
the supervisor (:func:`watch_exit`), as its output does while it starts: nothing here runs
on a timer while every worker is up. SIGTERM stops the workers, then the supervisor's
parts, then its PostgreSQL, and the exit status is 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import functools
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from forewarn.collector import settle_heap
from forewarn.domain.impact import ImpactPolicies
from forewarn.errors import ForewarnError, reason
from forewarn.server._activity import Activity, ActivityEndpoint
from forewarn.server._serve_logging import configure_logging, log
from forewarn.server.background import running
from forewarn.server.http import raise_descriptor_limit

if TYPE_CHECKING:
    from forewarn.server.runner import ServeSettings

__all__ = [
    "FIRST_PAUSE",
    "LONGEST_PAUSE",
    "WorkerStartError",
    "Workers",
    "check_addresses_free",
    "main",
    "watch_exit",
]

LOGGER = logging.getLogger("forewarn.workers")

#: Seconds before a dead worker is started again, doubled while it keeps dying young.
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 30.0
#: A worker that ran this long before it died is started again after the first pause.
YOUNG_SECONDS = 30.0
#: How long a worker has to listen, and to stop after SIGTERM.
START_SECONDS = 120.0
STOP_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1
_READY = b"ready\n"
_REFUSED = b"error: "


class WorkerStartError(ForewarnError):
    """A worker could not start (its one line says why)."""


def check_addresses_free(addresses: Sequence[tuple[str, int]]) -> None:
    """Each VM-facing address is bound here once without ``SO_REUSEPORT``, which fails while
    anything listens there, so the workers (which bind with it) never join the listeners of
    another server; the same one line as a single ``serve``'s when one is taken."""
    for host, port in addresses:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise OSError(
                    f"the VM-facing endpoint cannot listen on {host}:{port}: {exc.strerror or exc}"
                ) from None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """In a worker: SIGTERM when the supervisor dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def watch_exit(process: subprocess.Popen[bytes], on_exit: Callable[[], None]) -> None:
    """Call ``on_exit`` on the running loop's thread once ``process`` has exited, woken by
    the exit itself, never by a timer: a pidfd (Linux 5.3) that the loop watches, or, where
    the kernel refuses one, a thread blocked in ``wait`` until then."""
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # an older kernel, or a sandbox refusing the call
        threading.Thread(
            target=_wait_in_thread,
            args=(loop, process, on_exit),
            name=f"exit of {process.pid}",
            daemon=True,
        ).start()
        return

    def exited() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        on_exit()

    loop.add_reader(pidfd, exited)


def _wait_in_thread(
    loop: asyncio.AbstractEventLoop, process: subprocess.Popen[bytes], on_exit: Callable[[], None]
) -> None:
    process.wait()
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
        loop.call_soon_threadsafe(on_exit)


@dataclass
class _Worker:
    number: int
    process: subprocess.Popen[bytes]
    started_at: float
    ready: bool = False
    #: Set once the process has exited (:func:`watch_exit`).
    exited: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    #: Set by its exit and by output to read, while it starts.
    woken: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def ended(self) -> None:
        self.exited.set()
        self.woken.set()


class Workers:
    """N worker processes for ``settings`` (whose store is the shared PostgreSQL one)."""

    def __init__(self, settings: ServeSettings, count: int) -> None:
        self._orders = pickle.dumps(dataclasses.replace(settings, workers=1))
        self.count = count
        self._running: dict[int, _Worker] = {}
        self._stopping = False

    @property
    def up(self) -> int:
        """How many workers listen now."""
        return sum(
            1 for worker in self._running.values() if worker.ready and worker.process.poll() is None
        )

    def pids(self) -> list[int]:
        return [self._running[n].process.pid for n in sorted(self._running)]

    def _command(self, number: int) -> list[str]:
        """The command line of worker ``number`` (from 1)."""
        return [
            sys.executable,
            "-c",
            "from forewarn.server.workers import main; main()",
            str(number),
            str(self.count),
        ]

    def _spawn(self, number: int) -> _Worker:
        """Start worker ``number`` (from 1), its orders on its standard input, its exit
        watched."""
        process = subprocess.Popen(
            self._command(number),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor, which stops it
            preexec_fn=_die_with_parent,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(self._orders)
        process.stdin.close()
        os.set_blocking(process.stdout.fileno(), False)
        worker = _Worker(number, process, time.monotonic())
        watch_exit(process, worker.ended)
        self._running[number] = worker
        return worker

    async def _until_ready(self, worker: _Worker) -> str | None:
        """Wait until ``worker`` listens; None, or its one line when it could not start.
        Woken by its output and by its exit."""
        stdout = worker.process.stdout
        assert stdout is not None
        loop = asyncio.get_running_loop()
        loop.add_reader(stdout.fileno(), worker.woken.set)
        reading = True
        said = b""
        try:
            async with asyncio.timeout(START_SECONDS):
                while True:
                    worker.woken.clear()
                    if reading:
                        with contextlib.suppress(BlockingIOError):
                            chunk = stdout.read(4096)
                            if chunk == b"":  # the end: only its exit is left to wait for
                                loop.remove_reader(stdout.fileno())
                                reading = False
                            said += chunk or b""
                    if said.startswith(_READY):
                        worker.ready = True
                        return None
                    if worker.exited.is_set():
                        with contextlib.suppress(BlockingIOError, ValueError):
                            said += stdout.read() or b""
                        status = worker.process.wait()  # it has exited: reaped at once
                        line = said.decode(errors="replace").strip().removeprefix("error: ")
                        return line or f"exited with status {status} as it started"
                    await worker.woken.wait()
        except TimeoutError:
            return f"did not listen within {START_SECONDS:g} s"
        finally:
            if reading:
                loop.remove_reader(stdout.fileno())

    async def start(self) -> None:
        """Every worker started and listening; WorkerStartError naming the first that could
        not (the others are stopped by :meth:`stop`, which the caller's exit stack holds)."""
        workers = [self._spawn(number) for number in range(1, self.count + 1)]
        for worker in workers:
            problem = await self._until_ready(worker)
            if problem is not None:
                raise WorkerStartError(f"worker {worker.number} could not start: {problem}")

    async def supervise(self, stop: asyncio.Event) -> None:
        """Start each worker that dies again, after a pause that doubles while it keeps dying
        young; one log line for each restart. Until ``stop`` is set. Each worker's exit
        wakes its keeper: nothing here runs while every worker is up."""
        keepers = [
            asyncio.create_task(self._keep(number, stop), name=f"worker {number}'s keeper")
            for number in sorted(self._running)
        ]
        try:
            await stop.wait()
        finally:
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)

    async def _keep(self, number: int, stop: asyncio.Event) -> None:
        """Worker ``number`` started again each time it exits, until ``stop`` is set."""
        pause = FIRST_PAUSE
        while True:
            worker = self._running[number]
            await worker.exited.wait()
            status = worker.process.wait()  # it has exited: reaped at once
            worker.ready = False
            if worker.process.stdout is not None:
                worker.process.stdout.close()
            if time.monotonic() - worker.started_at >= YOUNG_SECONDS:
                pause = FIRST_PAUSE
            log(
                LOGGER,
                logging.WARNING,
                f"worker {number} (pid {worker.process.pid}) exited with status {status}; "
                f"starting it again in {pause:g} s",
            )
            while True:  # until a process is had (EAGAIN, EMFILE: later), or stopping
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                if stop.is_set() or self._stopping:
                    return
                pause = min(pause * 2, LONGEST_PAUSE)
                try:
                    worker = self._spawn(number)
                    break
                except OSError as exc:
                    log(
                        LOGGER,
                        logging.ERROR,
                        f"worker {number} could not be started: {reason(exc)}; "
                        f"again in {pause:g} s",
                    )
            problem = await self._until_ready(worker)
            if problem is not None and worker.process.poll() is None:
                worker.process.kill()  # did not listen in time: dead, and started again
                worker.process.wait()

    async def stop(self) -> None:
        """SIGTERM to every worker, SIGKILL to those still running after
        :data:`STOP_SECONDS`; each one waited for."""
        self._stopping = True
        for worker in self._running.values():
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        exits = [worker.exited.wait() for worker in self._running.values()]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*exits), STOP_SECONDS)
        for worker in self._running.values():
            if worker.process.poll() is None:
                worker.process.kill()
            worker.process.wait()
            if worker.process.stdout is not None:
                worker.process.stdout.close()


# -- a worker ---------------------------------------------------------------------------------


def main() -> NoReturn:
    """A worker process: its orders (the supervisor's settings, pickled: written by the
    ``serve`` that started this process, never by anyone else) on standard input, ``ready``
    or ``error: ...`` on standard output, then serving until SIGTERM (exit status 0)."""
    number, count = int(sys.argv[1]), int(sys.argv[2])
    settings: ServeSettings = pickle.loads(sys.stdin.buffer.read())
    try:
        import uvloop

        uvloop.run(_serve_worker(settings, number, count))
    except (ForewarnError, OSError) as exc:
        sys.stdout.buffer.write(_REFUSED + str(exc).encode() + b"\n")
        sys.stdout.flush()
        sys.exit(1)
    sys.exit(0)


async def _serve_worker(settings: ServeSettings, number: int, count: int) -> None:
    """Follow the shared journal and answer the VMs on every VM-facing address (beside the
    other ``count - 1`` workers, each VM's connections steered to one of them) until
    SIGTERM; no control API, no leadership, no Event Grid, no hooks: the supervisor has
    those."""
    from forewarn.cluster.tasks import run_front_end
    from forewarn.server.runner import leave_unless_started, listen_for_vms
    from forewarn.server.state import open_state

    configure_logging(settings.log_level, settings.log_format, worker=number)
    raise_descriptor_limit()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    started = [False]
    async with contextlib.AsyncExitStack() as stack:
        state = open_state(settings)
        stack.callback(state.service.close)
        replica = state.replica
        if replica is None:
            raise WorkerStartError("a worker needs the shared PostgreSQL store")
        replica.register()
        stack.callback(leave_unless_started, replica, lambda: started[0])
        endpoint = ActivityEndpoint(
            state.service,
            Activity(),
            rate_limit=settings.rate_limit,
            impact=ImpactPolicies.parse(settings.impact),
            group_writes=True,
        )
        await listen_for_vms(settings, endpoint, state.service.vms(), stack, shared_by=count)
        settle_heap()
        follow = functools.partial(run_front_end, replica, leads=False)
        await stack.enter_async_context(running("the shared journal's follower", follow, stop))
        started[0] = True
        sys.stdout.buffer.write(_READY)
        sys.stdout.flush()
        await stop.wait()
