"""``serve --workers``'s supervision in process (docs/scale-out.md, "Workers"): a worker's
exit wakes the supervisor, which starts it again, and its start and stop are woken by the
worker's output and exit, never found by looking on a timer.

The workers here are small processes that say ``ready`` (or refuse, or exit) as a worker
does, and the event loop's clock stands still: no timer of the loop ever fires, so what the
supervisor does, it does because the kernel told it (a pidfd the loop watches, or a thread
waiting on the process where the kernel refuses pidfds). A supervisor that looked at its
workers on a timer would wait for ever here: the test's only bound is on that hang.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

import pytest

from forewarn.server.runner import ServeSettings
from forewarn.server.workers import Workers, WorkerStartError

T = TypeVar("T")

#: A worker that reads its orders, says it listens, and waits for a signal.
LISTENS = (
    "import signal, sys; sys.stdin.buffer.read(); sys.stdout.write('ready\\n'); "
    "sys.stdout.flush(); signal.pause()"
)
#: A worker that refuses to start in one line, as a real one does.
REFUSES = (
    "import sys; sys.stdin.buffer.read(); sys.stdout.write('error: no room at the inn\\n'); "
    "sys.exit(1)"
)
#: A worker that exits without a word.
VANISHES = "import sys; sys.stdin.buffer.read(); sys.exit(3)"
#: How long a scenario may hang before it is called hung (not a verdict on speed).
HANG_SECONDS = 60.0


class _StandIns(Workers):
    """Workers running ``code``, each start's outcome queued as (number, pid, problem)."""

    def __init__(self, code: str, count: int = 2) -> None:
        super().__init__(ServeSettings(), count)
        self.code = code
        self.outcomes: asyncio.Queue[tuple[int, int, str | None]] = asyncio.Queue()

    #: Every process started, so that a hung scenario leaves none behind.
    spawned: ClassVar[list[subprocess.Popen[bytes]]] = []

    def _command(self, number: int) -> list[str]:
        return [sys.executable, "-c", self.code]

    #: How many starts from now on fail as a fork refused by the kernel does.
    refusals = 0

    def _spawn(self, number: int) -> Any:
        if self.refusals:
            self.refusals -= 1
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        worker = super()._spawn(number)
        self.spawned.append(worker.process)
        return worker

    async def _until_ready(self, worker: Any) -> str | None:
        problem = await super()._until_ready(worker)
        self.outcomes.put_nowait((worker.number, worker.process.pid, problem))
        return problem


class _Clock:
    """The event loop's clock, moved only by the test: no timer of the loop fires until the
    test moves the clock past it."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now


class _Lines(logging.Handler):
    """The supervisor's log lines, as they are logged (on the loop's thread)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: asyncio.Queue[str] = asyncio.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.put_nowait(record.getMessage())


def _on_a_still_clock(scenario: Callable[[_Clock], Coroutine[Any, Any, T]]) -> T:
    """Run ``scenario`` on an event loop whose clock moves only when it moves it, cancelled
    from another thread if it hangs."""
    loop = asyncio.new_event_loop()
    clock = _Clock()
    loop.time = clock.time  # type: ignore[method-assign]
    _StandIns.spawned.clear()
    hung = threading.Timer(HANG_SECONDS, loop.call_soon_threadsafe, args=(loop.stop,))
    hung.start()
    try:
        return loop.run_until_complete(scenario(clock))
    except RuntimeError:  # stopped before it completed
        if hung.is_alive():
            raise
    finally:
        hung.cancel()
        for process in _StandIns.spawned:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        loop.close()
    pytest.fail(f"hung for {HANG_SECONDS:g} s: something waited on a timer")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(params=["pidfd", "waiting-thread"])
