"""One VM against the others: flooding its endpoint with requests, or holding connections.

Part of ``python -m bench --only cheap-paths`` (:mod:`bench.cheap_paths` reports it), against
``forewarn serve`` on loopback. The server runs on core 0; the load (wrk, or this process's
connections) and the prober on core 1, all at the same priority: a flooder at ``nice 19``
would never compete with the prober beside it, and would hide what a flood costs the others.

- **Flood.** One VM floods its own endpoint with wrk, 50 connections as fast as they go, in
  three ways: one request at a time on kept connections, 16 pipelined in each write, and a
  new connection for every request. A prober polls twenty other VMs, each twice a second
  (under the rate limit), on a new connection each time. Rounds alternate a quiet phase and
  a flood phase; the victims' p99 under the flood over their p99 in the quiet phase of the
  same round is the figure, with the answers a second the flooding VM got and the share of a
  core the server spent meanwhile (read from ``/proc``, so it hardly depends on what else
  the machine runs, unlike the latencies).
- **Hoard.** The server runs with a descriptor limit of 1,024 (``prlimit``), as in a report
  where one VM's 1,100 idle connections made every other VM's poll fail and the control API
  unreachable. One VM opens 1,100 idle connections; then twenty VMs open 60 each (each within
  its cap, together past the VMs' share of the descriptors). The prober polls the other VMs
  and calls the control API meanwhile: the failures (there must be none), the victims' p99
  over a quiet phase's, the control API's p99, and the connections the server kept.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.fleetgen import addresses, fleet_yaml
from bench.servers import PATH, QUERY, Forewarn, cpu_seconds
from bench.tools import free_port, pin_cores, raise_open_files, split_cores, which
from bench.wrk import DONE_SCRIPT, WrkResult, run_wrk, write_script

HOST = "127.0.0.1"
FLOOD_CONNECTIONS = 50
#: Requests in each write of the pipelined flood.
PIPELINE_DEPTH = 16
#: How the flooding VM sends: wrk's request headers, and whether it pipelines.
FLOOD_MODES: dict[str, tuple[tuple[str, ...], bool]] = {
    "keep-alive": (("Metadata: true",), False),
    "pipelined": (("Metadata: true",), True),
    "new connection per request": (("Metadata: true", "Connection: close"), False),
}
VICTIMS = 20
#: Probes per second over all victims: two per victim, under IMDS's 5 per second.
PROBE_RATE = 40.0
#: The hoarding scenario's descriptor limit, soft and hard, as ``ulimit -n`` gave in the report.
HOARD_OPEN_FILES = 1024
#: Idle connections of the one hoarding VM: more than the descriptor limit.
HOARD_CONNECTIONS = 1100
#: VMs of the crowd, and each one's idle connections: within each VM's cap, past the share
#: of the descriptors all VMs together may use.
CROWD_VMS = 20
CROWD_CONNECTIONS = 60
_PROBE = (
    f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n"
    "Connection: close\r\n\r\n"
).encode()
_PIPELINE_SCRIPT = """\
init = function(args)
  local batch = {}
  for i = 1, %d do batch[i] = wrk.format() end
  pipelined = table.concat(batch)
end
request = function() return pipelined end
"""


class FloodError(AssertionError):
    """An answer was not what the scenario needs: no figure is valid."""


def pin(pid: int, core: int | None) -> None:
    """Every thread of ``pid`` on ``core`` (where the machine has one to spare)."""
    if core is None:
        return
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(task), {core})


@contextlib.contextmanager
def _pinned(server: Forewarn) -> Iterator[None]:
    """The server on core 0, this process (the prober, and the connections it holds) on
    core 1, for the block."""
    own = os.sched_getaffinity(0)
    cores = split_cores()
    assert server.process is not None
    pin(server.process.pid, None if cores is None else cores[0])
    pin(os.getpid(), None if cores is None else cores[1])
    try:
        yield
    finally:
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(task), own)


def run_pinned_wrk(
    binary: str,
    url: str,
    *,
    script: Path,
    duration: float,
    headers: Sequence[str],
    connections: int,
) -> WrkResult:
    """:func:`bench.wrk.run_wrk` on the load core, at the prober's priority."""
    _, load_prefix, _ = pin_cores()
    return run_wrk(
        binary,
        url,
        script=script,
        duration=duration,
        connections=connections,
        headers=headers,
        prefix=load_prefix,
    )


