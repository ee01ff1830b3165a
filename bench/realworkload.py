"""forewarn's real workload beside nginx: a fleet of VMs, each polling once a second at its own
address, in a private network namespace.

learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": "we
recommend that you poll the service once per second". ``forewarn serve --bind 0.0.0.0:PORT`` listens
once for the whole fleet and tells VMs apart by the address each connection arrived at; nginx, in
the same namespace, listens on ``0.0.0.0:PORT2`` and serves each address its own document
(``$server_addr``), from memory: the bytes forewarn answered at that address, fetched once, checking
the Metadata header as forewarn does. Every 50th VM has an event of its own an hour ahead (Freeze,
Reboot, Redeploy in turn), so documents differ and stay the same throughout the run.

The generator is ``bench/loadgen/poller.c``: open loop, latency from each poll's scheduled
time, every answer checked. Two modes: keep-alive (a connection per VM, opened before the
clock starts) and a new connection per poll (the documentation's ``requests.get`` sample).
Rounds interleave the two servers, alternating which goes first; each row is one server, one
mode, one round. The server runs on one core (nginx with one worker), the generator processes
on another (``taskset``). A run with errors (a poll unanswered when its VM's next is due, a
wrong status or length, ...) is said at once and counted, and misses the scenario's error
target; the other runs still go ahead, so an overloaded server shows how overloaded it is.

Kept connections are bounded by RLIMIT_NOFILE, whose hard limit (20,000 in the containers the
figures come from) no process may pass: the server holds one descriptor per connection beside
those it holds at rest, so keep-alive polls with as many VMs as the limit leaves after the
busier server's descriptors at rest and forewarn's reserve for its control API and store
(``limits.RESERVED_DESCRIPTORS``) with a few more; the new-connection mode polls with the
whole fleet.

Everything runs inside a network namespace made for the run (``ip netns add``, its loopback up,
deleted afterwards, also on failure), so the wildcard listeners reach nothing else. Every port
the bench listens on is in :data:`bench.tools.PORTS` (18000-18999).

``python -m bench.realworkload [--smoke]`` runs this scenario alone; ``python -m bench`` runs it
as ``real-workload``. Needs root, iproute2, gcc and nginx; says why it is skipped otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvloop

from bench.fleetgen import addresses, fleet_yaml, vm_name
from bench.floor import PythonFloor
from bench.loadgen.poller import (
    LoadgenError,
    PollerRun,
    Pollers,
    build_poller,
    compiler_problem,
    write_targets,
)
from bench.profile import parse_raw
from bench.profile import summarise as summarise_profile
from bench.servers import PATH, QUERY, Forewarn, Nginx, cpu_seconds, fetch
from bench.tools import free_port, pin_cores, raise_open_files, which
from forewarn.server.http import limits

ROOT = Path(__file__).resolve().parents[1]
#: The Python floor (bench/floor.py) answers each address its document and does nothing else:
#: what forewarn costs above it is its own work; above nginx but below it, the event loop's.
SERVERS = ("forewarn", "nginx", "python-floor")
MODES = ("keep-alive", "new-connection")
#: Every EVENT_EVERY-th VM gets an event of its own, of these types in turn.
EVENT_EVERY = 50
EVENT_TYPES = ("Freeze", "Reboot", "Redeploy")
#: Far enough ahead that no document changes while the run lasts.
NOTICE_SECONDS = 3600
#: Descriptors left to the server beyond its connections and what it holds at rest: those
#: forewarn keeps from its VMs' connections for the control API and its store (past its share,
#: it closes the longest-idle connections), and a few more.
SERVER_SPARE_FDS = limits.RESERVED_DESCRIPTORS + 8
FETCH_CONCURRENCY = 128
#: The servers profiled after the measured rounds, when py-spy is at hand: forewarn, and the
#: floor whose cost it is compared with.
PROFILED = ("forewarn", "python-floor")
#: py-spy's samples a second: enough for shares to a percent over a run of 10 s.
PROFILE_RATE = 250


class UnavailableError(RuntimeError):
    """What this machine lacks for the scenario: it is skipped, saying so."""


class RealWorkloadError(AssertionError):
    """A server answered something other than its document: no figure is valid."""


# -- outside the namespace --------------------------------------------------------------


def problem(nginx: str | None) -> str | None:
    """Why the scenario cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"a network namespace needs root (running as uid {os.geteuid()})"
    if which("ip") is None:
        return "iproute2's `ip` is needed for a network namespace"
    if nginx is None:
        return "nginx is needed beside forewarn (apt-get install -y nginx-light)"
    return compiler_problem()


