"""Finding (or installing) wrk and nginx, and starting and stopping the processes we run.

wrk and nginx come from Debian (``apt-get install -y wrk nginx-light``, or ``nginx`` where the
light build is not packaged). They are installed only when missing, only as root, and
``apt-get update`` runs once before, as a fresh machine's package lists may be empty.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Debian package candidates per tool, first match wins.
PACKAGES = {"wrk": ("wrk",), "nginx": ("nginx-light", "nginx")}
#: nginx lives in /usr/sbin, which a non-login PATH may not list.
EXTRA_PATH = ("/usr/sbin", "/usr/local/sbin", "/sbin")


@dataclass
class Tools:
    wrk: str | None
    nginx: str | None
    notes: list[str] = field(default_factory=list)


def which(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in EXTRA_PATH:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_tools(*, install: bool) -> Tools:
    """wrk and nginx, installing whichever is missing when ``install`` and we may."""
    missing = [name for name in PACKAGES if which(name) is None]
    notes: list[str] = []
    if missing and install:
        notes.extend(_apt_install(missing))
    return Tools(which("wrk"), which("nginx"), notes)


def _apt_install(names: Sequence[str]) -> list[str]:
    apt = shutil.which("apt-get")
    if apt is None:
        return [f"{', '.join(names)} missing and no apt-get to install them"]
    if os.geteuid() != 0:
        return [f"{', '.join(names)} missing; installing needs root (apt-get install -y wrk nginx)"]
    notes = []
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    update = subprocess.run(
        [apt, "update", "-qq"], capture_output=True, text=True, env=env, timeout=300
    )
    if update.returncode != 0:
        notes.append(f"apt-get update failed: {update.stderr.strip()[-200:]}")
    for name in names:
        for package in PACKAGES[name]:
            done = subprocess.run(
                [apt, "install", "-y", "-qq", "--no-install-recommends", package],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if done.returncode == 0:
                notes.append(f"installed {package}")
                break
        else:
            notes.append(f"could not install {name}")
    return notes


def raise_open_files(wanted: int) -> int:
    """Raise RLIMIT_NOFILE (children inherit it); returns the soft limit now in force.

    A connection per polling VM (or a listening socket per VM address) needs more than the
    usual 1024; with CAP_SYS_RESOURCE the hard limit is raised too.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    if hard != resource.RLIM_INFINITY and hard < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            return wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


#: Every port the benchmark suite listens on, documented in bench/RESULTS.md: a range of its
#: own, below the kernel's ephemeral ports (32768 and up), where connections get theirs.
PORTS = range(18000, 19000)


class _PortPicker:
    """Hands out ports of :data:`PORTS` in turn from a random place, so that two picks of one
    run never collide even before the first is bound, and two runs rarely do."""

    def __init__(self) -> None:
        self._next = secrets.randbelow(len(PORTS))

    def pick(self, host: str) -> int:
        for _ in range(len(PORTS)):
            port = PORTS[self._next]
            self._next = (self._next + 1) % len(PORTS)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
        raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1} on {host}")


_PICKER = _PortPicker()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of :data:`PORTS` nobody listens on right now."""
    return _PICKER.pick(host)


def wait_for_port(host: str, port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll (short, bounded waits) until ``host:port`` accepts, or fail with the reason."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on {host}:{port} within {timeout:g} s")


def stop(process: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, grace: float = 10) -> None:
    """Stop a process this suite started, by its own id only."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=grace)
    for stream in (process.stdout, process.stderr, process.stdin):
        if stream is not None:
            stream.close()


def split_cores() -> tuple[int, int] | None:
    """The server's core and the load generator's, a core each when this process may run on
    two (the issue's rule: what the generator spends never competes with the server)."""
    cores = sorted(os.sched_getaffinity(0))
    return (cores[0], cores[1]) if len(cores) >= 2 else None


def pin_cores() -> tuple[list[str], list[str], dict[str, int] | None]:
    """taskset prefixes for the server and the load generator (:func:`split_cores`), and
    which cores they are, for the report; no prefixes and None on a single core or without
    taskset."""
    cores = split_cores()
    taskset = which("taskset")
    if cores is None or taskset is None:
        return [], [], None
    server, generator = cores
    return (
        [taskset, "-c", str(server)],
        [taskset, "-c", str(generator)],
        {"server_core": server, "generator_core": generator},
    )
