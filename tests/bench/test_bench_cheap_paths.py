"""The cheap-paths benchmark, run short: each part must still run to its end with every
answer checked. Its figures are not quoted from runs this short.

The held-request part needs only loopback sockets; the 304 and flood parts need wrk, and
skip (saying so) where it is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_support import require_tool

from bench.cheap_paths import (
    cheap_path_lines,
    cheap_path_targets,
    compare_in_process,
    run_flood,
    run_not_modified,
)
from bench.held_requests import run_held


def _wrk() -> str:
    return require_tool("wrk", "the benchmarks' load generator")


def test_held_requests_are_measured_and_all_answered_at_the_impacts_end() -> None:
    """README, "Faithfulness": a request held during an impact is answered once the impact
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
    """SPEC.md section 1: a GET whose If-None-Match is the current tag answers 304 with no
    body; wrk's 304s and 200s are each checked before and after."""
    cost = run_not_modified(tmp_path, wrk=_wrk(), duration=1, rounds=1)
    assert cost["ok_cpu_us"] > 0
    assert cost["not_modified_cpu_us"] > 0


@pytest.mark.e2e
def test_a_flood_is_measured_against_the_other_vms(tmp_path: Path) -> None:
    """reference/imds/instance-metadata-service.md, "Rate limiting": the flooding VM gets 429s
    (run_flood fails otherwise) while the others are answered 200."""
    flood = run_flood(tmp_path, wrk=_wrk(), seconds=1, rounds=1)
    (round_,) = flood["rounds"]
    assert round_["flood_refused"] > 0
    assert round_["probes"] > 0
    results = {"held": run_held(20), "flood": flood}
    names = [target.name for target in cheap_path_targets(results)]
    assert any("p99" in name for name in names)
    assert any(line.startswith("Flood,") for line in cheap_path_lines(results))
