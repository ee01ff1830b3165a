"""The deadlines that end calls to a silent PostgreSQL (``forewarn.storage._deadlines``): one
thread keeps them all, runs each once its time is up, skips those cancelled first, and wakes
for a deadline set earlier than the one it sleeps until.

Each test keeps its deadlines in a keeper of its own (the process's is made at import, where
a change to how a keeper is made would go unseen), and one test uses the process's."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path

import pytest

from forewarn.storage import _deadlines as deadlines

#: How long a test waits for what must happen before calling it hung (not a verdict on speed).
HANG_SECONDS = 30.0


def _wait(event: threading.Event, what: str) -> None:
    assert event.wait(HANG_SECONDS), f"{what} did not happen within {HANG_SECONDS:g} s"


@pytest.fixture
def keeper() -> deadlines.Keeper:
    return deadlines.Keeper()


def test_an_action_runs_once_its_time_is_up_and_a_cancelled_one_never(
    keeper: deadlines.Keeper,
) -> None:
    ran: list[str] = []
    done = threading.Event()

    def kept() -> None:
        ran.append("kept")
        done.set()

    cancelled = keeper.after(0.05, lambda: ran.append("cancelled"))
    keeper.after(0.1, kept)
    cancelled.cancel()
    _wait(done, "the kept deadline's action")
    # The cancelled one's time came first: had it run, it would be in the list already.
    assert ran == ["kept"]


def test_actions_run_in_the_order_of_their_times_none_before_its_time(
    keeper: deadlines.Keeper,
) -> None:
    ran: list[tuple[float, float]] = []  # (its seconds, when it ran after they were set)
    done = threading.Event()
    began = time.monotonic()

    def at(seconds: float) -> None:
        ran.append((seconds, time.monotonic() - began))
        if seconds == 0.3:
            done.set()

    for seconds in (0.3, 0.2, 0.1, 0.15):
        keeper.after(seconds, functools.partial(at, seconds))
    _wait(done, "the last deadline's action")
    assert [seconds for seconds, _ in ran] == [0.1, 0.15, 0.2, 0.3]
    assert all(when >= seconds for seconds, when in ran), ran


def test_a_deadline_earlier_than_the_one_the_keeper_sleeps_until_wakes_it(
    keeper: deadlines.Keeper,
) -> None:
    done = threading.Event()
    late = keeper.after(3600.0, lambda: None)
    try:
        keeper.after(0.01, done.set)
        _wait(done, "the earlier deadline's action")
    finally:
        late.cancel()


def test_a_deadline_set_while_the_keeper_waits_for_none_wakes_it(
    keeper: deadlines.Keeper,
) -> None:
    first = threading.Event()
    keeper.after(0.0, first.set)
    _wait(first, "the first deadline's action")  # its thread now waits with nothing due
    done = threading.Event()
    keeper.after(0.01, done.set)
    _wait(done, "a deadline set after the keeper ran out of them")


def test_an_action_that_fails_is_logged_and_the_next_still_runs(
    keeper: deadlines.Keeper, caplog: pytest.LogCaptureFixture
) -> None:
    def fails() -> None:
        raise OSError("a socket already closed")

    done = threading.Event()
    with caplog.at_level("ERROR", logger="forewarn.storage"):
        keeper.after(0.01, fails)
        keeper.after(0.02, done.set)
        _wait(done, "the deadline after the failing one")
    logged = [r.getMessage() for r in caplog.records if r.name == "forewarn.storage"]
    assert logged == ["a deadline's action failed"]
    assert "OSError: a socket already closed" in caplog.text  # with its traceback


def test_one_thread_keeps_every_deadline(
    keeper: deadlines.Keeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    done = threading.Event()
    for _ in range(50):
        keeper.after(60.0, lambda: None).cancel()
    keeper.after(0.01, done.set)
    _wait(done, "the last deadline's action")
    assert [thread.name for thread in started] == ["forewarn deadlines"]
    assert started[0].daemon  # never holds up the process's exit


def test_the_process_keeper_runs_deadlines_and_a_forked_child_gets_its_own() -> None:
    done = threading.Event()
    deadlines.after(0.01, done.set)
    _wait(done, "the process keeper's deadline")
    pid = os.fork()
    if pid == 0:  # the child: the parent's keeper thread is not here; a new keeper must be
        ran = threading.Event()
        deadlines.after(0.01, ran.set)
        os._exit(0 if ran.wait(HANG_SECONDS) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "a forked child's deadline never ran"


def test_a_deadline_far_off_keeps_the_keeper_asleep_until_it(keeper: deadlines.Keeper) -> None:
    """Asleep, not looking again and again: its thread's CPU time (ticks of
    ``/proc/self/task/ID/stat``) over half a second before a deadline a minute off stays
    near none, where a thread that looked in a loop would spend the half second."""
    far = keeper.after(60.0, lambda: None)
    try:
        thread = keeper._thread  # the one this keeper started for the deadline
        assert thread is not None
        stat = Path(f"/proc/self/task/{thread.native_id}/stat")

        def ticks() -> int:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime, stime

        before = ticks()
        time.sleep(0.5)
        assert ticks() - before <= 5
    finally:
        far.cancel()
