"""A VM's polls while Resource Graph answers heavy queries, beside the same polls alone.

``python -m bench.resourcegraph``: one ``forewarn serve`` (memory store, manual clock) with a
fleet whose VMs publish to Resource Graph, ``--events`` events in its ``maintenanceresources``
table (3,000 by default). One VM polls its endpoint back to back for ``--seconds``, first with
nothing else running (quiet), then while ``--clients`` processes loop on a heavy query that is
still inside the cost bound (:data:`HEAVY`: 60 ``contains`` terms, 30 sort keys, ``$top``
1000 over every row). The figures: the poll's p50 and p99 each way, the ratio of the p99s
(the target: at most 2), and how many queries were answered meanwhile (at least one each, or
the figures are refused: a query process that never answered would make the ratio a lie).

The polls and the clients are processes apart from ``forewarn serve`` and from each other, so
that their own interpreter does not colour the figures. The query runs in ``forewarn serve``'s
query process (:class:`forewarn.server.azure.resourcegraph.QueryProcess`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

from bench.fleetgen import addresses
from bench.servers import PATH, QUERY, Forewarn
from bench.stats import percentile
from bench.tools import free_port

#: Valid, and costly: 60 contains terms over every row, 30 sort keys, a page of 1,000.
HEAVY = (
    "maintenanceresources | where "
    + " or ".join(f"tostring(properties.Resources) contains 'vm{index:04d}'" for index in range(60))
    + " or isnotempty(name) | sort by "
    + ", ".join(f"tostring(properties.Resources[{index % 4}]) asc" for index in range(30))
)

_CLIENT = textwrap.dedent(
    """
    import json, sys, time, httpx
    url, token, seconds, query = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    answered = refused = 0
    end = time.monotonic() + seconds
    with httpx.Client(headers={"Authorization": "Bearer " + token}, timeout=60) as http:
        while time.monotonic() < end:
            status = http.post(url, json={"query": query, "options": {"$top": 1000}}).status_code
            answered += status == 200
            refused += status != 200
    print(json.dumps({"answered": answered, "refused": refused}))
    """
)

_POLLER = textwrap.dedent(
    """
    import json, sys, time, httpx
    url, seconds = sys.argv[1], float(sys.argv[2])
    took = []
    with httpx.Client(headers={"Metadata": "true"}, timeout=30) as http:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            assert http.get(url).status_code == 200
            took.append((time.perf_counter() - start) * 1000)
    print(json.dumps(took))
    """
)


def _fleet(vms: int) -> str:
    lines = [
        "defaults: {subscriptionId: 11111111-1111-1111-1111-111111111111, location: eastus}",
        "vms:",
    ]
    for index, address in enumerate(addresses(vms)):
        lines.append(
            f"  - {{name: vm{index:04d}, address: {address}, scheduledEventsPolicy: "
            "{scheduledEventsAdditionalPublishingTargets: "
            "{eventGridAndResourceGraph: {enable: true}}}}"
        )
    return "\n".join(lines) + "\n"


def _polls(url: str, seconds: float) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", _POLLER, url, str(seconds)],
        capture_output=True,
        check=True,
        timeout=seconds + 60,
    )
    took: list[float] = sorted(json.loads(out.stdout))
    return took


def run_resource_graph(
    events: int = 3000, vms: int = 100, clients: int = 2, seconds: float = 10.0
) -> dict[str, Any]:
    """The figures of one run (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="forewarn-bench-arg-") as work:
        polled = next(iter(addresses(1)))
        server = Forewarn(
            Path(work) / "forewarn",
            _fleet(vms),
            host=polled,
            port=free_port(),
            control_port=free_port(),
            control_host="127.0.0.1",
            rate_limit=100_000,
            clock="manual",
        )
        with server:
            headers = {"Authorization": f"Bearer {server.token}"}
            with httpx.Client(base_url=server.control, headers=headers, timeout=30) as http:
                for index in range(events):
                    body = {"type": "Freeze", "resources": [f"vm{index % vms:04d}"]}
                    assert http.post("/events", json=body).status_code == 201
            poll_url = f"http://{polled}:{server.port}{PATH}?{QUERY}"
            graph = (
                f"http://127.0.0.1:{server.control_port}"
                "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
            )
            _polls(poll_url, 1.0)  # warm: connections, caches
            quiet = _polls(poll_url, seconds)
            started = [
                subprocess.Popen(
                    [sys.executable, "-c", _CLIENT, graph, server.token, str(seconds + 4), HEAVY],
                    stdout=subprocess.PIPE,
                )
                for _ in range(clients)
            ]
            time.sleep(2.0)  # the clients' first queries running (spawns the query process)
            loaded = _polls(poll_url, seconds)
            outputs = [client.communicate(timeout=seconds + 120)[0] for client in started]
    counts = [json.loads(output) for output in outputs]
    answered = sum(count["answered"] for count in counts)
    refused = sum(count["refused"] for count in counts)
    if answered < clients or refused:
        raise RuntimeError(f"the heavy query was answered {answered} times, refused {refused}")
    quiet_p99, loaded_p99 = percentile(quiet, 0.99), percentile(loaded, 0.99)
    return {
        "events": events,
        "vms": vms,
        "clients": clients,
        "seconds": seconds,
        "query_chars": len(HEAVY),
        "queries_answered": answered,
        "polls_quiet": len(quiet),
        "polls_loaded": len(loaded),
        "poll_p50_quiet_ms": round(percentile(quiet, 0.5), 3),
        "poll_p99_quiet_ms": round(quiet_p99, 3),
        "poll_p50_loaded_ms": round(percentile(loaded, 0.5), 3),
        "poll_p99_loaded_ms": round(loaded_p99, 3),
        "p99_ratio": round(loaded_p99 / quiet_p99, 3) if quiet_p99 else 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.resourcegraph", description=__doc__)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--vms", type=int, default=100)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    figures = run_resource_graph(options.events, options.vms, options.clients, options.seconds)
    text = json.dumps(figures, indent=2)
    print(text)
    if options.json is not None:
        options.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
