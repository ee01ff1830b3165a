"""Start-up: seconds from ``forewarn serve``'s process start until a large fleet is answered.

A VM that restarts its IMDS client, or a fleet whose emulator is restarted, waits for the
whole start-up: reading the fleet file, building the registry, opening the listener. The
scenario starts ``forewarn serve --bind 0.0.0.0:PORT`` with a generated fleet
(:mod:`bench.fleetgen`) inside a network namespace of its own (:mod:`bench.memory`), so each
VM is asked at its own address, and counts the seconds from just before the process is
started until every VM of a sample spread across the fleet (the first and the last included)
has been answered 200 with its document at its own address. The prober runs in the namespace
as ``python -m bench.startup probe``, started (and its imports paid) before the server is.

Two fleets: the served one (target: 100,000 VMs answered within 3 s) and the largest one
(1,000,000 VMs: served, or refused with a message naming the reason, within 30 s). A server
that has not finished within :data:`GIVE_UP_FACTOR` times its target (and at least
:data:`GIVE_UP_AT_LEAST_S`) is stopped and the wait recorded as a lower bound.

The profile that explains the figure: the served fleet is started once more with py-spy
attached from its first moments (``py-spy record --pid``, a run of its own, so no figure is
of a profiled server), and each module's *inclusive* share of the samples is reported (the
samples whose stack holds one of its frames): the fleet file's parse, the registry's build,
the imports and the listener each show as what they cost of the start-up.

Run on its own: ``python -m bench --only startup`` (``--startup-vms``, ``--startup-huge-vms``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.fleetgen import address, fleet_yaml
from bench.memory import READY, _inside, private_namespace, process_memory
from bench.profile import parse_raw
from bench.servers import PATH, QUERY, serve_command
from bench.tools import free_port, stop

ROOT = Path(__file__).resolve().parents[1]
#: The targets of the two fleets: seconds until answered (or, for the largest, refused).
SERVED_TARGET_S = 3.0
LARGEST_TARGET_S = 30.0
#: A start-up not over within this many times its target is stopped: the wait is then a
#: lower bound, and the target missed.
GIVE_UP_FACTOR = 4.0
GIVE_UP_AT_LEAST_S = 60.0
#: py-spy's samples a second while a start-up is profiled.
PROFILE_RATE = 100
#: VMs asked, spread evenly across the fleet from the first to the last.
SAMPLE = 64
#: Pause between the prober's passes over the VMs not answered yet.
PROBE_PAUSE_S = 0.01


@dataclass(frozen=True)
class StartupResult:
    """One start-up of ``forewarn serve``, from its process start."""

    vms: int
    fleet_file_bytes: int
    #: "served" (every sampled VM answered 200), "refused" (the server exited, saying why)
    #: or "gave up" (neither within ``give_up_seconds``).
    outcome: str
    #: Seconds from the process start until every sampled VM was answered, or until the
    #: server exited refusing, or until the wait was given up.
    seconds: float
    #: Seconds until the server printed that both planes listen (None if it never did).
    announced_seconds: float | None
    sampled_vms: int
    answered_vms: int
    give_up_seconds: float
    target_seconds: float
    #: The last line the server printed when it was not served (its reason, if it refused).
    message: str
    #: The server's peak resident set (``VmHWM``) once served, in bytes.
    peak_rss_bytes: int | None


def sample_indexes(count: int, sample: int = SAMPLE) -> list[int]:
    """Up to ``sample`` VM indexes evenly spread from the first to the last VM."""
    if count <= sample:
        return list(range(count))
    step = (count - 1) / (sample - 1)
    return sorted({round(i * step) for i in range(sample)})


def run_startup(
    work: Path,
    *,
    served_vms: int,
    largest_vms: int,
    py_spy: str | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Both fleets' start-ups, one after the other, in one namespace; then, with ``py_spy``,
    the served fleet's start-up again, profiled."""
    found: dict[str, Any] = {}
    with private_namespace() as namespace:
        for key, vms, target in (
            ("served", served_vms, SERVED_TARGET_S),
            ("largest", largest_vms, LARGEST_TARGET_S),
        ):
            log(f"bench: start-up of {vms:,} VMs ...")
            found[key] = asdict(measure_startup(namespace, work / key, vms, target))
        if py_spy is None:
            found["profile"] = {"skipped": "py-spy is not installed (pip install py-spy)"}
        else:
            log(f"bench: start-up of {served_vms:,} VMs again, profiled ...")
            profile: dict[str, Any] = {}
            measure_startup(
                namespace, work / "profiled", served_vms, SERVED_TARGET_S,
                profile=(py_spy, profile),
            )  # fmt: skip
            found["profile"] = profile
    return found