def exits_seen_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways an exit is seen: a pidfd, and a thread where the kernel refuses one."""
    if request.param == "waiting-thread":

        def refused(pid: int, flags: int = 0) -> int:
            raise OSError(errno.ENOSYS, "pidfd_open refused")

        monkeypatch.setattr(os, "pidfd_open", refused)
    return str(request.param)


def test_a_killed_worker_is_started_again_woken_by_its_exit(exits_seen_by: str) -> None:
    logger = logging.getLogger("forewarn.workers")

    async def scenario(clock: _Clock) -> tuple[list[str], list[int], list[int]]:
        workers = _StandIns(LISTENS)
        lines = _Lines()
        logger.addHandler(lines)
        stop = asyncio.Event()
        said, started = [], []
        try:
            await workers.start()
            while not workers.outcomes.empty():
                workers.outcomes.get_nowait()
            assert workers.up == 2
            first, second = workers.pids()
            started += [first, second]
            supervising = asyncio.create_task(workers.supervise(stop))
            # Killed three times, each time young: started again after 0.5, 1, 2 s (of the
            # loop's clock, which only the test moves), woken by the exit each time.
            for pause in (0.5, 1.0, 2.0):
                dead = workers.pids()[0]
                os.kill(dead, signal.SIGKILL)
                said.append(await lines.lines.get())
                assert workers.up == 1
                assert workers.outcomes.empty()
                clock.now += pause
                number, pid, problem = await workers.outcomes.get()
                assert (number, problem) == (1, None)
                assert workers.pids() == [pid, second]
                assert workers.up == 2
                started.append(pid)
            stop.set()
            await supervising
        finally:
            logger.removeHandler(lines)
            await workers.stop()  # SIGTERM, each exit awaited
        return said, started, workers.pids()

    said, started, last = _on_a_still_clock(scenario)
    assert all(map(_gone, started))
    assert last == [started[-1], started[1]]
    first, _, again, once_more, _ = started
    assert said == [
        f"worker 1 (pid {first}) exited with status -9; starting it again in 0.5 s",
        f"worker 1 (pid {again}) exited with status -9; starting it again in 1 s",
        f"worker 1 (pid {once_more}) exited with status -9; starting it again in 2 s",
    ]


@pytest.mark.parametrize(
    ("code", "said"),
    [(REFUSES, "no room at the inn"), (VANISHES, "exited with status 3 as it started")],
)
def test_a_worker_that_cannot_start_is_named_with_its_line(
    exits_seen_by: str, code: str, said: str
) -> None:
    async def scenario(_: _Clock) -> list[subprocess.Popen[bytes]]:
        workers = _StandIns(code)
        try:
            with pytest.raises(WorkerStartError) as refused:
                await workers.start()
            assert str(refused.value) == f"worker 1 could not start: {said}"
        finally:
            await workers.stop()
        return [worker.process for worker in workers._running.values()]

    processes = _on_a_still_clock(scenario)
    assert all(process.returncode is not None for process in processes)


def test_a_worker_the_kernel_refuses_to_start_again_is_tried_again_later() -> None:
    """A restart whose process cannot be made (a fork refused: EAGAIN, EMFILE) is said once
    and tried again after the next pause, not given up in silence."""
    logger = logging.getLogger("forewarn.workers")

    async def scenario(clock: _Clock) -> list[str]:
        workers = _StandIns(LISTENS)
        lines = _Lines()
        logger.addHandler(lines)
        stop = asyncio.Event()
        said = []
        try:
            await workers.start()
            while not workers.outcomes.empty():
                workers.outcomes.get_nowait()
            supervising = asyncio.create_task(workers.supervise(stop))
            os.kill(workers.pids()[0], signal.SIGKILL)
            said.append(await lines.lines.get())
            workers.refusals = 1
            clock.now += 0.5
            said.append(await lines.lines.get())
            assert workers.outcomes.empty()
            assert workers.up == 1
            clock.now += 1.0
            number, _, problem = await workers.outcomes.get()
            assert (number, problem, workers.up) == (1, None, 2)
            stop.set()
            await supervising
        finally:
            logger.removeHandler(lines)
            await workers.stop()
        return said

    said = _on_a_still_clock(scenario)
    assert said[1] == (
        "worker 1 could not be started: Resource temporarily unavailable; again in 1 s"
    )
