"""Cheap paths stay cheap: a 304 costs no more than a 200, and a VM flooding its endpoint
does not slow the others down.

``python -m bench --only cheap-paths`` runs both against ``forewarn serve`` on loopback, plus
the held-request figures of :mod:`bench.held_requests`:

- **Not modified.** One VM polled by wrk at full speed, with and without ``If-None-Match``
  carrying its current tag, in interleaved rounds; the server's CPU time per request is read
  from ``/proc``, so what else the machine does changes the rate but hardly the cost. The
  same comparison runs in this process too (the endpoint's socket protocol fed the two
  requests, timed per request), where no socket or kernel adds to either.
- **Flood.** One VM floods its own endpoint (wrk, 50 connections, as fast as it can); a
  prober polls twenty other VMs, each twice a second (under the rate limit), on a new
  connection each time. Rounds alternate a quiet phase and a flood phase; the victims' p99
  under the flood over their p99 in the quiet phase of the same round is the figure. The
  server runs on core 0; wrk and the prober on core 1, wrk at ``nice 19`` so that the prober,
  which sleeps between probes, is never starved by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import socket
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.fleetgen import addresses, fleet_yaml
from bench.report import Target
from bench.servers import PATH, QUERY, Forewarn, cpu_seconds, fetch
from bench.tools import free_port, pin_cores, split_cores
from bench.wrk import WrkResult, run_wrk, write_script

HOST = "127.0.0.1"
#: So high that the 304/200 comparison never meets a 429.
UNLIMITED = 1e12
FLOOD_CONNECTIONS = 50
VICTIMS = 20
#: Probes per second over all victims: two per victim, under IMDS's 5 per second.
PROBE_RATE = 40.0
_PROBE = (
    f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n"
    "Connection: close\r\n\r\n"
).encode()


class CheapPathError(AssertionError):
    """An answer was not what the scenario needs: no figure is valid."""


def pin(pid: int, core: int | None) -> None:
    """Every thread of ``pid`` on ``core`` (where the machine has one to spare)."""
    if core is None:
        return
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(task), {core})


def run_pinned_wrk(
    binary: str,
    url: str,
    *,
    script: Path,
    duration: float,
    headers: Sequence[str],
    connections: int,
    nice: int = 0,
) -> WrkResult:
    """:func:`bench.wrk.run_wrk` on the load core, at ``nice`` (a flood must not starve the
    prober beside it on that core)."""
    _, load_prefix, _ = pin_cores()
    return run_wrk(
        binary,
        url,
        script=script,
        duration=duration,
        connections=connections,
        headers=headers,
        prefix=[*load_prefix, *(["nice", "-n", str(nice)] if nice else [])],
    )


# -- a 304 against a 200 ------------------------------------------------------------------


@dataclass(frozen=True)
class CostRound:
    ok_cpu_us: float
    not_modified_cpu_us: float
    ok_rps: float
    not_modified_rps: float

    @property
    def ratio(self) -> float:
        return self.not_modified_cpu_us / self.ok_cpu_us


def _tag_of(host: str, port: int) -> str:
    """The ETag the VM at ``host`` is shown now."""
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("GET", f"{PATH}?{QUERY}", headers={"Metadata": "true"})
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    tag = response.getheader("ETag")
    if response.status != 200 or not tag:
        raise CheapPathError(f"forewarn answered {response.status} with ETag {tag!r}")
    return tag


def _check_not_modified(url: str, tag: str) -> None:
    status, body = fetch(url, {"Metadata": "true", "If-None-Match": tag})
    if status != 304 or body:
        raise CheapPathError(f"If-None-Match {tag} was answered {status} {body[:200]!r}")


def run_not_modified(work: Path, *, wrk: str, duration: float, rounds: int) -> dict[str, Any]:
    """One VM's 200 and 304 side by side over sockets, then in this process."""
    work.mkdir(parents=True, exist_ok=True)
    script = write_script(work)
    server = Forewarn(
        work / "forewarn",
        fleet_yaml(1),
        host=HOST,
        port=free_port(),
        control_port=free_port(),
        rate_limit=UNLIMITED,
    )
    cores = split_cores()
    with server:
        assert server.process is not None
        pin(server.process.pid, None if cores is None else cores[0])
        vm_address = next(addresses(1))
        url = server.url.replace(HOST, vm_address)
        tag = _tag_of(vm_address, server.port)
        _check_not_modified(url, tag)
        modes = {"200": ("Metadata: true",), "304": ("Metadata: true", f"If-None-Match: {tag}")}
        found: list[CostRound] = []
        for index in range(rounds):
            figures: dict[str, tuple[float, float]] = {}
            for mode in sorted(modes, reverse=bool(index % 2)):
                before = cpu_seconds(server.serving_pids())
                result = run_pinned_wrk(
                    wrk,
                    url,
                    script=script,
                    duration=duration,
                    headers=modes[mode],
                    connections=FLOOD_CONNECTIONS,
                )
                if result.errors or result.status_errors or not result.requests:
                    raise CheapPathError(f"{mode}: errors in {result}")
                cpu = cpu_seconds(server.serving_pids()) - before
                figures[mode] = (cpu / result.requests * 1e6, result.requests_per_second)
            found.append(CostRound(figures["200"][0], figures["304"][0], figures["200"][1],
                                   figures["304"][1]))  # fmt: skip
        _check_not_modified(url, tag)
    in_process = compare_in_process(rounds=max(3, rounds))
    return {
        "duration_s": duration,
        "rounds": [asdict(r) | {"ratio": r.ratio} for r in found],
        "ok_cpu_us": statistics.median(r.ok_cpu_us for r in found),
        "not_modified_cpu_us": statistics.median(r.not_modified_cpu_us for r in found),
        "cpu_ratio": statistics.median(r.ratio for r in found),
        "in_process": in_process,
    }


