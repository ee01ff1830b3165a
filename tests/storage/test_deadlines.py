"""The deadlines that end calls to a silent PostgreSQL (``forewarn.storage._deadlines``): one
thread keeps them all, runs each once its time is up, skips those cancelled first, and wakes
for a deadline set earlier than the one it sleeps until."""

from __future__ import annotations

import threading

import pytest

from forewarn.storage import _deadlines as deadlines

#: How long a test waits for what must happen before calling it hung (not a verdict on speed).
HANG_SECONDS = 30.0


def _wait(event: threading.Event, what: str) -> None:
    assert event.wait(HANG_SECONDS), f"{what} did not happen within {HANG_SECONDS:g} s"


def test_an_action_runs_once_its_time_is_up_and_a_cancelled_one_never() -> None:
    ran: list[str] = []
    done = threading.Event()

    def kept() -> None:
        ran.append("kept")
        done.set()

    cancelled = deadlines.after(0.05, lambda: ran.append("cancelled"))
    deadlines.after(0.1, kept)
    cancelled.cancel()
    _wait(done, "the kept deadline's action")
    # The cancelled one's time came first: had it run, it would be in the list already.
    assert ran == ["kept"]


def test_a_deadline_earlier_than_the_one_the_keeper_sleeps_until_wakes_it() -> None:
    done = threading.Event()
    late = deadlines.after(3600.0, lambda: None)
    try:
        deadlines.after(0.01, done.set)
        _wait(done, "the earlier deadline's action")
    finally:
        late.cancel()


def test_an_action_that_fails_is_logged_and_the_next_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fails() -> None:
        raise OSError("a socket already closed")

    done = threading.Event()
    with caplog.at_level("ERROR", logger="forewarn.storage"):
        deadlines.after(0.01, fails)
        deadlines.after(0.02, done.set)
        _wait(done, "the deadline after the failing one")
    assert "a deadline's action failed" in caplog.text


def test_one_thread_keeps_every_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    done = threading.Event()
    for _ in range(50):
        deadlines.after(60.0, lambda: None).cancel()
    deadlines.after(0.01, done.set)
    _wait(done, "the last deadline's action")
    assert [thread.name for thread in started] in ([], ["forewarn deadlines"])
