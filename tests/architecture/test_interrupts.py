"""The suite's processes take Ctrl-C as a terminal's foreground command does, even when the
suite itself was started as a background job (tests/support/interrupts.py says why)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from interrupts import ctrl_c_as_in_a_terminal


def _ignored_by(pid: int) -> set[int]:
    """The signals ``pid`` ignores, from its ``SigIgn`` mask in /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {number for number in range(1, 65) if mask >> (number - 1) & 1}
    raise AssertionError("no SigIgn line")


@pytest.fixture
def started_in_the_background() -> Iterator[None]:
    """This process as a shell without job control starts a background command."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGQUIT)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@pytest.mark.usefixtures("started_in_the_background")
def test_a_child_started_after_it_takes_ctrl_c() -> None:
    ctrl_c_as_in_a_terminal()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _ignored_by(child.pid).isdisjoint({signal.SIGINT, signal.SIGQUIT})
        child.send_signal(signal.SIGINT)
        assert child.wait(30) != 0  # KeyboardInterrupt ended it
    finally:
        child.kill()
        child.wait()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("started_in_the_background")
def test_without_it_the_child_ignores_ctrl_c() -> None:
    """What the function undoes: the ignored signals pass to every child."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert {signal.SIGINT, signal.SIGQUIT} <= _ignored_by(child.pid)
    finally:
        child.kill()
        child.wait()


def test_the_suites_own_processes_take_ctrl_c() -> None:
    """tests/conftest.py calls it before any test: this very process does not ignore it."""
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert signal.SIGINT not in _ignored_by(os.getpid())
