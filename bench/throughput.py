"""One VM's endpoint at full speed, against nginx serving the same bytes, in the same run.

Two ways to poll: keep-alive (one connection, many requests) and a new connection for every
request (``Connection: close``), as many real clients do. forewarn runs with every check of
the endpoint on: the Metadata header, the api-version, the rate limit (set so high it never
refuses, but evaluated on every request) and the caller's identity by the address the request
arrives at. Rounds alternate which server goes first so a drift in the machine's speed does
not favour either; the ratio is taken within each round, then the median across rounds.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.servers import PATH, Forewarn, Nginx, cpu_seconds, fetch
from bench.tools import free_port, pin_cores
from bench.wrk import WrkResult, run_wrk, write_script

HOST = "127.0.0.1"
#: So high that no request is refused, while the per-VM token bucket still runs each time.
RATE_LIMIT = 1e12
#: VMs of one availability set: the event's Resources list names them, which brings the
#: document to the size of a typical real one (about 450 bytes).
SET_VMS = ("bench-web-00", "bench-web-01", "bench-web-02", "bench-web-03", "bench-web-04")
MODES = {
    "keep-alive": ("Metadata: true",),
    "new connection per request": ("Metadata: true", "Connection: close"),
}


class ThroughputError(AssertionError):
    """A server answered something other than the document: no rate is valid."""


@dataclass(frozen=True)
class Run:
    """One wrk run, and the CPU the server spent answering it."""

    wrk: WrkResult
    server_cpu_us_per_request: float


@dataclass(frozen=True)
class ModeResult:
    mode: str
    forewarn_runs: list[Run]
    nginx_runs: list[Run]

    @property
    def forewarn(self) -> list[WrkResult]:
        return [run.wrk for run in self.forewarn_runs]

    @property
    def nginx(self) -> list[WrkResult]:
        return [run.wrk for run in self.nginx_runs]

    @property
    def ratios(self) -> list[float]:
        return [
            f.requests_per_second / n.requests_per_second
            for f, n in zip(self.forewarn, self.nginx, strict=True)
        ]

    def summary(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "forewarn_rps": statistics.median(r.requests_per_second for r in self.forewarn),
            "nginx_rps": statistics.median(r.requests_per_second for r in self.nginx),
            "ratio": statistics.median(self.ratios),
            "ratios": self.ratios,
            "forewarn_p99_ms": statistics.median(r.p99_ms for r in self.forewarn),
            "nginx_p99_ms": statistics.median(r.p99_ms for r in self.nginx),
            # Contention-proof companion figure: server CPU per request, and nginx's over
            # forewarn's (the throughput ratio if each server had a core to itself).
            "forewarn_cpu_us": statistics.median(
                r.server_cpu_us_per_request for r in self.forewarn_runs
            ),
            "nginx_cpu_us": statistics.median(r.server_cpu_us_per_request for r in self.nginx_runs),
            "cpu_ratio": statistics.median(
                n.server_cpu_us_per_request / f.server_cpu_us_per_request
                for f, n in zip(self.forewarn_runs, self.nginx_runs, strict=True)
                if f.server_cpu_us_per_request > 0
            )
            if any(f.server_cpu_us_per_request > 0 for f in self.forewarn_runs)
            else 0.0,
            "rounds": {
                "forewarn": [asdict(r) for r in self.forewarn_runs],
                "nginx": [asdict(r) for r in self.nginx_runs],
            },
        }


def fleet_yaml() -> str:
    lines = ["availabilitySets:", "  - {name: bench-web}", "vms:"]
    for index, name in enumerate(SET_VMS):
        lines.append(
            f"  - {{name: {name}, address: 127.0.0.{index + 1}, availabilitySet: bench-web}}"
        )
    return "\n".join(lines) + "\n"


def _check_endpoint(url: str, body: bytes, who: str) -> None:
    """Both servers must answer the document only when asked properly, before any timing."""
    status, answer = fetch(url, {"Metadata": "true"})
    if status != 200 or answer != body:
        raise ThroughputError(f"{who} answered {status} {answer[:200]!r}")
    status, _ = fetch(url)
    if status != 400:
        raise ThroughputError(f"{who} answered {status} without the Metadata header")


def run_throughput(
    work: Path, *, wrk: str, nginx: str, duration: float, rounds: int, connections: int = 50
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    script = write_script(work)
    server_prefix, wrk_prefix, pinning = pin_cores()
    forewarn_server = Forewarn(
        work / "forewarn",
        fleet_yaml(),
        host=HOST,
        port=free_port(),
        control_port=free_port(),
        rate_limit=RATE_LIMIT,
        prefix=server_prefix,
    )
    with forewarn_server as server:
        server.call(
            "POST",
            "/events",
            {
                "type": "Freeze",
                "resources": list(SET_VMS[:3]),
                "source": "Platform",
                "description": "Virtual machine is being paused because of a "
                "memory-preserving Live Migration operation.",
                "durationInSeconds": 5,
            },
        )
        status, body = fetch(server.url, {"Metadata": "true"})
        if status != 200 or b'"Freeze"' not in body:
            raise ThroughputError(f"forewarn answered {status} {body[:200]!r}")
        status, _ = fetch(
            server.url.replace("api-version=2020-07-01", "api-version=latest"), {"Metadata": "true"}
        )
        if status != 400:
            raise ThroughputError(f"forewarn answered {status} to api-version=latest")
        with Nginx(nginx, work / "nginx", body, HOST, free_port(), prefix=server_prefix) as static:
            _check_endpoint(server.url, body, "forewarn")
            _check_endpoint(static.url, body, "nginx")
            results = []
            for mode, headers in MODES.items():
                ours: list[Run] = []
                theirs: list[Run] = []
                for round_index in range(rounds):
                    order = [
                        (server.url, server.serving_pids(), ours),
                        (static.url, static.serving_pids(), theirs),
                    ]
                    if round_index % 2:
                        order.reverse()
                    for url, pids, into in order:
                        cpu_before = cpu_seconds(pids)
                        result = run_wrk(
                            wrk,
                            url,
                            script=script,
                            duration=duration,
                            connections=connections,
                            headers=headers,
                            prefix=wrk_prefix,
                        )
                        if not result.clean:
                            who = "forewarn" if url == server.url else "nginx"
                            raise ThroughputError(f"{who}, {mode}: errors in {result}")
                        cpu = cpu_seconds(pids) - cpu_before
                        into.append(Run(result, cpu / result.requests * 1e6))
                results.append(ModeResult(mode, ours, theirs).summary())
            # Still answering correctly after the load.
            _check_endpoint(server.url, body, "forewarn")
    return {
        "document_bytes": len(body),
        "path": PATH,
        "duration_s": duration,
        "rounds": rounds,
        "connections": connections,
        "pinning": pinning,
        "modes": results,
    }