def write_pipeline_script(folder: Path, depth: int = PIPELINE_DEPTH) -> Path:
    """A wrk script sending ``depth`` requests in each write (and printing its figures)."""
    script = folder / "pipeline.lua"
    script.write_text(_PIPELINE_SCRIPT % depth + DONE_SCRIPT, encoding="utf-8")
    return script


# -- probing the other VMs ----------------------------------------------------------------


@dataclass
class Probes:
    """What the prober saw in one phase: each answered probe's latency (seconds), the probes
    that failed, and the same for the control API where it was called."""

    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    control_latencies: list[float] = field(default_factory=list)
    control_failures: int = 0


def _probe(host: str, port: int) -> float:
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(_PROBE)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    if not data.startswith(b"HTTP/1.1 200 "):
        raise FloodError(f"a victim was answered {data[:100]!r}")
    return time.perf_counter() - started


def _call_control(server: Forewarn) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(
        f"{server.control}/clock", headers={"Authorization": f"Bearer {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
    return time.perf_counter() - started


def probe_for(
    port: int,
    victims: Sequence[str],
    seconds: float,
    *,
    control: Forewarn | None = None,
    tolerate: bool = False,
) -> Probes:
    """Probe the victims in turn at PROBE_RATE for ``seconds`` (and call ``control``'s API
    after every fourth probe); with ``tolerate``, a probe or call that fails is counted
    rather than fatal."""
    found = Probes()
    started = time.perf_counter()
    for index in range(max(1, round(seconds * PROBE_RATE))):
        wait = started + index / PROBE_RATE - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        try:
            found.latencies.append(_probe(victims[index % len(victims)], port))
        except (OSError, FloodError):
            if not tolerate:
                raise
            found.failures += 1
        if control is not None and index % 4 == 0:
            try:
                found.control_latencies.append(_call_control(control))
            except OSError:
                found.control_failures += 1
    return found


def percentile_ms(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``values`` (seconds), in milliseconds; NaN if none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1e3


# -- a flood against the others ------------------------------------------------------------


@dataclass(frozen=True)
class FloodRound:
    quiet_p50_ms: float
    quiet_p99_ms: float
    flood_p50_ms: float
    flood_p99_ms: float
    probes: int
    flood_requests: int
    flood_refused: int
    #: The share of a core the server used while flooded (the probes' few included).
    server_cpu_share: float

    @property
    def p99_ratio(self) -> float:
        return self.flood_p99_ms / self.quiet_p99_ms


def _flood_round(
    server: Forewarn, wrk: str, script: Path, mode: str, victims: Sequence[str], seconds: float
) -> FloodRound:
    headers, _ = FLOOD_MODES[mode]
    quiet = probe_for(server.port, victims, seconds).latencies
    # The flood under way before the probes start, and still on after they end.
    margin = min(1.0, seconds / 2)
    cpu_before, started = cpu_seconds(server.serving_pids()), time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        flood = pool.submit(
            lambda: run_pinned_wrk(
                wrk,
                server.url,
                script=script,
                duration=_flood_seconds(seconds),
                headers=headers,
                connections=FLOOD_CONNECTIONS,
            )
        )
        time.sleep(margin)
        flooded = probe_for(server.port, victims, seconds).latencies
        result = flood.result()
    cpu = cpu_seconds(server.serving_pids()) - cpu_before
    cpu_share = cpu / (time.monotonic() - started)
    if result.errors or not result.status_errors:
        raise FloodError(f"{mode}: the flooding VM did not get its 429s cleanly: {result}")
    return FloodRound(
        percentile_ms(quiet, 0.5),
        percentile_ms(quiet, 0.99),
        percentile_ms(flooded, 0.5),
        percentile_ms(flooded, 0.99),
        len(flooded),
        result.requests,
        result.status_errors,
        cpu_share,
    )


def run_flood(
    work: Path,
    *,
    wrk: str,
    seconds: float,
    rounds: int,
    modes: Sequence[str] = tuple(FLOOD_MODES),
) -> dict[str, Any]:
    """The flood figures, per mode (:data:`FLOOD_MODES`)."""
    work.mkdir(parents=True, exist_ok=True)
    scripts = {False: write_script(work), True: write_pipeline_script(work)}
    flooder, *victims = addresses(VICTIMS + 1)
    server = Forewarn(
        work / "forewarn",
        fleet_yaml(VICTIMS + 1),
        host=HOST,
        port=free_port(),
        control_port=free_port(),
    )
    server.url = f"http://{flooder}:{server.port}{PATH}?{QUERY}"
    found: dict[str, list[FloodRound]] = {mode: [] for mode in modes}
    with server, _pinned(server):
        for _ in range(rounds):
            for mode in modes:
                script = scripts[FLOOD_MODES[mode][1]]
                found[mode].append(_flood_round(server, wrk, script, mode, victims, seconds))
    return {
        "flood_connections": FLOOD_CONNECTIONS,
        "pipeline_depth": PIPELINE_DEPTH,
        "victims": VICTIMS,
        "probe_rate": PROBE_RATE,
        "seconds": seconds,
        "nice": 0,
        "modes": {mode: _flood_summary(runs, seconds) for mode, runs in found.items()},
    }


def _flood_seconds(seconds: float) -> float:
    """How long wrk floods (whole seconds: wrk's ``-d``)."""
    return max(1, round(seconds + 2 * min(1.0, seconds / 2)))


def _flood_summary(runs: Sequence[FloodRound], seconds: float) -> dict[str, Any]:
    ratios = [r.p99_ratio for r in runs]
    return {
        "rounds": [asdict(r) | {"p99_ratio": r.p99_ratio} for r in runs],
        "quiet_p99_ms": statistics.median(r.quiet_p99_ms for r in runs),
        "flood_p99_ms": statistics.median(r.flood_p99_ms for r in runs),
        "p99_ratio": statistics.median(ratios),
        "p99_ratio_spread": [min(ratios), max(ratios)],
        "flood_rps": statistics.median(r.flood_requests / _flood_seconds(seconds) for r in runs),
        "server_cpu_share": statistics.median(r.server_cpu_share for r in runs),
    }


# -- a VM holding connections --------------------------------------------------------------


@contextlib.contextmanager
def idle_connections(
    hosts: Sequence[str], port: int, each: int
) -> Iterator[list[list[socket.socket]]]:
    """``each`` idle connections (nothing sent) to every one of ``hosts``."""
    opened: list[list[socket.socket]] = []
    try:
        for host in hosts:
            mine: list[socket.socket] = []
            opened.append(mine)
            for _ in range(each):
                sock = socket.create_connection((host, port), timeout=10)
                sock.setblocking(False)
                mine.append(sock)
        yield opened
    finally:
        for mine in opened:
            for sock in mine:
                sock.close()


def still_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (it has neither closed nor reset it)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


#: Looks at the connections, 0.1 s apart, that must all count the same before the count is
#: taken: a server starved of CPU for a moment closes none between two looks, and read
#: then, hundreds over its cap looked kept.
_SETTLED_LOOKS = 10


def _kept(opened: Sequence[Sequence[socket.socket]]) -> int:
    """How many of ``opened`` the server still holds, once that stops changing for a second."""
    counted = [-1]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        counted.append(sum(still_open(sock) for mine in opened for sock in mine))
        if len(counted) > _SETTLED_LOOKS and len(set(counted[-_SETTLED_LOOKS:])) == 1:
            return counted[-1]
        time.sleep(0.1)
    raise FloodError(f"the server was still closing connections after 30 s: {counted[-5:]}")


@dataclass(frozen=True)
class HoardPhase:
    connections: int
    kept: int
    probes: int
    failures: int
    p99_ms: float
    control_calls: int
    control_failures: int
    control_p99_ms: float


def _hoard_phase(
    server: Forewarn,
    victims: Sequence[str],
    hoarders: Sequence[str],
    each: int,
    seconds: float,
) -> HoardPhase:
    with idle_connections(hoarders, server.port, each) as opened:
        kept = _kept(opened)
        probes = probe_for(server.port, victims, seconds, control=server, tolerate=True)
    return HoardPhase(
        len(hoarders) * each,
        kept,
        len(probes.latencies) + probes.failures,
        probes.failures,
        percentile_ms(probes.latencies, 0.99),
        len(probes.control_latencies) + probes.control_failures,
        probes.control_failures,
        percentile_ms(probes.control_latencies, 0.99),
    )


def run_hoard(work: Path, *, seconds: float, rounds: int) -> dict[str, Any]:
    """The hoarding figures: one VM, then a crowd, holding idle connections under a
    descriptor limit of :data:`HOARD_OPEN_FILES`."""
    prlimit = which("prlimit")
    if prlimit is None:
        return {"skipped": "prlimit (util-linux) is needed to give the server its limit"}
    raise_open_files(HOARD_CONNECTIONS + CROWD_VMS * CROWD_CONNECTIONS + 256)
    work.mkdir(parents=True, exist_ok=True)
    hoarder, *rest = addresses(1 + CROWD_VMS + VICTIMS)
    crowd, victims = rest[:CROWD_VMS], rest[CROWD_VMS:]
    server = Forewarn(
        work / "forewarn",
        fleet_yaml(1 + CROWD_VMS + VICTIMS),
        host=HOST,
        port=free_port(),
        control_port=free_port(),
        prefix=[prlimit, f"--nofile={HOARD_OPEN_FILES}:{HOARD_OPEN_FILES}", "--"],
    )
    quiet: list[float] = []
    one: list[HoardPhase] = []
    many: list[HoardPhase] = []
    with server, _pinned(server):
        for _ in range(rounds):
            probed = probe_for(server.port, victims, seconds, control=server)
            quiet.append(percentile_ms(probed.latencies, 0.99))
            one.append(_hoard_phase(server, victims, [hoarder], HOARD_CONNECTIONS, seconds))
            many.append(_hoard_phase(server, victims, crowd, CROWD_CONNECTIONS, seconds))
    return {
        "open_files": HOARD_OPEN_FILES,
        "seconds": seconds,
        "quiet_p99_ms": statistics.median(quiet),
        "one_vm": _hoard_summary(one, quiet),
        "crowd": _hoard_summary(many, quiet) | {"vms": CROWD_VMS},
    }


def _hoard_summary(phases: Sequence[HoardPhase], quiet: Sequence[float]) -> dict[str, Any]:
    ratios = [phase.p99_ms / calm for phase, calm in zip(phases, quiet, strict=True)]
    return {
        "rounds": [asdict(phase) for phase in phases],
        "connections": phases[0].connections,
        "kept": max(phase.kept for phase in phases),
        "failures": sum(phase.failures for phase in phases),
        "probes": sum(phase.probes for phase in phases),
        "control_failures": sum(phase.control_failures for phase in phases),
        "control_calls": sum(phase.control_calls for phase in phases),
        "p99_ms": statistics.median(phase.p99_ms for phase in phases),
        "control_p99_ms": statistics.median(phase.control_p99_ms for phase in phases),
        "p99_ratio": statistics.median(ratios),
        "p99_ratio_spread": [min(ratios), max(ratios)],
    }


__all__ = [
    "FLOOD_MODES",
    "FloodError",
    "idle_connections",
    "pin",
    "probe_for",
    "run_flood",
    "run_hoard",
    "run_pinned_wrk",
    "still_open",
]
