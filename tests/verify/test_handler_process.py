"""The handler's process group as ``HandlerProcess.stop`` sees it: stopped means no member
runs once ``stop()`` returns, and a zombie its parent never reaped is not running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from forewarn.verify.handler import HandlerProcess, _group_runs

#: Starts a child that ignores SIGTERM, so only the group's SIGKILL ends it, then waits.
PARENT_AND_CHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen(['sh', '-c', 'trap \"\" TERM; sleep 300 & wait'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def test_stop_returns_only_once_no_member_of_the_group_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal takes effect when its target is next scheduled: on a busy machine the group's
    SIGKILL lands late. Delivered here 0.3 s late on purpose, ``stop()`` still returns only
    once nothing of the group runs."""
    killpg = os.killpg

    def late_kill(group: int, signum: int) -> None:
        if signum == signal.SIGKILL:
            threading.Timer(0.3, killpg, (group, signum)).start()
        else:
            killpg(group, signum)

    monkeypatch.setattr(os, "killpg", late_kill)
    handler = HandlerProcess([sys.executable, "-c", PARENT_AND_CHILD], dict(os.environ))
    handler.start()
    try:
        deadline = time.monotonic() + 20
        while not handler.output_tail().strip() and time.monotonic() < deadline:
            time.sleep(0.02)
        child = int(handler.output_tail().split()[0])
        group = os.getpgid(child)
        assert _group_runs(group)
        handler.stop()
        assert not _group_runs(group)
    finally:
        handler.close()


def test_a_zombie_left_in_the_group_does_not_count_as_running() -> None:
    # a child of this process in a group of its own, killed and not yet reaped: a zombie
    zombie = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert _group_runs(zombie.pid)
        os.kill(zombie.pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while _group_runs(zombie.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(f"/proc/{zombie.pid}/stat", "rb") as stat:
            assert stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"  # listed, not reaped
        assert not _group_runs(zombie.pid)
    finally:
        zombie.kill()
        zombie.wait()
    assert not _group_runs(zombie.pid)