def _run(argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


@contextlib.contextmanager
def private_namespace() -> Iterator[str]:
    """A network namespace with only its loopback up; deleted however the block ends, with
    every process still in it (only this run starts processes there)."""
    name = f"forewarn-bench-{os.getpid()}-{secrets.token_hex(3)}"
    added = _run(["ip", "netns", "add", name])
    if added.returncode != 0:
        raise UnavailableError(f"`ip netns add {name}` failed: {added.stderr.strip()}")
    try:
        up = _run(["ip", "-n", name, "link", "set", "lo", "up"])
        if up.returncode != 0:
            raise UnavailableError(f"loopback of {name} did not come up: {up.stderr.strip()}")
        yield name
    finally:
        for pid in _run(["ip", "netns", "pids", name]).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        _run(["ip", "netns", "del", name])


def run_real_workload(
    work: Path,
    *,
    nginx: str | None,
    vms: int,
    rounds: int,
    seconds: float,
    period: float = 1.0,
    profile: bool = False,
) -> dict[str, Any]:
    """The scenario, measured inside a namespace of its own; raises :class:`UnavailableError`
    when this machine cannot run it. Each VM polls once a ``period`` (the documentation's
    once a second, or longer for a fleet whose every VM one core could not answer each
    second). ``profile``: then forewarn and the floor are profiled in each mode, when py-spy
    is at hand (:data:`PROFILED`); the figures say why not otherwise."""
    reason = problem(nginx)
    if reason is not None:
        raise UnavailableError(reason)
    assert nginx is not None  # problem() said so
    binary = build_poller()
    work.mkdir(parents=True, exist_ok=True)
    out = work / "real-workload.json"
    with private_namespace() as namespace:
        argv = ["ip", "netns", "exec", namespace, sys.executable, "-m", "bench.realworkload"]
        argv += ["--inside", "--work", str(work), "--poller", str(binary), "--nginx", nginx]
        argv += ["--vms", str(vms), "--rounds", str(rounds), "--seconds", f"{seconds:g}"]
        argv += ["--period", f"{period:g}"]
        argv += ["--json", str(out)]
        py_spy = find_py_spy() if profile else None
        if py_spy is not None:
            argv += ["--profile-with", py_spy]
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        done = subprocess.run(
            argv,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": path},
            stdout=subprocess.DEVNULL,  # stderr: its progress, and each run's errors, live
            # start-up and documents, then each run's set-up, clock and drain: all bounded
            timeout=600 + rounds * len(MODES) * len(SERVERS) * (seconds + 120),
            check=False,
        )
    if done.returncode != 0:
        raise RealWorkloadError(f"the real workload failed (exit {done.returncode}; see above)")
    results: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if profile and py_spy is None:
        results["profiles"] = {"skipped": "py-spy is not installed (pip install py-spy)"}
    return results


def find_py_spy() -> str | None:
    """py-spy on the PATH, or beside this interpreter (a virtual environment not activated)."""
    beside = Path(sys.executable).parent / "py-spy"
    return which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


# -- inside the namespace ---------------------------------------------------------------


def _request(address: str, port: int) -> bytes:
    return (
        f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: {address}:{port}\r\nMetadata: true\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


async def _fetch_one(address: str, port: int, limit: asyncio.Semaphore) -> bytes:
    async with limit:
        reader, writer = await asyncio.open_connection(address, port)
        try:
            writer.write(_request(address, port))
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
        finally:
            writer.close()
            await writer.wait_closed()
    if not head.startswith(b"HTTP/1.1 200 "):
        raise RealWorkloadError(f"forewarn answered {head[:80]!r} at {address}")
    return body


def fetch_documents(hosts: Sequence[str], port: int) -> list[bytes]:
    """What the server answers at each address, once."""

    async def main() -> list[bytes]:
        limit = asyncio.Semaphore(FETCH_CONCURRENCY)
        return list(await asyncio.gather(*(_fetch_one(host, port, limit) for host in hosts)))

    return uvloop.run(main())


def _schedule_events(server: Forewarn, vms: int) -> int:
    """An event of its own for every EVENT_EVERY-th VM, so that documents differ."""
    count = 0
    for index in range(0, vms, EVENT_EVERY):
        event_type = EVENT_TYPES[count % len(EVENT_TYPES)]
        body = {"type": event_type, "resources": [vm_name(index)], "noticeSeconds": NOTICE_SECONDS}
        server.call("POST", "/events", body)
        count += 1
    return count


def _check_same_answers(port: int, other_port: int, hosts: Sequence[str]) -> None:
    """Both servers answer the same bytes at each of ``hosts``, and refuse without the
    Metadata header, before anything is timed."""
    for host in hosts:
        urls = [f"http://{host}:{p}{PATH}?{QUERY}" for p in (port, other_port)]
        answers = [fetch(url, {"Metadata": "true"}) for url in urls]
        if answers[0] != answers[1] or answers[0][0] != 200:
            raise RealWorkloadError(f"the servers answer differently at {host}: {answers}")
        for url in urls:
            status, _ = fetch(url)
            if status != 400:
                raise RealWorkloadError(f"{url} answered {status} without the Metadata header")


def open_fds(pids: Sequence[int]) -> int:
    """The most descriptors any of ``pids`` holds."""
    return max((len(os.listdir(f"/proc/{pid}/fd")) for pid in pids), default=0)


def _row(server: str, mode: str, round_index: int, run: PollerRun, cpu: float) -> dict[str, Any]:
    polls = max(1, run.ok)
    return {
        "server": server,
        "mode": mode,
        "round": round_index,
        "vms": run.vms,
        "polls": run.polls,
        "ok": run.ok,
        "polls_per_s": run.polls_per_second,
        "server_cpu_us_per_poll": cpu / polls * 1e6,
        "generator_cpu_us_per_poll": run.cpu_s / polls * 1e6,
        "generator_processes": run.processes,
        **{key: getattr(run, key) for key in ("p50_ms", "p90_ms", "p99_ms", "p999_ms")},
        "max_ms": run.max_ms,
        "generator_lag_p99_ms": run.lag_p99_ms,
        "generator_max_lag_ms": run.max_lag_ms,
        "errors": run.errors,
        "error_kinds": run.error_kinds,
    }


def _failure(server: str, mode: str, run: PollerRun) -> str:
    return (
        f"real workload: {server}, {mode}: {run.errors} error(s) {run.error_kinds} in "
        f"{run.polls} polls (answered: p50 {run.p50_ms} ms, p99 {run.p99_ms} ms; the generator "
        f"late by {run.lag_p99_ms} ms at p99, {run.max_lag_ms} ms at most)"
    )


def measure(
    work: Path,
    *,
    poller: Path,
    nginx: str,
    vms: int,
    rounds: int,
    seconds: float,
    period: float = 1.0,
    profile_with: str | None = None,
) -> dict[str, Any]:
    """The scenario itself; to be run inside the namespace."""
    limit = raise_open_files(vms + 1024)  # a connection per VM, and what else the server holds
    server_prefix, generator_prefix, pinning = pin_cores()
    hosts = list(addresses(vms))
    forewarn = Forewarn(
        work / "forewarn",
        fleet_yaml(vms),
        host="0.0.0.0",
        port=free_port("0.0.0.0"),
        control_host="127.0.0.1",
        control_port=free_port(),
        options=("--timing", "first_call_delay=0"),  # documents final from the first poll
        prefix=server_prefix,
        start_timeout=600,
    )
    rows: list[dict[str, Any]] = []
    with forewarn:
        events = _schedule_events(forewarn, vms)
        documents = fetch_documents(hosts, forewarn.port)
        static = Nginx(
            nginx,
            work / "nginx",
            b"",
            "0.0.0.0",
            free_port("0.0.0.0"),
            documents=dict(zip(hosts, documents, strict=True)),
            prefix=server_prefix,
        )
        floor = PythonFloor(
            work / "python-floor",
            dict(zip(hosts, documents, strict=True)),
            free_port("0.0.0.0"),
            prefix=server_prefix,
        )
        with static, floor:
            samples = sorted({hosts[0], hosts[1], hosts[-1], hosts[len(hosts) // 2]})
            _check_same_answers(forewarn.port, static.port, samples)
            servers: dict[str, Forewarn | Nginx | PythonFloor] = {
                "forewarn": forewarn,
                "nginx": static,
                "python-floor": floor,
            }
            at_rest = {name: open_fds(s.serving_pids()) for name, s in servers.items()}
            kept = min(vms, limit - max(at_rest.values()) - SERVER_SPARE_FDS)
            targets = write_targets(work / "targets.txt", hosts, map(len, documents))
            for round_index in range(rounds):
                order = SERVERS if round_index % 2 == 0 else SERVERS[::-1]
                for mode in MODES:
                    for name in order:
                        count = kept if mode == "keep-alive" else vms
                        print(
                            f"real workload: round {round_index + 1}, {name}, {mode}, {count} VMs",
                            file=sys.stderr,
                            flush=True,
                        )
                        pids = servers[name].serving_pids()
                        with Pollers(
                            poller,
                            targets,
                            vms=count,
                            port=servers[name].port,
                            mode=mode,
                            duration=seconds,
                            period=period,
                            prefix=generator_prefix,
                        ) as pollers:
                            before = cpu_seconds(pids)
                            pollers.go()
                            pollers.wait_for_results()  # not the connections' closing
                            cpu = cpu_seconds(pids) - before
                            run = pollers.collect()
                        if run.errors:  # counted, and said at once; the target fails
                            print(_failure(name, mode, run), file=sys.stderr, flush=True)
                        rows.append(_row(name, mode, round_index, run, cpu))
            profiles: dict[str, dict[str, Any]] | None = None
            if profile_with is not None:
                profiles = {
                    name: {
                        mode: _profile(
                            profile_with,
                            name,
                            servers[name],
                            poller=poller,
                            targets=targets,
                            vms=kept if mode == "keep-alive" else vms,
                            mode=mode,
                            seconds=seconds,
                            period=period,
                            prefix=generator_prefix,
                            out=work / f"profile-{name}-{mode}.txt",
                        )
                        for mode in MODES
                    }
                    for name in PROFILED
                }
            # Still the same answers after the load: no document moved during the run.
            if fetch_documents(samples, forewarn.port) != [
                documents[hosts.index(host)] for host in samples
            ]:
                raise RealWorkloadError("forewarn's documents changed during the run")
    sizes = sorted(len(document) for document in documents)
    return {
        "vms": vms,
        "keep_alive_vms": kept,
        "open_files_limit": limit,
        "server_fds_at_rest": at_rest,
        "server_spare_fds": SERVER_SPARE_FDS,
        "vms_with_events": events,
        "document_bytes": {"min": sizes[0], "max": sizes[-1]},
        "pinning": pinning,
        "rounds": rounds,
        "seconds": seconds,
        "period_s": period,
        "rows": rows,
        # Polls not answered with their VM's document within a period, over every run: the
        # figures of a run with errors are of the polls that were answered.
        "errors": sum(row["errors"] for row in rows),
        "profiles": profiles,
        "summary": summarise(rows),
        "modes": compare(rows),
    }


def _profile(
    py_spy: str,
    name: str,
    server: Forewarn | Nginx | PythonFloor,
    *,
    poller: Path,
    targets: Path,
    vms: int,
    mode: str,
    seconds: float,
    period: float,
    prefix: Sequence[str],
    out: Path,
) -> dict[str, Any]:
    """Where ``server``'s CPU goes under the fleet's polls in ``mode`` (:mod:`bench.profile`):
    a run of its own after the measured ones, so no figure is of a profiled server."""
    (pid,) = server.serving_pids()
    print(f"real workload: profiling {name}, {mode}", file=sys.stderr, flush=True)
    with Pollers(
        poller,
        targets,
        vms=vms,
        port=server.port,
        mode=mode,
        duration=seconds,
        period=period,
        prefix=prefix,
    ) as pollers:
        pollers.go()
        # --native: the C library's calls (the kernel's work) apart from the Python above them
        argv = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds)))]
        argv += ["--rate", str(PROFILE_RATE), "--native", "--format", "raw", "--output", str(out)]
        sampled = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=seconds + 120,
            check=False,
        )
        pollers.wait_for_results()
        pollers.collect()
    if sampled.returncode != 0 or not out.exists():
        return {"error": f"py-spy exit {sampled.returncode}: {sampled.stderr.strip()[-300:]}"}
    with out.open(encoding="utf-8") as lines:
        return summarise_profile(parse_raw(lines))