class _Sink:
    """A connected transport that only counts what is written to it."""

    def __init__(self) -> None:
        self.last = b""

    def write(self, data: bytes) -> None:
        self.last = data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (HOST, 80) if name in ("sockname", "peername") else default

    def is_closing(self) -> bool:
        return False

    def is_reading(self) -> bool:
        return True


def compare_in_process(rounds: int, requests: int = 20_000) -> dict[str, Any]:
    """The socket protocol (``server/http/``) fed each request ``requests`` times per
    round, alternating which goes first, on a transport that only keeps what is written:
    the server's own work per request (the endpoint without the dashboard's record, which
    ``forewarn serve`` adds to both alike)."""
    from forewarn.domain.vms import Vm
    from forewarn.server import http as server_http
    from forewarn.server.http import _idle_connections, _shared
    from forewarn.server.imds import ImdsEndpoint
    from forewarn.testing import ForewarnPlatform

    service = ForewarnPlatform(vms=[Vm(name="vm0", vm_id="bench-vm0", address=HOST)]).service
    endpoint = ImdsEndpoint(service, rate_limit=UNLIMITED)
    loop = asyncio.new_event_loop()
    try:
        shared = _shared._Shared(endpoint, loop)
        protocol = server_http.ImdsProtocol(
            endpoint, shared, loop, _idle_connections._Connections(loop)
        )
        sink = _Sink()
        protocol.connection_made(sink)  # type: ignore[arg-type]
        poll = f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n"
        protocol.data_received(poll.encode() + b"\r\n")
        tag = next(
            line.partition(b": ")[2]
            for line in sink.last.split(b"\r\n")
            if line.startswith(b"ETag: ")
        )
        sent = {
            "200": poll.encode() + b"\r\n",
            "304": poll.encode() + b"If-None-Match: %s\r\n\r\n" % tag,
        }
        timings: dict[str, list[float]] = {"200": [], "304": []}
        for index in range(rounds):
            for mode in sorted(sent, reverse=bool(index % 2)):
                data, receive = sent[mode], protocol.data_received
                started = time.perf_counter()
                for _ in range(requests):
                    receive(data)
                timings[mode].append((time.perf_counter() - started) / requests * 1e6)
                if not sink.last.startswith(b"HTTP/1.1 %s " % mode.encode()):
                    raise CheapPathError(f"in process, {mode} expected: {sink.last[:100]!r}")
    finally:
        loop.close()
    # The fastest round of each: the least disturbed by whatever else the machine ran.
    ok, not_modified = min(timings["200"]), min(timings["304"])
    return {"ok_us": ok, "not_modified_us": not_modified, "ratio": not_modified / ok}


