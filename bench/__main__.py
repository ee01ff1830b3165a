"""``python -m bench``: every scenario, side by side with nginx, then a table and a JSON file.

``--smoke`` is the seconds-long version CI runs so the suite never rots; its figures are too
short to quote. The full run takes a few minutes and is run by hand; its results go in
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.fleetgen import fleet_yaml
from bench.polling import run_polling
from bench.report import machine, now_iso, table, targets, write_json
from bench.scale import scale_results
from bench.servers import Forewarn
from bench.throughput import run_throughput
from bench.tools import find_tools, free_port, raise_open_files

SCENARIOS = ("throughput", "polling", "scale")


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
    parser.add_argument("--json", type=Path, default=Path("bench/results.json"))
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    parser.add_argument("--duration", type=float, help="seconds per wrk run (default 5)")
    parser.add_argument("--rounds", type=int, help="wrk rounds per server and mode (default 3)")
    parser.add_argument("--poll-vms", type=int, help="VMs polling at once (default 10000)")
    parser.add_argument("--poll-seconds", type=float, help="seconds of polling (default 10)")
    parser.add_argument("--sizes", type=_sizes, help="fleet sizes (default 1000,10000,100000)")
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    smoke = args.smoke
    args.duration = args.duration or (1.0 if smoke else 5.0)
    args.rounds = args.rounds or (1 if smoke else 3)
    args.poll_vms = args.poll_vms or (200 if smoke else 10_000)
    args.poll_seconds = args.poll_seconds or (1.0 if smoke else 10.0)
    args.sizes = args.sizes or ([500, 1000] if smoke else [1000, 10_000, 100_000])
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
            results["polling"] = run_polling_scenario(work / "polling", args)
        if "scale" in only:
            log(f"bench: campaign and memory at {', '.join(map(str, args.sizes))} VMs ...")
            results["scale"] = scale_results(args.sizes)
    results["machine"]["load_average_after"] = list(os.getloadavg())
    results["targets"] = [target.as_dict() for target in targets(results)]
    return results


def run_polling_scenario(work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    vms = args.poll_vms
    # forewarn: one listening socket and one connection per VM; the generator: one per VM.
    limit = raise_open_files(3 * vms + 1024)
    if limit < 3 * vms + 256:
        vms = max(1, (limit - 256) // 3)
    started = time.perf_counter()
    server = Forewarn(
        work, fleet_yaml(vms), host="127.0.0.1", port=free_port(), control_port=free_port()
    )
    out = []
    with server:
        start_seconds = time.perf_counter() - started
        for close in (False, True):
            result = run_polling(server.port, vms, close=close, duration=args.poll_seconds)
            out.append({**result.summary(), "server_start_s": start_seconds})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    print(table(results))
    write_json(results, args.json)
    print(f"bench: results in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
