"""The real workload: a fleet polling once a second at its own addresses, forewarn beside
nginx, in a network namespace of the run's own.

The smoke size runs here (200 VMs, one round of one second per server and mode); its figures
are not quoted. What is asserted is that every poll was answered with its VM's own document
by both servers, in both modes, and that the figures the report needs are there. The pure
summaries are tested on rows written here.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from bench_smoke import run_smoke
from machine_support import unavailable

from bench.realworkload import (
    EVENT_EVERY,
    RealWorkloadError,
    UnavailableError,
    compare,
    fetch_documents,
    private_namespace,
    run_real_workload,
    summarise,
)
from bench.tools import which

ROOT = Path(__file__).resolve().parents[2]


def _row(
    server: str, mode: str, round_index: int, cpu_us: float, p99: float, errors: int = 0
) -> dict[str, float | str | int]:
    return {
        "errors": errors,
        "server": server,
        "mode": mode,
        "round": round_index,
        "vms": 100,
        "polls_per_s": 100.0,
        "server_cpu_us_per_poll": cpu_us,
        "generator_cpu_us_per_poll": 5.0,
        "p50_ms": p99 / 4,
        "p99_ms": p99,
        "max_ms": p99 * 2,
        "generator_lag_p99_ms": 0.01,
    }


def test_rounds_are_summed_up_as_median_and_spread_and_the_ratio_is_taken_per_round() -> None:
    rows = [
        _row("forewarn", "keep-alive", 0, 20.0, 1.0),
        _row("nginx", "keep-alive", 0, 10.0, 0.5),
        _row("nginx", "keep-alive", 1, 12.0, 0.4),
        _row("forewarn", "keep-alive", 1, 40.0, 3.0),
        _row("forewarn", "keep-alive", 2, 30.0, 2.0),
        _row("nginx", "keep-alive", 2, 27.0, 0.6),
        *(_row("python-floor", "keep-alive", index, 15.0, 0.5) for index in range(3)),
    ]
    summary = {(row["server"], row["mode"]): row for row in summarise(rows)}
    forewarn = summary[("forewarn", "keep-alive")]
    assert forewarn["rounds"] == 3
    assert forewarn["server_cpu_us_per_poll"] == {"median": 30.0, "min": 20.0, "max": 40.0}
    assert forewarn["p99_ms"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    (mode,) = compare(rows)
    # per round: 10/20 = 0.5, 12/40 = 0.3, 27/30 = 0.9; their median
    assert mode["cpu_ratios"] == pytest.approx([0.5, 0.3, 0.9])
    assert mode["cpu_ratio"] == pytest.approx(0.5)
    assert (mode["forewarn_p99_ms"], mode["nginx_p99_ms"]) == (2.0, 0.5)
    # nginx against the floor, per round: 10/15, 12/15, 27/15; their median
    assert mode["floor_cpu_ratio"] == pytest.approx(12 / 15)
    assert mode["floor_p99_ms"] == 0.5


def test_runs_with_errors_are_left_out_of_the_ratio_and_the_p99() -> None:
    """A run's CPU per answered poll and p99 of answered polls say nothing when other polls
    went unanswered: round 1's nginx run failed, so round 1 has no ratio, and only nginx's
    run of round 0 gives its p99; with no run left, no figure at all."""
    rows = [
        _row("forewarn", "keep-alive", 0, 20.0, 1.0),
        _row("nginx", "keep-alive", 0, 10.0, 0.5),
        _row("forewarn", "keep-alive", 1, 40.0, 3.0),
        _row("nginx", "keep-alive", 1, 400.0, 900.0, errors=5),
        _row("forewarn", "new-connection", 0, 40.0, 800.0, errors=9),
        _row("nginx", "new-connection", 0, 20.0, 0.7),
        _row("python-floor", "keep-alive", 0, 15.0, 0.4),
        _row("python-floor", "keep-alive", 1, 15.0, 0.4),
        _row("python-floor", "new-connection", 0, 25.0, 0.6),
    ]
    kept, fresh = compare(rows)
    assert (kept["rounds"], kept["rounds_without_errors"]) == (2, 1)
    assert kept["cpu_ratios"] == [0.5]
    assert (kept["forewarn_p99_ms"], kept["nginx_p99_ms"]) == (2.0, 0.5)
    assert (fresh["rounds_without_errors"], fresh["cpu_ratio"]) == (0, None)
    assert (fresh["forewarn_p99_ms"], fresh["nginx_p99_ms"]) == (None, 0.7)
    assert kept["floor_cpu_ratio"] == pytest.approx(10 / 15)


def test_a_machine_without_nginx_skips_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="nginx is needed"):
        run_real_workload(tmp_path, nginx=None, vms=10, rounds=1, seconds=1)


@pytest.mark.e2e
@pytest.mark.netns
def test_the_namespace_is_removed_with_its_processes_even_on_failure() -> None:
    try:
        with private_namespace() as name:
            sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "60"])
            # the namespace counts it once ip has entered it: only then is it "inside"
            deadline = time.monotonic() + 10
            while not subprocess.run(
                ["ip", "netns", "pids", name], capture_output=True, text=True, check=False
            ).stdout.split():
                assert time.monotonic() < deadline, "the process never entered the namespace"
                time.sleep(0.01)
            raise RealWorkloadError("a failure inside")
    except UnavailableError as reason:
        unavailable(str(reason))
    except RealWorkloadError:
        pass
    assert sleeper.wait(timeout=10) != 0  # killed with the namespace
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert name not in listed.stdout


@pytest.mark.e2e
@pytest.mark.netns
def test_smoke_run_answers_every_poll_of_both_servers_in_both_modes(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": "we
    recommend that you poll the service once per second". 200 VMs at their own addresses, every 50th
    with an event of its own, so the documents differ; every answer is checked against its VM's
    document length by the generator, and a single error fails the run."""
    try:
        results = run_real_workload(tmp_path, nginx=which("nginx"), vms=200, rounds=1, seconds=1)
    except UnavailableError as reason:
        unavailable(str(reason))
    assert (results["vms"], results["keep_alive_vms"]) == (200, 200)
    assert results["vms_with_events"] == 200 // EVENT_EVERY
    assert results["document_bytes"]["min"] < results["document_bytes"]["max"]
    assert results["open_files_limit"] >= 1024
    rows = {(row["server"], row["mode"]): row for row in results["rows"]}
    assert set(rows) == {
        (server, mode)
        for server in ("forewarn", "nginx", "python-floor")
        for mode in ("keep-alive", "new-connection")
    }
    assert results["errors"] == 0
    assert results["period_s"] == 1.0
    for row in rows.values():
        assert row["polls"] == row["ok"] == 200
        assert (row["errors"], row["error_kinds"]) == (0, {})
        # each thread's time on a CPU, in nanoseconds: 200 answers cost the server some, and
        # the generator some to ask
        assert row["server_cpu_us_per_poll"] > 0
        assert row["generator_cpu_us_per_poll"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert {mode["mode"] for mode in results["modes"]} == {"keep-alive", "new-connection"}


def test_documents_are_fetched_from_a_listening_server_only() -> None:
    """Nothing listens on port 1 of loopback: the fetch fails rather than yield a document."""
    with pytest.raises(ConnectionRefusedError):
        fetch_documents(["127.0.0.1"], 1)


@pytest.mark.e2e
@pytest.mark.netns
def test_entry_command_runs_the_real_workload_as_a_scenario(tmp_path: Path) -> None:
    """`python -m bench --smoke --only real-workload`: the table, the targets and the JSON,
    or the reason the scenario was skipped."""
    out = tmp_path / "results.json"
    done = run_smoke("real-workload", out)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text(encoding="utf-8"))
    if "real-workload" in results["skipped"]:
        unavailable(results["skipped"]["real-workload"])
    assert results["real_workload"]["errors"] == 0
    assert "Real workload, VMs polling once every 1 s at their own addresses" in done.stdout
    names = [target["name"] for target in results["targets"]]
    assert "p99 latency, 200 VMs polling 1/s at their own addresses, keep-alive" in names
    assert "real workload, 200 VMs new-connection: nginx server CPU per poll / forewarn's" in names