def measure_startup(
    namespace: str,
    work: Path,
    vms: int,
    target: float,
    *,
    fleet_text: str | None = None,
    profile: tuple[str, dict[str, Any]] | None = None,
) -> StartupResult:
    """Start ``forewarn serve`` for ``vms`` VMs on one wildcard listener in ``namespace`` and
    time it until a sample of its VMs is answered, or it exits, or the wait is given up.
    ``fleet_text`` replaces the generated fleet file (a file the server must refuse);
    ``profile``, py-spy's path and a dict, has py-spy sample the start-up into the dict
    (:func:`summarise_startup`)."""
    if vms < 1:
        raise ValueError("a start-up is timed until at least one VM is answered")
    work.mkdir(parents=True, exist_ok=True)
    fleet = work / "fleet.yaml"
    fleet.write_text(fleet_yaml(vms) if fleet_text is None else fleet_text, encoding="utf-8")
    port, control_port = free_port(), free_port()
    give_up = max(target * GIVE_UP_FACTOR, GIVE_UP_AT_LEAST_S)
    indexes = sample_indexes(vms)
    probe = subprocess.Popen(
        _inside(
            namespace,
            sys.executable,
            "-m",
            "bench.startup",
            "probe",
            str(port),
            ",".join(map(str, indexes)),
            "--timeout",
            str(give_up),
        ),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log_path = work / "forewarn.out"
    server: subprocess.Popen[bytes] | None = None
    sampler: subprocess.Popen[str] | None = None
    try:
        assert probe.stdout is not None
        if probe.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the prober did not start: {probe.communicate()[1][-2000:]}")
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "FOREWARN_TOKEN": secrets.token_urlsafe(24),
            "FOREWARN_RUNTIME_DIR": str(work),
        }
        argv = serve_command(f"0.0.0.0:{port}", f"127.0.0.1:{control_port}", fleet)
        started = time.monotonic()
        with log_path.open("wb") as out:
            server = subprocess.Popen(
                _inside(namespace, *argv), stdout=out, stderr=subprocess.STDOUT, env=env
            )
        if profile is not None:
            # `ip netns exec` execs the server: its pid is the server's, from its first moments.
            sampling = ["record", "--pid", str(server.pid), "--rate", str(PROFILE_RATE)]
            sampling += ["--nonblocking", "--format", "raw", "--output", str(work / "profile.txt")]
            sampler = subprocess.Popen(
                [profile[0], *sampling],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        announced: float | None = None
        while True:
            now = time.monotonic()
            if announced is None and READY in _text(log_path):
                announced = now - started
            if probe.poll() is not None:
                break
            if server.poll() is not None:
                return StartupResult(
                    vms, fleet.stat().st_size, "refused", now - started, announced,
                    len(indexes), 0, give_up, target, _last_line(log_path, work), None,
                )  # fmt: skip
            time.sleep(PROBE_PAUSE_S / 2)
        answer = json.loads(probe.communicate()[0].splitlines()[-1])
        if announced is None and READY in _text(log_path):
            announced = answer["at"] - started
        served = answer["answered"] == len(indexes)
        peak = process_memory(server.pid)[1] if served and server.poll() is None else None
        return StartupResult(
            vms, fleet.stat().st_size, "served" if served else "gave up",
            answer["at"] - started, announced, len(indexes), answer["answered"], give_up,
            target, "" if served else _last_line(log_path, work), peak,
        )  # fmt: skip
    finally:
        if sampler is not None and profile is not None:
            profile[1].update(_sampled(sampler, work / "profile.txt"))
        stop(probe)  # type: ignore[arg-type]
        if server is not None:
            stop(server)


def _sampled(sampler: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    """Stop py-spy (SIGINT: it writes what it sampled) and summarise its samples."""
    if sampler.poll() is None:
        sampler.send_signal(signal.SIGINT)
    try:
        _, errors = sampler.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        sampler.kill()
        _, errors = sampler.communicate()
    if not out.exists():
        return {"error": f"py-spy exit {sampler.returncode}: {errors.strip()[-300:]}"}
    with out.open(encoding="utf-8") as lines:
        # A sample taken before the interpreter had a frame has no stack: " COUNT".
        return summarise_startup(parse_raw(_frameless_named(lines)))


def _frameless_named(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        yield f"(no Python frame yet){line}" if line.startswith(" ") else line


#: ``name (file:line)`` for a Python frame.
_PYTHON_FRAME = re.compile(r"\((?P<file>[^():]+\.py):\d+\)$")


def module_of(frame: str) -> str | None:
    """What a frame's cost is counted to: forewarn's own file, a library's package, the
    imports' machinery, or the standard library's module; None for a native frame."""
    if "<frozen importlib" in frame:
        return "imports (importlib)"
    match = _PYTHON_FRAME.search(frame)
    if match is None:
        return None
    path = match.group("file")
    if path.startswith("forewarn/"):
        return path
    head, _, rest = path.partition("/")
    return f"{head}/" if rest else path


def summarise_startup(stacks: list[tuple[list[str], int]], top: int = 15) -> dict[str, Any]:
    """Each module's inclusive share of the samples (a sample counts once for every module
    in its stack), largest first, and the innermost frames most often sampled."""
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for frames, count in stacks:
        total += count
        for module in {module_of(frame) for frame in frames} - {None}:
            inclusive[str(module)] += count
        if frames:
            leaves[frames[-1]] += count
    if total == 0:
        return {"samples": 0, "inclusive": [], "top_frames": []}
    return {
        "samples": total,
        "rate": PROFILE_RATE,
        "inclusive": [[module, n / total] for module, n in inclusive.most_common(top)],
        "top_frames": [[frame, n / total] for frame, n in leaves.most_common(top)],
    }


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _last_line(path: Path, work: Path) -> str:
    """The server's last words, the run's own folder left out of the paths they name."""
    lines = [line for line in _text(path).splitlines() if line.strip()]
    return lines[-1].strip().replace(f"{work}/", "")[:500] if lines else ""


# -- the prober, run inside the namespace ---------------------------------------------------


def _answered(host: str, port: int) -> bool:
    """One poll of ``host`` as its VM makes it: answered 200, or not (yet)."""
    request = (
        f"GET {PATH}?{QUERY} HTTP/1.1\r\nHost: {host}\r\nMetadata: true\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(request)
            head = sock.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.1 200 ")


def probe(port: int, indexes: Sequence[int], timeout: float) -> dict[str, Any]:
    """Ask each sampled VM at its own address until every one was answered 200 or
    ``timeout`` passed; ``at`` is the monotonic clock (the machine's, shared with the
    process that started the server) when the last one was."""
    waiting = [address(index) for index in indexes]
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        waiting = [host for host in waiting if not _answered(host, port)]
        if waiting:
            time.sleep(PROBE_PAUSE_S)
    return {"at": time.monotonic(), "answered": len(indexes) - len(waiting)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    probe_command = commands.add_parser("probe", help="ask sampled VMs until answered")
    probe_command.add_argument("port", type=int)
    probe_command.add_argument("indexes", help="comma-separated VM indexes")
    probe_command.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(argv)
    indexes = [int(part) for part in args.indexes.split(",") if part]
    print(json.dumps(probe(args.port, indexes, args.timeout)), flush=True)


if __name__ == "__main__":
    main()