# -- figures --------------------------------------------------------------------------------

FIGURES = (
    "polls_per_s",
    "server_cpu_us_per_poll",
    "generator_cpu_us_per_poll",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "generator_lag_p99_ms",
)


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per server and mode: the median and the spread (min-max) over rounds of each figure."""
    found = []
    for mode in MODES:
        for server in SERVERS:
            mine = [row for row in rows if row["server"] == server and row["mode"] == mode]
            if not mine:
                continue
            found.append(
                {
                    "server": server,
                    "mode": mode,
                    "vms": mine[0]["vms"],
                    "rounds": len(mine),
                    **{figure: _spread([row[figure] for row in mine]) for figure in FIGURES},
                }
            )
    return found


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _cpu_ratios(rounds: Sequence[dict[str, dict[str, Any]]], server: str) -> list[float]:
    """nginx's server CPU per poll over ``server``'s, round by round."""
    return [
        pair["nginx"]["server_cpu_us_per_poll"] / pair[server]["server_cpu_us_per_poll"]
        for pair in rounds
        if pair[server]["server_cpu_us_per_poll"] > 0
    ]


def compare(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode: nginx's server CPU per poll over forewarn's, within each round, then the
    median over rounds; and each server's median p99. Only runs without errors count: a
    run's CPU per answered poll, or p99 of the polls that were answered, says nothing when
    others were not (None when no run is left)."""
    found = []
    for mode in MODES:
        pairs: dict[int, dict[str, dict[str, Any]]] = {}
        for row in rows:
            if row["mode"] == mode:
                pairs.setdefault(row["round"], {})[row["server"]] = row
        rounds = [pair for _, pair in sorted(pairs.items()) if set(pair) == set(SERVERS)]
        if not rounds:
            continue
        clean = [pair for pair in rounds if not any(row["errors"] for row in pair.values())]
        ratios = _cpu_ratios(clean, "forewarn")
        p99s = {
            server: [pair[server]["p99_ms"] for pair in rounds if not pair[server]["errors"]]
            for server in SERVERS
        }
        found.append(
            {
                "mode": mode,
                "vms": rounds[0]["forewarn"]["vms"],
                "rounds": len(rounds),
                "rounds_without_errors": len(clean),
                "cpu_ratio": _median(ratios),
                "cpu_ratios": ratios,
                # What a Python server on this loop can reach at all, in the same rounds.
                "floor_cpu_ratio": _median(_cpu_ratios(clean, "python-floor")),
                "forewarn_p99_ms": _median(p99s["forewarn"]),
                "nginx_p99_ms": _median(p99s["nginx"]),
                "floor_p99_ms": _median(p99s["python-floor"]),
            }
        )
    return found


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.realworkload", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--smoke", action="store_true", help="200 VMs, 1 round of 1 s")
    parser.add_argument("--vms", type=int, help="VMs in the fleet (default 20000)")
    parser.add_argument("--rounds", type=int, help="rounds per server and mode (default 3)")
    parser.add_argument("--seconds", type=float, help="seconds per run (default 10)")
    parser.add_argument(
        "--period", type=float, default=1.0, help="seconds between a VM's polls (default 1)"
    )
    parser.add_argument("--json", type=Path, help="where the figures go (default: stdout)")
    parser.add_argument("--work", type=Path, help="folder for the servers' files")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--poller", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--nginx", help=argparse.SUPPRESS)
    parser.add_argument("--profile-with", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.vms = args.vms or (200 if args.smoke else 20_000)
    args.rounds = args.rounds or (1 if args.smoke else 3)
    args.seconds = args.seconds or (1.0 if args.smoke else 10.0)
    if args.vms < 2 or args.rounds < 1 or args.seconds <= 0 or args.period <= 0:
        parser.error("--vms at least 2, --rounds at least 1, --seconds and --period above 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.inside:
        results = measure(
            args.work,
            poller=args.poller,
            nginx=args.nginx,
            vms=args.vms,
            rounds=args.rounds,
            seconds=args.seconds,
            period=args.period,
            profile_with=args.profile_with,
        )
    else:
        with tempfile.TemporaryDirectory(prefix="forewarn-bench-") as folder:
            work = args.work or Path(folder)
            try:
                results = run_real_workload(
                    work,
                    nginx=which("nginx"),
                    vms=args.vms,
                    rounds=args.rounds,
                    seconds=args.seconds,
                    period=args.period,
                    profile=not args.smoke,
                )
            except (UnavailableError, LoadgenError) as error:
                print(f"real workload skipped: {error}", file=sys.stderr)
                return 0 if isinstance(error, UnavailableError) else 1
    text = json.dumps(results, indent=2) + "\n"
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if results["errors"] and not args.inside:  # inside, the figures are still to be read
        print(f"real workload: {results['errors']} poll(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
