"""``python -m bench``: every scenario, side by side with nginx, then a table and a JSON file.

``--smoke`` is the seconds-long version CI runs so the suite never rots; its figures are too
short to quote. The full run takes about twenty minutes and is run by hand on an otherwise idle
machine; it writes the whole of ``bench/results.json`` (each run's commit, tree state, machine,
load, command and date beside the figures), from which ``python -m bench.render`` makes the
figures of ``docs/benchmarks.md`` and ``bench/RESULTS.md``; ``--merge --only ...`` measures some
scenarios again into that file. ``--scale`` measures the largest fleets: the
real workload with 100,000 VMs (each polling every 10 s: a core could not answer them all
every second, nor nginx), the campaign up to 300,000 VMs, the memory of 100,000.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cheap_paths import run_cheap_paths
from bench.cluster_campaign import APPROVALS_PER_TURN, run_cluster_campaign
from bench.memory import NamespaceUnavailableError, namespace_problem, run_memory
from bench.propagation import postgres_problem, run_propagation
from bench.realworkload import UnavailableError, find_py_spy, run_real_workload
from bench.report import (
    RESULTS_FORMAT,
    SCENARIOS,
    machine,
    merge_results,
    now_iso,
    source_state,
    table,
    targets,
    write_json,
)
from bench.scale import scale_results
from bench.startup import run_startup
from bench.throughput import run_throughput
from bench.tools import find_tools
from bench.workers import MODES, run_workers

ROOT = Path(__file__).resolve().parents[1]
#: Where a whole run, and every ``--merge``, writes its figures: docs/benchmarks.md and
#: RESULTS.md are rendered from this file (``python -m bench.render``).
RESULTS_PATH = ROOT / "bench" / "results.json"
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
        "--scale",
        action="store_true",
        help="the largest fleets: real workload at 100000 VMs polling every 10 s, campaign "
        "up to 300000 VMs",
    )
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--json",
        type=Path,
        help="where the figures go (default: bench/results.json for a whole run or --merge, "
        "bench/results/partial.json for --smoke, --scale or --only, so those never replace "
        "the figures docs/benchmarks.md and RESULTS.md are made from)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="run the --only scenarios and put their figures into the results file (default "
        "bench/results.json), replacing those scenarios' figures there; each part of the file "
        "keeps the commit, machine and command it was measured with",
    )
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    parser.add_argument("--duration", type=float, help="seconds per wrk run (default 10)")
    parser.add_argument("--rounds", type=int, help="wrk rounds per server and mode (default 3)")
    parser.add_argument("--real-vms", type=int, help="VMs polling 1/s (default 20000)")
    parser.add_argument(
        "--real-rounds", type=int, help="real-workload rounds per server and mode (default 3)"
    )
    parser.add_argument("--real-seconds", type=float, help="seconds per real-workload run (10)")
    parser.add_argument(
        "--real-period",
        type=float,
        help="seconds between a VM's polls in the real workload (default 1; 10 with --scale)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        help="fleet sizes, smallest first (default 1000,10000,100000; add 300000 for the "
        "flatness targets' largest fleet)",
    )
    parser.add_argument(
        "--propagation-samples",
        type=int,
        help="changes made through one front-end and awaited on another (default 200)",
    )
    parser.add_argument(
        "--cluster-sizes",
        type=_sizes,
        help="fleet sizes of the three-front-end campaign (default 1000,5000; add 100000 "
        "for the target's largest fleet, a few minutes more)",
    )
    parser.add_argument(
        "--approvals-per-turn",
        type=int,
        default=APPROVALS_PER_TURN,
        help="approvals each front-end of the three-front-end campaign reads in one turn of "
        f"its event loop, committed together (default {APPROVALS_PER_TURN}; 1: one at a time)",
    )
    parser.add_argument(
        "--memory-vms",
        type=int,
        help="VMs of the fleet whose server memory is read after each VM polled (default 100000)",
    )
    parser.add_argument(
        "--postgres-url",
        default=POSTGRES_URL,
        help="PostgreSQL for the propagation scenario (env FOREWARN_TEST_POSTGRES_URL)",
    )
    parser.add_argument(
        "--held-vms", type=int, help="VMs with a request held at once, cheap-paths (default 10000)"
    )
    parser.add_argument(
        "--startup-vms",
        type=int,
        help="VMs of the fleet whose start-up is timed until answered (default 100000)",
    )
    parser.add_argument(
        "--startup-largest-vms",
        type=int,
        help="VMs of the largest fleet file, served or refused (default 1000000)",
    )
    parser.add_argument(
        "--workers-vms",
        type=int,
        help="VMs polling 1/s at one process and at serve --workers beside it (default 2000)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="the workers of serve --workers (default 2)"
    )
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    smoke, scale = args.smoke, args.scale
    if smoke and scale:
        parser.error("--smoke and --scale are opposites: choose one")
    args.duration = args.duration or (1.0 if smoke else 10.0)
    args.rounds = args.rounds or (1 if smoke else 3)
    args.real_vms = args.real_vms or (200 if smoke else 100_000 if scale else 20_000)
    args.real_rounds = args.real_rounds or (1 if smoke else 3)
    args.real_seconds = args.real_seconds or (1.0 if smoke else 10.0)
    args.real_period = args.real_period or (10.0 if scale else 1.0)
    if args.real_period <= 0:
        parser.error("--real-period must be above 0")
    default_sizes = [1000, 10_000, 100_000, 300_000] if scale else [1000, 10_000, 100_000]
    args.sizes = args.sizes or ([500, 1000] if smoke else default_sizes)
    args.propagation_samples = args.propagation_samples or (10 if smoke else 200)
    args.cluster_sizes = args.cluster_sizes or ([100] if smoke else [1000, 5000])
    args.held_vms = args.held_vms or (200 if smoke else 10_000)
    args.memory_vms = args.memory_vms or (2000 if smoke else 100_000)
    if args.approvals_per_turn < 1:
        parser.error("--approvals-per-turn must be at least 1")
    if args.memory_vms < 2:
        parser.error("--memory-vms must be at least 2")
    args.startup_vms = args.startup_vms or (300 if smoke else 100_000)
    args.startup_largest_vms = args.startup_largest_vms or (3000 if smoke else 1_000_000)
    args.workers_vms = args.workers_vms or (100 if smoke else 2000)
    if args.workers < 2:
        parser.error("--workers must be at least 2: one process is what they are measured by")
    if args.merge and smoke:
        parser.error("--merge puts figures into the results file; --smoke figures are never quoted")
    return args


def run(args: argparse.Namespace, log: Any = print, command: Sequence[str] = ()) -> dict[str, Any]:
    """Every chosen scenario, and the record of how, where and at which commit it ran."""
    only = set(args.only.split(","))
    started = time.monotonic()
    record: dict[str, Any] = {
        "date": now_iso(),
        **source_state(ROOT),
        "command": shlex.join(["python", "-m", "bench", *command]),
        "smoke": args.smoke,
        "scenarios": [scenario for scenario in SCENARIOS if scenario in only],
        "load_average_before": list(os.getloadavg()),
    }
    results: dict[str, Any] = {"format": RESULTS_FORMAT, "runs": [record], "skipped": {}}
    tools = find_tools(install=not args.no_install)
    for note in tools.notes:
        log(f"bench: {note}")
    record["machine"] = machine(tools.wrk, tools.nginx)
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
        if "real-workload" in only:
            log(
                f"bench: {args.real_vms} VMs polling every {args.real_period:g} s, forewarn, "
                "nginx and the Python floor ..."
            )
            try:
                results["real_workload"] = run_real_workload(
                    work / "real-workload",
                    nginx=tools.nginx,
                    vms=args.real_vms,
                    rounds=args.real_rounds,
                    seconds=args.real_seconds,
                    period=args.real_period,
                    profile=not args.smoke,
                )
                if results["real_workload"]["errors"]:
                    log(f"bench: real-workload FAILED {results['real_workload']['errors']} polls")
            except UnavailableError as reason:
                results["skipped"]["real-workload"] = str(reason)
                log(f"bench: real-workload skipped: {reason}")
        if "scale" in only:
            log(f"bench: campaign and memory at {', '.join(map(str, args.sizes))} VMs ...")
            results["scale"] = scale_results(args.sizes)
        if "memory" in only:
            problem = namespace_problem()
            if problem is not None:
                results["skipped"]["memory"] = problem
                log(f"bench: memory skipped: {problem}")
            else:
                log(f"bench: server memory, 1 VM then {args.memory_vms} VMs on one listener ...")
                results["memory"] = run_memory(work / "memory", args.memory_vms).summary()
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
            log(
                f"bench: the campaign with 3 front-ends sharing {sizes} VMs, "
                f"{args.approvals_per_turn} approvals to a front-end and a turn ..."
            )
            results["cluster_campaign"] = [
                dataclasses.asdict(
                    run_cluster_campaign(size, args.postgres_url, args.approvals_per_turn)
                )
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
        if "startup" in only:
            try:
                results["startup"] = run_startup(
                    work / "startup",
                    served_vms=args.startup_vms,
                    largest_vms=args.startup_largest_vms,
                    py_spy=find_py_spy(),
                    log=log,
                )
            except NamespaceUnavailableError as reason:
                results["skipped"]["startup"] = str(reason)
                log(f"bench: startup skipped: {reason}")
        if "workers" in only:
            log(f"bench: {args.workers_vms} VMs, one process and {args.workers} workers ...")
            try:
                results["workers"] = run_workers(
                    vms=args.workers_vms,
                    workers=args.workers,
                    seconds=args.real_seconds,
                    rounds=1 if args.smoke else 2,
                    # smoke: the mode whose figure the workers are for, new connections
                    modes=("new-connection",) if args.smoke else MODES,
                )
            except UnavailableError as reason:
                results["skipped"]["workers"] = str(reason)
                log(f"bench: workers skipped: {reason}")
    record["load_average_after"] = list(os.getloadavg())
    record["seconds"] = round(time.monotonic() - started, 1)
    results["targets"] = [target.as_dict() for target in targets(results)]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(command)
    whole = not (args.smoke or args.scale) and set(args.only.split(",")) == set(SCENARIOS)
    path = args.json or (
        RESULTS_PATH if whole or args.merge else ROOT / "bench" / "results" / "partial.json"
    )
    earlier = None
    if args.merge and path.exists():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        if earlier.get("format") != RESULTS_FORMAT:
            print(f"bench: {path} is not a results file of format {RESULTS_FORMAT}")
            return 2
    results = run(args, command=command)
    if earlier is not None:
        results = merge_results(earlier, results)
    print(table(results))
    write_json(results, path)
    print(f"bench: results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
