"""The benchmark suite, run short: every scenario must still work, so it never rots.

Figures from runs this short are not quoted anywhere; what is asserted is that each scenario
ran to its end with every answer checked. The scale scenario runs in process and needs
nothing; throughput needs wrk and nginx, and skips (saying so) where they are not installed. The
real workload has a file of its own (test_bench_real_workload.py).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from machine_support import require_tool

from bench.scale import (
    CAMPAIGN_PHASES,
    ScenarioError,
    campaign_rounds,
    grouped_schedule_cost,
    measure_idle_memory,
    run_campaign,
)
from bench.throughput import ModeResult, Run, run_throughput
from bench.wrk import WrkResult
from forewarn.domain.platform import Platform

ROOT = Path(__file__).resolve().parents[2]


def test_campaign_at_1k_vms_runs_every_event_to_its_end() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    Started "This event has started"; "No Completed or similar status is ever provided. The event is
    no longer returned when the event is finished." Each of 1,000 VMs gets its event, approves it,
    reboots (no answer while down), sees it Started, and then no longer sees it; afterwards one VM's
    change re-encodes that VM's document only."""
    result = run_campaign(1000)
    assert result.vms == 1000
    assert result.peak_open_events == 1000
    assert result.requests == 5000
    assert result.documents_rebuilt_after_one_change == 1
    assert result.campaign_seconds > 0
    assert result.per_vm_microseconds == pytest.approx(result.campaign_seconds / 1000 * 1e6)
    # What the campaign leaves alive (12 tracked objects a VM) outgrows the youngest
    # generation's threshold, so the collector ran; its time is part of the campaign's.
    assert result.collections[0] >= 1
    assert 0 < result.collector_seconds < result.campaign_seconds
    # Its steps, timed apart, make up the whole, the collector's time included.
    assert tuple(result.phase_seconds) == CAMPAIGN_PHASES
    assert all(seconds > 0 for seconds in result.phase_seconds.values())
    assert sum(result.phase_seconds.values()) == pytest.approx(result.campaign_seconds)
    assert sum(result.phase_collector_seconds.values()) == pytest.approx(result.collector_seconds)


