"""``python -m bench``: every scenario, side by side with nginx, then a table and a JSON file.

``--smoke`` is the seconds-long version CI runs so the suite never rots; its figures are too
short to quote. The full run takes a few minutes and is run by hand; its results go in
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cheap_paths import run_cheap_paths
from bench.cluster_campaign import run_cluster_campaign
from bench.fleetgen import fleet_yaml
from bench.polling import run_polling
from bench.propagation import postgres_problem, run_propagation
from bench.report import machine, now_iso, table, targets, write_json
from bench.scale import scale_results
from bench.servers import Forewarn, Nginx, cpu_seconds, fetch
from bench.throughput import run_throughput
from bench.tools import find_tools, free_port, raise_open_files

SCENARIOS = ("throughput", "polling", "scale", "propagation", "cluster-campaign", "cheap-paths")
#: The PostgreSQL the propagation scenario uses (a namespace of its own, removed after).
POSTGRES_URL = os.environ.get(
    "FOREWARN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part]
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("a comma-separated list of positive VM counts")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="seconds-long run for CI")
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--json",
        type=Path,
        help="where the figures go (default: bench/results.json for a whole run, "
        "bench/results/partial.json for --smoke or --only, so those never replace the "
        "figures RESULTS.md reports)",
    )
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    parser.add_argument("--duration", type=float, help="seconds per wrk run (default 4)")
    parser.add_argument("--rounds", type=int, help="wrk rounds per server and mode (default 5)")
    parser.add_argument("--poll-vms", type=int, help="VMs polling at once (default 10000)")
    parser.add_argument("--poll-seconds", type=float, help="seconds of polling (default 10)")
    parser.add_argument(
        "--poll-close-vms", type=int, help="VMs polling on a new connection each (default 2000)"
    )
    parser.add_argument("--sizes", type=_sizes, help="fleet sizes (default 1000,10000,100000)")
    parser.add_argument(
        "--propagation-samples",
        type=int,
        help="changes made through one front-end and awaited on another (default 200)",
    )
    parser.add_argument(
        "--cluster-sizes",
        type=_sizes,
        help="fleet sizes of the three-front-end campaign (default 1000,10000; 100000 "
        "takes about four minutes)",
    )
    parser.add_argument(
        "--postgres-url",
        default=POSTGRES_URL,
        help="PostgreSQL for the propagation scenario (env FOREWARN_TEST_POSTGRES_URL)",
    )
    parser.add_argument(
        "--held-vms", type=int, help="VMs with a request held at once, cheap-paths (default 10000)"
    )
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    smoke = args.smoke
    args.duration = args.duration or (1.0 if smoke else 4.0)
    args.rounds = args.rounds or (1 if smoke else 5)
    args.poll_vms = args.poll_vms or (200 if smoke else 10_000)
    args.poll_seconds = args.poll_seconds or (1.0 if smoke else 10.0)
    args.poll_close_vms = args.poll_close_vms or (100 if smoke else 2000)
    args.sizes = args.sizes or ([500, 1000] if smoke else [1000, 10_000, 100_000])
    args.propagation_samples = args.propagation_samples or (10 if smoke else 200)
    args.cluster_sizes = args.cluster_sizes or ([100] if smoke else [1000, 10_000])
    args.held_vms = args.held_vms or (200 if smoke else 10_000)
    return args


def run(args: argparse.Namespace, log: Any = print) -> dict[str, Any]:
    only = set(args.only.split(","))
    results: dict[str, Any] = {"date": now_iso(), "smoke": args.smoke, "skipped": {}}
    tools = find_tools(install=not args.no_install)
    for note in tools.notes:
        log(f"bench: {note}")
    results["machine"] = machine(tools.wrk, tools.nginx)
    with tempfile.TemporaryDirectory(prefix="forewarn-bench-") as folder:
        work = Path(folder)
        if "throughput" in only:
            if tools.wrk is None or tools.nginx is None:
                reason = "wrk and nginx are needed (apt-get install -y wrk nginx-light)"
                results["skipped"]["throughput"] = reason
                log(f"bench: throughput skipped: {reason}")
            else:
                log("bench: throughput, forewarn and nginx side by side ...")
                results["throughput"] = run_throughput(
                    work / "throughput",
                    wrk=tools.wrk,
                    nginx=tools.nginx,
                    duration=args.duration,
                    rounds=args.rounds,
                )
        if "polling" in only:
            log(f"bench: {args.poll_vms} VMs polling once a second ...")
            results["polling"] = run_polling_scenario(work / "polling", args, tools.nginx)
        if "scale" in only:
            log(f"bench: campaign and memory at {', '.join(map(str, args.sizes))} VMs ...")
            results["scale"] = scale_results(args.sizes)
        postgres = {"propagation", "cluster-campaign"} & only
        problem = postgres_problem(args.postgres_url) if postgres else None
        for scenario in sorted(postgres if problem is not None else ()):
            results["skipped"][scenario] = problem
            log(f"bench: {scenario} skipped: {problem}")
        if "propagation" in only and problem is None:
            log(f"bench: {args.propagation_samples} changes across 3 front-ends ...")
            results["propagation"] = run_propagation(
                work / "propagation", args.postgres_url, samples=args.propagation_samples
            ).summary()
        if "cluster-campaign" in only and problem is None:
            sizes = ", ".join(map(str, args.cluster_sizes))
            log(f"bench: the campaign with 3 front-ends sharing {sizes} VMs ...")
            results["cluster_campaign"] = [
                dataclasses.asdict(run_cluster_campaign(size, args.postgres_url))
                for size in args.cluster_sizes
            ]
        if "cheap-paths" in only:
            log(f"bench: cheap paths: 304 vs 200, {args.held_vms} VMs held, one VM flooding ...")
            results["cheap_paths"] = run_cheap_paths(
                work / "cheap-paths",
                wrk=tools.wrk,
                duration=args.duration,
                rounds=args.rounds,
                held_vms=args.held_vms,
                flood_seconds=args.duration if args.smoke else 5.0,
            )
    results["machine"]["load_average_after"] = list(os.getloadavg())
    results["targets"] = [target.as_dict() for target in targets(results)]
    return results


def run_polling_scenario(
    work: Path, args: argparse.Namespace, nginx: str | None
) -> list[dict[str, Any]]:
    """forewarn with a VM per address, then nginx (when installed) polled the same way from
    the same generator: nginx's figures are what this machine and generator allow at all.

    On kept connections the server holds a listening socket and a connection per VM, so as
    many VMs poll as RLIMIT_NOFILE allows (its hard limit cannot be raised in a container).
    A new connection per poll costs the generator more than the server, so that mode runs
    with ``--poll-close-vms`` VMs, a rate the generator sustains on 2 cores.
    """
    vms = args.poll_vms
    limit = raise_open_files(2 * vms + 512)
    vms = min(vms, limit - 512)
    kept = min(vms, (limit - 512) // 2)
    fresh = min(vms, args.poll_close_vms)
    started = time.perf_counter()
    server = Forewarn(
        work / "forewarn",
        fleet_yaml(vms),
        host="127.0.0.1",
        port=free_port(),
        control_port=free_port(),
    )
    out = []
    plan = ((False, kept), (True, fresh))
    with server:
        start_seconds = time.perf_counter() - started
        for close, count in plan:
            cpu_before = cpu_seconds(server.serving_pids())
            result = run_polling(server.port, count, close=close, duration=args.poll_seconds)
            cpu = cpu_seconds(server.serving_pids()) - cpu_before
            out.append(
                {
                    **result.summary(),
                    "server": "forewarn",
                    "server_cpu_us_per_poll": cpu / max(1, result.ok) * 1e6,
                    "fleet_vms": vms,
                    "open_files_limit": limit,
                    "server_start_s": start_seconds,
                }
            )
        status, body = fetch(server.url.replace(server.host, "127.1.0.1"), {"Metadata": "true"})
    if nginx is None:
        return out
    if status != 200:
        raise RuntimeError(f"forewarn answered {status} at 127.1.0.1")
    with Nginx(nginx, work / "nginx", body, "127.0.0.1", free_port()) as static:
        for close, count in plan:
            cpu_before = cpu_seconds(static.serving_pids())
            result = run_polling(
                static.port, count, close=close, duration=args.poll_seconds, single_host="127.0.0.1"
            )
            cpu = cpu_seconds(static.serving_pids()) - cpu_before
            out.append(
                {
                    **result.summary(),
                    "server": "nginx",
                    "server_cpu_us_per_poll": cpu / max(1, result.ok) * 1e6,
                    "open_files_limit": limit,
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    print(table(results))
    whole = not args.smoke and args.only == ",".join(SCENARIOS)
    path = args.json or Path("bench/results.json" if whole else "bench/results/partial.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(results, path)
    print(f"bench: results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
