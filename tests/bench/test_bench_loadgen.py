"""The compiled load generator (bench/loadgen/poller.c): its usage errors, its checks of every
answer, its open-loop schedule and its figures, against a small server written here.

Durations are fractions of a second (``--period 0.1``); nothing here asserts a speed.
"""

from __future__ import annotations

import json
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from machine_support import require

from bench.loadgen.poller import Pollers, build_poller, compiler_problem, merge_runs, write_targets
from bench.stats import histogram_percentile_ms
from bench.tools import free_port

DOCUMENT = b'{"DocumentIncarnation":1,"Events":[]}'


@pytest.fixture(scope="module")
def poller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(compiler_problem())
    return build_poller(tmp_path_factory.mktemp("poller"))


@dataclass
class Answers:
    """What the test server answers, and what it was asked."""

    status: int = 200
    body: bytes = DOCUMENT
    silent: bool = False
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0


def _serve(answers: Answers) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            answers.connections += 1
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    byte = self.rfile.read(1)
                    if not byte:
                        return
                    head += byte
                answers.requests.append(head)
                if answers.silent:
                    continue
                reason = b"OK" if answers.status == 200 else b"Other"
                body = b"" if answers.status == 304 else answers.body
                self.wfile.write(
                    b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (answers.status, reason, len(body), body)
                )

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[int, Answers]]:
    answers = Answers()
    port = free_port()
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), _serve(answers)) as tcp:
        tcp.daemon_threads = True
        thread = threading.Thread(target=tcp.serve_forever, daemon=True)
        thread.start()
        try:
            yield port, answers
        finally:
            tcp.shutdown()
            thread.join(timeout=10)


def _targets(folder: Path, count: int, length: int = len(DOCUMENT)) -> Path:
    return write_targets(folder / "targets.txt", ["127.0.0.1"] * count, [length] * count)