# -- a flood against the others -----------------------------------------------------------


@dataclass(frozen=True)
class FloodRound:
    quiet_p50_ms: float
    quiet_p99_ms: float
    flood_p50_ms: float
    flood_p99_ms: float
    probes: int
    flood_requests: int
    flood_refused: int

    @property
    def p99_ratio(self) -> float:
        return self.flood_p99_ms / self.quiet_p99_ms


def _probe(host: str, port: int) -> float:
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(_PROBE)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    if not data.startswith(b"HTTP/1.1 200 "):
        raise CheapPathError(f"a victim was answered {data[:100]!r}")
    return time.perf_counter() - started


def _probe_for(port: int, victims: Sequence[str], seconds: float) -> list[float]:
    """Probe the victims in turn at PROBE_RATE for ``seconds``; latencies, sorted."""
    latencies = []
    started = time.perf_counter()
    for index in range(max(1, round(seconds * PROBE_RATE))):
        wait = started + index / PROBE_RATE - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        latencies.append(_probe(victims[index % len(victims)], port))
    return sorted(latencies)


def _percentile(sorted_values: Sequence[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))] * 1e3


def run_flood(work: Path, *, wrk: str, seconds: float, rounds: int) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    script = write_script(work)
    server = Forewarn(
        work / "forewarn",
        fleet_yaml(VICTIMS + 1),
        host=HOST,
        port=free_port(),
        control_port=free_port(),
    )
    flooder, *victims = addresses(VICTIMS + 1)
    own_cores = os.sched_getaffinity(0)
    cores = split_cores()
    found: list[FloodRound] = []
    with server:
        assert server.process is not None
        pin(server.process.pid, None if cores is None else cores[0])
        pin(os.getpid(), None if cores is None else cores[1])
        try:
            flood_url = f"http://{flooder}:{server.port}{PATH}?{QUERY}"
            for _ in range(rounds):
                quiet = _probe_for(server.port, victims, seconds)
                with ThreadPoolExecutor(max_workers=1) as pool:
                    flood = pool.submit(
                        lambda: run_pinned_wrk(
                            wrk,
                            flood_url,
                            script=script,
                            duration=seconds + 2,
                            headers=("Metadata: true",),
                            connections=FLOOD_CONNECTIONS,
                            nice=19,
                        )
                    )
                    time.sleep(1.0)  # the flood under way
                    flooded = _probe_for(server.port, victims, seconds)
                    result = flood.result()
                if result.errors or not result.status_errors:
                    raise CheapPathError(f"the flooding VM did not get its 429s: {result}")
                found.append(
                    FloodRound(
                        _percentile(quiet, 0.5),
                        _percentile(quiet, 0.99),
                        _percentile(flooded, 0.5),
                        _percentile(flooded, 0.99),
                        len(flooded),
                        result.requests,
                        result.status_errors,
                    )
                )
        finally:
            for task in os.listdir(f"/proc/{os.getpid()}/task"):
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(int(task), own_cores)
    return {
        "flood_connections": FLOOD_CONNECTIONS,
        "victims": VICTIMS,
        "probe_rate": PROBE_RATE,
        "seconds": seconds,
        "rounds": [asdict(r) | {"p99_ratio": r.p99_ratio} for r in found],
        "quiet_p99_ms": statistics.median(r.quiet_p99_ms for r in found),
        "flood_p99_ms": statistics.median(r.flood_p99_ms for r in found),
        "p99_ratio": statistics.median(r.p99_ratio for r in found),
        "p99_ratio_spread": [min(r.p99_ratio for r in found), max(r.p99_ratio for r in found)],
        "flood_rps": statistics.median(r.flood_requests / (seconds + 2) for r in found),
    }


