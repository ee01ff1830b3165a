"""Running wrk and reading its figures exactly, through a Lua ``done`` hook that prints JSON.

Only ``done`` is defined, so wrk's per-request path stays in C and the load generator is as
fast as it can be; the text summary wrk prints is kept for the log.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = "WRK_JSON "

DONE_SCRIPT = """\
done = function(summary, latency, requests)
  io.write(string.format(
    '%s{"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,'
    .. '"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,'
    .. '"p99_us":%d,"max_us":%d}\\n',
    "WRK_JSON ", summary.requests, summary.duration, summary.bytes, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""


@dataclass(frozen=True)
class WrkResult:
    requests: int
    seconds: float
    requests_per_second: float
    errors: int
    status_errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float

    @property
    def clean(self) -> bool:
        """Every response was 2xx and no socket failed: only then does the rate count."""
        return self.errors == 0 and self.status_errors == 0 and self.requests > 0


def parse_output(text: str) -> WrkResult:
    """The figures from wrk's output; raises ValueError when the JSON line is missing."""
    for line in text.splitlines():
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER) :])
            break
    else:
        raise ValueError(f"wrk printed no {MARKER.strip()} line:\n{text[-2000:]}")
    seconds = data["duration_us"] / 1e6
    return WrkResult(
        requests=data["requests"],
        seconds=seconds,
        requests_per_second=data["requests"] / seconds if seconds > 0 else 0.0,
        errors=data["connect_errors"]
        + data["read_errors"]
        + data["write_errors"]
        + data["timeouts"],
        status_errors=data["status_errors"],
        p50_ms=data["p50_us"] / 1000,
        p90_ms=data["p90_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        max_ms=data["max_us"] / 1000,
    )


def write_script(folder: Path) -> Path:
    script = folder / "done.lua"
    script.write_text(DONE_SCRIPT, encoding="utf-8")
    return script


def run_wrk(
    binary: str,
    url: str,
    *,
    script: Path,
    duration: float,
    connections: int = 50,
    threads: int = 1,
    headers: Sequence[str] = ("Metadata: true",),
    prefix: Sequence[str] = (),
) -> WrkResult:
    """wrk for ``duration`` seconds (bounded: wrk stops itself, and a timeout backs it up)."""
    command = [
        *prefix,
        binary,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",
        "--timeout",
        "5s",
        "-s",
        str(script),
    ]
    for header in headers:
        command += ["-H", header]
    command.append(url)
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=duration + 30, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return parse_output(done.stdout)