def _poll(poller: Path, *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    done = subprocess.run(
        [str(poller), "--period", "0.1", "--duration", "0.3", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return done.returncode, json.loads(line) if line.startswith("{") else None, done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--targets FILE is required"),
        (["--targets", "t"], "--port is required"),
        (["--targets", "t", "--port", "0"], "--port must be a whole number from 1 to 65535"),
        (["--targets", "t", "--port", "80", "--mode", "close"], "--mode must be keep-alive"),
        (["--targets", "t", "--port", "80", "--period", "-1"], "--period must be a number"),
        (["--targets", "t", "--port", "80", "--count", "x"], "--count must be a whole number"),
        (["--targets", "t", "--port", "80", "--expect-status", "304"], "needs --if-none-match"),
        (["--targets", "t", "--port", "80", "--verbose"], "unknown or incomplete option"),
        (["--targets", "t", "--port", "80", "extra"], "unexpected arguments"),
        (["--targets", "/nonexistent/targets", "--port", "80"], "cannot read"),
    ],
)
def test_bad_arguments_are_usage_errors(poller: Path, argv: list[str], message: str) -> None:
    done = subprocess.run([str(poller), *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_a_slice_past_the_targets_file_is_a_usage_error(poller: Path, tmp_path: Path) -> None:
    targets = _targets(tmp_path, 3)
    status, _, err = _poll(poller, "--targets", str(targets), "--port", "80", "--first", "3")
    assert status == 2
    assert "has 3 VMs" in err
    status, _, err = _poll(
        poller, "--targets", str(targets), "--port", "80", "--first", "1", "--count", "3"
    )
    assert (status, "has only 3 VMs" in err) == (2, True)


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["keep-alive", "new-connection"])
def test_every_vm_polls_once_a_period_and_every_answer_is_checked(
    poller: Path, server: tuple[int, Answers], tmp_path: Path, mode: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": once
    per second (here a tenth of one): 4 VMs, 3 periods, 12 polls, each with the Metadata header the
    endpoint requires.

    The schedule is the generator's; whether the server here answers each poll before the
    VM's next is the machine's: an answer later than that is a timeout, and nothing else."""
    port, answers = server
    status, result, err = _poll(
        poller, "--targets", str(_targets(tmp_path, 4)), "--port", str(port), "--mode", mode
    )
    assert result is not None, err
    late = _late(result)
    assert status == (1 if late else 0), err
    assert (result["vms"], result["periods"], result["polls"]) == (4, 3, 12)
    assert (result["ok"], result["failed"], result["errors"]) == (12 - late, late, late)
    assert len(answers.requests) >= 12 - late
    assert all(b"\r\nMetadata: true\r\n" in request for request in answers.requests)
    assert all(
        b"GET /metadata/scheduledevents?api-version=2020-07-01 " in r for r in answers.requests
    )
    if not late:  # a VM whose poll timed out hangs up and connects again
        assert len(answers.requests) == 12
        assert answers.connections == (4 if mode == "keep-alive" else 12)
    if result["ok"]:
        assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    # getrusage counts the generator's own time to the microsecond: twelve polls cost some
    assert result["cpu_s"] > 0
    # The figures printed are the histogram's, read the way bench.stats reads them.
    buckets = [(int(value), int(count)) for value, count in result["latency_us"]]
    assert sum(count for _, count in buckets) == result["ok"]
    for key, fraction in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
        if result["ok"]:
            expected = histogram_percentile_ms(buckets, fraction, result["max_ms"] * 1000)
            assert result[key] == pytest.approx(expected, abs=0.0015)


def _late(result: dict[str, Any]) -> int:
    """The polls answered after the VM's next poll was due (timeouts); no other error."""
    late: int = result["error_kinds"]["timeout"]
    others = {kind: n for kind, n in result["error_kinds"].items() if n and kind != "timeout"}
    assert others == {}, result
    return late


def _once(poller: Path, port: int, targets: Path, *argv: str) -> tuple[int, dict[str, Any], str]:
    """One poll of one VM, its answer awaited for up to a period of 5 s: the outcome of the
    answer alone, whatever the machine's load."""
    status, result, err = _poll(
        poller, "--targets", str(targets), "--port", str(port), "--period", "5", *argv
    )
    assert result is not None, err
    assert (result["polls"], result["error_kinds"]["timeout"]) == (1, 0), result
    return status, result, err


@pytest.mark.e2e
def test_a_wrong_body_length_fails_the_run_loudly(
    poller: Path, server: tuple[int, Answers], tmp_path: Path
) -> None:
    port, _ = server
    targets = _targets(tmp_path, 1, length=len(DOCUMENT) + 1)
    status, result, err = _once(poller, port, targets)
    assert status == 1
    assert result["ok"] == 0
    assert result["error_kinds"]["length"] == result["polls"] == 1
    assert "1 error(s) in 1 polls: length 1" in err


@pytest.mark.e2e
def test_an_unexpected_status_is_an_error_and_304_is_asked_for_with_its_tag(
    poller: Path, server: tuple[int, Answers], tmp_path: Path
) -> None:
    """scheduled-events: the ETag of a document; a poller that sends it back in If-None-Match
    expects 304 Not Modified, and anything else is an error of kind status."""
    port, answers = server
    answers.status = 304
    targets = _targets(tmp_path, 1)
    status, result, _ = _once(poller, port, targets)
    assert status == 1
    assert (result["ok"], result["error_kinds"]["status"]) == (0, 1)
    answers.requests.clear()
    status, result, err = _once(
        poller, port, targets, "--expect-status", "304", "--if-none-match", '"1"'
    )
    assert status == 0, err
    assert result["ok"] == 1
    assert len(answers.requests) == 1
    assert all(b'\r\nIf-None-Match: "1"\r\n' in request for request in answers.requests)


@pytest.mark.e2e
def test_an_unanswered_poll_is_a_timeout_and_nothing_waits_longer(
    poller: Path, server: tuple[int, Answers], tmp_path: Path
) -> None:
    port, answers = server
    answers.silent = True
    status, result, _ = _poll(poller, "--targets", str(_targets(tmp_path, 2)), "--port", str(port))
    assert status == 1
    assert result is not None
    assert (result["ok"], result["error_kinds"]["timeout"]) == (0, 6)


@pytest.mark.e2e
def test_a_refused_connection_is_a_connect_error(poller: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port of the range that nothing listens on
        sock.bind(("127.0.0.1", free_port()))
        port = sock.getsockname()[1]
        status, result, _ = _poll(
            poller,
            "--targets",
            str(_targets(tmp_path, 2)),
            "--port",
            str(port),
            "--mode",
            "new-connection",
        )
    assert status == 1
    assert result is not None
    assert result["error_kinds"]["connect"] == 6


@pytest.mark.e2e
def test_processes_share_one_clock_and_their_runs_merge(
    poller: Path, server: tuple[int, Answers], tmp_path: Path
) -> None:
    """A fleet larger than one process's descriptors is split into slices: 5 VMs at 2 a
    process are 3 processes, started together, whose figures are one run."""
    port, answers = server
    targets = _targets(tmp_path, 5)
    with Pollers(
        poller,
        targets,
        vms=5,
        port=port,
        mode="keep-alive",
        duration=0.3,
        period=0.1,
        per_process=2,
    ) as pollers:
        assert answers.requests == []  # connected, and waiting for the clock
        pollers.go()
        run = pollers.collect()
    # An answer later than the VM's next poll is a timeout (the machine's load), nothing else.
    late = run.error_kinds.get("timeout", 0)
    assert set(run.error_kinds) <= {"timeout"}
    assert (run.processes, run.vms, run.periods, run.polls) == (3, 5, 3, 15)
    assert (run.ok, run.errors) == (15 - late, late)
    assert answers.connections == 5 or late  # one that timed out connects again
    if run.ok:
        assert 0 < run.p50_ms <= run.p99_ms <= run.max_ms
        assert run.polls_per_second > 0


def test_merged_runs_add_counts_and_take_percentiles_of_all_polls() -> None:
    """Two processes: 99 fast polls in one, one slow poll in the other. The merged p99 is
    the 99th of the 100 values, the max the slow one."""
    common = {"mode": "keep-alive", "periods": 1, "lag_us": [[5, 1]], "max_lag_ms": 0.005}
    first = {
        **common,
        "vms": 99,
        "polls": 99,
        "ok": 99,
        "failed": 0,
        "errors": 0,
        "error_kinds": {"timeout": 0},
        "latency_us": [[100, 98], [200, 1]],
        "max_ms": 0.2,
        "cpu_s": 0.5,
        "span_s": 1.0,
    }
    second = {
        **common,
        "vms": 1,
        "polls": 2,
        "ok": 1,
        "failed": 1,
        "errors": 1,
        "error_kinds": {"timeout": 1},
        "latency_us": [[9000, 1]],
        "max_ms": 9.0,
        "cpu_s": 0.25,
        "span_s": 1.5,
    }
    run = merge_runs([first, second])
    assert (run.vms, run.polls, run.ok, run.errors, run.processes) == (100, 101, 100, 1, 2)
    assert run.error_kinds == {"timeout": 1}
    assert run.p50_ms == 0.1
    assert run.p99_ms == 0.2
    assert run.max_ms == 9.0
    assert run.cpu_s == 0.75
    assert run.polls_per_second == pytest.approx(100 / 1.5)
    with pytest.raises(ValueError, match="no generator results"):
        merge_runs([])