def run_cheap_paths(
    work: Path,
    *,
    wrk: str | None,
    duration: float,
    rounds: int,
    held_vms: int,
    flood_seconds: float,
) -> dict[str, Any]:
    """The three figures; those needing wrk are skipped (said so) where it is missing."""
    from bench.held_requests import run_held

    results: dict[str, Any] = {"held": run_held(held_vms)}
    if wrk is None:
        results["skipped"] = "wrk is needed for the 304 and flood figures"
        return results
    results["not_modified"] = run_not_modified(
        work / "not-modified", wrk=wrk, duration=duration, rounds=rounds
    )
    results["flood"] = run_flood(
        work / "flood", wrk=wrk, seconds=flood_seconds, rounds=max(rounds, 3)
    )
    return results


# -- the report ----------------------------------------------------------------------------

#: At 10,000 VMs the release is one pass over every held request (the endpoint's whole work
#: per request), after the hold timer's next look (every 50 ms).
RELEASE_WITHIN_MS = 1000.0
#: A held request beyond its connection: the request as parsed, its place in the timer's
#: heap and its VM's list.
HELD_REQUEST_BYTES = 1024.0


def cheap_path_targets(results: dict[str, Any] | None) -> list[Target]:
    """The goals, for whichever parts ran."""
    if not results:
        return []
    found = []
    cost = results.get("not_modified")
    if cost:
        found.append(
            Target("CPU per request, a 304 / a 200 for the same VM", cost["cpu_ratio"], 1.0,
                   "x", False)
        )  # fmt: skip
    held = results["held"]
    found.append(
        Target(f"memory per held request at {held['vms']:,} VMs (beyond its connection)",
               held["bytes_per_held_request"], HELD_REQUEST_BYTES, "B", False)
    )  # fmt: skip
    found.append(
        Target(f"last of {held['vms']:,} held requests answered after the impact's end",
               held["last_answer_ms"], RELEASE_WITHIN_MS, "ms", False)
    )  # fmt: skip
    flood = results.get("flood")
    if flood:
        found.append(
            Target("another VM's p99 while one VM floods / without the flood",
                   flood["p99_ratio"], 2.0, "x", False)
        )  # fmt: skip
    return found


def cheap_path_lines(results: dict[str, Any] | None) -> list[str]:
    """The table's lines for the cheap paths."""
    if not results:
        return []
    lines = []
    cost = results.get("not_modified")
    if cost:
        in_process = cost["in_process"]
        lines.append(
            f"Not modified, one VM at full speed, {len(cost['rounds'])} round(s): server CPU "
            f"{cost['not_modified_cpu_us']:.1f} us per 304, {cost['ok_cpu_us']:.1f} us per 200 "
            f"({cost['cpu_ratio']:.2f}x); in process {in_process['not_modified_us']:.2f} us "
            f"and {in_process['ok_us']:.2f} us ({in_process['ratio']:.2f}x)"
        )
    held = results["held"]
    lines.append(
        f"Held during an impact, {held['vms']:,} VMs: {held['bytes_per_held_request']:,.0f} B "
        f"per held request ({held['bytes_per_held_request_with_connection']:,.0f} B with its "
        f"connection); answered {held['first_answer_ms']:.0f} to {held['last_answer_ms']:.0f} "
        f"ms after the clock passed the impact's end (spread {held['release_spread_ms']:.0f} ms)"
    )
    flood = results.get("flood")
    if flood:
        spread = flood["p99_ratio_spread"]
        lines.append(
            f"Flood, one VM with {flood['flood_connections']} connections at full speed "
            f"({flood['flood_rps']:,.0f} req/s, 429s), {flood['victims']} other VMs probed: p99 "
            f"{flood['flood_p99_ms']:.2f} ms against {flood['quiet_p99_ms']:.2f} ms without it, "
            f"{flood['p99_ratio']:.2f}x (rounds {spread[0]:.2f}x to {spread[1]:.2f}x)"
        )
    if results.get("skipped"):
        lines.append(f"Cheap paths: {results['skipped']}")
    return lines


__all__ = [
    "cheap_path_lines",
    "cheap_path_targets",
    "compare_in_process",
    "run_cheap_paths",
    "run_flood",
    "run_not_modified",
]