def test_campaign_fails_when_an_approval_does_not_start_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": the
    POST lets the event start early; a platform that ignored approvals must fail the scenario, not
    yield a figure."""
    monkeypatch.setattr(Platform, "approve", lambda self, vm_name, event_ids: None)
    with pytest.raises(ScenarioError, match="while rebooting"):
        run_campaign(50)


def test_idle_memory_is_measured_per_vm() -> None:
    small, large = measure_idle_memory(200), measure_idle_memory(1000)
    assert small.bytes_total > 0
    assert large.bytes_total > small.bytes_total
    assert large.bytes_per_idle_vm == pytest.approx(large.bytes_total / 1000)


@pytest.mark.e2e
def test_throughput_beside_nginx(tmp_path: Path) -> None:
    """SPEC 1 [doc]: "Header `Metadata: true` is required on every request";
    both servers are checked to refuse a request without it, and to serve the same bytes,
    before wrk measures either."""
    wrk = require_tool("wrk", "the load generator")
    nginx = require_tool("nginx", "the server measured beside", package="nginx-light")
    results = run_throughput(tmp_path, wrk=wrk, nginx=nginx, duration=1, rounds=1, connections=8)
    assert 300 < results["document_bytes"] < 600
    modes = {mode["mode"]: mode for mode in results["modes"]}
    assert set(modes) == {"keep-alive", "new connection per request"}
    for mode in modes.values():
        (ours,), (theirs,) = mode["rounds"]["forewarn"], mode["rounds"]["nginx"]
        assert ours["wrk"]["requests_per_second"] == mode["forewarn_rps"] > 0
        assert theirs["wrk"]["requests_per_second"] == mode["nginx_rps"] > 0
        assert mode["ratios"] == [pytest.approx(mode["forewarn_rps"] / mode["nginx_rps"])]
        # Each server's CPU while wrk ran, per request it answered: never nothing.
        assert ours["server_cpu_us_per_request"] == mode["forewarn_cpu_us"] > 0
        assert theirs["server_cpu_us_per_request"] == mode["nginx_cpu_us"] > 0
        assert mode["cpu_ratio"] == pytest.approx(mode["nginx_cpu_us"] / mode["forewarn_cpu_us"])


def test_each_figure_is_the_median_of_its_rounds_and_the_ratio_that_of_each_rounds() -> None:
    """Three rounds side by side (docs/benchmarks.md: "3 interleaved rounds ..., the median
    with its spread; only ratios count"): the ratio is taken within each round, then the
    median across rounds, which is not the ratio of the medians."""
    rounds = [(100.0, 200.0, 10.0, 5.0), (300.0, 310.0, 20.0, 6.0), (90.0, 100.0, 8.0, 7.0)]
    ours = [Run(_wrk(rps), cpu) for rps, _, cpu, _ in rounds]
    theirs = [Run(_wrk(rps), cpu) for _, rps, _, cpu in rounds]
    summary = ModeResult("keep-alive", ours, theirs).summary()
    assert summary["ratios"] == pytest.approx([0.5, 300 / 310, 0.9])
    assert summary["ratio"] == pytest.approx(0.9)  # the median of the rounds' ratios
    assert summary["forewarn_rps"] / summary["nginx_rps"] != pytest.approx(summary["ratio"])
    assert (summary["forewarn_rps"], summary["nginx_rps"]) == (100.0, 200.0)
    assert (summary["forewarn_cpu_us"], summary["nginx_cpu_us"]) == (10.0, 6.0)
    assert summary["cpu_ratio"] == pytest.approx(0.5)  # of 0.5, 0.3 and 0.875


def _wrk(requests_per_second: float) -> WrkResult:
    return WrkResult(
        requests=int(requests_per_second),
        seconds=1.0,
        requests_per_second=requests_per_second,
        errors=0,
        status_errors=0,
        p50_ms=1.0,
        p90_ms=1.5,
        p99_ms=2.0,
        max_ms=3.0,
    )


def test_entry_command_writes_the_table_and_the_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--no-install",
            "--only",
            "scale",
            "--sizes",
            "300,600",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Campaign (every VM gets, approves, finishes an event; the median round)" in done.stdout
    results = json.loads(out.read_text(encoding="utf-8"))
    scale = results["scale"]
    assert [c["vms"] for c in scale["campaigns"]] == [300, 600]
    # Each size's figure is the median of its rounds, an odd number of them, all kept.
    for campaign in scale["campaigns"]:
        rounds = scale["campaign_rounds_us"][str(campaign["vms"])]
        assert len(rounds) == campaign_rounds(campaign["vms"]) == 9
        assert campaign["per_vm_microseconds"] == sorted(rounds)[4]
    for vms, rounds in scale["grouped_schedule_rounds_us"].items():
        assert scale["grouped_schedule_us"][vms] == sorted(rounds)[len(rounds) // 2]
    # The growth is also given with the collector's time taken out of both sizes.
    smallest, largest = scale["campaigns"]
    without = [
        (c["campaign_seconds"] - c["collector_seconds"]) / c["vms"] for c in (smallest, largest)
    ]
    assert scale["time_per_vm_growth_without_collector"] == pytest.approx(without[1] / without[0])
    assert "x without the collector's time)" in done.stdout
    assert "  its steps, us per VM (of which the collector's) at 300, 600 VMs:" in done.stdout
    names = [target["name"] for target in results["targets"]]
    assert "documents encoded again after one VM's change" in names
    # The file says how it was made: the run's commit, the tree's state, the machine, the
    # load before and after, the command, and which scenarios' figures are its own.
    (run,) = results["runs"]
    assert run["machine"]["cores"] >= 1
    assert run["machine"]["memory_bytes"] > 0
    assert len(run["commit"]) == 40
    assert isinstance(run["dirty"], bool)
    assert len(run["load_average_before"]) == len(run["load_average_after"]) == 3
    assert run["command"].startswith("python -m bench --smoke --no-install --only scale")
    assert run["scenarios"] == ["scale"]
    assert run["smoke"] is True


def test_the_scale_scenarios_leave_the_collector_as_they_found_it() -> None:
    """They settle the heap as ``forewarn serve`` does, and undo it when they end, so the
    process running them (this test run, the next scenario) is not changed."""
    thresholds, frozen, callbacks = gc.get_threshold(), gc.get_freeze_count(), list(gc.callbacks)
    run_campaign(50)
    measure_idle_memory(50)
    grouped_schedule_cost(50, events=5)
    assert (gc.get_threshold(), gc.get_freeze_count()) == (thresholds, frozen)
    assert gc.callbacks == callbacks  # the campaign's timing of the collector is gone


def test_a_campaign_size_is_run_an_odd_number_of_times_fewer_as_it_grows() -> None:
    """Short campaigns are repeated (their median is the figure), long ones run once."""
    assert [campaign_rounds(n) for n in (300, 1_000, 10_000, 15_000, 100_000, 300_000)] == [
        9,
        9,
        3,
        1,
        1,
        1,
    ]
