"""What a running ``forewarn serve`` holds per VM once every VM of a large fleet has polled.

One wildcard listener serves the whole fleet (``serve --bind 0.0.0.0:PORT``, VMs told apart
by the address each connection arrived at), inside a network namespace made for the run, so
the wildcard reaches nothing but that namespace's loopback. The server is started twice, with
a 1-VM fleet and with an N-VM one; every VM's address is then polled once on a new
connection (a bounded sweep: the figure is memory, not speed), and the server's resident set
is read from ``/proc/PID/status``. The cost of a VM is the difference spread over the
difference in VMs: ``(RSS_N - RSS_1) / (N - 1)``, so the interpreter, the libraries and the
control API, which every run pays once, are left out.

Run on its own: ``python -m bench --only memory`` (``--memory-vms`` sets N). The sweep runs in
the namespace as ``python -m bench.memory sweep PORT COUNT``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.fleetgen import addresses, fleet_yaml
from bench.servers import PATH, QUERY, serve_command
from bench.tools import free_port, stop

ROOT = Path(__file__).resolve().parents[1]
#: What ``forewarn serve`` prints once both planes listen (server/runner.py).
READY = "forewarn: Scheduled Events for"
#: Connections the sweep keeps open at once.
SWEEP_CONCURRENCY = 64
#: The target: a VM that has polled costs less than this in a running server.
TARGET_BYTES_PER_VM = 2048


class NamespaceUnavailableError(RuntimeError):
    """No private network namespace can be made here (not Linux, not root, no ``ip``)."""


@dataclass(frozen=True)
class ServedMemory:
    """One server's start-up time and resident set after every VM polled once."""

    vms: int
    start_seconds: float
    sweep_seconds: float
    polled_ok: int
    #: ``VmRSS``: resident now.
    rss_bytes: int
    #: ``VmHWM``: the most that was ever resident (start-up's parse included).
    hwm_bytes: int


@dataclass(frozen=True)
class MemoryResult:
    one: ServedMemory
    fleet: ServedMemory
    bytes_per_vm: float

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "target_bytes_per_vm": TARGET_BYTES_PER_VM}


def namespace_problem() -> str | None:
    """Why no network namespace can be made here, or None when one can."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"creating a network namespace needs root (running as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    return None


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise NamespaceUnavailableError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


@contextlib.contextmanager
def private_namespace() -> Iterator[str]:
    """A network namespace of its own with loopback up; removed on the way out, however the
    run ended, with any process still inside it (only this run starts processes there)."""
    problem = namespace_problem()
    if problem is not None:
        raise NamespaceUnavailableError(problem)
    name = f"forewarn-bench-{os.getpid()}-{secrets.token_hex(3)}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        listed = subprocess.run(
            ["ip", "netns", "pids", name], capture_output=True, text=True, timeout=30, check=False
        )
        for pid in listed.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30, check=False)


def _inside(namespace: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *argv]


def process_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes, from ``/proc/PID/status``."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                amount, unit = value.split()
                if unit != "kB":
                    raise RuntimeError(f"/proc/{pid}/status gives {key} in {unit}")
                fields[key] = int(amount) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def _wait_ready(process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Wait (short, bounded naps) for the start-up announcement, or fail with the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if READY in log.read_text(encoding="utf-8", errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.05)
    text = log.read_text(encoding="utf-8", errors="replace")[-2000:]
    raise RuntimeError(f"forewarn serve did not start within {timeout:g} s:\n{text}")


def measure_served(
    namespace: str, work: Path, vms: int, *, start_timeout: float = 600
) -> ServedMemory:
    """Start ``forewarn serve`` for ``vms`` VMs on one wildcard listener in ``namespace``,
    poll every VM once, and read the server's memory."""
    work.mkdir(parents=True, exist_ok=True)
    fleet = work / "fleet.yaml"
    fleet.write_text(fleet_yaml(vms), encoding="utf-8")
    port, control_port = free_port(), free_port()
    log_path = work / "forewarn.out"
    argv = serve_command(f"0.0.0.0:{port}", f"127.0.0.1:{control_port}", fleet)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "FOREWARN_TOKEN": secrets.token_urlsafe(24),
        "FOREWARN_RUNTIME_DIR": str(work),
    }
    started = time.perf_counter()
    with log_path.open("wb") as log:
        # `ip netns exec` enters the namespace and execs the command: the pid is the server's.
        server = subprocess.Popen(
            _inside(namespace, *argv), stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        _wait_ready(server, log_path, start_timeout)
        start_seconds = time.perf_counter() - started
        swept = time.perf_counter()
        done = subprocess.run(
            _inside(namespace, sys.executable, "-m", "bench.memory", "sweep", str(port), str(vms)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=max(120.0, vms / 200),
            check=False,
        )
        sweep_seconds = time.perf_counter() - swept
        if done.returncode != 0:
            raise RuntimeError(f"the sweep failed: {done.stderr.strip()[-2000:]}")
        ok = int(json.loads(done.stdout)["ok"])
        if ok != vms:
            raise RuntimeError(f"{vms - ok} of {vms} VMs were not answered 200")
        if server.poll() is not None:
            raise RuntimeError(f"forewarn serve exited with {server.returncode}")
        rss, hwm = process_memory(server.pid)
    finally:
        stop(server)
    return ServedMemory(vms, start_seconds, sweep_seconds, ok, rss, hwm)


def run_memory(work: Path, vms: int) -> MemoryResult:
    """RSS per polled VM: a 1-VM server and a ``vms``-VM server, one after the other."""
    if vms < 2:
        raise ValueError("the fleet must have at least 2 VMs to tell a VM's cost")
    with private_namespace() as namespace:
        one = measure_served(namespace, work / "one", 1)
        fleet = measure_served(namespace, work / "fleet", vms)
    return MemoryResult(one, fleet, (fleet.rss_bytes - one.rss_bytes) / (vms - 1))


# -- the sweep, run inside the namespace ----------------------------------------------------


async def _poll(address: str, port: int) -> bool:
    """One poll as the documentation's ``requests.get`` sample makes it: a new connection,
    kept alive as HTTP/1.1 is by default, closed by the client once its answer is read; so
    whatever the server keeps of a VM that polls this way is counted."""
    request = (
        f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: {address}\r\nMetadata: true\r\n"
        "Connection: keep-alive\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(address, port)
    try:
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
        length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head)
        if length is None:
            return False
        await asyncio.wait_for(reader.readexactly(int(length.group(1))), timeout=30)
    finally:
        writer.close()
    return head.startswith(b"HTTP/1.1 200 ")


async def sweep(port: int, count: int) -> dict[str, int]:
    """Poll each of the first ``count`` fleet addresses once, on a new connection each, a
    few connections at a time."""
    pending = addresses(count)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        for address in pending:  # shared: each address is taken by one worker
            answered = await _poll(address, port)
            ok += answered

    await asyncio.gather(*(worker() for _ in range(SWEEP_CONCURRENCY)))
    return {"ok": ok, "failed": count - ok}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    sweep_command = commands.add_parser("sweep", help="poll every VM once (run in the namespace)")
    sweep_command.add_argument("port", type=int)
    sweep_command.add_argument("count", type=int)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of forewarn
        result = asyncio.run(sweep(args.port, args.count))
    else:
        result = uvloop.run(sweep(args.port, args.count))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
