"""A private network namespace for a test: loopback up and 169.254.169.254 on it, deleted
(with anything still running in it) however the test ends. Needs root and iproute2; the
test is skipped with the reason otherwise."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import pytest
from e2e_support import AZURE_ENDPOINT, run


@dataclass(frozen=True)
class Namespace:
    name: str

    def argv(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


def skip_unless_namespaces_work() -> None:
    """Skip, saying why, where no network namespace can be made."""
    if not sys.platform.startswith("linux"):
        pytest.skip(f"network namespaces are Linux-only (this is {sys.platform})")
    if os.geteuid() != 0:
        pytest.skip(f"creating a network namespace needs root (running as uid {os.geteuid()})")
    if shutil.which("ip") is None:
        pytest.skip("iproute2's `ip` is not installed")


def _kill_everything_in(namespace: str) -> None:
    """Only this test starts processes in its namespace; none may outlive it."""
    listed = run(["ip", "netns", "pids", namespace], timeout=10)
    for pid in listed.stdout.split():
        with suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


@contextmanager
def namespace_for_test() -> Iterator[Namespace]:
    skip_unless_namespaces_work()
    name = f"forewarn-e2e-{os.getpid()}-{secrets.token_hex(3)}"
    added = run(["ip", "netns", "add", name], timeout=10)
    if added.returncode != 0:
        pytest.skip(f"`ip netns add {name}` failed: {added.stderr.strip()}")
    namespace = Namespace(name)
    try:
        for argv in (
            ["ip", "link", "set", "lo", "up"],
            ["ip", "addr", "add", f"{AZURE_ENDPOINT}/32", "dev", "lo"],
        ):
            result = run(namespace.argv(*argv), timeout=10)
            assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
        yield namespace
    finally:
        _kill_everything_in(name)
        deleted = run(["ip", "netns", "del", name], timeout=10)
        assert deleted.returncode == 0, deleted.stderr
