"""Building ``poller.c`` and running it as one or more processes that start on one clock.

A process may hold at most RLIMIT_NOFILE's hard limit of descriptors (20,000 in the
containers the figures come from), and a kept connection is one descriptor, so a fleet
larger than that is split into slices, one process each. Every process opens its connections
first and says ``ready``; then all are given one start time on CLOCK_MONOTONIC (the same
clock in every process), so VM ``i`` of all of them polls at ``i/N`` of a period whichever
process it is in. Their histograms are merged for the percentiles (:mod:`bench.stats`).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.stats import histogram_percentile_ms, merge_histograms

SOURCE = Path(__file__).with_name("poller.c")
MODES = ("keep-alive", "new-connection")
#: Descriptors a generator process keeps besides its VMs' connections (stdio, epoll, timer).
PROCESS_SPARE_FDS = 64
#: How long a process may take to open its kept connections (poller.c gives up at 60 s).
SETUP_TIMEOUT = 90.0
#: How long after the start the processes wait before the first poll, so all are waiting.
START_DELAY = 0.2


class LoadgenError(RuntimeError):
    """The generator could not be built or did not run to its end."""


def compiler_problem() -> str | None:
    """Why the generator cannot be built here, or None."""
    if shutil.which("gcc") is None:
        return "gcc is needed to build bench/loadgen/poller.c (apt-get install -y gcc)"
    return None


def cache_folder() -> Path:
    """Where built binaries are kept: the user's cache, or the temporary folder when that
    cannot be written (a read-only home)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    folder = Path(base) / "forewarn-bench"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"forewarn-bench-{os.getuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def build_poller(folder: Path | None = None) -> Path:
    """The generator's binary, compiled once per version of its source."""
    source = SOURCE.read_bytes()
    folder = folder or cache_folder()
    binary = folder / f"poller-{hashlib.sha256(source).hexdigest()[:16]}"
    if binary.exists():
        return binary
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{binary.name}.{os.getpid()}"
    done = subprocess.run(
        ["gcc", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-o", str(partial), str(SOURCE), "-lm"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise LoadgenError(f"gcc could not build {SOURCE}:\n{done.stderr}")
    partial.replace(binary)  # atomic: a concurrent build finds a whole binary or none
    return binary


def write_targets(path: Path, addresses: Iterable[str], lengths: Iterable[int]) -> Path:
    """The generator's targets file: each VM's address and the body length it must get."""
    lines = [f"{address} {length}\n" for address, length in zip(addresses, lengths, strict=True)]
    path.write_text("".join(lines), encoding="ascii")
    return path


def per_process_limit() -> int:
    """VMs one generator process may hold a connection for."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    return max(1, limit - PROCESS_SPARE_FDS)


def slices(vms: int, per_process: int) -> list[tuple[int, int]]:
    """(first, count) of each process: as few processes as the limit allows, even sizes."""
    if vms < 1 or per_process < 1:
        raise ValueError("at least one VM and one VM per process")
    processes = -(-vms // per_process)
    base, extra = divmod(vms, processes)
    found, first = [], 0
    for index in range(processes):
        count = base + (1 if index < extra else 0)
        found.append((first, count))
        first += count
    return found


@dataclass(frozen=True)
class PollerRun:
    """One run of every generator process, merged."""

    mode: str
    vms: int
    processes: int
    periods: int
    polls: int
    ok: int
    failed: int
    errors: int
    error_kinds: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    lag_p99_ms: float
    max_lag_ms: float
    cpu_s: float
    span_s: float
    stderr: str = field(default="", repr=False)

    @property
    def polls_per_second(self) -> float:
        """Answers per second, from the start to the last answer."""
        return self.ok / self.span_s if self.span_s > 0 else 0.0


def merge_runs(lines: Sequence[dict[str, Any]], stderr: str = "") -> PollerRun:
    """The processes' JSON lines as one run; percentiles from the merged histograms."""
    if not lines:
        raise ValueError("no generator results to merge")
    latency = merge_histograms(line["latency_us"] for line in lines)
    lag = merge_histograms(line["lag_us"] for line in lines)
    max_us = max(line["max_ms"] for line in lines) * 1000
    max_lag_us = max(line["max_lag_ms"] for line in lines) * 1000
    kinds: dict[str, int] = {}
    for line in lines:
        for kind, count in line["error_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + count
    return PollerRun(
        mode=lines[0]["mode"],
        vms=sum(line["vms"] for line in lines),
        processes=len(lines),
        periods=lines[0]["periods"],
        polls=sum(line["polls"] for line in lines),
        ok=sum(line["ok"] for line in lines),
        failed=sum(line["failed"] for line in lines),
        errors=sum(line["errors"] for line in lines),
        error_kinds={kind: count for kind, count in kinds.items() if count},
        p50_ms=histogram_percentile_ms(latency, 0.50, max_us),
        p90_ms=histogram_percentile_ms(latency, 0.90, max_us),
        p99_ms=histogram_percentile_ms(latency, 0.99, max_us),
        p999_ms=histogram_percentile_ms(latency, 0.999, max_us),
        max_ms=max_us / 1000,
        lag_p99_ms=histogram_percentile_ms(lag, 0.99, max_lag_us),
        max_lag_ms=max_lag_us / 1000,
        cpu_s=sum(line["cpu_s"] for line in lines),
        span_s=max(line["span_s"] for line in lines),
        stderr=stderr,
    )


class Pollers:
    """The generator processes of one run: started (and connected) on enter; :meth:`go`
    starts their clock; :meth:`wait_for_results` returns once every answer is in, and
    :meth:`collect` returns the merged run."""

    def __init__(
        self,
        binary: Path,
        targets: Path,
        *,
        vms: int,
        port: int,
        mode: str,
        duration: float,
        period: float = 1.0,
        prefix: Sequence[str] = (),
        per_process: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self.argv_base = [
            *prefix,
            str(binary),
            "--targets",
            str(targets),
            "--total",
            str(vms),
            "--port",
            str(port),
            "--mode",
            mode,
            "--duration",
            f"{duration:g}",
            "--period",
            f"{period:g}",
            "--wait-start",
        ]
        self.slices = slices(vms, per_process or per_process_limit())
        self.duration, self.period = duration, period
        self.processes: list[subprocess.Popen[str]] = []
        self.lines: list[dict[str, Any]] = []

    def __enter__(self) -> Pollers:
        try:
            for first, count in self.slices:
                self.processes.append(
                    subprocess.Popen(
                        [*self.argv_base, "--first", str(first), "--count", str(count)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            for process in self.processes:
                assert process.stdout is not None
                line = process.stdout.readline()  # poller.c bounds its set-up itself
                if line.strip() != "ready":
                    raise LoadgenError(f"the generator did not start: {self._failure(process)}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def go(self) -> None:
        """Start every process's clock at the same instant, just ahead."""
        start = time.monotonic() + START_DELAY
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write(f"{start:.9f}\n")
            process.stdin.close()

    def wait_for_results(self) -> None:
        """Until every process has printed its result line, which it does once its last
        answer is in and before it closes its connections: the measured span ends here."""
        for process in self.processes[len(self.lines) :]:
            assert process.stdout is not None
            text = process.stdout.readline()
            try:
                self.lines.append(json.loads(text))
            except json.JSONDecodeError:
                raise LoadgenError(
                    f"the generator printed no result: {self._failure(process)}"
                ) from None

    def collect(self) -> PollerRun:
        """Every process's result, merged, once all have exited."""
        self.wait_for_results()
        stderr = []
        for process in self.processes:
            err = _ended(process)
            if process.returncode not in (0, 1):  # 1: it ran, with errors (counted)
                raise LoadgenError(f"the generator exited with {process.returncode}: {err}")
            stderr.append(err)
        return merge_runs(self.lines, "".join(stderr))

    def _failure(self, process: subprocess.Popen[str]) -> str:
        err = _ended(process)
        return f"exit {process.returncode}: {err.strip()}"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None and not stream.closed:
                    stream.close()


def _ended(process: subprocess.Popen[str]) -> str:
    """What ``process`` wrote to stderr, once it has exited (poller.c's runs are bounded:
    its set-up by 60 s, its polls by the duration plus one period)."""
    assert process.stderr is not None
    err = process.stderr.read()
    process.wait(timeout=SETUP_TIMEOUT)
    return err
