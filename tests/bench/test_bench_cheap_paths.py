"""The cheap-paths benchmark, run short: each part must still run to its end with every
answer checked. Its figures are not quoted from runs this short.

The held-request part needs only loopback sockets, the hoarding part prlimit; the 304 and
flood parts need wrk, and skip (saying so) where it is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_support import require_tool

from bench.cheap_paths import (
    cheap_path_lines,
    cheap_path_targets,
    compare_in_process,
    run_not_modified,
)
from bench.flood import FLOOD_MODES, run_flood, run_hoard
from bench.held_requests import run_held
from forewarn.server.http import limits


def _wrk() -> str:
    return require_tool("wrk", "the benchmarks' load generator")


def test_held_requests_are_measured_and_all_answered_at_the_impacts_end() -> None:
    """docs/faithfulness.md: a request held during an impact is answered once the impact
    is over. 100 VMs, each with one held: every one answered 200, dated the impact's end
    (run_held refuses to give figures otherwise), none during it."""
    held = run_held(100)
    assert held["vms"] == 100
    assert held["rss_held_bytes"] > 0
    assert 0 <= held["first_answer_ms"] <= held["last_answer_ms"]
    assert held["release_spread_ms"] == pytest.approx(
        held["last_answer_ms"] - held["first_answer_ms"]
    )


def test_the_304_and_the_200_are_compared_in_process() -> None:
    figures = compare_in_process(rounds=2, requests=200)
    assert figures["ok_us"] > 0
    assert figures["ratio"] == pytest.approx(figures["not_modified_us"] / figures["ok_us"])


@pytest.mark.e2e
def test_the_304_and_the_200_are_compared_over_sockets(tmp_path: Path) -> None:
    """SPEC 1: a GET whose If-None-Match is the current tag answers 304 with no
    body; wrk's 304s and 200s are each checked before and after."""
    cost = run_not_modified(tmp_path, wrk=_wrk(), duration=1, rounds=1)
    assert cost["ok_cpu_us"] > 0
    assert cost["not_modified_cpu_us"] > 0


@pytest.mark.e2e
def test_a_flood_is_measured_against_the_other_vms(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate limiting": the
    flooding VM gets 429s (run_flood fails otherwise), however it sends (kept connections,
    pipelined, a new connection each time), while the others are answered 200."""
    flood = run_flood(tmp_path, wrk=_wrk(), seconds=1, rounds=1)
    assert (flood["nice"], set(flood["modes"])) == (0, set(FLOOD_MODES))
    for figures in flood["modes"].values():
        (round_,) = figures["rounds"]
        assert round_["flood_refused"] > 0
        assert round_["probes"] > 0
    results = {"held": run_held(20), "flood": flood}
    names = [target.name for target in cheap_path_targets(results)]
    assert sum("p99 while one VM floods" in name for name in names) == len(FLOOD_MODES)
    lines = cheap_path_lines(results)
    assert sum(line.startswith("Flood (") for line in lines) == len(FLOOD_MODES)


@pytest.mark.e2e
def test_connections_held_by_one_vm_and_by_many_are_measured(tmp_path: Path) -> None:
    """docs/security.md: under a descriptor limit of 1,024, one VM holding 1,100 idle
    connections keeps at most its cap, a crowd of VMs stays within the VMs' share, and the
    other VMs' polls and the control API are answered meanwhile."""
    require_tool("prlimit", "sets the server's descriptor limit", package="util-linux")
    hoard = run_hoard(tmp_path, seconds=1, rounds=1)
    one, crowd = hoard["one_vm"], hoard["crowd"]
    assert (one["connections"], one["kept"]) == (1100, limits.CONNECTIONS_PER_VM)
    assert crowd["kept"] <= hoard["open_files"] - limits.RESERVED_DESCRIPTORS
    for figures in (one, crowd):
        assert figures["probes"] > 0
        assert figures["control_calls"] > 0
        assert figures["failures"] == figures["control_failures"] == 0
    results = {"held": run_held(20), "hoard": hoard}
    failed = [t for t in cheap_path_targets(results) if t.name.startswith("polls and control")]
    assert len(failed) == 2
    assert all(target.met for target in failed)
    assert sum(line.startswith("Hoard, ") for line in cheap_path_lines(results)) == 2
