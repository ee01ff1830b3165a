"""Cheap paths stay cheap: a 304 costs no more than a 200, and one VM, flooding its endpoint
or holding connections, does not slow the others down nor lock them out.

``python -m bench --only cheap-paths`` runs these against ``forewarn serve`` on loopback, plus
the held-request figures of :mod:`bench.held_requests`:

- **Not modified.** One VM polled by wrk at full speed, with and without ``If-None-Match``
  carrying its current tag, in interleaved rounds; the server's CPU time per request is read
  from ``/proc``, so what else the machine does changes the rate but hardly the cost. The
  same comparison runs in this process too (the endpoint's socket protocol fed the two
  requests, timed per request), where no socket or kernel adds to either.
- **Flood** and **hoard**: one VM flooding its endpoint (kept connections, pipelined, a new
  connection per request) or holding idle connections, against other VMs' polls and the
  control API, all at the same priority (:mod:`bench.flood`).
"""

from __future__ import annotations

import asyncio
import http.client
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.fleetgen import addresses, fleet_yaml
from bench.flood import FLOOD_CONNECTIONS, pin, run_flood, run_hoard, run_pinned_wrk
from bench.report import Target
from bench.servers import PATH, QUERY, Forewarn, cpu_seconds, fetch
from bench.tools import free_port, split_cores
from bench.wrk import write_script

HOST = "127.0.0.1"
#: So high that the 304/200 comparison never meets a 429.
UNLIMITED = 1e12


class CheapPathError(AssertionError):
    """An answer was not what the scenario needs: no figure is valid."""


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


def run_cheap_paths(
    work: Path,
    *,
    wrk: str | None,
    duration: float,
    rounds: int,
    held_vms: int,
    flood_seconds: float,
) -> dict[str, Any]:
    """The figures; those needing wrk are skipped (said so) where it is missing."""
    from bench.held_requests import run_held

    results: dict[str, Any] = {"held": run_held(held_vms)}
    results["hoard"] = run_hoard(work / "hoard", seconds=flood_seconds, rounds=max(rounds, 3))
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
    flood = results.get("flood") or {}
    for mode, figures in flood.get("modes", {}).items():
        found.append(
            Target(f"another VM's p99 while one VM floods ({mode}) / without the flood",
                   figures["p99_ratio"], 2.0, "x", False)
        )  # fmt: skip
    hoard = results.get("hoard") or {}
    for phase, who in (("one_vm", "one VM holds"), ("crowd", "many VMs hold")):
        figures = hoard.get(phase)
        if figures:
            found.append(
                Target(f"another VM's p99 while {who} {figures['connections']:,} idle "
                       "connections / without", figures["p99_ratio"], 2.0, "x", False)
            )  # fmt: skip
            found.append(
                Target(f"polls and control API calls failed while {who} connections",
                       figures["failures"] + figures["control_failures"], 0, "", False)
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
    flood = results.get("flood") or {}
    for mode, figures in flood.get("modes", {}).items():
        spread = figures["p99_ratio_spread"]
        lines.append(
            f"Flood ({mode}), one VM with {flood['flood_connections']} connections at full "
            f"speed, same priority ({figures['flood_rps']:,.0f} answers/s, 429s; server "
            f"{figures['server_cpu_share']:.0%} of a core), "
            f"{flood['victims']} other VMs probed: p99 {figures['flood_p99_ms']:.2f} ms "
            f"against {figures['quiet_p99_ms']:.2f} ms without it, {figures['p99_ratio']:.2f}x "
            f"(rounds {spread[0]:.2f}x to {spread[1]:.2f}x)"
        )
    hoard = results.get("hoard") or {}
    if hoard.get("skipped"):
        lines.append(f"Hoard: {hoard['skipped']}")
    for phase, who in (("one_vm", "one VM"), ("crowd", f"{hoard.get('crowd', {}).get('vms')} VMs")):
        figures = hoard.get(phase)
        if figures:
            lines.append(
                f"Hoard, descriptor limit {hoard['open_files']:,}: {who} holding "
                f"{figures['connections']:,} idle connections ({figures['kept']:,} kept): "
                f"other VMs' p99 {figures['p99_ms']:.2f} ms against {hoard['quiet_p99_ms']:.2f} "
                f"ms ({figures['p99_ratio']:.2f}x), {figures['failures']} of "
                f"{figures['probes']} polls failed; control API p99 "
                f"{figures['control_p99_ms']:.2f} ms, {figures['control_failures']} of "
                f"{figures['control_calls']} calls failed"
            )
    if results.get("skipped"):
        lines.append(f"Cheap paths: {results['skipped']}")
    return lines


__all__ = [
    "cheap_path_lines",
    "cheap_path_targets",
    "compare_in_process",
    "run_cheap_paths",
    "run_not_modified",
]
