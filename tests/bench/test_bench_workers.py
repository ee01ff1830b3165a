"""`python -m bench --smoke --only workers`: one process and `serve --workers 2` polled side
by side by the real workload's VMs (bench/workers.py), each server's CPU per answered poll
with every process it started counted, and the targets the figures are held to
(docs/scale-out.md, "Workers")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_smoke import run_smoke

pytestmark = [pytest.mark.e2e, pytest.mark.netns]


def test_the_workers_scenario_measures_both_servers_and_states_its_targets(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    done = run_smoke("workers", out, "--workers-vms", "60")
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text(encoding="utf-8"))
    if "workers" in results["skipped"]:
        pytest.skip(results["skipped"]["workers"])
    (mode,) = results["workers"]["modes"]
    assert mode["mode"] == "new-connection"
    servers = {row["server"]: row for row in mode["rows"]}
    assert set(servers) == {"one process", "2 workers"}
    # every process each server started is counted: the workers' supervisor, two workers
    # and their PostgreSQL's processes, against one
    assert servers["one process"]["processes"] == 1
    assert servers["2 workers"]["processes"] > 3
    for row in servers.values():
        assert row["errors"] == 0
        assert row["ok"] == row["polls"] > 0
        # each poll wakes the server: counted, and not more than a handful of times a poll
        assert 0 < row["server_timeslices_per_poll"] < 50
        # split by process: the parts add up to the whole
        parts = row["server_cpu_us_per_poll_by_part"]
        assert set(parts) == {"started", "workers", "database"}
        assert sum(parts.values()) == pytest.approx(row["server_cpu_us_per_poll"], rel=0.05)
    assert servers["one process"]["server_cpu_us_per_poll_by_part"]["workers"] == 0
    assert servers["2 workers"]["server_cpu_us_per_poll_by_part"]["workers"] > 0
    assert servers["2 workers"]["server_cpu_us_per_poll_by_part"]["database"] > 0
    ratio = (
        servers["2 workers"]["server_cpu_us_per_poll"]
        / (servers["one process"]["server_cpu_us_per_poll"])
    )
    assert mode["cpu_per_poll_ratio"] == pytest.approx(ratio)
    targets = {target["name"]: target for target in results["targets"]}
    name = "2 workers / one process, 60 VMs new-connection: server CPU per poll answered"
    assert targets[name]["limit"] == 1.15
    assert targets["2 workers, 60 VMs new-connection: polls failed"]["met"] is True
    assert "serve --workers 2 beside one process, 60 VMs new-connection" in done.stdout
    assert "times the server's threads were put on a CPU, per poll answered" in done.stdout
