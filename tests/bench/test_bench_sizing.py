"""The sizing of docs/scale-out.md ("Sizing to a million VMs"), worked out from a results file:
each figure from the measured ones it names, and the bound the resource furthest past the
measuring machine (or past one namespace's writes)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.render import block
from bench.sizing import SizingError, capacity, size


def results(
    *, keep_alive_us: float = 25.0, new_connection_per_s: float = 10_000.0, write_ms: float = 5.0
) -> dict[str, Any]:
    def summary(mode: str, cpu_us: float, per_s: float) -> dict[str, Any]:
        return {
            "server": "forewarn",
            "mode": mode,
            "vms": 20_000,
            "server_cpu_us_per_poll": {"median": cpu_us},
            "polls_per_s": {"median": per_s},
        }

    return {
        "runs": [{"machine": {"cores": 4, "memory_bytes": 8 * 2**30}}],
        "real_workload": {
            "summary": [
                summary("keep-alive", keep_alive_us, 20_000.0),
                summary("new-connection", 60.0, new_connection_per_s),
            ]
        },
        "memory": {"bytes_per_vm": 2048.0, "fleet": {"vms": 100_000}},
        "propagation": {"change_p50_ms": write_ms},
        "cluster_campaign": [
            {"vms": 1000, "journal_transactions": 500, "approvals_per_turn": 100},
            {"vms": 100_000, "journal_transactions": 1_000, "approvals_per_turn": 100},
        ],
    }


def test_each_figure_comes_from_the_measured_ones() -> None:
    measured = capacity(results())
    assert measured.vms_per_core == 40_000  # 1 s / 25 us a poll
    assert measured.vms_per_listener == 10_000
    assert measured.namespace_transactions_per_s == 200  # 1 s / 5 ms a write
    assert measured.transactions_per_vm == 0.01  # the largest campaign's
    sized = size(1_000_000, measured)
    assert (sized.cores, sized.workers, sized.machines) == (25, 100, 25)
    assert sized.worker_bytes == 2048.0 * 1_000_000
    assert sized.machine_bytes == 4 * 2048.0 * 1_000_000  # a worker a core, each the fleet
    assert sized.transactions_per_s == 10_000


def test_the_bound_is_the_resource_furthest_past_the_machine() -> None:
    # 10,000 VMs: 100 transactions a second, half one namespace's 200; a listener and a
    # core of the 4 each: the database is nearest its limit
    assert size(10_000, capacity(results())).bound == "the database's writes (one namespace)"
    # a listener answering 1,000 a second: 10 workers for 4 cores
    slow_accept = capacity(results(new_connection_per_s=1000.0))
    assert size(10_000, slow_accept).bound == "one listener's accept rate (new connections)"
    assert size(1_000_000, capacity(results())).bound == "the database's writes (one namespace)"
    fast_writes = capacity(results(write_ms=0.001, new_connection_per_s=1e9, keep_alive_us=1000))
    assert size(100_000, fast_writes).bound == "CPU (kept-alive polls)"


def test_the_block_names_what_it_is_worked_out_from() -> None:
    text = block("sizing", results())
    assert "| 1,000,000 | 25 | 100 | 25 | 1.9 GiB / 7.6 GiB | 10,000 |" in text
    assert "| transactions a second one namespace commits" in text
    assert (
        "of 4 cores answers (a worker a core), kept alive / on new connections | 160,000 / 40,000 |"
        in text
    )
    lacking = results()
    del lacking["memory"]
    with pytest.raises(SizingError, match="memory"):
        block("sizing", lacking)
